"""The search controller: bracket with single short trials, confirm with
repeated final-duration trials, bisect in log space, model the knee where
trials disagree, check the minimum load.

Each iteration, every goal gets a fresh view of the measured loads
(state.py) and the strategies (strategy/) are asked in turn what the goal
needs: bracketing (bracketing.py) while the bracket is wide or open, then the
knee model (knee.py) if final trials disagree inside it, else bisection with
final trials and the verdict (bisection.py). The first goal that wants a
trial gets it; when every goal has its verdict, the minimum load is measured
too (inversion.py): loss there (and not above) is a loss inversion that makes
the goal fail conservatively. A load asked for again after 4 x
``max_trials_per_load`` trials without valid evidence ends its goal as
unstable. Budgets stop the loop before a trial that would exceed them.
"""
from __future__ import annotations

from typing import Callable

from softnet.analysis.mlr_spec import goal_result
from softnet.search.classify import LOWER, UPPER, bound_evidence
from softnet.search.config import SearchConfig
from softnet.search.model import Goal, GoalResult, Inversion, Measurement, SearchResult
from softnet.search.state import SearchState, View
from softnet.search.strategy import CHECKED, GOAL_STRATEGIES, Done, InversionCheck, Step

OnTrial = Callable[[Measurement, str], None]


class _Search:
    def __init__(self, measure: Callable[[float, float], Measurement], config: SearchConfig,
                 on_trial: OnTrial | None):
        self.measure, self.config, self.on_trial = measure, config, on_trial
        self.state = SearchState(config)
        self.strategies = [cls(self.state) for cls in GOAL_STRATEGIES]
        # The specification's relevant bounds are conservative over the loads tried on their own.
        self.inversion_check = InversionCheck(self.state) if config.check_min_load and not config.spec_rule else None

    def plan(self, g: Goal, view: View) -> Step | Done:
        # Bisection, the last strategy, always answers.
        return next(p for s in self.strategies if (p := s.nominate(g, view)) is not None)

    def next_step(self) -> tuple[Step | None, dict[int, Done]]:
        done: dict[int, Done] = {}
        views: dict[int, View] = {}
        for i, g in enumerate(self.state.goals):
            views[i] = self.state.view(g)
            p = self.plan(g, views[i])
            if isinstance(p, Step):
                tried = self.state.by_load.get(p.load_pps, [])
                if len(tried) >= 4 * self.config.max_trials_per_load:
                    valid = sum(m.valid for m in tried)
                    why = (f"{valid} valid trials there did not settle it" if valid else "no valid evidence")
                    done[i] = Done("unstable", f"{p.load_pps:,.0f} pps asked for again after {len(tried)} trials: "
                                   + why)
                    continue
                return p, done
            done[i] = p
        if self.inversion_check:
            for i, g in enumerate(self.state.goals):
                if done[i].status in CHECKED and (step := self.inversion_check.nominate(g, views[i])):
                    return step, done
        return None, done

    def run_trial(self, step: Step) -> None:
        m = self.measure(step.load_pps, step.duration_s)
        if not isinstance(m, Measurement):
            raise TypeError(f"measurer returned {type(m).__name__}, expected softnet.search.Measurement")
        self.state.add_trial(step.load_pps, m)
        if self.on_trial:
            self.on_trial(m, step.why)

    def run(self) -> SearchResult:
        stopped_by = "done"
        while True:
            step, done = self.next_step()
            if step is None:
                break
            if self.config.over_budget(self.state.trials, step.duration_s):
                stopped_by = "budget"
                break
            self.run_trial(step)
        return SearchResult([self.result(g, done.get(i)) for i, g in enumerate(self.state.goals)],
                            self.state.trials, stopped_by)

    def result(self, g: Goal, d: Done | None) -> GoalResult:
        s = self.state
        view = s.view(g)
        classes, lo, u = view.classes, view.lower_pps, view.upper_pps
        if d is None:
            d = Done("budget_exhausted", "the trial budget ran out before the bounds were pinned")
        inversions = [Inversion(ld, u) for ld, (c, ok) in classes.items()
                      if u is not None and ld > u and c.kind == LOWER and ok]
        diagnosis = d.diagnosis
        if d.status == "budget_exhausted" and self.config.spec_rule and lo is not None and u is not None:
            diagnosis += (f"; bracket so far [{lo:,.0f}, {u:,.0f}] pps, not all of it classified by the "
                          "duration sum")
        if inversions:
            diagnosis += (f"; loss inversion: the goal fails at {u:,.0f} pps but is met at "
                          f"{inversions[-1].meets_goal_at_pps:,.0f} pps (bounds kept below the failing load)")
        for ld, (c, _) in classes.items():  # upper evidence the inversion rule set aside
            if c.kind == UPPER and (u is None or ld < u):
                diagnosis += (f"; {ld:,.0f} pps failed the goal in {c.bad} of {len(c.trials)} trials, short of "
                              f"the final confidence: a loss inversion there is possible, not confirmed")
        if s.invalid_cap is not None:
            diagnosis += f"; loads above {s.invalid_cap:,.0f} pps could not be offered (invalid trials)"
        spec = goal_result(g.spec, [m.spec_trial() for m in s.trials])
        compliant = (lo, u) == (spec.relevant_lower_bound_pps, spec.relevant_upper_bound_pps)
        if self.config.spec_rule and not compliant and d.status == "found":
            # Cannot happen by construction (the view is the specification's pair); said, never hidden.
            diagnosis += (f"; the search's bounds ({lo}, {u}) are not the specification's relevant bounds "
                          f"({spec.relevant_lower_bound_pps}, {spec.relevant_upper_bound_pps})")
        return GoalResult(goal=g, status=d.status, lower_bound_pps=lo, upper_bound_pps=u,
                          lower=bound_evidence(classes[lo][0]) if lo is not None else None,
                          upper=bound_evidence(classes[u][0]) if u is not None else None,
                          diagnosis=diagnosis, mixed_loads_pps=view.mixed_pps, inversions=inversions,
                          knee=s.knee.summary(g), spec=spec, compliant=compliant,
                          engine="softnet" if self.config.spec_rule else "bayes")


def search(measure: Callable[[float, float], Measurement], config: SearchConfig,
           on_trial: OnTrial | None = None) -> SearchResult:
    """Find lower and upper bounds of each goal's conditional throughput.

    ``measure(intended_load_pps, duration_s)`` runs one trial; ``config``
    holds the goals, loads, width and budgets (SearchConfig);
    ``on_trial(measurement, why)`` is called after each trial. The search
    never raises for what the SUT does: a budget, a minimum load that already
    fails, or an unstable SUT all end in a result with a status and a
    diagnosis per goal.
    """
    if not isinstance(config, SearchConfig):
        raise TypeError(f"search() takes a SearchConfig, got {type(config).__name__}")
    return _Search(measure, config, on_trial).run()
