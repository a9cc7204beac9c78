"""Bracketing: find a load that meets the goal and one that fails it, and
narrow them with single short trials.

The first trial is at the maximum load; its forwarding rate is where the
search looks for the lower bound first (as RFC 2544 testers and MLRsearch
do). Beyond the bracket, steps double each time they miss. While U/L is
wider than ``bracket_factor`` x the width, bisect in log space with one short
trial per load (first just above where the forwarding rate points). A
bracket at the minimum or maximum load ends the goal (min_load_fails,
above_max_load).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from softnet.search.model import Goal
from softnet.search.strategy.base import Done, Step, Strategy

if TYPE_CHECKING:  # state.py imports the knee model from this package
    from softnet.search.state import SearchState, View


BURST_LOSS = 0.01  # a trial that lost this share or more was overloaded, not caught by a stall


class Bracketing(Strategy):
    def __init__(self, state: SearchState):
        super().__init__(state)
        self.reached_by: dict[float, float] = {}  # load -> relative step of the expansion that chose it

    def nominate(self, g: Goal, view: View) -> Step | Done | None:
        s, classes, lo, u = self.state, view.classes, view.lower_pps, view.upper_pps
        w, final, short = g.relative_width, g.final_trial_duration, g.short_duration
        if u is None:
            if lo is None:
                return Step(s.max_load, short, "first trial at the maximum load")
            if not classes[lo][1]:
                return Step(lo, final, "confirm the goal is met at the highest load")
            if lo >= s.max_load * (1 - w):
                return Done("above_max_load", f"the goal is met at the maximum load {lo:,.0f} pps")
            return Step(self.expand(lo, +1, g), short, "look for loss above the highest load")
        if lo is None:
            if u in self.reached_by and not classes[u][1] and (not self.config.spec_rule or self.burst(u)):
                # A step down that found loss: one unlucky trial must not walk the search down.
                return Step(u, final, "confirm the loss before looking lower")
            if u > s.min_load * (1 + w):
                return Step(self.expand(u, -1, g), short, "look for a load meeting the goal")
            if not s.load_class(g, u, self.config.final_confidence)[1]:
                return Step(u, final, "confirm the loss at the minimum load")
            return Done("min_load_fails", f"the goal is not met even at the minimum load {u:,.0f} pps")
        ratio = (u - lo) / u
        if g in s.knee.anchor:
            # The knee model places the trials now: bisecting between bounds it keeps
            # reclassifying would chase its own tail (seen at this VM's NDR).
            return None
        if ratio > self.config.bracket_factor * w:
            hint = self.forwarding_hint(g, u) * (1 + w)
            if lo * (1 + w) < hint < u * (1 - w) and s.snap(hint) not in s.by_load:
                return Step(s.snap(hint), short, "just above where the forwarding rate points")
            return Step(s.snap(math.sqrt(lo * u)), short, "bisect (bracketing)")
        return None

    def burst(self, load: float) -> bool:
        """Did the load's trials lose little enough for a burst (a host stall), not
        overload? Only then is a step down confirmed before the next (the
        specification's rule: on this VM's recorded trials, confirming overload
        cost 1.8 trial-s a search and bought nothing)."""
        return max((m.loss_ratio for m in self.state.valid(load)), default=1.0) < BURST_LOSS

    def forwarding_hint(self, g: Goal, above: float) -> float:
        """Where the forwarding rates of the bad trials at or above a load say
        the goal's loss ratio is reached (exact for a flat capacity)."""
        seen = [m.forwarding_rate_pps for ld, ms in self.state.by_load.items() if ld >= above
                for m in ms if m.valid and g.is_bad(m)]
        return min(seen, default=above) / (1 - g.loss_ratio)

    def expand(self, edge: float, direction: int, g: Goal) -> float:
        """Next load beyond ``edge``. Downwards, first where the forwarding rate
        seen at or above it points; then steps that double each time they miss
        (1x, 2x, 4x... the width, at most 50%)."""
        w, snap = g.relative_width, self.state.snap
        step = min(0.5, 2 * self.reached_by.get(edge, w / 2))
        if direction < 0:
            # The forwarding rate of the bad trials at or above the edge is an upper
            # estimate of where the goal is met (exact for a flat capacity): go there
            # when it is further down than the doubling step (a step at a
            # time from 2 Mpps down to a PDR at 0.55 Mpps cost 6 trials on this VM).
            hint = self.forwarding_hint(g, edge) * (1 - w)
            if hint < edge * (1 - max(step, w / 2)):
                target = snap(hint)
                self.reached_by[target] = w if edge not in self.reached_by else step
                return target
        target = snap(edge * (1 - step) if direction < 0 else edge / (1 - step))
        self.reached_by[target] = step
        return target
