"""Inversion check: after every goal has its verdict, measure the minimum load.

Loss there (and not above) is a loss inversion, which makes the goal fail
conservatively (the view then puts U at the minimum load). Meeting the goal
at the minimum load needs the goal's confidence; failing it, the final one.
Only goals that found bounds (found or unstable) need the check.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from softnet.search.classify import UPPER
from softnet.search.model import Goal
from softnet.search.strategy.base import Step, Strategy

if TYPE_CHECKING:  # state.py imports the knee model from this package
    from softnet.search.state import View

CHECKED = ("found", "unstable")  # verdicts whose bounds a loss inversion would overturn


class InversionCheck(Strategy):
    def nominate(self, g: Goal, view: View) -> Step | None:
        s = self.state
        base = s.snap(s.min_load)
        c, conclusive = s.load_class(g, base)
        if c.kind == UPPER and not c.majority:
            c, conclusive = s.load_class(g, base, self.config.final_confidence)
        if conclusive:
            return None
        return Step(base, g.final_trial_duration, "check the minimum load (loss inversion)")
