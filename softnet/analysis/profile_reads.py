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
            "napi_budget_exhausted", "rx_skbs", "consumed_skbs", "dropped_skbs", "unmatched_exits", "drop_keys_full")


@dataclass(frozen=True)
class ProfileDelta:
    """Two reads' difference: per-CPU counters over the wall time between them."""

    cpus: list[ProfileCpu]
    drops: list[tuple[int, int, int, int]]  # (reason, ifindex, netns inode, count)
    wall_ns: int
    monotonic_ns: list[int]  # the two reads' clocks
    sampled_cpus: list[ProfileCpu]  # the same counters summed over the periods the stage events were attached
    sampled_ns: int


def delta(a: ProfileRead, b: ProfileRead) -> ProfileDelta:
    """b - a per CPU (the counters only grow while the programs are attached)."""
    cpus = []
    for ca, cb in zip(a.cpus, b.cpus):
        before = {(f, t): (ns, n) for f, t, ns, n in ca.transitions or []}
        transitions = [[f, t, ns - before.get((f, t), (0, 0))[0], n - before.get((f, t), (0, 0))[1]]
                       for f, t, ns, n in cb.transitions or [] if n != before.get((f, t), (0, 0))[1]]
        cpus.append(_counters(ca, cb, transitions))
    before = {(r, i, ns): n for r, i, ns, n in a.drops}
    drops = [(r, i, ns, n - before.get((r, i, ns), 0)) for r, i, ns, n in b.drops
             if n - before.get((r, i, ns), 0)]
    return ProfileDelta(cpus=cpus, drops=drops, wall_ns=b.monotonic_ns - a.monotonic_ns,
                        monotonic_ns=[a.monotonic_ns, b.monotonic_ns],
                        sampled_cpus=[_counters(ca, cb) for ca, cb in zip(a.sampled_cpus, b.sampled_cpus)],
                        sampled_ns=b.sampled_ns - a.sampled_ns)


def _counters(ca: ProfileCpu, cb: ProfileCpu, transitions: list | None = None) -> ProfileCpu:
    # every counter alike: the difference, field by field
    x, y = ca.model_dump(include=set(COUNTERS)), cb.model_dump(include=set(COUNTERS))
    return ProfileCpu(**{k: y[k] - x[k] for k in COUNTERS},
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
