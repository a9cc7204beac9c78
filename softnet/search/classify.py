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
"""
from __future__ import annotations

from dataclasses import dataclass

from scipy.stats import beta, binomtest

from softnet.search.model import BoundEvidence, Goal, Measurement

LOWER, UPPER, PENDING = "lower", "upper", "pending"


@dataclass
class LoadClass:
    load_pps: float
    kind: str  # LOWER | UPPER | PENDING
    trials: list[Measurement]
    bad: int
    confidence: float  # posterior probability of the side it is classified on (or the likelier side)
    majority: bool = False  # decided by majority after max_trials, below the goal's confidence


def prob_upper(goal: Goal, n: int, bad: int) -> float:
    return float(beta.sf(goal.exceed_ratio, bad + 0.5, n - bad + 0.5))


def classify(goal: Goal, load_pps: float, trials: list[Measurement], max_trials: int,
             confidence: float | None = None) -> LoadClass:
    """``confidence``: a stricter level than the goal's (the final bounds, the
    minimum-load check); the strictest of the two applies."""
    conf = max(goal.confidence, confidence or 0.0)
    n = len(trials)
    bad = sum(goal.is_bad(t) for t in trials)
    if n == 0:
        return LoadClass(load_pps, PENDING, trials, 0, 0.5)
    p_up = prob_upper(goal, n, bad)
    if p_up >= conf:
        return LoadClass(load_pps, UPPER, trials, bad, p_up)
    if 1 - p_up >= conf:
        return LoadClass(load_pps, LOWER, trials, bad, 1 - p_up)
    if n >= max_trials:
        kind = UPPER if p_up >= 0.5 else LOWER
        return LoadClass(load_pps, kind, trials, bad, p_up if kind == UPPER else 1 - p_up, majority=True)
    return LoadClass(load_pps, PENDING, trials, bad, max(p_up, 1 - p_up))


def bound_evidence(c: LoadClass) -> BoundEvidence:
    offered = sum(t.offered_count for t in c.trials)
    lost = sum(max(0, t.offered_count - t.forwarded_count) for t in c.trials)
    ci = binomtest(lost, offered).proportion_ci(0.95, method="exact") if offered else None
    return BoundEvidence(load_pps=c.load_pps, trials=len(c.trials), bad_trials=c.bad, confidence=c.confidence,
                         loss_ratio=lost / offered if offered else float("nan"),
                         loss_ratio_ci95=(ci.low, ci.high) if ci else (float("nan"), float("nan")),
                         worst_trial_loss_ratio=max((t.loss_ratio for t in c.trials), default=float("nan")))
