"""Arithmetic on kernel counters read from procfs (softnet.collect.procfs):
differences with wrap-around, tick totals and busy ratios. Pure functions,
so captured reads can be evaluated anywhere."""
from __future__ import annotations

from softnet.results.raw import ProcSnapshot

# /proc/stat per-CPU columns, in USER_HZ ticks (man 5 proc).
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
# Queue lengths at the instant of reading: levels, not counters (never differenced).
SOFTNET_GAUGES = frozenset({"backlog_len", "input_qlen", "process_qlen", "cpu"})


def counter_delta(a: int, b: int, bits: int | None = None) -> int:
    """b - a for a counter; a ``bits``-wide counter that went backwards wrapped once."""
    if bits and b < a:
        return b + (1 << bits) - a
    return b - a


def softnet_delta(a: dict[int, dict[str, int]], b: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
    """Per CPU present in both: counters differenced with u32 wrap, gauges as read at b."""
    return {c: {k: (v if k in SOFTNET_GAUGES else counter_delta(a[c].get(k, v), v, 32)) for k, v in b[c].items()}
            for c in b if c in a}


def delta(a: ProcSnapshot, b: ProcSnapshot) -> ProcSnapshot:
    """b - a for every counter of two snapshots (per CPU present in both)."""
    return ProcSnapshot(
        # softirq counts are unsigned int per CPU in the kernel: they wrap at 2^32.
        softirqs={k: {c: counter_delta(a.softirqs.get(k, {}).get(c, 0), v, 32) for c, v in per_cpu.items()}
                  for k, per_cpu in b.softirqs.items()},
        cpu_ticks={c: {k: v - a.cpu_ticks[c].get(k, 0) for k, v in ticks.items()}
                   for c, ticks in b.cpu_ticks.items() if c in a.cpu_ticks},
        softnet=softnet_delta(a.softnet, b.softnet),
    )


IDLE_TICKS = ("idle", "iowait")


def tick_total(ticks: dict[str, int]) -> int:
    """All ticks of one CPU (guest time is already counted in user/nice)."""
    return sum(ticks.values()) - ticks.get("guest", 0) - ticks.get("guest_nice", 0)


def busy_ratio(ticks: dict[str, int]) -> float | None:
    """Share of non-idle ticks on one CPU. Tick-sampled: softirq time is
    misattributed without CONFIG_IRQ_TIME_ACCOUNTING (see `softnet doctor`)."""
    total = tick_total(ticks)
    if total <= 0:
        return None
    return 1 - sum(ticks.get(k, 0) for k in IDLE_TICKS) / total
