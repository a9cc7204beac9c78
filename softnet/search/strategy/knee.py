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
[L, U] (the *anchor*), the final trials near the crossing (within KNEE_SPAN
of the model's centre) are modelled. The centre starts at the anchor and
follows the posterior median: a random loss burst far below the knee can
make the first mixed load, and a window pinned there would never see the
crossing (it would put it at the window's edge and ask for trials beyond
the loads it models, for ever: seen in a trace on this VM). Trials go where
the posterior puts the crossing and the loads near it are classified by that posterior (SearchState.load_class), until its 80%
interval is within the width (with L and U paired) or the goal's knee budget
(trials its own knee asked for) is spent. An interval wider than
``unstable_width`` makes the goal unstable; its diagnosis says how much of the
loss near the knee the stall attribution ties to the host.
"""
from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import expit, logit

from softnet.search.model import STALL_FLAG, Goal, KneeStalls, KneeSummary
from softnet.search.strategy.base import Done, Step, Strategy

if TYPE_CHECKING:
    from softnet.search.state import SearchState, View

KNEE_SPAN = 1.3  # the knee model sees final trials within this factor of its centre
# The crossing grid reaches this far (in ln load) beyond the outermost loads modelled;
# an interval that reaches past them is not "resolved" (the data do not bound it).
EDGE = 0.02
KNEE_MIN_TRIALS = 8  # trials near the knee before its spread says what more trials would give
HOPELESS = 3.0  # stop when the whole knee budget would still leave the interval this x unstable_width

# Slope per unit of ln load: at 5 the share goes from 10% to 90% over ~140% of
# load, at 5000 over 0.09%. Floors and ceilings stay 0.05 clear of the exceed ratio.
# Coarse on purpose: the model is refitted after every trial near the knee.
SLOPES = np.geomspace(5.0, 5000.0, 24)
FLOORS = np.linspace(0.0, 0.4, 5)
CEILINGS = np.linspace(1.0, 0.6, 5)


def crossing_posterior(loads: np.ndarray, n: np.ndarray, bad: np.ndarray, exceed: float,
                       points: int = 300, span: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(grid of x_c, posterior mass on it) marginalised over slope, floor and ceiling.
    ``span``: loads (pps) the crossing may lie between (the prior's range), at
    least the loads modelled plus EDGE."""
    x = np.log(loads)
    lo_x, hi_x = x.min() - EDGE, x.max() + EDGE
    if span is not None:
        lo_x, hi_x = min(lo_x, math.log(span[0])), max(hi_x, math.log(span[1]))
    xc = np.linspace(lo_x, hi_x, points)
    # Each load's ln p and ln(1 - p) are cached (_load_logp); its counts only weight them.
    loglik = sum(_load_loglik(float(xi), float(ni), float(ki), float(lo_x), float(hi_x), points, exceed)
                 for xi, ni, ki in zip(x, n, bad))
    mass = np.exp(loglik - loglik.max()).sum(axis=(1, 2))
    return xc, mass / mass.sum()


def _shapes(exceed: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(floor, ceiling, c) of every knee shape the model allows at this exceed ratio."""
    lo = FLOORS[(FLOORS <= exceed - 0.05) | (FLOORS == 0)]
    hi = CEILINGS[(CEILINGS >= exceed + 0.05) | (CEILINGS == 1)]
    floor, ceil = (a.ravel() for a in np.meshgrid(lo, hi))
    # A knee spans at least half the range: a small step between a high floor and a low
    # ceiling fits any coin-toss region and would pin a crossing the data do not show.
    keep = ceil - floor >= 0.5 - 1e-9
    floor, ceil = floor[keep], ceil[keep]
    return floor, ceil, logit((exceed - floor) / (ceil - floor))


@functools.lru_cache(maxsize=64)  # 1.1 MB each (70 MB at most): a refit changes one load's counts
def _load_loglik(x: float, n: float, bad: float, lo_x: float, hi_x: float, points: int,
                 exceed: float) -> np.ndarray:
    """One load's binomial log-likelihood over (x_c, slope, shape)."""
    log_p, log_q = _load_logp(x, lo_x, hi_x, points, exceed)
    return bad * log_p + (n - bad) * log_q


# 2.2 MB each (140 MB at most); a knee models ~10 loads. Keyed by the load, not its
# counts: a refit after one more trial at a load reuses that load's logs too.
@functools.lru_cache(maxsize=64)
def _load_logp(x: float, lo_x: float, hi_x: float, points: int, exceed: float) -> tuple[np.ndarray, np.ndarray]:
    """(ln p, ln(1 - p)) of a trial at x being bad, over (x_c, slope, shape)."""
    xc = np.linspace(lo_x, hi_x, points)
    floor, ceil, c = _shapes(exceed)
    z = SLOPES[None, :, None] * (x - xc)[:, None, None] + c[None, None, :]
    p = np.clip(floor + (ceil - floor) * expit(z), 1e-9, 1 - 1e-9)
    return np.log(p), np.log1p(-p)


def crossing_quantiles(xc: np.ndarray, mass: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """Loads (pps) at the posterior quantiles ``qs`` of the crossing."""
    cdf = np.cumsum(mass)
    return [math.exp(xc[min(len(xc) - 1, int(np.searchsorted(cdf, q)))]) for q in qs]


# The spread is the host's when at least this share of the bad trials near the knee lost at
# least this share of their packets in host stalls. Counted per trial: the spread is which
# trials went bad, and a packet share let one overloaded trial outweigh ten stalled ones
# (near this host's NDR 62-91% of the bad trials were the host's, 15-32% of the packets).
HOST_SHARE = 0.5


def host_confirmed(st: KneeStalls) -> bool:
    """Does the stall attribution tie a knee's spread to the host (KneeModel.stalled)?"""
    return st.host_trial_share is not None and st.host_trial_share >= HOST_SHARE


def stall_words(st: KneeStalls) -> str:
    """The stall attribution's verdict on a knee's spread, for its diagnosis."""
    share = st.host_trial_share
    if share is None:  # trials without an attribution (simulated, or no stall probe)
        return "; no loss attribution says whether the spread is the host's"
    said = (f"; in {st.host_bad_trials} of its {st.bad_trials} bad trials ({share:.0%}) the attribution "
            f"ties most of the loss to host stalls ({st.host_lost_pkts:,} of {st.lost_pkts:,} packets)")
    if host_confirmed(st):
        return said + ": the spread is the host's"
    over = st.overloaded_bad_trials
    if over >= HOST_SHARE * st.bad_trials:
        # A slower vCPU would look the same: "capacity varied", not "the data path's".
        return said + (f": not host stalls; in {over} of them the SUT was overloaded over most of the trial: "
                       "its capacity varied from trial to trial")
    return said + ": not confirmed, the rest is the data path's or unseen"


class KneeModel:
    """Per goal, the knee its final trials disagree at (the anchor), and the
    posterior of the crossing near it, refitted once per new trial."""

    def __init__(self, state: SearchState):
        self.state = state
        self.anchor: dict[Goal, float] = {}  # goal -> the first mixed load: the grid trials are aimed on
        self.centre: dict[Goal, float] = {}  # goal -> where the modelled window is centred
        # goal -> trials its knee asked for: the budget counts these, not every trial near
        # the crossing (else the NDR's trials at this host's PDR floor spent the PDR's)
        self.asked: dict[Goal, int] = {}
        # (goal, trials so far) -> (loads near the knee, their final trials, x_c grid, posterior mass)
        self._fits: dict[tuple[Goal, int], tuple[list[float], int, np.ndarray, np.ndarray]] = {}

    def _fit_around(self, g: Goal, centre: float) -> tuple[list[float], int, np.ndarray, np.ndarray]:
        s = self.state
        base = s.snap(s.min_load)
        near = [ld for ld in sorted(s.by_load)
                if ld != base and s.final(g, ld) and centre / KNEE_SPAN <= ld <= centre * KNEE_SPAN]
        if not near:
            near = [self.anchor[g]]
        n, bad = (np.array(c, float) for c in zip(*(s.final_counts(g, ld) for ld in near)))
        # The crossing may lie a bracketing step (bracket_factor x the width) past the
        # loads tried: with a prior that stopped 2% past them at a 2% width, a crossing
        # above them all piled up at that edge and the trials crept up 1% at a time
        # (seen replaying this host's trials). Not the whole window: the model would lose
        # the loads that bound it as the window follows the median.
        margin = 1 + self.state.config.bracket_factor * g.relative_width
        span = (near[0] / margin, near[-1] * margin)
        return (near, int(n.sum()), *crossing_posterior(np.array(near), n, bad, g.exceed_ratio, span=span))

    def fit(self, g: Goal) -> tuple[list[float], int, np.ndarray, np.ndarray]:
        """(loads within KNEE_SPAN of the centre, their final trials, x_c grid, mass).
        When the crossing's median lies nearer a window edge than its centre,
        the window moves to the median (at most a few times per trial)."""
        key = (g, len(self.state.trials))
        if key not in self._fits:
            centre = self.centre.setdefault(g, self.anchor[g])
            fit = self._fit_around(g, centre)
            for _ in range(4):
                med = crossing_quantiles(fit[2], fit[3], (0.5,))[0]
                if abs(math.log(med / centre)) <= math.log(KNEE_SPAN) / 2:
                    break
                centre = self.centre[g] = med
                fit = self._fit_around(g, centre)
            self._fits[key] = fit
        return self._fits[key]

    def stalled(self, g: Goal) -> KneeStalls:
        """What the stall attribution says of the final trials near the knee: how many
        were flagged; of its bad trials, in how many it ties most of the loss to the host
        (stalls the probe saw, or queues left undrained by shorter ones) and in how many
        the SUT was overloaded over most of the trial; and the packets behind both."""
        trials = [m for ld in self.fit(g)[0] for m in self.state.final(g, ld)]
        bad = [m for m in trials if g.is_bad(m)]
        host_of = [min(m.host_lost_pkts, m.all_lost) for m in bad]
        lost, host = sum(m.all_lost for m in bad), sum(host_of)
        told = [(m, h) for m, h in zip(bad, host_of) if m.lost_pkts_all is not None and m.all_lost]  # attributed
        host_bad = sum(h >= HOST_SHARE * m.all_lost for m, h in told)
        return KneeStalls(flagged_trials=sum(STALL_FLAG in m.flags for m in trials), trials=len(trials),
                          lost_pkts=lost, host_lost_pkts=host, host_share=host / lost if lost else None,
                          bad_trials=len(told), host_bad_trials=host_bad,
                          overloaded_bad_trials=sum(m.sut_overloaded for m, _ in told),
                          host_trial_share=host_bad / len(told) if told else None)

    def region(self, g: Goal) -> list[float]:
        return self.fit(g)[0] if g in self.anchor else []

    def prob(self, g: Goal, load: float) -> float:
        """Posterior probability that the crossing lies above the load (it meets the goal)."""
        _, _, xc, mass = self.fit(g)
        return float(mass[xc > math.log(load)].sum())

    def summary(self, g: Goal) -> KneeSummary | None:
        if g not in self.anchor:
            return None
        near, trials, xc, mass = self.fit(g)
        q10, med, q90 = crossing_quantiles(xc, mass, (0.1, 0.5, 0.9))
        # Resolved: the 80% interval lies between loads that were tried, not beyond them.
        resolved = near[0] * (1 - 1e-9) <= q10 and q90 <= near[-1] * (1 + 1e-9)
        return KneeSummary(crossing_pps=med, interval80_pps=[q10, q90], trials=trials, asked=self.asked.get(g, 0),
                           resolved=resolved, host_stalls=self.stalled(g))


class KneeStrategy(Strategy):
    """Inside a narrow bracket: model the knee where final trials disagree."""

    def nominate(self, g: Goal, view: View) -> Step | Done | None:
        if self.config.spec_rule:  # the duration sums decide a mixed load: no knee to model
            return None
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
        q10, q90 = k.interval80_pps
        paired = lo is not None and u is not None and (u - lo) / u <= w
        # n: the trials this goal's knee placed; the budget, the rotation of aims and the
        # projection below count those (the others near it are a bonus, not a plan).
        n, budget, spread = k.asked, self.config.knee_trial_budget, q90 / q10 - 1
        where = (f"knee model: crossing {k.crossing_pps:,.0f} pps, 80% in {q10:,.0f}..{q90:,.0f} pps "
                 f"from {k.trials} trials near it")
        if (spread <= w and paired and k.resolved) or n >= budget:
            if spread > unstable_width:
                return Done("unstable", f"{where}: wider than {unstable_width:.0%}, the SUT does not "
                            "settle on one side" + stall_words(k.host_stalls))
            if not (k.resolved or paired):
                apart = f"{(u - lo) / u:.0%} apart" if lo is not None and u is not None else "not both known"
                return Done("unstable", f"{where}: the knee budget ran out with the interval past the "
                            f"loads tried and the bounds {apart}")
            return Done("found", where)
        # The lower bound a blurred knee ends with is a load tried just below its median
        # crossing, or it says less than the model knows (bounds read low).
        placed = lo is not None and lo >= k.crossing_pps * (1 - w)
        # Resolved or not: an interval that reaches past the loads tried is no narrower
        # for it (the prior there spans one bracketing step).
        if n >= KNEE_MIN_TRIALS and placed and spread > unstable_width:
            # An interval narrows as 1/sqrt(trials) at best: when even the whole knee
            # budget could not bring it within unstable_width, more trials only cost.
            # Host stalls alone stop nothing: the loss they explain is set apart (or
            # counted, when the user asks so), so more trials still pin the crossing
            # asked for (stopping there left this host's NDR CV at 6.9%).
            projected = spread * math.sqrt(n / budget)
            if projected > HOPELESS * unstable_width:
                return Done("unstable", f"{where}: at this spread even {budget} trials would leave it "
                            f"about {projected:.0%} wide (more than {unstable_width:.0%}), the SUT does not "
                            "settle on one side" + stall_words(k.host_stalls))
        q25, med, q75 = crossing_quantiles(*model.fit(g)[2:], (0.25, 0.5, 0.75))
        aim = (med, q25, q75)[n % 3]
        if not placed and n >= KNEE_MIN_TRIALS:
            aim = med
        anchor, step = model.anchor[g], -math.log(1 - w) / 2
        target = self.state.snap(anchor * math.exp(step * round(math.log(aim / anchor) / step)))
        centre = model.centre[g]
        if not centre / KNEE_SPAN <= target <= centre * KNEE_SPAN:
            model.centre[g] = target  # a trial the model would not see would be asked for again and again
        model.asked[g] = n + 1  # the controller runs the first goal's step: this one
        return Step(target, g.final_trial_duration, "where the knee model puts the crossing")
