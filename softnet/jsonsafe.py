"""JSON has no NaN or infinity: results write them as null."""
import math


def json_safe(obj):
    """Recursively replace NaN/inf by None so json.dumps(allow_nan=False) works."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
