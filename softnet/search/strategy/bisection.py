"""Bisection: inside a bracket narrow enough, confirm L and U with final
trials, bisect in log space with final trials until (U - L) / U <= width,
give both ends the final confidence, and give the verdict.

Away from a modelled knee, a load still mixed after ``max_trials_per_load``
trials is decided by the majority and its confidence says so; when such mixed
loads spread wider than ``unstable_width`` the goal is *unstable*: bounds are
given, no value. With the specification's rule (SearchConfig.rule = "spec")
it bisects with one final trial a step while the bracket is wider than the
width and confirms the two ends after; the duration sums decide a load, so
nothing is mixed. This strategy always answers: it is the last one asked.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from softnet.search.model import Goal
from softnet.search.strategy.base import Done, Step, Strategy

if TYPE_CHECKING:  # state.py imports the knee model from this package
    from softnet.search.state import View


class Bisection(Strategy):
    def nominate(self, g: Goal, view: View) -> Step | Done:
        s, cfg = self.state, self.config
        classes, lo, u, mixed = view.classes, view.lower_pps, view.upper_pps, view.mixed_pps
        final = g.final_trial_duration
        ratio = (u - lo) / u
        if cfg.spec_rule and ratio > g.relative_width:
            # One trial a step, each end confirmed once the bracket is narrow: a step that
            # a confirmation overturns is bisected again, and most are not.
            return Step(s.snap(math.sqrt(lo * u)), final, "bisect")
        for end in (lo, u):
            if not classes[end][1]:
                return Step(end, final, "confirm a bound")
        if ratio > g.relative_width:
            return Step(s.snap(math.sqrt(lo * u)), final, "bisect")
        for end in (lo, u):  # the final pair carries the answer: it needs the final confidence
            if not s.load_class(g, end, cfg.final_confidence)[1]:
                return Step(end, final, "confirm a final bound")
        # The minimum load's own coin toss (checked apart, for inversions) is no spread of the knee.
        knee_mixed = [ld for ld in mixed if ld != s.snap(s.min_load)]
        spread = max(knee_mixed) / min(knee_mixed) - 1 if len(knee_mixed) > 1 else 0.0
        if spread > cfg.unstable_width:
            return Done("unstable", f"trials disagree at {len(knee_mixed)} loads spread over {spread:.1%} "
                        f"(more than {cfg.unstable_width:.0%}): the SUT does not settle on one side")
        note = f"; {len(mixed)} load(s) decided by majority after {cfg.max_trials_per_load} trials" if mixed else ""
        return Done("found", f"bounds {ratio:.3%} apart{note}")
