"""The probabilistic loss model of a soak, in the manner of FD.io CSIT's
PLRsearch (draft-vpolak-bmwg-plrsearch): the SUT's average loss per second
at an offered load is the integral, from 0 to the load, of a sigmoid
centred on a load ``mrr`` with width ``spread``; two sigmoids are fitted
(the logistic, "stretch", and the normal CDF, "erf"); a trial's loss count
is Poisson with that mean times its duration (here negative binomial: as
Poisson for the small counts near the critical load, with a spread of some
percent for the millions lost past capacity). The posterior of (mrr,
spread) under each fit gives the posterior of the critical load, where the
average loss ratio equals the target (1e-7 by default); the estimate is the
two fits' posteriors mixed half and half, as PLRsearch averages them.

Where PLRsearch integrates by quasi-Monte Carlo, this module evaluates the
posterior on a grid in (log mrr, log spread/mrr): deterministic (a resumed
soak computes exactly what it had), and refined once around the posterior
mass, so a narrow posterior late in an hour's soak is still resolved.

Unlike PLRsearch, each trial may be spoilt (prior probability 5%: a vCPU
stall, a neighbour's burst) and then lose any count: on a noisy host one
lossy trial at a low load otherwise drags the 1e-7 estimate to the bottom
of the range, where zero-loss trials carry no evidence to lift it.

The next trial's load is a draw from the critical load's posterior
(Thompson sampling) from a generator seeded by the trial's index: trials
gather around the estimate as it narrows, and a replay draws the same load.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.special import erfcx, gammaln, ndtr

from softnet.results.soak import CriticalLoad

FITS = ("stretch", "erf")
_SQRT2 = math.sqrt(2.0)
_INV_SQRT2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class LossEvidence:
    """One trial as the model reads it."""
    load_pps: float  # offered
    duration_s: float
    lost_pkts: int  # counted against the SUT (host stalls set apart)

    def lossy(self, target_loss_ratio: float) -> bool:
        """It lost more than the target ratio of what was offered."""
        return self.lost_pkts > target_loss_ratio * self.load_pps * self.duration_s


# The loss count's spread beyond Poisson: variance mu + DISPERSION mu^2 (negative binomial). Near the
# critical load counts are small and it is Poisson; a trial far past capacity loses millions, and the
# share it loses varies by some percent from trial to trial (the host, the queues), which Poisson's
# +-sqrt(mu) would take for a contradiction of any curve not exactly through it.
DISPERSION = 0.01


def log_count_pmf(k: np.ndarray, log_mu: np.ndarray) -> np.ndarray:
    """log P(K = k), K negative binomial with mean exp(log_mu) and variance mu + DISPERSION mu^2."""
    r = 1.0 / DISPERSION
    log_r_mu = np.logaddexp(math.log(r), log_mu)  # log(r + mu)
    return (gammaln(k + r) - gammaln(r) - gammaln(k + 1.0) + r * (math.log(r) - log_r_mu)
            + k * (log_mu - log_r_mu))


def _log_softplus(z: np.ndarray) -> np.ndarray:
    """log(log(1 + e^z)), exact where e^z underflows."""
    sp = np.logaddexp(0.0, z)
    return np.where(z < -30.0, z, np.log(np.maximum(sp, 1e-300)))


def _log_normal_integral(z: np.ndarray) -> np.ndarray:
    """log G(z), G(z) = integral of the normal CDF from -inf to z = z Phi(z) + phi(z)."""
    zn = np.minimum(z, 0.0)  # the left form is stable where z <= 0 (erfcx of a positive argument)
    left = -0.5 * zn * zn + np.log(np.maximum(_INV_SQRT2PI + 0.5 * zn * erfcx(-zn / _SQRT2), 1e-300))
    # far left even that cancels: G(z) ~ phi(z) / z^2 (1 - 3/z^2)
    zf = np.minimum(z, -40.0)
    far = math.log(_INV_SQRT2PI) - 0.5 * zf * zf - 2.0 * np.log(-zf) + np.log1p(-3.0 / (zf * zf))
    zp = np.maximum(z, 0.0)
    right = np.log(zp * ndtr(zp) + _INV_SQRT2PI * np.exp(-0.5 * zp * zp))
    return np.where(z < -40.0, far, np.where(z <= 0.0, left, right))


def log_loss_per_second(fit: str, load: np.ndarray, mrr: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """log of the average packets lost per second at ``load`` (broadcast)."""
    a, b = (load - mrr) / spread, -mrr / spread
    lg = _log_softplus if fit == "stretch" else _log_normal_integral
    la, lb = lg(a), lg(b)
    # log(F(a) - F(b)) with a > b; the difference of two tiny figures kept in logs
    return np.log(spread) + la + np.log1p(-np.exp(np.minimum(lb - la, -1e-12)))


def _critical(fit: str, target: float, mrr: np.ndarray, spread: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The load where loss per second / load = target, per parameter point (bisection in log load;
    loss/load rises with load, the integrand rising). Clipped to [lo, hi]."""
    a, b = np.full(mrr.shape, math.log(lo)), np.full(mrr.shape, math.log(hi))
    lt = math.log(target)
    for _ in range(48):
        mid = 0.5 * (a + b)
        over = log_loss_per_second(fit, np.exp(mid), mrr, spread) - mid > lt
        b, a = np.where(over, mid, b), np.where(over, a, mid)
    return np.exp(0.5 * (a + b))


