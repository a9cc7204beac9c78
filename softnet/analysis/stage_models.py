"""Stages across loads: the WiFi-AP study's Fig. 10 (stage cost per packet at
each load), per-stage cost-vs-load linear fits, and the capacity they predict
(the load where the SUT's CPUs reach 100%) against the PDR the same sweep
measured.

Input: one configuration's trial results (dicts with "profile" from a
profiled trial). Stage times are summed over all CPUs, as the study's "total
cycles consumed by all the cores"; busy time for the capacity is the SUT's
CPUs' only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from softnet.analysis.kernel_stats import mean_of
from softnet.analysis.stages import EBPF_STAGES, WIFI_STAGES
from softnet.results.trial import ProfiledTrial

BUSY_LINEAR_MAX_PCT = 90.0  # per SUT CPU: above, queues and batching bend the cost curve


def _profiled(trials: list[ProfiledTrial]) -> list[ProfiledTrial]:
    return [t for t in trials if t.valid and t.profile and t.profile.stages]


def sut_cpus(trial: ProfiledTrial) -> list[int]:
    return list(trial.placement.requested.sut_cpus)


def _stage_sums(trial: ProfiledTrial, pct: bool, grouping: str = "wifi_ap") -> dict[str, float]:
    """stage -> % of one CPU (``pct``) or ns per packet, summed over the CPUs;
    ``grouping``: the WiFi-AP study's stages or the eBPF profile study's."""
    out: dict[str, float] = {}
    for s in trial.profile.stages.values():
        for row in getattr(s, grouping):
            v = row.pct_of_cpu if pct else row.ns_per_packet
            if v is not None:
                out[row.stage] = out.get(row.stage, 0.0) + v
    return out


def sut_busy_pct(trial: ProfiledTrial) -> float:
    """eBPF-measured busy time of the SUT's CPUs, summed (100 = one CPU)."""
    return sum(trial.profile.per_cpu[c].busy_pct for c in sut_cpus(trial))


def sut_nohz_cpu_time_pct(trial: ProfiledTrial) -> float | None:
    """The same busy time by another mechanism: the SUT CPUs' wall minus nohz
    idle time from /proc/stat (the kernel sampler), summed; None unsampled."""
    per_cpu = trial.kernel.per_cpu if trial.kernel else {}
    vals = [per_cpu[c].cpu_time_pct if c in per_cpu else None for c in sut_cpus(trial)]
    return None if not vals or any(v is None for v in vals) else sum(vals)


def forwarded_pps(trial: ProfiledTrial) -> float:
    return trial.received_pkts / trial.duration_s


def stage_levels(trials: list[dict]) -> list[dict]:
    """Per load (ascending), the mean over the valid profiled runs: stage ns
    per forwarded packet and % of one CPU (summed over CPUs), coverage (the
    lowest over runs and CPUs doing packet work), and the SUT CPUs' busy %."""
    by_load: dict[float, list[ProfiledTrial]] = {}
    for t in _profiled([ProfiledTrial.model_validate(t) for t in trials]):
        by_load.setdefault(t.intended_rate_pps, []).append(t)
    out = []
    for load, ts in sorted(by_load.items()):
        per_pkt = [_stage_sums(t, pct=False) for t in ts]
        pct = [_stage_sums(t, pct=True) for t in ts]
        ebpf = [_stage_sums(t, pct=False, grouping="ebpf_profile") for t in ts]
        coverages = [s.coverage for t in ts for s in t.profile.stages.values()
                     if s.coverage is not None and (s.packet_time_pct or 0) >= 1.0]
        out.append({
            "load_pps": load, "runs": len(ts),
            "forwarded_pps": mean_of([forwarded_pps(t) for t in ts]),
            "loss_ratio": mean_of([t.loss_ratio for t in ts]),
            "stages_ns_per_packet": {s: mean_of([p.get(s) for p in per_pkt]) or 0.0 for s in WIFI_STAGES},
            "stages_pct_of_cpu": {s: mean_of([p.get(s) for p in pct]) or 0.0 for s in WIFI_STAGES},
            # the eBPF receive-path study's grouping of the same intervals (None: a stage it cannot time)
            "ebpf_ns_per_packet": {s: mean_of([p.get(s) for p in ebpf]) if ex != "unavailable" else None
                                   for s, (ex, _) in EBPF_STAGES.items()} if any(ebpf) else {},
            "coverage_min": min(coverages, default=None),
            "sut_busy_pct": mean_of([sut_busy_pct(t) for t in ts]),
            # cross-check: eBPF busy (sched_switch + irq/softirq in idle) against nohz CPU time (/proc/stat)
            "sut_nohz_cpu_time_pct": mean_of([sut_nohz_cpu_time_pct(t) for t in ts]),
            "duty": ts[0].profile.duty,
        })
    return out


