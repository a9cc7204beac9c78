"""Provenance attached to every result: where, when and with what it was measured."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from pathlib import Path

from softnet import __version__


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def spec_hash(spec: dict) -> str:
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]


def provenance(changes=None, **spec) -> dict:
    return {
        "softnet_version": __version__,
        "kernel": platform.release(),
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpus_online": os.cpu_count(),
        "recorded_unix_s": time.time(),
        "spec": spec,
        "spec_hash": spec_hash(spec),
        "host_changes_applied": list(changes.applied) if changes else [],
    }
