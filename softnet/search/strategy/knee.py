"""Where the bad-trial share crosses the exceed ratio, from all trials near it.

A load near a gradual knee stays mixed however often it is tried: its own
trials cannot say which side it is on. The trials at its neighbours can, if
the bad-trial share p is a smooth function of load. Model (x = ln load):

    p(x) = floor + (ceiling - floor) * sigmoid(slope * (x - x_c) + c),

with c chosen so that p(x_c) = exceed ratio: x_c is the crossing itself.
``floor`` is the share of bad trials far below the knee (random loss at any
load, which the VM and PASTRAMI's data both show), ``ceiling`` the share far
above it (PASTRAMI has knees that level off at 60-70% bad runs); without
them a floor or a plateau would flatten the fitted slope and move the crossing.

The posterior of (x_c, slope, floor, ceiling) is computed on a grid, with
flat priors on x_c, floor and ceiling and a log-uniform one on the slope,
from the binomial likelihood of every load's counts; marginalised, it gives
the posterior of the crossing alone, from which P(crossing above a load) and
quantiles follow.

As a strategy: once final trials disagree at a load inside the bracket
[L, U] (the *anchor*), the final trials near it (within KNEE_SPAN) are
modelled; trials go where the posterior puts the crossing and the loads near
it are classified by that posterior (SearchState.load_class), until its 80%
interval is within the width (with L and U paired) or the knee budget is
spent. An interval wider than ``unstable_width`` makes the goal unstable.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import expit, logit

from softnet.search.model import Goal
from softnet.search.strategy.base import Done, Step, Strategy

if TYPE_CHECKING:
    from softnet.search.state import SearchState, View

KNEE_SPAN = 1.3  # the knee model sees final trials within this factor of the first mixed load

# Slope per unit of ln load: at 5 the share goes from 10% to 90% over ~140% of
# load, at 5000 over 0.09%. Floors and ceilings stay 0.05 clear of the exceed ratio.
# Coarse on purpose: the model is refitted after every trial near the knee.
SLOPES = np.geomspace(5.0, 5000.0, 24)
FLOORS = np.linspace(0.0, 0.4, 5)
CEILINGS = np.linspace(1.0, 0.6, 5)


def crossing_posterior(loads: np.ndarray, n: np.ndarray, bad: np.ndarray, exceed: float,
                       points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """(grid of x_c, posterior mass on it) marginalised over slope, floor and ceiling."""
    x = np.log(loads)
    xc = np.linspace(x.min() - 0.02, x.max() + 0.02, points)
    lo = FLOORS[(FLOORS <= exceed - 0.05) | (FLOORS == 0)]
    hi = CEILINGS[(CEILINGS >= exceed + 0.05) | (CEILINGS == 1)]
    floor, ceil = (a.ravel() for a in np.meshgrid(lo, hi))
    # A knee spans at least half the range: a small step between a high floor and a low
    # ceiling fits any coin-toss region and would pin a crossing the data do not show.
    keep = ceil - floor >= 0.5 - 1e-9
    floor, ceil = floor[keep], ceil[keep]
    c = logit((exceed - floor) / (ceil - floor))
    # p over (x_c, slope, shape, load)
    z = SLOPES[None, :, None, None] * (x[None, None, None, :] - xc[:, None, None, None]) + c[None, None, :, None]
    p = floor[None, None, :, None] + (ceil - floor)[None, None, :, None] * expit(z)
    p = np.clip(p, 1e-9, 1 - 1e-9)
    loglik = (bad * np.log(p) + (n - bad) * np.log1p(-p)).sum(axis=-1)
    mass = np.exp(loglik - loglik.max()).sum(axis=(1, 2))
    return xc, mass / mass.sum()


def crossing_quantiles(xc: np.ndarray, mass: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """Loads (pps) at the posterior quantiles ``qs`` of the crossing."""
    cdf = np.cumsum(mass)
    return [math.exp(xc[min(len(xc) - 1, int(np.searchsorted(cdf, q)))]) for q in qs]


class KneeModel:
    """Per goal, the knee its final trials disagree at (the anchor), and the
    posterior of the crossing near it, refitted once per new trial."""

    def __init__(self, state: SearchState):
        self.state = state
        self.anchor: dict[Goal, float] = {}  # goal -> the mixed load its knee model is centred on
        # (goal, trials so far) -> (loads near the knee, their final trials, x_c grid, posterior mass)
        self._fits: dict[tuple[Goal, int], tuple[list[float], int, np.ndarray, np.ndarray]] = {}

    def fit(self, g: Goal) -> tuple[list[float], int, np.ndarray, np.ndarray]:
        """(loads within KNEE_SPAN of the anchor, their final trials, x_c grid, mass)."""
        s = self.state
        key = (g, len(s.trials))
        if key not in self._fits:
            anchor, base = self.anchor[g], s.snap(s.min_load)
            near = [ld for ld in sorted(s.by_load)
                    if ld != base and s.final(g, ld) and anchor / KNEE_SPAN <= ld <= anchor * KNEE_SPAN]
            n, bad = (np.array(c, float) for c in zip(*(s.final_counts(g, ld) for ld in near)))
            self._fits[key] = (near, int(n.sum()), *crossing_posterior(np.array(near), n, bad, g.exceed_ratio))
        return self._fits[key]

    def region(self, g: Goal) -> list[float]:
        return self.fit(g)[0] if g in self.anchor else []

    def prob(self, g: Goal, load: float) -> float:
        """Posterior probability that the crossing lies above the load (it meets the goal)."""
        _, _, xc, mass = self.fit(g)
        return float(mass[xc > math.log(load)].sum())

    def summary(self, g: Goal) -> dict | None:
        if g not in self.anchor:
            return None
        _, trials, xc, mass = self.fit(g)
        q10, med, q90 = crossing_quantiles(xc, mass, (0.1, 0.5, 0.9))
        return {"crossing_pps": med, "interval80_pps": [q10, q90], "trials": trials}


class KneeStrategy(Strategy):
    """Inside a narrow bracket: model the knee where final trials disagree."""

    def nominate(self, g: Goal, view: View) -> Step | Done | None:
        s, model = self.state, self.state.knee
        lo, u = view.lower_pps, view.upper_pps
        if g not in model.anchor:  # final trials disagree inside the bracket: a knee to model
            base = s.snap(s.min_load)
            for ld in view.classes:
                n, bad = s.final_counts(g, ld)
                if ld != base and lo <= ld <= u and 0 < bad < n:
                    model.anchor[g] = ld
                    break
        if g not in model.anchor:
            return None
        return self.plan(g, lo, u)

    def plan(self, g: Goal, lo: float | None, u: float | None) -> Step | Done:
        """Final trials where the crossing is likeliest: its median, then its
        quartiles in turn (the spread pins the slope, so a sharp knee resolves
        in a few trials), on a grid of half the width so loads repeat."""
        model, unstable_width = self.state.knee, self.config.unstable_width
        w = g.relative_width
        k = model.summary(g)
        q10, q90 = k["interval80_pps"]
        paired = lo is not None and u is not None and (u - lo) / u <= w
        if (q90 / q10 - 1 <= w and paired) or k["trials"] >= self.config.knee_trial_budget:
            where = (f"knee model: crossing {k['crossing_pps']:,.0f} pps, 80% in {q10:,.0f}..{q90:,.0f} pps "
                     f"from {k['trials']} trials near it")
            if q90 / q10 - 1 > unstable_width:
                return Done("unstable", f"{where}: wider than {unstable_width:.0%}, the SUT does not "
                            "settle on one side")
            return Done("found", where)
        q25, med, q75 = crossing_quantiles(*model.fit(g)[2:], (0.25, 0.5, 0.75))
        aim = (med, q25, q75)[k["trials"] % 3]
        anchor, step = model.anchor[g], -math.log(1 - w) / 2
        target = anchor * math.exp(step * round(math.log(aim / anchor) / step))
        return Step(self.state.snap(target), g.final_trial_duration, "where the knee model puts the crossing")
