"""Where a bench writes its run: bench/results/<bench>-<UTC timestamp>.json
(ignored by git), with this host's provenance."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from softnet.provenance import provenance

RESULTS = Path(__file__).resolve().parent / "results"


def write(bench: str, payload: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{bench}-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps({"provenance": provenance(None, benchmark=bench), **payload}, indent=1, default=float))
    return path
