"""A soak's summary from its stored trials: the critical load's path, a
capacity step where the trials are better told as two SUTs, and the drift
watch: each series of the SUT host's resources (and each per-trial rate)
fitted for a trend (Theil-Sen slope per hour, with its interval) and a
change point (jumpavg, FD.io CSIT's, as `softnet trend` uses), and flagged
where it moved by more than a floor a busy host's own churn stays under.

Why Theil-Sen: the median of pairwise slopes shrugs off the odd sample a
vCPU stall or a page-cache flush throws, where least squares would follow
it; scipy gives its interval."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import jumpavg
import numpy as np
from scipy.stats import theilslopes

from softnet.analysis.loss_time import counted_received
from softnet.analysis.plr_model import LossEvidence, PlrModel
from softnet.results.soak import SOAK, CapacityStepDoc, DriftFit, SoakMark, SoakSummary

# a flag needs the series to move by this share of its typical level over the soak, and at least
# the floor of its unit: the host's own churn (page cache, dentries, a socket's buffer) stays below both
REL_FLOOR = 0.05
BYTES_FLOOR = 1 << 20
COUNT_FLOOR = 100.0
# socket buffer memory is counted host-wide (not per namespace): every process's sockets move it
SOCKET_MEM_FLOOR = 16 << 20
# a per-packet cost moves with the host's own pace by 10-20% on a shared VM (docs/explanation/compare.md):
# a flag needs it to move more than that
COST_REL_FLOOR = 0.2
# a cost is read from the trials near the load the soak settled at (the second half's median), as
# far as this share: a cost per packet moves with the load (batching)
COST_NEAR = 0.25
# levels whose fall, not rise, is the leak
FALLING_IS_LEAK = ("mem.available_bytes",)


def evidence_of(result: dict, host_stall_loss: str = "set_apart") -> LossEvidence:
    """A stored trial as the loss model reads it: the loss the SUT caused (host stalls set apart)."""
    sent = int(result.get("sent_pkts") or 0)
    return LossEvidence(float(result["intended_rate_pps"]), float(result["duration_s"]),
                        max(0, sent - counted_received(result, host_stall_loss)))


def is_cost(series: str) -> bool:
    return series.endswith("_per_pkt")


def _floor(series: str) -> float:
    if series.startswith("sock.") and series.endswith("_mem_bytes"):
        return SOCKET_MEM_FLOOR
    return BYTES_FLOOR if series.endswith("_bytes") else COUNT_FLOOR


def fit_series(series: str, t_s: Sequence[float], values: Sequence[float], confidence: float) -> DriftFit:
    """One series over soak time: its Theil-Sen trend, jumpavg's largest
    change (levels only: a per-packet cost is noisier than any step), and a flag."""
    t, y = np.asarray(t_s, float), np.asarray(values, float)
    slope = ci = None
    if len(y) >= 3 and np.ptp(t) > 0:
        s, _, lo, hi = theilslopes(y, t, alpha=confidence)
        slope, ci = float(s * 3600), (float(lo * 3600), float(hi * 3600))
    change_at = change_by = None
    # jumpavg reads non-negative figures; a flat series has no change
    if not is_cost(series) and len(y) >= 4 and np.ptp(y) > 0 and y.min() >= 0:
        groups = list(jumpavg.classify([float(v) for v in y]))
        start, best = 0, None
        for prev, g in zip(groups, groups[1:]):
            start += len(prev)
            jump = g.stats.avg - prev.stats.avg
            if best is None or abs(jump) > abs(best[1]):
                best = (start, jump)
        if best:
            change_at, change_by = float(t[best[0]]), float(best[1])
    fit = DriftFit(series=series, samples=len(y), first=float(y[0]) if len(y) else 0.0,
                   last=float(y[-1]) if len(y) else 0.0, slope_per_h=slope, slope_ci_per_h=ci,
                   change_at_s=change_at, change_by=change_by)
    return _flagged(fit, float(np.median(np.abs(y))) if len(y) else 0.0, float(np.ptp(t)) if len(t) else 0.0)


def _flagged(fit: DriftFit, typical: float, span_s: float) -> DriftFit:
    need = max((COST_REL_FLOOR if is_cost(fit.series) else REL_FLOOR) * typical, _floor(fit.series))
    if fit.slope_ci_per_h is not None and span_s > 0:
        lo, hi = fit.slope_ci_per_h
        moved = fit.slope_per_h * span_s / 3600
        rising_leak = fit.series not in FALLING_IS_LEAK
        if abs(moved) >= need and (lo > 0 or hi < 0):
            leak = (lo > 0) == rising_leak
            rate = is_cost(fit.series)  # a cost, not a level: what grows is the work per packet
            flag = ("cost_rising" if lo > 0 else "cost_falling") if rate else "leak_suspected" if leak else "trend"
            return fit.model_copy(update={
                "flag": flag,
                "reason": f"{fit.series} {_signed(fit.slope_per_h)}/h [{_signed(lo)}, {_signed(hi)}]"})
    if fit.change_by is not None and abs(fit.change_by) >= need:
        return fit.model_copy(update={"flag": "step", "reason": f"{fit.series} stepped by {_signed(fit.change_by)} "
                                                                 f"at {fit.change_at_s:.0f} s"})
    return fit


def _p(p: float) -> str:
    return "< 1e-300" if p < 1e-300 else f"= {p:.1g}"


def _signed(x: float) -> str:
    a = abs(x)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{x / div:+.3g}{suffix}"
    return f"{x:+.3g}"


def drift_fits(marks: Sequence[SoakMark], rates: dict[str, Sequence[float | None]], loads: Sequence[float],
               confidence: float) -> list[DriftFit]:
    """Each watched series over the soak's last run (a resumed soak rebuilt
    its testbed: what grew before is gone) and each per-trial cost, from the
    trials near the load the soak settled at."""
    start = max((i for i, m in enumerate(marks) if m.segment_start), default=0)
    tail = marks[start:]
    names = sorted({k for m in tail if m.drift for k in m.drift.levels})
    fits = []
    for name in names:
        pts = [(m.elapsed_s, m.drift.levels[name]) for m in tail if m.drift and name in m.drift.levels]
        fits.append(fit_series(name, [p[0] for p in pts], [p[1] for p in pts], confidence))
    settled = float(np.median(loads[len(loads) // 2:])) if len(loads) else 0.0
    for name, values in sorted(rates.items()):
        pts = [(m.elapsed_s, v) for m, v, x in zip(marks, values, loads)
               if v is not None and abs(x / settled - 1) <= COST_NEAR]
        if len(pts) >= 5:
            fits.append(fit_series(name, [p[0] for p in pts], [p[1] for p in pts], confidence))
    return fits


def capacity_steps(model: PlrModel, marks: Sequence[SoakMark],
                   evidence: Sequence[LossEvidence]) -> list[CapacityStepDoc]:
    """The steps the soak confirmed (a surprising trial and its repeat), each
    from the trial the new SUT began at, with the estimate from the trials
    before it (since the step before) and at the end of its stretch."""
    out = []
    confirmed = [m for m in marks if m.step_from is not None]
    for n, m in enumerate(confirmed):
        k, suspect = m.step_from, marks[m.index - 1]
        since = confirmed[n - 1].step_from if n else 0
        end = confirmed[n + 1].index - 1 if n + 1 < len(confirmed) else len(marks) - 1
        out.append(CapacityStepDoc(at_trial=k, at_s=marks[k - 1].elapsed_s if k > 0 else 0.0,
                                   surprise=(suspect.surprise, m.surprise), side=suspect.surprise_side or "more",
                                   witness=suspect.witness, before=model.posterior(evidence[since:k]).estimate,
                                   after=marks[end].estimate))
    return out


def summarize(model: PlrModel, marks: Sequence[SoakMark], evidence: Sequence[LossEvidence],
              rates: dict[str, Sequence[float | None]], finished: bool) -> SoakSummary:
    """The soak's summary as of its stored trials."""
    path = [(m.elapsed_s, m.estimate.median_pps, m.estimate.lower_pps, m.estimate.upper_pps)
            for m in marks if m.estimate]
    steps = capacity_steps(model, marks, evidence)
    fits = drift_fits(marks, rates, [e.load_pps for e in evidence], model.confidence)
    flags = [f"capacity_step: at {s.at_s:.0f} s (trial {s.at_trial}), critical load "
             f"{s.before.median_pps:,.0f} -> " + (f"{s.after.median_pps:,.0f} pps" if s.after else "?")
             + f" (the SUT lost {s.side} than at about the same load in trial {s.witness}; p "
             f"{_p(s.surprise[0])}, then {_p(s.surprise[1])})" for s in steps]
    flags += [f"{f.flag}: {f.reason}" for f in fits if f.flag]
    last = next((m.estimate for m in reversed(marks) if m.estimate), None)
    return SoakSummary(trials=len(marks), elapsed_s=marks[-1].elapsed_s if marks else 0.0,
                       trial_seconds=float(sum(e.duration_s for e in evidence)), estimate=last, path=path,
                       capacity_steps=steps, drift=fits, flags=flags, finished=finished)


