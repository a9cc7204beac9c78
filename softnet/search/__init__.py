"""Adaptive NDR/PDR search with a confidence statement (softnet.search).

    from softnet.search import Goal, SearchConfig, search
    config = SearchConfig(goals=[Goal(loss_ratio=0.0), Goal(loss_ratio=0.005)],
                          min_load_pps=1e4, max_load_pps=1e7, relative_width=0.005)
    result = search(measure, config)

``measure(intended_load_pps, duration_s) -> Measurement`` is any callable: a
real testbed trial, a synthetic SUT, a replay. algorithm.py is the controller;
each strategy lives in strategy/ (bracketing, bisection, knee model,
inversion check); config.py holds the settings.
"""
from softnet.search.algorithm import search
from softnet.search.config import SearchConfig
from softnet.search.model import INVALIDATING_FLAGS, BoundEvidence, Goal, GoalResult, Measurement, SearchResult

__all__ = ["search", "SearchConfig", "Goal", "Measurement", "GoalResult", "SearchResult", "BoundEvidence",
           "INVALIDATING_FLAGS"]
