"""Load classification from repeated trials, and the evidence at a bound.

Each trial at a load is good or bad for a goal. The share p of bad trials a
load would produce is unknown; with a Jeffreys prior Beta(1/2, 1/2) and k bad
of n trials its posterior is Beta(k + 1/2, n - k + 1/2). The load is an upper
bound once P(p > exceed_ratio) >= confidence, a lower bound once
P(p <= exceed_ratio) >= confidence. Far from the goal two agreeing trials
suffice (0.924 at exceed_ratio 0.5 and confidence 0.9; five for 0.99, the
level the final bounds need); near it more are taken, up to a cap after which
the majority decides (ties count as bad) and the load is marked ``majority``,
with a stated confidence below the goal's. One unlucky trial never decides a
load.

Loss is assumed to grow with load, so a load also borrows the evidence of
its neighbours (``pool_monotone``): good trials at higher loads speak for it
meeting the goal, bad trials at lower loads for it failing. A flat noisy
region then gets the evidence of all its loads instead of each load
re-deciding a coin toss.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betainc, betaincc

from softnet.search.model import BoundEvidence, Goal, Measurement

LOWER, UPPER, PENDING = "lower", "upper", "pending"


@dataclass
class LoadClass:
    load_pps: float
    kind: str  # LOWER | UPPER | PENDING
    trials: list[Measurement]  # this load's own trials
    bad: int
    confidence: float  # posterior probability of the side it is classified on (or the likelier side)
    majority: bool = False  # decided by majority after max_trials, below the goal's confidence
    pooled_trials: int = 0  # trials the posterior used (own plus pooled neighbours)


def prob_upper(goal: Goal, n: int, bad: int) -> float:
    """P(p > exceed ratio) under Beta(bad + 1/2, n - bad + 1/2): the Beta sf,
    called as scipy.special's (scipy.stats' argument checks cost 10x the sum)."""
    return float(betaincc(bad + 0.5, n - bad + 0.5, goal.exceed_ratio))


def classify(goal: Goal, load_pps: float, trials: list[Measurement], max_trials: int,
             confidence: float | None = None, pooled: tuple[int, int] | None = None) -> LoadClass:
    """``confidence``: a stricter level than the goal's (the final bounds, the
    minimum-load check); the strictest of the two applies. ``pooled``: (trials,
    bad) of this load's pool (``pool_monotone``) instead of its own counts; the
    majority cap still counts the load's own trials."""
    conf = max(goal.confidence, confidence or 0.0)
    bad = sum(goal.is_bad(t) for t in trials)
    n_pool, bad_pool = pooled or (len(trials), bad)
    if n_pool == 0:
        return LoadClass(load_pps, PENDING, trials, 0, 0.5)
    p_up = prob_upper(goal, n_pool, bad_pool)
    if p_up >= conf:
        return LoadClass(load_pps, UPPER, trials, bad, p_up, pooled_trials=n_pool)
    if 1 - p_up >= conf:
        return LoadClass(load_pps, LOWER, trials, bad, 1 - p_up, pooled_trials=n_pool)
    if len(trials) >= max_trials:
        kind = UPPER if p_up >= 0.5 else LOWER
        return LoadClass(load_pps, kind, trials, bad, p_up if kind == UPPER else 1 - p_up, majority=True,
                         pooled_trials=n_pool)
    return LoadClass(load_pps, PENDING, trials, bad, max(p_up, 1 - p_up), pooled_trials=n_pool)


def statement(goal: Goal, load_pps: float, final: list[Measurement], kind: str | None = None) -> LoadClass:
    """softnet's posterior statement of a load from its final trials, beside a
    classification made otherwise (the specification's): on ``kind``'s side,
    or the likelier one."""
    bad = sum(goal.is_bad(m) for m in final)
    p_up = prob_upper(goal, len(final), bad) if final else 0.5
    kind = kind or (UPPER if p_up >= 0.5 else LOWER)
    return LoadClass(load_pps, kind, final, bad, p_up if kind == UPPER else 1 - p_up, pooled_trials=len(final))


def bound_evidence(c: LoadClass) -> BoundEvidence:
    offered = sum(t.offered_count for t in c.trials)
    lost = sum(max(0, t.offered_count - t.forwarded_count) for t in c.trials)
    from scipy.stats import binomtest  # here: scipy.stats' import is 0.6 s, paid only where it is used

    ci = binomtest(lost, offered).proportion_ci(0.95, method="exact") if offered else None
    return BoundEvidence(load_pps=c.load_pps, trials=len(c.trials), bad_trials=c.bad, confidence=c.confidence,
                         pooled_trials=c.pooled_trials,
                         loss_ratio=lost / offered if offered else float("nan"),
                         loss_ratio_ci95=(ci.low, ci.high) if ci else (float("nan"), float("nan")),
                         worst_trial_loss_ratio=max((t.loss_ratio for t in c.trials), default=float("nan")))



def pool_monotone(counts: list[tuple[int, int]], goal: Goal) -> list[tuple[int, int]]:
    """Each load's evidence pooled with its neighbours under monotone loss.

    ``counts``: (trials, bad) per load, loads ascending. If the bad-trial
    share p never falls with load, p(L) is at most the average p over any
    window [L, L'] above it and at least the average over any window [L'', L]
    below it. So a window above L that says "meets the goal" is evidence that
    L does, and a window below that says "fails" is evidence that L fails.
    Each load gets the window whose posterior is strongest; when a window on
    each side is conclusive at the goal's confidence they contradict the
    assumption (noise or a loss inversion) and the load keeps its own counts.
    """
    n = np.array([c[0] for c in counts], dtype=float)
    k = np.array([c[1] for c in counts], dtype=float)
    out = []
    for i, own in enumerate(counts):
        if own[0] == 0:
            out.append(own)
            continue
        n_up, k_up = np.cumsum(n[i:]), np.cumsum(k[i:])  # windows [i, j], j >= i
        n_dn, k_dn = np.cumsum(n[i::-1]), np.cumsum(k[i::-1])  # windows [j, i], j <= i
        p_lower = betainc(k_up + 0.5, n_up - k_up + 0.5, goal.exceed_ratio)  # Beta cdf
        p_upper = betaincc(k_dn + 0.5, n_dn - k_dn + 0.5, goal.exceed_ratio)  # Beta sf
        a, b = int(np.argmax(p_lower)), int(np.argmax(p_upper))
        if p_lower[a] >= goal.confidence and p_upper[b] >= goal.confidence:
            out.append(own)
        elif p_lower[a] >= p_upper[b]:
            out.append((int(n_up[a]), int(k_up[a])))
        else:
            out.append((int(n_dn[b]), int(k_dn[b])))
    return out