class PlrModel:
    """The posterior over a soak's trials, for loads in [min_pps, max_pps]."""

    def __init__(self, min_pps: float, max_pps: float, target_loss_ratio: float = 1e-7, confidence: float = 0.95,
                 grid: tuple[int, int] = (90, 36), spoilt: float = 0.05):
        if not 0 < min_pps < max_pps:
            raise ValueError("min_pps, max_pps: need 0 < min < max")
        if not 0 < target_loss_ratio < 1:
            raise ValueError("target_loss_ratio: in (0, 1)")
        if not 0 <= spoilt < 1:
            raise ValueError("spoilt: in [0, 1)")
        self.min_pps, self.max_pps, self.target, self.confidence = min_pps, max_pps, target_loss_ratio, confidence
        self.spoilt = spoilt
        self.grid = grid
        # priors: log mrr uniform over a span reaching past max (a SUT above the range shows as no loss),
        # log(spread / mrr) uniform from a sharp knee to a spread as wide as the load itself
        self.log_mrr = (math.log(min_pps / 2), math.log(max_pps * 4))
        self.log_rel_spread = (math.log(1e-4), math.log(2.0))

    def _log_post(self, fit: str, lm: np.ndarray, ls: np.ndarray, ev: Sequence[LossEvidence]) -> np.ndarray:
        """Log likelihood of the trials at each grid point (flat priors in the grid's coordinates)."""
        if not ev:
            return np.zeros(np.broadcast_shapes(lm.shape, ls.shape))
        mrr = np.exp(lm)[..., None]
        spread = mrr * np.exp(ls)[..., None]
        load = np.array([e.load_pps for e in ev])
        k = np.array([e.lost_pkts for e in ev], float)
        log_mu = log_loss_per_second(fit, load, mrr, spread) + np.log([e.duration_s for e in ev])
        ll = log_count_pmf(k, log_mu)
        if not self.spoilt:
            return ll.sum(axis=-1)
        # a trial is spoilt (a stall, a neighbour) with prior probability `spoilt`: then its loss is any
        # count from 1 to what it sent, uniform on a log scale; one such trial costs log(spoilt), not
        # the astronomically small Poisson chance that would pin the estimate to it
        sent = np.maximum(2.0, load * np.array([e.duration_s for e in ev]))
        log_u = np.where(k > 0, -np.log(np.maximum(k, 1.0)) - np.log(np.log(sent) + 0.5772), -np.inf)
        return np.logaddexp(math.log1p(-self.spoilt) + ll, math.log(self.spoilt) + log_u).sum(axis=-1)

    def _fit(self, fit: str, ev: Sequence[LossEvidence]) -> tuple[np.ndarray, np.ndarray, float, np.ndarray,
                                                                  np.ndarray]:
        """(critical loads, normalised weights, log evidence, mrr, spread): the prior's grid,
        then boxes around the posterior's mass until its bulk spans several points."""
        nm, ns = self.grid
        box_m, box_s = self.log_mrr, self.log_rel_spread
        log_evidence = None
        for _ in range(4):
            lm = np.linspace(*box_m, nm)[:, None]
            ls = np.linspace(*box_s, ns)[None, :]
            lp = self._log_post(fit, lm, ls, ev)
            top = lp.max()
            if log_evidence is None:  # on the prior's own grid: the marginal likelihood
                cell = (lm[1, 0] - lm[0, 0]) * (ls[0, 1] - ls[0, 0])
                area = (box_m[1] - box_m[0]) * (box_s[1] - box_s[0])
                log_evidence = float(top + math.log(np.exp(lp - top).sum() * cell / area))
            # resolved when the bulk (within e^-4.6, 1%, of the top) spans several points each way;
            # else the next box holds what is within e^-12 of the top, one step wider
            bulk_i, bulk_j = np.nonzero(lp > top - 4.6)
            if len(np.unique(bulk_i)) >= 6 and len(np.unique(bulk_j)) >= 4:
                break
            i, j = np.nonzero(lp > top - 12.0)
            dm, ds = lm[1, 0] - lm[0, 0], ls[0, 1] - ls[0, 0]
            box_m = (max(self.log_mrr[0], lm[i.min(), 0] - dm), min(self.log_mrr[1], lm[i.max(), 0] + dm))
            box_s = (max(self.log_rel_spread[0], ls[0, j.min()] - ds),
                     min(self.log_rel_spread[1], ls[0, j.max()] + ds))
        w = np.exp(lp - top)
        mrr = np.broadcast_to(np.exp(lm), w.shape)
        crit = _critical(fit, self.target, mrr, mrr * np.exp(ls), self.min_pps, self.max_pps)
        return crit.ravel(), (w / w.sum()).ravel(), log_evidence, mrr.ravel(), (mrr * np.exp(ls)).ravel()

    def posterior(self, evidence: Sequence[LossEvidence]) -> "Posterior":
        """The critical load's posterior (both fits, half and half) after ``evidence``."""
        parts, fits, evidences = [], {}, []
        for fit in FITS:
            c, w, le, mrr, spread = self._fit(fit, evidence)
            parts.append((c, w / len(FITS), mrr, spread))
            fits[fit] = (_quantile(c, w, 0.5), _stdev(c, w))
            evidences.append(le)
        c, w = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        tail = (1 - self.confidence) / 2
        est = CriticalLoad(target_loss_ratio=self.target, median_pps=_quantile(c, w, 0.5),
                           lower_pps=_quantile(c, w, tail), upper_pps=_quantile(c, w, 1 - tail),
                           confidence=self.confidence, mean_pps=float((c * w).sum()), stdev_pps=_stdev(c, w),
                           fits=fits, log_evidence=float(np.logaddexp.reduce(evidences) - math.log(len(FITS))),
                           trials=len(evidence))
        return Posterior(est, c, w, [(fit, p[1], p[2], p[3]) for fit, p in zip(FITS, parts)])

    def next_load(self, post: "Posterior | None", index: int, seed: int = 0,
                  last_received_pps: float | None = None, recent: Sequence[LossEvidence] = ()) -> float:
        """The load of trial ``index``: the top of the range first, then what
        the SUT delivered there, then a draw from the critical load's
        posterior. ``recent``: the trials the posterior reads; after trials
        that lost nothing, the draw is pulled up towards the lowest load that
        lost beyond the target, halfway after one, further after each more
        (PLRsearch's rule): a posterior that piles up at the range's bottom
        would otherwise draw trials there forever, and a trial at the bottom
        that loses nothing says nothing new."""
        if index == 0 or post is None:
            return self.max_pps
        if index == 1 and last_received_pps:
            return min(self.max_pps, max(self.min_pps, last_received_pps))
        rng = np.random.default_rng([seed, index])
        load = float(rng.choice(post.crit, p=post.weights / post.weights.sum()))
        zeros = 0
        for e in reversed(recent):
            if e.lost_pkts:
                break
            zeros += 1
        lossy = [e.load_pps for e in recent if e.lossy(self.target)]
        if zeros and lossy and min(lossy) > load:
            pull = 2.0 ** (1 - zeros)
            load = (min(lossy) + pull * load) / (1 + pull)
        return float(min(self.max_pps, max(self.min_pps, load)))


