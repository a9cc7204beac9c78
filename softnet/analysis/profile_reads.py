"""Arithmetic on softnet-profile reads (softnet.collect.profiler): the delta
of two reads and drop rows named by reason and device. Pure, so a stored raw
trial can be re-evaluated anywhere."""
from __future__ import annotations

from dataclasses import dataclass

from softnet.results.raw import ProfileCpu, ProfileRead
from softnet.results.trial import DropRow

CTXS = ("idle", "ksoftirqd", "napi_thread", "other_task")
COUNTERS = ("hardirq_ns", "hardirq_cnt", "sysvec_ns", "sysvec_cnt", "busy_ns", "idle_ns", "napi_thread_ns",
            "hardirq_in_idle_ns", "softirq_in_idle_ns", "ctx_switches", "napi_polls", "napi_work",
            "napi_budget_exhausted", "rx_skbs", "consumed_skbs", "dropped_skbs", "unmatched_exits", "drop_keys_full",
            "unseen_switches")
# counted only while the per-packet events are attached (sampled either way), or counts of what was lost
UNSCALED = ("rx_skbs", "consumed_skbs", "dropped_skbs", "unmatched_exits", "drop_keys_full", "unseen_switches")


@dataclass(frozen=True)
class ProfileDelta:
    """Two reads' difference: per-CPU counters over the wall time between them."""

    cpus: list[ProfileCpu]
    drops: list[tuple[int, int, int, int]]  # (reason, ifindex, netns inode, count)
    wall_ns: int
    monotonic_ns: list[int]  # the two reads' clocks
    sampled_cpus: list[ProfileCpu]  # the same counters summed over the periods the stage events were attached
    sampled_ns: int
    base_share: float | None = None  # the share of the window the counters were summed over (none: all of it)


def delta(a: ProfileRead, b: ProfileRead) -> ProfileDelta:
    """b - a per CPU (the counters only grow while the programs are attached).
    Counters summed over part of the time (the base programs duty-cycled)
    are scaled to the window: estimates of what it held."""
    cpus = []
    base_ns = b.base_ns - (a.base_ns or 0) if b.base_ns is not None else None
    wall = b.monotonic_ns - a.monotonic_ns
    for ca, cb in zip(a.cpus, b.cpus):
        before = {(f, t): (ns, n) for f, t, ns, n in ca.transitions or []}
        transitions = [[f, t, ns - before.get((f, t), (0, 0))[0], n - before.get((f, t), (0, 0))[1]]
                       for f, t, ns, n in cb.transitions or [] if n != before.get((f, t), (0, 0))[1]]
        c = _counters(ca, cb, transitions)
        cpus.append(c if base_ns is None else _scaled(c, base_ns, wall))
    before = {(r, i, ns): n for r, i, ns, n in a.drops}
    drops = [(r, i, ns, n - before.get((r, i, ns), 0)) for r, i, ns, n in b.drops
             if n - before.get((r, i, ns), 0)]
    return ProfileDelta(cpus=cpus, drops=drops, wall_ns=b.monotonic_ns - a.monotonic_ns,
                        monotonic_ns=[a.monotonic_ns, b.monotonic_ns],
                        sampled_cpus=[_counters(ca, cb) for ca, cb in zip(a.sampled_cpus, b.sampled_cpus)],
                        sampled_ns=b.sampled_ns - a.sampled_ns,
                        base_share=base_ns / wall if base_ns is not None and wall > 0 else None)


def _scaled(c: ProfileCpu, base_ns: int, wall_ns: int) -> ProfileCpu:
    """Counters summed over base_ns of a wall_ns window, scaled to the window.
    A CPU's busy and idle time count from its first switch or softirq in each
    period: they are first stretched over the whole period (in their own
    proportion), NAPI-thread time with them."""
    if base_ns <= 0:
        return c.model_copy(update={k: 0 for k in COUNTERS if k not in UNSCALED} | {
            "napi_work_hist": [0] * len(c.napi_work_hist),
            "softirq_ns": {v: {x: [0, 0] for x in by} for v, by in c.softirq_ns.items()}})
    seen = c.busy_ns + c.idle_ns
    stretch = base_ns / seen if seen else 1.0
    f = wall_ns / base_ns
    upd = {k: round(getattr(c, k) * f * (stretch if k in ("busy_ns", "idle_ns", "napi_thread_ns") else 1))
           for k in COUNTERS if k not in UNSCALED}
    upd["napi_work_hist"] = [round(n * f) for n in c.napi_work_hist]
    upd["softirq_ns"] = {v: {x: [round(ns * f), round(n * f)] for x, (ns, n) in by.items()}
                         for v, by in c.softirq_ns.items()}
    return c.model_copy(update=upd)


def _counters(ca: ProfileCpu, cb: ProfileCpu, transitions: list | None = None) -> ProfileCpu:
    # every counter alike: the difference, field by field
    x, y = ca.model_dump(include=set(COUNTERS)), cb.model_dump(include=set(COUNTERS))
    return ProfileCpu(**{k: None if x[k] is None or y[k] is None else y[k] - x[k] for k in COUNTERS},
                      napi_work_hist=[q - p for p, q in zip(ca.napi_work_hist, cb.napi_work_hist)],
                      softirq_ns={vec: {ctx: [cb.softirq_ns[vec][ctx][i] - ca.softirq_ns[vec][ctx][i] for i in (0, 1)]
                                        for ctx in CTXS} for vec in cb.softirq_ns},
                      transitions=transitions)


def name_drops(drops: list, reasons: dict[int, str], devices: dict[tuple[int, int], str],
               scale: float = 1.0) -> list[DropRow]:
    """[(reason, ifindex, netns inode, count)] -> rows with the reason's name
    (the kernel's enum) and the device's testbed role where it is one.
    ``scale``: all packets over those polled while sampled, for the estimate
    over the whole window when kfree_skb counted only part of the time (1:
    counted exactly)."""
    rows = [DropRow(reason=reasons.get(r, f"reason {r}"), device=devices.get((ns, i), f"ifindex {i} (netns {ns})"),
                    skbs=n, estimated_skbs=round(n * scale)) for r, i, ns, n in drops]
    return sorted(rows, key=lambda row: -row.skbs)