MIN_LOADS = 3  # distinct loads a fit needs


@dataclass(frozen=True)
class Fit:
    slope: float
    intercept: float
    r2: float
    slope_stderr: float
    points: int


def _fit(x: np.ndarray, y: np.ndarray, loads: int) -> Fit | None:
    if loads < MIN_LOADS:
        return None
    from scipy import stats  # here: its import is 0.6 s, paid only where it is used

    f = stats.linregress(x, y)
    return Fit(float(f.slope), float(f.intercept), float(f.rvalue ** 2), float(f.stderr), int(len(x)))


def measured_pdr(trials: list[dict], loss_ratio: float) -> dict:
    """The sweep's PDR on its own grid: the highest load whose valid runs'
    mean loss is at most `loss_ratio`, below the lowest load where it is not
    (the PDR lies between them: the grid's resolution)."""
    by_load: dict[float, list[float]] = {}
    for t in trials:
        t = t if isinstance(t, ProfiledTrial) else ProfiledTrial.model_validate(t)
        if t.valid:
            by_load.setdefault(t.intended_rate_pps, []).append(t.loss_ratio)
    lower = upper = None
    for load, losses in sorted(by_load.items()):
        if np.mean(losses) > loss_ratio:
            upper = load
            break
        lower = load
    return {"loss_ratio": loss_ratio, "lower_pps": lower, "upper_pps": upper}


def cost_models(trials: list[dict], pdr_loss_ratio: float = 0.005) -> dict:
    """Per-stage CPU time as a linear function of the forwarded load, from
    every valid profiled run below saturation (each SUT CPU under
    BUSY_LINEAR_MAX_PCT busy; loss does not matter: the load is what was
    forwarded); the capacity predicted where the SUT CPUs' busy time reaches
    100% each; the sweep's measured PDR and highest forwarded rate.

    Slopes are ns of CPU per forwarded packet; intercepts % of one CPU at no
    load; R² says how linear the stage is over the loads."""
    parsed = [ProfiledTrial.model_validate(t) for t in trials]
    ts = _profiled(parsed)
    if not ts:
        return {}
    n_sut = len(sut_cpus(ts[0]))
    linear = [t for t in ts if sut_busy_pct(t) < BUSY_LINEAR_MAX_PCT * n_sut]
    x = np.array([forwarded_pps(t) for t in linear])
    loads = len({t.intended_rate_pps for t in linear})
    stages = {}
    for s in WIFI_STAGES:
        fit = _fit(x, np.array([_stage_sums(t, pct=True).get(s, 0.0) for t in linear]), loads)
        if fit and any(_stage_sums(t, pct=True).get(s, 0.0) for t in linear):
            stages[s] = {"ns_per_packet": fit.slope * 1e7, "intercept_pct": fit.intercept, "r2": fit.r2,
                         "points": fit.points}
    busy = _fit(x, np.array([sut_busy_pct(t) for t in linear]), loads)
    predicted = None
    if busy and busy.slope > 0:
        predicted = (100.0 * n_sut - busy.intercept) / busy.slope
    pdr = measured_pdr(parsed, pdr_loss_ratio)
    return {
        "loads_used_pps": sorted({t.intended_rate_pps for t in linear}),
        "stages": stages,
        "sut_cpus": sut_cpus(ts[0]),
        "sut_busy": None if busy is None else {"ns_per_packet": busy.slope * 1e7, "intercept_pct": busy.intercept,
                                               "r2": busy.r2, "points": busy.points},
        "predicted_capacity_pps": predicted,
        "measured_pdr": pdr,
        "max_forwarded_pps": max(forwarded_pps(t) for t in ts),
        # predicted / measured: above 1, something other than the SUT CPU's time limits the rate first
        "predicted_over_pdr": (predicted / pdr["lower_pps"]) if predicted and pdr["lower_pps"] else None,
    }


def pdr_text(pdr: dict, fmt) -> str:
    """measured_pdr() in words; `fmt` formats a rate."""
    if pdr["lower_pps"] is None:
        return f"none: loss above {100 * pdr['loss_ratio']:g}% already at the lowest load ({fmt(pdr['upper_pps'])})"
    if pdr["upper_pps"] is None:
        return f"at least {fmt(pdr['lower_pps'])} (not exceeded on the swept loads)"
    return f"between {fmt(pdr['lower_pps'])} and {fmt(pdr['upper_pps'])}"
