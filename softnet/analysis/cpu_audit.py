"""Per-CPU packet-path time measured with eBPF (softnet-profile) against
what /proc/stat reports: the WiFi-AP study's softirq CPU misaccounting,
audited per trial.

Measured, per CPU over the window (wall W):
- softirq time by vector and by the task it ran on top of (idle/swapper,
  ksoftirqd, a threaded-NAPI kthread, another task), and hardirq time;
- busy = time a task other than the idle task ran, plus the hardirq and
  softirq time spent inside the idle task: what really kept the CPU busy.

Reported: /proc/stat ticks (user, system, softirq, irq, idle...). Without
IRQ time accounting (this kernel) softirq time is charged by the tick to
whatever the tick interrupts; softirqs run inside the idle task between
ticks are charged to nothing, and the tick-sampled busy share falls short.
``misaccounted_pct`` = measured busy % - reported busy %; the cause named
is the softirq time spent inside the idle task when that explains it, else
the tick's sampling of short bursts (a kthread woken often for short
work is mostly missed by the tick; example in docs/reference/measurements.md).
"""
from __future__ import annotations

from softnet.analysis.counters import IDLE_TICKS, busy_ratio, tick_total
from softnet.analysis.kernel_stats import mean_of
from softnet.analysis.profile_reads import ProfileDelta
from softnet.results.trial import CpuAudit, CpuProfile, ProfiledTrial, StoredAudit, StoredCpuProfile

AGREE_PCT = 2.0  # |measured - reported| within this many points of one CPU: no misaccounting found


def cpu_profile(d: ProfileDelta, cpu: int) -> CpuProfile:
    """One CPU's measured times as % of the window, and its NAPI figures."""
    c, wall = d.cpus[cpu], d.wall_ns
    sirq = {vec: {ctx: v[0] for ctx, v in by_ctx.items()} for vec, by_ctx in c.softirq_ns.items()}
    sirq_total = sum(sum(by_ctx.values()) for by_ctx in sirq.values())
    net_rx = sirq["NET_RX"]
    net = sum(net_rx.values()) + sum(sirq["NET_TX"].values())
    busy = c.busy_ns + c.hardirq_in_idle_ns + c.softirq_in_idle_ns
    return CpuProfile(
        softirq_pct=100 * sirq_total / wall,
        net_softirq_pct=100 * net / wall,
        hardirq_pct=100 * c.hardirq_ns / wall,
        sysvec_pct=100 * c.sysvec_ns / wall,  # IPIs (RPS hands packets over by IPI), local timer
        interrupts_per_s=(c.hardirq_cnt + c.sysvec_cnt) / (wall / 1e9),  # device IRQs + system vectors
        busy_pct=100 * busy / wall,
        softirq_in_idle_pct=100 * c.softirq_in_idle_ns / wall,
        softirq_pct_by_context={ctx: 100 * sum(sirq[v][ctx] for v in sirq) / wall for ctx in next(iter(sirq.values()))},
        net_rx_pct_by_context={ctx: 100 * ns / wall for ctx, ns in net_rx.items()},
        napi_polls_per_s=c.napi_polls / (wall / 1e9),
        napi_work_per_poll=c.napi_work / c.napi_polls if c.napi_polls else None,
        napi_budget_exhausted_share=c.napi_budget_exhausted / c.napi_polls if c.napi_polls else None,
        napi_work_hist=c.napi_work_hist,
        context_switches_per_s=c.ctx_switches / (wall / 1e9),
        unmatched_exits=c.unmatched_exits,
        unseen_switches=c.unseen_switches,
    )


def audit_cpu(measured: CpuProfile, ticks: dict[str, int]) -> CpuAudit:
    """Measured (``cpu_profile``) against one CPU's /proc/stat tick deltas."""
    total = tick_total(ticks)
    if total <= 0:
        return CpuAudit(verdict="no ticks in the window")
    reported_busy = 100 * busy_ratio(ticks)
    gap = measured.busy_pct - reported_busy
    if abs(gap) <= AGREE_PCT:
        verdict = f"no misaccounting found (within {AGREE_PCT:g} points of one CPU)"
    elif gap > 0 and measured.softirq_in_idle_pct >= gap / 2:
        verdict = (f"under-reported by {gap:.1f} points: {measured.softirq_in_idle_pct:.1f}% of the CPU "
                   "went to softirqs run inside the idle task, which the tick charges to idle")
    elif gap > 0:
        verdict = (f"under-reported by {gap:.1f} points: the work comes in short bursts between idle "
                   "periods, and the tick (stopped while idle, nohz) rarely lands in them")
    else:
        verdict = f"over-reported by {-gap:.1f} points (tick sampling charges whole ticks to short bursts)"
    return CpuAudit(reported_busy_pct=reported_busy, reported_softirq_pct=100 * ticks.get("softirq", 0) / total,
                    reported_system_pct=100 * ticks.get("system", 0) / total,
                    reported_idle_pct=100 * sum(ticks.get(k, 0) for k in IDLE_TICKS) / total,
                    # time the hypervisor ran something else on this vCPU: invisible to in-guest tracing
                    reported_steal_pct=100 * ticks.get("steal", 0) / total,
                    measured_busy_pct=measured.busy_pct, measured_softirq_pct=measured.softirq_pct,
                    misaccounted_pct=gap, verdict=verdict)


def summarize_audit(trials: list[dict]) -> list[dict]:
    """Per load and CPU over the valid profiled trials of one configuration:
    measured against reported busy and softirq shares (mean, and the gap's
    range over runs: the tick's error is not steady, so its spread matters)."""
    rows: dict[tuple[float, int], list[tuple[StoredCpuProfile, StoredAudit]]] = {}
    for t in map(ProfiledTrial.model_validate, trials):
        p = t.profile
        if not (t.valid and p):
            continue
        for cpu, m in p.per_cpu.items():
            rows.setdefault((t.intended_rate_pps, cpu), []).append((m, p.audit[cpu]))
    out = []
    for (load, cpu), pairs in sorted(rows.items()):
        gaps = [a.misaccounted_pct for _, a in pairs if a.misaccounted_pct is not None]
        out.append({"load_pps": load, "cpu": cpu, "runs": len(pairs),
                    "measured_busy_pct": mean_of([m.busy_pct for m, _ in pairs]),
                    "reported_busy_pct": mean_of([a.reported_busy_pct for _, a in pairs]),
                    "measured_softirq_pct": mean_of([m.softirq_pct for m, _ in pairs]),
                    "reported_softirq_pct": mean_of([a.reported_softirq_pct for _, a in pairs]),
                    "gap_min": min(gaps, default=None), "gap_max": max(gaps, default=None),
                    "napi_work_per_poll": mean_of([m.napi_work_per_poll for m, _ in pairs]),
                    # where NET_RX ran: the idle task (the WiFi-AP study's misaccounting), ksoftirqd, a NAPI kthread
                    "net_rx_pct_by_context": {ctx: mean_of([m.net_rx_pct_by_context[ctx] for m, _ in pairs])
                                              for ctx in pairs[0][0].net_rx_pct_by_context}})
    return out


def by_context(pct: dict) -> str:
    """{"idle": 35.2, "ksoftirqd": 0.01, ...} -> "idle 35.2, ..." (shares under 0.05% left out)."""
    return ", ".join(f"{ctx} {v:.1f}" for ctx, v in pct.items() if v is not None and v >= 0.05) or "-"
