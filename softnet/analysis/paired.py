"""Paired comparisons: is B slower or faster than A, or equivalent within a
margin, from measurements taken in pairs close in time.

A host that drifts (a VM's neighbours, thermal state, a CI runner) moves A
and B alike when they are measured one right after the other, so the
difference within a pair keeps the change and loses most of the drift. Each
round measures every variant once, in an order that alternates (A B, B A,
A B, ...: ABBA for two), so a drift that is linear over a round cancels too.

Per metric and round, the pair's difference is the log ratio ln(b / a)
(``scale = "ratio"``: rates, costs, latencies; shown as % change) or b - a
(``scale = "difference"``: loss ratios, which are often 0). The estimate is
the Hodges-Lehmann median of those differences with the interval of the
Wilcoxon signed-rank test (distribution-free: this VM's stalls make a few
wild pairs, which a mean and a t-interval would follow); the verdict reads
that interval against zero and against the equivalence margin:

* ``equivalent``: two one-sided tests (TOST), each at level 1 - confidence,
  both reject a change of the margin or more: the interval at confidence
  1 - 2 (1 - confidence) (90% for 95%, ``tost_ci``) lies inside (-margin,
  +margin). Schuirmann's test: it claims equivalence falsely at most at the
  stated rate, and reads a narrower interval than the one shown;
* ``slower`` / ``faster``: otherwise, the interval excludes zero (slower:
  worse on that metric; for capacity a lower rate, for a cost, a loss or a
  latency a higher one);
* ``undecided``: neither.

The experiment is sequential: it looks at the data after a geometric series
of rounds (MIN_ROUNDS, then x1.5 each) and stops once every metric it
decides on has a verdict. Looking more than once spends the error rate more
than once, so each look uses confidence 1 - (1 - c) / K for the K looks the
budget allows (Bonferroni): conservative, and valid however the looks fall.
The final figures are reported at that per-look confidence, so the interval
shown is the one the verdict read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from softnet.results.comparison import Better, PairedDifference, Scale, Verdict

MIN_ROUNDS = 4
LOOK_GROWTH = 1.5


def adjust(d: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, float]:
    """Regression adjustment: the pair differences less the part a covariate
    measured in both trials of each pair explains, d - beta x (beta: the
    least-squares slope). The covariate (the host's pace, measured with the
    SUT at rest) is one the variants cannot move, so its difference is
    chance: all of it is taken out, the pairs' imbalance with it. One that
    explains nothing leaves d as it was."""
    xc = x - x.mean()
    ss = float(xc @ xc)
    if ss == 0 or len(d) < 4:
        return d, 0.0
    beta = float(xc @ (d - d.mean())) / ss
    return d - beta * x, beta


def paired_difference(metric: str, a: Sequence[float | None], b: Sequence[float | None], *, better: Better,
                      scale: Scale = "ratio", unit: str = "", confidence: float = 0.95,
                      margin: float = 0.02, kind: str = "",
                      covariate: tuple[Sequence[float | None], Sequence[float | None]] | None = None
                      ) -> PairedDifference:
    """The paired difference of b against a, round by round (a[i], b[i] from
    round i; None where a side has no value: that round is dropped).
    ``covariate``: the same rounds' covariate on each side (the host's pace),
    taken out of the differences by regression when every pair has it."""
    if len(a) != len(b):
        raise ValueError(f"{metric}: {len(a)} baseline values against {len(b)} candidate values")
    keep = [i for i, (x, y) in enumerate(zip(a, b)) if _usable(x, scale) and _usable(y, scale)]
    pairs = [(a[i], b[i]) for i in keep]
    dropped = len(a) - len(pairs)
    n = len(pairs)
    base = dict(metric=metric, unit=unit, better=better, scale=scale, n_pairs=n, confidence=confidence,
                margin=margin, dropped_pairs=dropped, kind=kind)
    if n == 0:
        return PairedDifference(**base, baseline_mean=None, candidate_mean=None, estimate=None, ci=None,
                                p_value=None, verdict="undecided")
    xa, xb = np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float)
    d = np.log(xb / xa) if scale == "ratio" else xb - xa
    if covariate is not None and all(_usable(covariate[0][i], "ratio") and _usable(covariate[1][i], "ratio")
                                     for i in keep):
        ca, cb = (np.array([c[i] for i in keep], float) for c in covariate)
        d, beta = adjust(d, np.log(cb / ca))
        base["covariate_beta"] = beta
    mean, lo, hi = hodges_lehmann(d, confidence)
    _, tlo, thi = hodges_lehmann(d, tost_confidence(confidence))
    from scipy import stats  # here: its import is 0.6 s, paid only where it is used

    p = float(stats.wilcoxon(d).pvalue) if n >= 2 and np.any(d != 0) else (1.0 if n >= 2 else None)
    to_change = (lambda v: math.expm1(v)) if scale == "ratio" else (lambda v: v)
    ci = None if lo is None else (to_change(lo), to_change(hi))
    tost = None if tlo is None else (to_change(tlo), to_change(thi))
    verdict, significant = decide(ci, margin, better, tost)
    return PairedDifference(**base, baseline_mean=float(xa.mean()), candidate_mean=float(xb.mean()),
                            estimate=to_change(mean), ci=ci, p_value=p, verdict=verdict, significant=significant,
                            tost_ci=tost)


def tost_confidence(confidence: float) -> float:
    """The two-sided confidence of the interval TOST reads: each one-sided
    test at 1 - confidence."""
    return 1 - 2 * (1 - confidence)


def signed_rank_counts(n: int) -> np.ndarray:
    """How many of the 2^n sign patterns give each signed-rank sum 0..n(n+1)/2
    (the exact null distribution of Wilcoxon's statistic)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    return counts


def hodges_lehmann(d: np.ndarray, confidence: float) -> tuple[float, float | None, float | None]:
    """The median of the Walsh averages (d_i + d_j) / 2, i <= j, and the
    distribution-free interval around it that the signed-rank test gives
    (exact up to 60 pairs, normal beyond). A host stall that lands between
    the two halves of one pair makes one wild difference: it moves this
    estimate by one rank, a mean by its whole size."""
    n = len(d)
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    est = float(np.median(walsh))
    if n < 2:
        return est, None, None
    alpha = 1 - confidence
    m = len(walsh)
    if n <= 60:
        cdf = np.cumsum(signed_rank_counts(n)) / 2.0 ** n
        k = int(np.searchsorted(cdf, alpha / 2, side="right"))  # P(W <= k - 1) <= alpha / 2
    else:
        mu, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        from scipy import stats

        k = max(0, int(math.floor(mu - stats.norm.ppf(1 - alpha / 2) * sd)))
    if k < 1:  # too few pairs to reach this confidence at all
        return est, None, None
    return est, float(walsh[k - 1]), float(walsh[m - k])


def _usable(v: float | None, scale: Scale) -> bool:
    if v is None or not math.isfinite(v):
        return False
    return v > 0 if scale == "ratio" else True


def decide(ci: tuple[float, float] | None, margin: float, better: Better,
           tost_ci: tuple[float, float] | None = None) -> tuple[Verdict, bool]:
    """The verdict an interval of the change (b against a) gives, and
    whether it excludes zero; equivalence reads ``tost_ci`` (TOST's
    interval) where given, ``ci`` otherwise."""
    if ci is None and tost_ci is None:
        return "undecided", False
    elo, ehi = tost_ci or ci
    if -margin < elo and ehi < margin:
        return "equivalent", ci is not None and (ci[0] > 0 or ci[1] < 0)
    if ci is None:
        return "undecided", False
    lo, hi = ci
    significant = lo > 0 or hi < 0
    if not significant:
        return "undecided", False
    up = lo > 0
    return ("slower" if up == (better == "lower") else "faster"), True


def look_schedule(max_rounds: int, min_rounds: int = MIN_ROUNDS, growth: float = LOOK_GROWTH,
                  confidence: float = 0.95) -> list[int]:
    """The rounds after which a sequential experiment looks: min_rounds, then
    x growth each (rounded up), the last being max_rounds. A look before the
    signed-rank test can reach the per-look confidence at all (n pairs all of
    one sign have p = 2 / 2^n) would spend error rate for nothing: the first
    look moves up until it can."""
    if max_rounds < 1:
        return []
    start = max(2, min(min_rounds, max_rounds))
    while True:
        looks, n = [], start
        while n < max_rounds:
            looks.append(n)
            n = max(n + 1, math.ceil(n * growth))
        looks.append(max_rounds)
        alpha = (1 - confidence) / len(looks)
        reachable = math.ceil(math.log2(2 / alpha))
        if looks[0] >= min(reachable, max_rounds):
            return looks
        start = min(reachable, max_rounds)


def per_look_confidence(confidence: float, n_looks: int) -> float:
    """Bonferroni: each of n looks at 1 - (1 - c) / n keeps the chance of any
    false call over all of them at most 1 - c."""
    return 1 - (1 - confidence) / max(1, n_looks)


@dataclass(frozen=True)
class StopRule:
    """When a sequential comparison stops: every metric in ``decide_on`` has a
    verdict other than undecided (``decided``), or the budget is spent."""

    decide_on: tuple[str, ...]
    looks: tuple[int, ...]

    def is_look(self, rounds: int) -> bool:
        return rounds in self.looks

    def decided(self, diffs: Sequence[PairedDifference]) -> bool:
        relevant = [d for d in diffs if d.kind in self.decide_on]
        return bool(relevant) and all(d.verdict != "undecided" for d in relevant)


def round_order(n_variants: int, round_index: int) -> list[int]:
    """Variant indices in the order round ``round_index`` measures them:
    forward on even rounds, reversed on odd ones (ABBA for two variants)."""
    order = list(range(n_variants))
    return order if round_index % 2 == 0 else order[::-1]


def unpaired_difference(metric: str, a: Sequence[float | None], b: Sequence[float | None], *, better: Better,
                        scale: Scale = "ratio", unit: str = "", confidence: float = 0.95,
                        margin: float = 0.02) -> PairedDifference:
    """The same figures from two separate groups (stored results measured
    apart in time): Welch's t on the logs (ratio) or the values. Drift
    between the two runs is in the difference: the interval cannot know it."""
    xa = np.array([v for v in a if _usable(v, scale)], float)
    xb = np.array([v for v in b if _usable(v, scale)], float)
    base = dict(metric=metric, unit=unit, better=better, scale=scale, n_pairs=min(len(xa), len(xb)),
                confidence=confidence, margin=margin, dropped_pairs=len(a) - len(xa) + len(b) - len(xb))
    if not len(xa) or not len(xb):
        return PairedDifference(**base, baseline_mean=None, candidate_mean=None, estimate=None, ci=None,
                                p_value=None, verdict="undecided")
    la, lb = (np.log(xa), np.log(xb)) if scale == "ratio" else (xa, xb)
    mean = float(lb.mean() - la.mean())
    to_change = (lambda v: math.expm1(v)) if scale == "ratio" else (lambda v: v)
    ci = tost = p = None
    if len(xa) >= 2 and len(xb) >= 2:
        va, vb = la.var(ddof=1) / len(la), lb.var(ddof=1) / len(lb)
        se = math.sqrt(va + vb)
        if se == 0:
            ci, p = (to_change(mean), to_change(mean)), (1.0 if mean == 0 else 0.0)
            tost = ci
        else:
            dof = (va + vb) ** 2 / (va ** 2 / (len(la) - 1) + vb ** 2 / (len(lb) - 1))
            from scipy import stats

            def interval(conf: float) -> tuple[float, float]:
                half = float(stats.t.ppf(1 - (1 - conf) / 2, dof)) * se
                return to_change(mean - half), to_change(mean + half)

            ci, tost = interval(confidence), interval(tost_confidence(confidence))
            p = float(2 * stats.t.sf(abs(mean) / se, dof))
    verdict, significant = decide(ci, margin, better, tost)
    return PairedDifference(**base, baseline_mean=float(xa.mean()), candidate_mean=float(xb.mean()),
                            estimate=to_change(mean), ci=ci, p_value=p, verdict=verdict, significant=significant,
                            tost_ci=tost)


def beyond_capacity(diffs: Sequence[PairedDifference]) -> float | None:
    """The lower of the two sides' capacity, where one was measured: loss and
    latency at loads from there up are the capacity's change seen again,
    not a change of their own."""
    caps = [min(d.baseline_mean, d.candidate_mean) for d in diffs if d.kind == "capacity"
            and d.baseline_mean is not None and d.candidate_mean is not None]
    return min(caps) if caps else None


def regressions(diffs: Sequence[PairedDifference], threshold: float,
                loss_threshold: float) -> list[PairedDifference]:
    """What a CI gate fails on (``diffs``: one candidate's): significantly
    worse, and worse by more than ``threshold`` (a relative change, for ratio
    metrics) or ``loss_threshold`` (an absolute difference of loss ratios);
    loss and latency only at loads below both sides' capacity by more than
    ``threshold``: nearer, a capacity change the gate allows moves them too."""
    cap = beyond_capacity(diffs)
    return [d for d in diffs if d.significant and d.worse_by is not None
            and d.worse_by > (threshold if d.scale == "ratio" else loss_threshold)
            and not (cap is not None and d.load_pps is not None and d.kind in ("loss", "latency")
                     and d.load_pps >= cap * (1 - threshold))]


def gate_words(bad: Sequence[PairedDifference]) -> str:
    """The metrics a gate failed on, each once: "capacity -10.2%; loss at 2
    loads (most +0.8 points, at 200 kpps)"."""
    out = []
    for kind in dict.fromkeys(d.family for d in bad):
        ds = [d for d in bad if d.family == kind]
        worst = max(ds, key=lambda d: d.worse_by or 0)
        size = (f"{100 * worst.estimate:+.1f}%" if worst.scale == "ratio" else
                f"{100 * worst.estimate:+.2f} points")
        where = [d for d in ds if d.load_pps is not None]
        if len(ds) == 1:
            out.append(f"{worst.metric} {size}")
        else:
            at = f", at {worst.metric.split('@')[-1]}" if where else ""
            out.append(f"{kind} at {len(ds)} {'loads' if where else 'figures'} (most {size}{at})")
    return "; ".join(out)