@dataclass(frozen=True)
class Posterior:
    estimate: CriticalLoad
    crit: np.ndarray  # critical load per grid point (both fits)
    weights: np.ndarray  # their posterior weights, summing to 1
    params: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]  # per fit: (name, weights, mrr, spread)

    def _log_means(self, e: LossEvidence):
        """Per fit: (posterior weights, log of the mean loss count at the trial's load and duration)."""
        for fit, w, mrr, spread in self.params:
            yield w, log_loss_per_second(fit, np.asarray(e.load_pps, float), mrr, spread) + math.log(e.duration_s)

    def log_predictive(self, e: LossEvidence) -> float:
        """log P(the trial's loss count) under this posterior (log_count_pmf, mixed over it)."""
        k = np.asarray(float(e.lost_pkts))
        parts = [np.log(np.maximum(w, 1e-300)) + log_count_pmf(k, log_mu) for w, log_mu in self._log_means(e)]
        return float(np.logaddexp.reduce(np.concatenate(parts)))

    def surprise(self, e: LossEvidence) -> tuple[float, str]:
        """How unlikely the trial's loss count is under this posterior: the
        smaller predictive tail, P(K >= k) or P(K <= k), K negative binomial
        as log_count_pmf's, mixed over the posterior; and which ("more": it
        lost more than the model expects, "less")."""
        from scipy.stats import nbinom

        up = down = 0.0
        r = 1.0 / DISPERSION
        for w, log_mu in self._log_means(e):
            p = r / (r + np.exp(log_mu))
            up += float((w * nbinom.sf(e.lost_pkts - 1, r, p)).sum())
            down += float((w * nbinom.cdf(e.lost_pkts, r, p)).sum())
        return (up, "more") if up < down else (down, "less")


