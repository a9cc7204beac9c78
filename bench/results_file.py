"""Where a bench writes its run: bench/results/<bench>-<UTC timestamp>.json
(ignored by git), with this host's provenance unless the run brings its own
(a bench that changed the host gives the provenance of its changes)."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from numbers import Number
from pathlib import Path

from softnet.provenance import provenance

RESULTS = Path(__file__).resolve().parent / "results"


def path_for(bench: str, at: datetime | None = None) -> Path:
    """The file of a run that started ``at`` (default now); its folder made."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    return RESULTS / f"{bench}-{at or datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.json"


def _plain(x):
    """What json cannot write: numpy scalars and arrays as their Python values; dates, paths as text."""
    if hasattr(x, "tolist"):
        return x.tolist()
    return float(x) if isinstance(x, Number) else str(x)


def dump(path: Path, payload: dict) -> Path:
    """Write (or rewrite, as a long bench goes) one run's file."""
    path.write_text(json.dumps(payload, indent=1, default=_plain) + "\n")
    return path


def write(bench: str, payload: dict, at: datetime | None = None) -> Path:
    if "provenance" not in payload:
        payload = {"provenance": provenance(None, benchmark=bench), **payload}
    return dump(path_for(bench, at), payload)
