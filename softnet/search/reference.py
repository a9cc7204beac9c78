"""The reference engine: MLRsearch 1.2.1 (FD.io CSIT's implementation, the
one RFC 9971 cites) driving softnet's trials.

MLRsearch chooses the loads and durations; each trial is softnet's (the same
measurer, flags, stall attribution, store and replay as softnet's engine).
MLRsearch is deterministic given its trial results, so a search interrupted
by a kill resumes by replaying its stored trials, as softnet's does. The
answer reported is the specification's, computed from the trials by
softnet.analysis.mlr_spec; MLRsearch's own is checked against it
(``compliant``).

MLRsearch settings beyond the goal attributes are its defaults as CSIT runs
them: two preceding targets, expansion coefficient 2, no warm-up trial, no
time limit (softnet's budgets stop it instead), fail_fast off (a goal whose
minimum load fails has no lower bound, not an exception).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from softnet.analysis.mlr_spec import goal_result
from softnet.search.algorithm import OnTrial
from softnet.search.classify import bound_evidence, statement
from softnet.search.config import SearchConfig
from softnet.search.model import Goal, GoalResult, Measurement, SearchResult



class _Budget(Exception):
    """The next trial would exceed the search's budget."""


def mlrsearch_config(config: SearchConfig):
    """The search's goals and loads as MLRsearch 1.2.1's Config."""
    from MLRsearch import Config, SearchGoal

    mlr = Config()
    mlr.goals = [SearchGoal(loss_ratio=g.loss_ratio, exceed_ratio=g.exceed_ratio,
                            relative_width=g.relative_width or config.relative_width,
                            initial_trial_duration=g.short_duration, final_trial_duration=g.final_trial_duration,
                            duration_sum=g.duration_sum_s, preceding_targets=2, expansion_coefficient=2,
                            fail_fast=False) for g in config.goals]
    mlr.min_load, mlr.max_load = config.min_load_pps, config.max_load_pps
    mlr.search_duration_max, mlr.warmup_duration = 1e9, None
    return mlr


def search_mlrsearch(measure: Callable[[float, float], Measurement], config: SearchConfig,
                     on_trial: OnTrial | None = None) -> SearchResult:
    """One search by MLRsearch 1.2.1 through ``measure(load_pps, duration_s)``."""
    from MLRsearch import AbstractMeasurer, MeasurementResult, MultipleLossRatioSearch

    trials: list[Measurement] = []

    class Measurer(AbstractMeasurer):
        def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
            if config.over_budget(trials, intended_duration):
                raise _Budget()
            m = measure(float(intended_load), float(intended_duration))
            if not isinstance(m, Measurement):
                raise TypeError(f"measurer returned {type(m).__name__}, expected softnet.search.Measurement")
            m.intended_load_pps = float(intended_load)
            trials.append(m)
            if on_trial:
                on_trial(m, "MLRsearch")
            # A trial that is no measurement lost everything, as the specification reads it (mlr_spec).
            offered = max(1, m.offered_count)
            forwarded = min(m.forwarded_count, m.offered_count) if m.valid else 0
            return MeasurementResult(intended_duration=intended_duration, intended_load=intended_load,
                                     offered_count=offered, forwarding_count=max(0, forwarded))

    mlr = mlrsearch_config(config)
    own: dict | None = None
    stopped_by = "done"
    try:
        own = MultipleLossRatioSearch(config=mlr).search(measurer=Measurer(), debug=lambda _: None)
    except _Budget:
        stopped_by = "budget"
    goals = [_goal_result(g, mlr_goal, trials, own, stopped_by, config)
             for g, mlr_goal in zip(config.goals, mlr.goals)]
    return SearchResult(goals, trials, stopped_by)


def _goal_result(g: Goal, mlr_goal, trials: list[Measurement], own, stopped_by: str,
                 config: SearchConfig) -> GoalResult:
    if g.relative_width is None:
        g = replace(g, relative_width=config.relative_width)
    spec = goal_result(g.spec, [m.spec_trial() for m in trials])
    lo, up = spec.relevant_lower_bound_pps, spec.relevant_upper_bound_pps
    compliant = None
    said = ""
    if own is not None:
        r = own[mlr_goal]
        theirs = (float(r.relevant_lower_bound) if r.relevant_lower_bound is not None else None,
                  float(r.relevant_upper_bound) if r.relevant_upper_bound is not None else None)
        compliant = all(a is None and b is None or a is not None and b is not None and abs(a / b - 1) < 1e-9
                        for a, b in zip(theirs, (lo, up)))
        if not compliant:
            said = f"; MLRsearch's own bounds {theirs} differ from the specification's over its trials"
    status, why = _status(g, spec, stopped_by, config)
    return GoalResult(goal=g, status=status, lower_bound_pps=lo, upper_bound_pps=up,
                      lower=_evidence(g, lo, trials), upper=_evidence(g, up, trials),
                      diagnosis=why + said, spec=spec, compliant=compliant, engine="mlrsearch")


def _status(g: Goal, spec, stopped_by: str, config: SearchConfig) -> tuple[str, str]:
    lo, up, width = spec.relevant_lower_bound_pps, spec.relevant_upper_bound_pps, spec.relative_width
    if stopped_by == "budget":
        return "budget_exhausted", "the trial budget ran out before MLRsearch reached the goal's width"
    if up is None:
        return "above_max_load", f"no load failed the goal up to the maximum load {config.max_load_pps:,.0f} pps"
    if lo is None:
        return "min_load_fails", f"the goal is not met even at the lowest load MLRsearch tried ({up:,.0f} pps)"
    if width is not None and width <= g.relative_width * (1 + 1e-9):
        return "found", f"MLRsearch: relevant bounds {width:.3%} apart"
    return "irregular", (f"MLRsearch ended with the relevant bounds {width:.3%} apart "
                         f"(goal width {g.relative_width:.2%})")


def _evidence(g: Goal, load: float | None, trials: list[Measurement]):
    """softnet's statement of a bound beside the specification's: the posterior of its final trials."""
    if load is None:
        return None
    final = [m for m in trials if abs(m.intended_load_pps - load) < 1e-6 and m.valid
             and m.duration_s >= g.final_trial_duration]
    return bound_evidence(statement(g, load, final))