def _quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    order = np.argsort(x)
    cw = np.cumsum(w[order])
    return float(x[order][min(len(x) - 1, int(np.searchsorted(cw, q * cw[-1])))])


def _stdev(x: np.ndarray, w: np.ndarray) -> float:
    m = (x * w).sum() / w.sum()
    return float(math.sqrt(max(0.0, ((x - m) ** 2 * w).sum() / w.sum())))


def witness(earlier: Sequence[LossEvidence], e: LossEvidence, side: str, near: float = 0.1,
            factor: float = 10.0, at_least: int = 3, share: float = 2 / 3) -> int | None:
    """The model-free evidence that the SUT itself changed, where a surprise
    alone may be the fits' shape (two sigmoids) failing a SUT of another
    shape: of the earlier trials at loads within ``near`` of this one's (at
    least ``at_least`` of them), ``share`` or more lost ``factor`` times less
    (side "more") or more ("less") than it, each ratio given one packet's
    slack. The last such trial, or None. A share, not every one: the trials
    just before a step may already see part of it; and not fewer: a host
    whose trials at one load lose now nothing, now 500 packets, has not
    changed."""
    ratio = e.lost_pkts / max(1.0, e.load_pps * e.duration_s)
    slack = 1.0 / max(1.0, e.load_pps * e.duration_s)
    near_ones = [i for i, o in enumerate(earlier) if abs(o.load_pps / e.load_pps - 1) <= near]
    if len(near_ones) < at_least:
        return None
    apart = []
    for i in near_ones:
        o = earlier[i]
        sent = max(1.0, o.load_pps * o.duration_s)
        r = o.lost_pkts / sent
        if (side == "more" and (r + 1 / sent) * factor < ratio) or (side == "less" and r > factor * (ratio + slack)):
            apart.append(i)
    return apart[-1] if len(apart) >= max(at_least, share * len(near_ones)) else None


def step_start(before: Posterior, after: Posterior, between: Sequence[LossEvidence]) -> int:
    """Where in ``between`` (the trials after the last one that still saw
    the old SUT, up to the confirmed step) the new SUT began: the start of
    the longest run to the end whose trials the after-posterior explains
    better, summed (a single change point by likelihood ratio). An index
    into ``between``; len(between): none of them."""
    best, best_sum, total = len(between), 0.0, 0.0
    for j in range(len(between) - 1, -1, -1):
        total += after.log_predictive(between[j]) - before.log_predictive(between[j])
        if total > best_sum:
            best, best_sum = j, total
    return best
