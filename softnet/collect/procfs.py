"""Parsers for the kernel's per-CPU packet and CPU accounting in procfs.

Each parser takes the file's text so it can be tested on captured files
(tests/data/procfs/). `snapshot()` reads them all at one instant and `delta()`
subtracts two snapshots. All of these are host-wide (not per-namespace).
"""
from __future__ import annotations

from pathlib import Path

# /proc/stat per-CPU columns, in USER_HZ ticks (man 5 proc).
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
# /proc/net/softnet_stat columns (net/core/net-procfs.c, kernel >= 5.10); hex.
SOFTNET_FIELDS = ("processed", "dropped", "time_squeeze", None, None, None, None, None,
                  None, "received_rps", "flow_limit_count", "backlog_len", "cpu")


def parse_softirqs(text: str) -> dict[str, list[int]]:
    """{'NET_RX': [count on cpu0, cpu1, ...], ...}"""
    lines = text.strip().splitlines()
    ncpu = len(lines[0].split())
    out = {}
    for line in lines[1:]:
        name, _, rest = line.partition(":")
        vals = [int(v) for v in rest.split()]
        if len(vals) != ncpu:
            raise ValueError(f"softirqs: line '{name.strip()}' has {len(vals)} values, expected {ncpu}")
        out[name.strip()] = vals
    return out


def parse_stat_cpus(text: str) -> dict[int, dict[str, int]]:
    """Per-CPU tick counters from /proc/stat (the aggregate 'cpu' line is skipped)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *vals = line.split()
            out[int(name[3:])] = dict(zip(STAT_FIELDS, (int(v) for v in vals)))
    return out


def parse_softnet_stat(text: str) -> dict[int, dict[str, int]]:
    """Per-CPU softnet counters keyed by the CPU index the kernel prints (col 13)."""
    out = {}
    for row, line in enumerate(text.strip().splitlines()):
        cols = [int(v, 16) for v in line.split()]
        rec = {name: cols[i] for i, name in enumerate(SOFTNET_FIELDS) if name and i < len(cols)}
        out[rec.pop("cpu", row)] = rec
    return out


def snapshot(root: Path = Path("/proc")) -> dict:
    return {
        "softirqs": parse_softirqs((root / "softirqs").read_text()),
        "cpu_ticks": parse_stat_cpus((root / "stat").read_text()),
        "softnet": parse_softnet_stat((root / "net/softnet_stat").read_text()),
    }


def delta(a: dict, b: dict) -> dict:
    """b - a for every counter of two snapshots (per CPU)."""
    return {
        "softirqs": {k: [y - x for x, y in zip(a["softirqs"][k], b["softirqs"][k])] for k in b["softirqs"]},
        "cpu_ticks": {c: {k: b["cpu_ticks"][c][k] - a["cpu_ticks"][c].get(k, 0) for k in b["cpu_ticks"][c]}
                      for c in b["cpu_ticks"] if c in a["cpu_ticks"]},
        "softnet": {c: {k: b["softnet"][c][k] - a["softnet"][c].get(k, 0) for k in b["softnet"][c]}
                    for c in b["softnet"] if c in a["softnet"]},
    }


def busy_ratio(ticks: dict[str, int]) -> float | None:
    """Share of non-idle ticks on one CPU. Tick-sampled: softirq time is
    misattributed without CONFIG_IRQ_TIME_ACCOUNTING (see `softnet doctor`)."""
    total = sum(ticks.values()) - ticks.get("guest", 0) - ticks.get("guest_nice", 0)
    if total <= 0:
        return None
    return 1 - (ticks.get("idle", 0) + ticks.get("iowait", 0)) / total


def thread_cpu(pid: int) -> int | None:
    """CPU a task last ran on (/proc/PID/stat field 39)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rsplit(")", 1)[1].split()[36])
