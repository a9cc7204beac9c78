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
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, logit

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