def trial_rates(documents: Sequence[dict]) -> dict[str, list[float | None]]:
    """Per-trial rates the drift watch fits besides the levels: the SUT
    kthreads' CPU time per packet (where the trial read it)."""
    ns = [((d.get("sut_thread_cpu") or {}).get("ns_per_pkt")) for d in documents]
    return {"sut.cpu_ns_per_pkt": ns} if any(v is not None for v in ns) else {}


@dataclass(frozen=True)
class StoredSoak:
    """One cell's soak as stored: its summary, and each trial's mark, load and whether it lost beyond the target."""
    campaign_id: str
    cell_id: int
    summary: SoakSummary
    marks: list[SoakMark]
    loads: list[tuple[float, bool]]


def stored_soaks(store, campaign_id: str) -> list[StoredSoak]:
    """The campaign's soak cells with their trials (none: not a soak)."""
    from softnet.results import readers

    out = []
    for cell_id, summary in store.soaks(campaign_id).items():
        docs = [t.document for t in readers.stored_trials(store, campaign_id, cell_id, 0)]
        marks = [SoakMark.model_validate(d[SOAK]) for d in docs if SOAK in d]
        target = summary.estimate.target_loss_ratio if summary.estimate else 0.0
        loads = [(e.load_pps, e.lossy(target)) for e in map(evidence_of, docs)]
        out.append(StoredSoak(campaign_id, cell_id, summary, marks, loads))
    return out
