"""Saturation detection and PDR/NDR, following PASTRAMI sec. V-A to V-C.

Terms (X = PDR loss threshold, default 0.5%; eta = TIR threshold, default 0.1):

* PDR point: the lowest offered load whose mean PLR exceeds X - the
  "potential saturation point" of the paper's algorithm (Fig. 7).
* PDR@X%: the highest tested load below the PDR point, i.e. the highest rate
  measured with mean DR >= 1 - X (sec. II). None if the lowest load already
  exceeds X; None if no load exceeds X (the PDR lies beyond the sweep).
* NDR: the highest tested load below the PDR point (any load when there is
  no PDR point) whose mean PLR is exactly zero, i.e. no included run lost a
  packet (rx >= tx). Only a sweep estimate: the true NDR is somewhere
  between this load and the next tested one.
* Verdict: TIR is taken for every step between consecutive loads from the
  PDR point upward. GOOD: each such TIR < eta (the load beyond PDR becomes
  loss, not throughput, so PDR@X% marks saturation). BAD: some step has
  TIR >= eta. INCONCLUSIVE: the PDR point is the highest load (no step to
  check). NO-SATURATION: mean PLR never exceeds X.
* Saturation load: the "detected saturation point" Fig. 7 returns - the
  lowest load >= the PDR point from which every further step has TIR < eta
  (the PDR point when GOOD; later, or None, when BAD).

The paper's method looks only at mean PLR and TIR; ``flags`` reports what it
does not see:

* low_load_loss: mean PLR at the lowest load > ``low_load_plr`` (1e-6).
* loss_inversion: for consecutive loads O1 < O2, mean PLR(O2) < LCL(O1), the
  lower confidence limit of PLR(O1) (needs K >= 2 at O1).
* excluded_runs: runs left out by the RunPolicy, counted per reason.
* rx_clamped: included runs with rx > tx whose loss was clamped to 0.
* single_run: loads with K = 1 (no std, no confidence interval).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Iterable

from softnet.units import format_rate

from .loss_stats import (DEFAULT_CONFIDENCE, LoadStats, RunLike, RunPolicy, SweepStats,
                         TirStep, json_safe, summarize_sweep)

DEFAULT_PDR_LOSS_RATIO = 0.005  # PDR@0.5%
DEFAULT_ETA = 0.1
# Paper sec. IV-B: 1e-6 is the bottom of its log scale, a loss ratio "not even
# possible to be evaluated reliably"; loss above it at the lowest load is real.
DEFAULT_LOW_LOAD_PLR = 1e-6


class Verdict(str, Enum):
    GOOD = "GOOD"
    BAD = "BAD"
    INCONCLUSIVE = "INCONCLUSIVE"
    NO_SATURATION = "NO-SATURATION"


def _pct(ratio: float) -> str:
    return f"{ratio * 100:.3g}%"


def format_load(load_pps: float) -> str:
    """Load as it appears in reasons and flags, in engineering form: '600 kpps'."""
    return format_rate(load_pps)


@dataclass(frozen=True)
class Flag:
    kind: str  # low_load_loss | loss_inversion | excluded_runs | rx_clamped | single_run
    message: str
    loads_pps: list[float]
    count: int = 1


@dataclass(frozen=True)
class SaturationReport:
    verdict: Verdict
    reason: str
    pdr_loss_ratio: float
    eta: float
    pdr_point_load_pps: float | None
    pdr_load_pps: float | None
    ndr_load_pps: float | None
    # Fig. 7's "detected saturation point": lowest load >= PDR point from which
    # every further step has TIR < eta (equals the PDR point when GOOD).
    saturation_load_pps: float | None
    steps_checked: list[TirStep]  # TIR steps from the PDR point upward
    violations: list[TirStep]  # the checked steps with TIR >= eta
    flags: list[Flag] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return json_safe(d)


def assess(sweep: SweepStats, *, pdr_loss_ratio: float = DEFAULT_PDR_LOSS_RATIO,
           eta: float = DEFAULT_ETA, low_load_plr: float = DEFAULT_LOW_LOAD_PLR) -> SaturationReport:
    """Verdict, PDR@X% and NDR of a summarised sweep (see module docstring)."""
    if not 0.0 < pdr_loss_ratio < 1.0:
        raise ValueError(f"pdr_loss_ratio is a fraction in (0, 1), e.g. 0.005; got {pdr_loss_ratio}")
    loads = sweep.loads
    label = f"PDR@{pdr_loss_ratio * 100:g}%"
    flags = _flags(sweep, pdr_loss_ratio, low_load_plr)
    common = dict(pdr_loss_ratio=pdr_loss_ratio, eta=eta, flags=flags)
    if not loads:
        return _report(Verdict.INCONCLUSIVE, "no load has an included run", None, None, None, [], [],
                       **common)

    i_pdr = next((i for i, s in enumerate(loads) if s.plr_ratio.mean > pdr_loss_ratio), None)
    below = loads if i_pdr is None else loads[:i_pdr]
    ndr = next((s.load_pps for s in reversed(below) if s.plr_ratio.mean == 0.0), None)

    if i_pdr is None:
        top = loads[-1]
        return _report(
            Verdict.NO_SATURATION,
            f"mean PLR never exceeds {_pct(pdr_loss_ratio)}; at the highest load {format_load(top.load_pps)} "
            f"it is {_pct(top.plr_ratio.mean)}, so {label} lies beyond the sweep",
            None, None, ndr, [], [], **common)

    point = loads[i_pdr].load_pps
    pdr = loads[i_pdr - 1].load_pps if i_pdr > 0 else None
    steps = sweep.tir_steps[i_pdr:]  # step k joins loads[k] and loads[k+1]
    bad = [s for s in steps if not s.tir < eta]  # "not <" also catches NaN
    onset = (bad[-1].to_load_pps if bad else point) if steps else None
    if onset == loads[-1].load_pps and bad:
        onset = None  # the last step still gains throughput: no saturation seen
    start = (f"mean PLR first exceeds {_pct(pdr_loss_ratio)} at {format_load(point)} "
             f"({_pct(loads[i_pdr].plr_ratio.mean)})")
    if not steps:
        verdict, reason = Verdict.INCONCLUSIVE, (
            f"{start}, the highest tested load: no higher load to check that TIR stays below eta={eta:g}")
    elif bad:
        s = bad[0]
        verdict, reason = Verdict.BAD, (
            f"{start}, but TIR = {s.tir:.3f} >= eta={eta:g} between {format_load(s.from_load_pps)} "
            f"and {format_load(s.to_load_pps)}: throughput still grows beyond {label}"
            + (f" ({len(bad)} of {len(steps)} steps)" if len(bad) > 1 else "")
            + (f"; TIR stays below eta only from {format_load(onset)}" if onset is not None
               else "; TIR is still >= eta on the last step"))
    else:
        worst = max(steps, key=lambda s: s.tir)
        verdict, reason = Verdict.GOOD, (
            f"{start}; TIR < eta={eta:g} on all {len(steps)} steps up to {format_load(loads[-1].load_pps)} "
            f"(largest {worst.tir:.3f} between {format_load(worst.from_load_pps)} "
            f"and {format_load(worst.to_load_pps)})")
    return _report(verdict, reason, point, pdr, ndr, list(steps), bad, onset, **common)


def _report(verdict, reason, point, pdr, ndr, steps, bad, onset=None, **common) -> SaturationReport:
    return SaturationReport(verdict=verdict, reason=reason, pdr_point_load_pps=point, pdr_load_pps=pdr,
                            ndr_load_pps=ndr, saturation_load_pps=onset, steps_checked=steps,
                            violations=bad, **common)


def _flags(sweep: SweepStats, pdr_loss_ratio: float, low_load_plr: float) -> list[Flag]:
    out: list[Flag] = []
    loads: list[LoadStats] = sweep.loads
    if loads and loads[0].plr_ratio.mean > low_load_plr:
        first = loads[0]
        extra = (f"; above {_pct(pdr_loss_ratio)}, so it alone sets the PDR point"
                 if first.plr_ratio.mean > pdr_loss_ratio else "")
        out.append(Flag("low_load_loss",
                        f"mean PLR {first.plr_ratio.mean:.3g} at the lowest load {format_load(first.load_pps)} "
                        f"(> {low_load_plr:g}): likely a warm-up or setup artefact{extra}",
                        [first.load_pps]))
    # Inversion: the higher load's mean PLR lies below the lower load's lower
    # confidence limit - more load, significantly less loss.
    for a, b in zip(loads, loads[1:]):
        if b.plr_ratio.mean < a.plr_ratio.ci_lower:
            out.append(Flag("loss_inversion",
                            f"mean PLR {b.plr_ratio.mean:.3g} at {format_load(b.load_pps)} is below the "
                            f"{sweep.confidence:g} lower confidence limit {a.plr_ratio.ci_lower:.3g} of the PLR "
                            f"at {format_load(a.load_pps)} (mean {a.plr_ratio.mean:.3g})",
                            [a.load_pps, b.load_pps]))
    if sweep.excluded or sweep.empty_loads_pps:
        by_reason = Counter(e.reason for e in sweep.excluded)
        where = sorted({e.load_pps for e in sweep.excluded})
        text = ", ".join(f"{n} {r}" for r, n in sorted(by_reason.items()))
        if sweep.empty_loads_pps:
            text += "; loads left out (no run left): " + ", ".join(map(format_load, sweep.empty_loads_pps))
        out.append(Flag("excluded_runs", f"runs excluded from statistics: {text}", where,
                        len(sweep.excluded)))
    clamped = [s for s in loads if s.n_rx_clamped]
    if clamped:
        n = sum(s.n_rx_clamped for s in clamped)
        out.append(Flag("rx_clamped", f"{n} runs with rx > tx (counter artefact) kept with loss clamped to 0",
                        [s.load_pps for s in clamped], n))
    single = [s.load_pps for s in loads if s.n_runs < 2]
    if single:
        out.append(Flag("single_run", "loads with one included run have no std or confidence interval",
                        single, len(single)))
    return out


@dataclass(frozen=True)
class Analysis:
    stats: SweepStats
    report: SaturationReport
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"meta": json_safe(self.meta), "stats": self.stats.to_dict(),
                "report": self.report.to_dict()}


def analyze_rows(rows: Iterable[RunLike], *, confidence: float = DEFAULT_CONFIDENCE,
                 policy: RunPolicy = RunPolicy(), meta: dict | None = None, **assess_kw) -> Analysis:
    """summarize_sweep + assess in one call; ``assess_kw`` go to ``assess``."""
    sweep = summarize_sweep(rows, confidence=confidence, policy=policy)
    return Analysis(sweep, assess(sweep, **assess_kw), dict(meta or {}))


def analyze_pastrami_file(path: str | os.PathLike, **kw) -> Analysis:
    """Read one PASTRAMI file and analyse it (keywords as for analyze_rows)."""
    from .pastrami_files import parse_filename, read_pastrami_file

    return analyze_rows(read_pastrami_file(path), meta=parse_filename(path), **kw)
