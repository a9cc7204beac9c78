"""Adaptive NDR/PDR search with a confidence statement (softnet.search).

    from softnet.search import search, Goal, Measurement
    result = search(measure, goals=[Goal(loss_ratio=0.0), Goal(loss_ratio=0.005)],
                    min_load_pps=1e4, max_load_pps=1e7, relative_width=0.005)

``measure(intended_load_pps, duration_s) -> Measurement`` is any callable: a
real testbed trial, a synthetic SUT, a replay. See algorithm.py for the method.
"""
from softnet.search.algorithm import search
from softnet.search.model import INVALIDATING_FLAGS, BoundEvidence, Goal, GoalResult, Measurement, SearchResult

__all__ = ["search", "Goal", "Measurement", "GoalResult", "SearchResult", "BoundEvidence", "INVALIDATING_FLAGS"]
