"""Per-load statistics of a load sweep, following PASTRAMI sec. IV-A.

For K runs at offered load O (each run: tx sent, rx forwarded, duration T):

* PLR  = (tx - rx) / tx per run, then averaged (the paper divides by O*T;
  we divide by the measured tx, which equals O*T for runs that are not
  generator-limited - those are excluded, see ``RunPolicy``).
* DR   = 1 - PLR                                   (paper eq. 1)
* T(O) = rx / T  [packets/s]                       (paper R(O) = N/T)

Each metric gets mean, sample std (ddof=1, paper eq. 2) and a Student-t
confidence interval ``mean -+ t_{K-1} * std / sqrt(K)``. K=1 has no spread
estimate: std and the CI are NaN. ``plr_delta_ucl`` = (UCL - PLR) / PLR.

rx > tx (a counter artefact) is kept but clamped: rx_eff = min(rx, tx), so
PLR is never negative and DR = 1 - PLR, T = DR * tx / T still hold.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Iterable, Protocol

import numpy as np

from softnet.jsonsafe import json_safe

DEFAULT_CONFIDENCE = 0.95


class RunLike(Protocol):
    offered_load_pps: float
    run_index: int
    tx_pkts: int
    rx_pkts: int
    duration_s: float


def check_confidence(confidence: float) -> float:
    """Validate a two-sided confidence level (0 < c < 1, e.g. 0.95)."""
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95; got {confidence!r}")
    return c


def t_critical(confidence: float, dof: int) -> float:
    """Two-sided Student-t critical value, e.g. t_{K-1, 0.025} for 0.95."""
    c = check_confidence(confidence)
    if dof < 1:
        return math.nan
    # scipy.special, not scipy.stats: the same quantile (stats.t.ppf calls
    # it) without stats' 0.6 s import in every process that evaluates a trial
    from scipy.special import stdtrit

    return float(stdtrit(dof, 1.0 - (1.0 - c) / 2.0))


@dataclass(frozen=True)
class MeanCI:
    """Sample mean, sample std (ddof=1) and two-sided t confidence interval."""

    n: int
    mean: float
    std: float
    ci_lower: float
    ci_upper: float

    @classmethod
    def of(cls, values: Iterable[float], confidence: float = DEFAULT_CONFIDENCE) -> "MeanCI":
        x = np.asarray(list(values), dtype=float)
        n = int(x.size)
        if n == 0:
            return cls(0, math.nan, math.nan, math.nan, math.nan)
        mean = float(x.mean())
        if n == 1:  # no spread estimate from one run
            return cls(1, mean, math.nan, math.nan, math.nan)
        std = float(x.std(ddof=1))
        half = t_critical(confidence, n - 1) * std / math.sqrt(n)
        return cls(n, mean, std, mean - half, mean + half)


@dataclass(frozen=True)
class RunPolicy:
    """Which runs are excluded from statistics, and why.

    generator_tolerance: a run whose tx differs from offered_load * T by more
      than this fraction did not apply the nominal load (generator-limited
      or overshooting), so its loss belongs to another load.
    rx_excess_tolerance: rx above tx by at most this fraction of tx is a
      counter artefact - kept, loss clamped to 0. Beyond it the counters are
      not trusted and the run is excluded.
    """

    generator_tolerance: float = 0.01
    rx_excess_tolerance: float = 1e-5

    def exclusion_reason(self, run: RunLike) -> str | None:
        expected = run.offered_load_pps * run.duration_s
        if run.tx_pkts < expected * (1.0 - self.generator_tolerance):
            return "generator_limited"
        if run.tx_pkts > expected * (1.0 + self.generator_tolerance):
            return "generator_overshoot"
        if run.rx_pkts - run.tx_pkts > self.rx_excess_tolerance * run.tx_pkts:
            return "counters_inconsistent"
        return None


@dataclass(frozen=True)
class ExcludedRun:
    load_pps: float
    run_index: int
    reason: str
    tx_pkts: int
    rx_pkts: int


@dataclass(frozen=True)
class LoadStats:
    """Statistics of the included runs at one offered load."""

    load_pps: float
    duration_s: float
    n_runs: int  # included runs (= K)
    n_excluded: int
    n_rx_clamped: int  # included runs with rx > tx, loss clamped to 0
    plr_ratio: MeanCI
    dr_ratio: MeanCI
    throughput_pps: MeanCI
    plr_delta_ucl: float  # (UCL - PLR) / PLR; NaN when PLR == 0 or K < 2


@dataclass(frozen=True)
class TirStep:
    """Throughput Increase Ratio between consecutive analysed loads (sec. V-A)."""

    from_load_pps: float
    to_load_pps: float
    tir: float  # (T(O2) - T(O1)) / (O2 - O1), dimensionless


def tir(low: LoadStats, high: LoadStats) -> float:
    """TIR from mean throughputs and nominal offered loads."""
    return (high.throughput_pps.mean - low.throughput_pps.mean) / (high.load_pps - low.load_pps)


@dataclass(frozen=True)
class SweepStats:
    confidence: float
    loads: list[LoadStats]  # ascending load, loads with no included run left out
    tir_steps: list[TirStep]
    excluded: list[ExcludedRun] = field(default_factory=list)
    empty_loads_pps: list[float] = field(default_factory=list)  # every run excluded

    def to_dict(self) -> dict:
        return json_safe(asdict(self))


def load_stats(runs: list[RunLike], confidence: float = DEFAULT_CONFIDENCE,
               n_excluded: int = 0) -> LoadStats:
    """Statistics of the (already filtered) runs at a single offered load."""
    if not runs:
        raise ValueError("load_stats needs at least one run")
    loads = {r.offered_load_pps for r in runs}
    durations = {r.duration_s for r in runs}
    if len(loads) != 1 or len(durations) != 1:
        raise ValueError(f"runs mix loads {sorted(loads)} or durations {sorted(durations)}")
    tx = np.array([r.tx_pkts for r in runs], dtype=float)
    rx = np.array([r.rx_pkts for r in runs], dtype=float)
    if np.any(tx <= 0):
        raise ValueError("runs with tx_pkts == 0 have no loss ratio; exclude them first")
    rx_eff = np.minimum(rx, tx)
    (duration,) = durations
    plr = (tx - rx_eff) / tx
    plr_ci = MeanCI.of(plr, confidence)
    delta = ((plr_ci.ci_upper - plr_ci.mean) / plr_ci.mean
             if plr_ci.mean > 0 and plr_ci.n >= 2 else math.nan)
    return LoadStats(
        load_pps=loads.pop(), duration_s=duration, n_runs=len(runs),
        n_excluded=n_excluded, n_rx_clamped=int(np.count_nonzero(rx > tx)),
        plr_ratio=plr_ci, dr_ratio=MeanCI.of(1.0 - plr, confidence),
        throughput_pps=MeanCI.of(rx_eff / duration, confidence), plr_delta_ucl=delta,
    )


def summarize_sweep(rows: Iterable[RunLike], *, confidence: float = DEFAULT_CONFIDENCE,
                    policy: RunPolicy = RunPolicy()) -> SweepStats:
    """Group runs by offered load, drop excluded runs, compute stats and TIR."""
    check_confidence(confidence)
    groups: dict[float, list[RunLike]] = defaultdict(list)
    for r in rows:
        groups[float(r.offered_load_pps)].append(r)
    loads, excluded, empty = [], [], []
    for load in sorted(groups):
        kept = []
        for r in groups[load]:
            reason = policy.exclusion_reason(r)
            if reason is None:
                kept.append(r)
            else:
                excluded.append(ExcludedRun(load, r.run_index, reason, r.tx_pkts, r.rx_pkts))
        if kept:
            loads.append(load_stats(kept, confidence, len(groups[load]) - len(kept)))
        else:
            empty.append(load)
    steps = [TirStep(a.load_pps, b.load_pps, tir(a, b)) for a, b in zip(loads, loads[1:])]
    return SweepStats(confidence, loads, steps, excluded, empty)
