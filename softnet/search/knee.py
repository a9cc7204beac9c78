"""Where the bad-trial share crosses the exceed ratio, from all trials near it.

A load near a gradual knee stays mixed however often it is tried: its own
trials cannot say which side it is on. The trials at its neighbours can, if
the bad-trial share p is a smooth function of load. Model (x = ln load):

    p(x) = floor + (1 - floor) * sigmoid(slope * (x - x_c) + c),

with c chosen so that p(x_c) = exceed ratio: x_c is the crossing itself.
``floor`` is the share of bad trials far below the knee (random loss at any
load, which the VM and PASTRAMI's data both show); without it a floor would
flatten the fitted slope and pull the crossing down.

The posterior of (x_c, slope, floor) is computed on a grid, with flat priors
on x_c and floor and a log-uniform one on the slope, from the binomial
likelihood of every load's counts. What it gives: P(x_c > ln load), the
probability that a load is below the crossing.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit, logit

SLOPES = np.geomspace(5.0, 5000.0, 28)  # per unit of ln load: 5 is a knee ~100% wide, 5000 ~0.1%
FLOORS = np.linspace(0.0, 0.45, 10)


def crossing_posterior(loads: np.ndarray, n: np.ndarray, bad: np.ndarray, exceed: float,
                       points: int = 240) -> tuple[np.ndarray, np.ndarray]:
    """(grid of x_c, posterior mass on it) marginalised over slope and floor."""
    x = np.log(loads)
    lo, hi = x.min() - 0.02, x.max() + 0.02
    xc = np.linspace(lo, hi, points)
    floors = FLOORS[FLOORS < exceed - 0.05]
    c = logit((exceed - floors) / (1 - floors))  # (F,)
    # p over (xc, slope, floor, load)
    z = SLOPES[None, :, None, None] * (x[None, None, None, :] - xc[:, None, None, None]) + c[None, None, :, None]
    p = floors[None, None, :, None] + (1 - floors[None, None, :, None]) * expit(z)
    p = np.clip(p, 1e-9, 1 - 1e-9)
    loglik = (bad * np.log(p) + (n - bad) * np.log1p(-p)).sum(axis=-1)
    loglik -= loglik.max()
    mass = np.exp(loglik).sum(axis=(1, 2))
    return xc, mass / mass.sum()


def prob_below_crossing(load: float, loads, n, bad, exceed: float) -> float:
    """P(the crossing lies above ``load``): the posterior belief it meets the goal."""
    xc, mass = crossing_posterior(np.asarray(loads, float), np.asarray(n, float), np.asarray(bad, float), exceed)
    return float(mass[xc > np.log(load)].sum())
