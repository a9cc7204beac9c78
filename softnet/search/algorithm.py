"""The search loop: bracket with single short trials, confirm with repeated
final-duration trials, bisect in log space, model the knee where trials
disagree, check the minimum load.

Every trial is evidence for every goal (a trial is bad or good for each loss
ratio), so goals share loads. Per goal, each iteration rebuilds a view of the
measured loads:

- a load with final-duration trials is classified from them and from the
  window of neighbouring loads that, under monotone loss, says most about it
  (classify.pool_monotone; the minimum load keeps its own evidence, which
  the inversion check needs); until that is conclusive it is *provisional*:
  the majority of all its valid trials, short ones included (ties count as
  bad);
- U is the lowest load classified upper, L the highest lower below U (the
  conservative pair: a lower bound above U is a loss inversion, reported);
- while U/L is wider than ``bracket_factor`` x width, bisect with one short
  trial per load; then, if final trials disagree at a load inside [L, U], the
  knee is modelled (knee.py): trials go where the posterior puts the crossing
  and the loads near it are classified by that posterior, until its 80%
  interval is within the width or ``knee_trials`` are spent; otherwise confirm
  L and U with final trials and bisect with final trials until
  (U - L) / U <= width.

The first trial is at the maximum load; its forwarding rate is where the
search looks for the lower bound first (as RFC 2544 testers and MLRsearch do).
Away from a modelled knee, a load still mixed after ``max_trials_per_load``
trials is decided by the majority and its confidence says so; when such mixed
loads spread wider than ``unstable_width`` (or a modelled knee's interval
does), the goal is *unstable*: bounds are given, no value.
After all goals converge, the minimum load is measured too: loss there (and not
above) is a loss inversion that makes the goal fail conservatively.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from softnet.search.classify import LOWER, PENDING, UPPER, LoadClass, bound_evidence, classify, pool_monotone
from softnet.search.knee import crossing_posterior, crossing_quantiles
from softnet.search.model import Goal, GoalResult, Measurement, SearchResult

KNEE_SPAN = 1.3  # the knee model sees final trials within this factor of the first mixed load


@dataclass
class _Step:
    load_pps: float
    duration_s: float
    why: str


@dataclass
class _Done:
    status: str
    diagnosis: str


class _Search:
    def __init__(self, measure, goals, min_load, max_load, width, max_trials, max_trial_seconds,
                 max_trials_per_load, final_confidence, bracket_factor, unstable_width, check_min_load, on_trial,
                 knee_trials):
        self.measure, self.goals = measure, [g if g.relative_width else replace(g, relative_width=width) for g in goals]
        self.min_load, self.max_load = float(min_load), float(max_load)
        self.max_trials, self.max_seconds = max_trials, max_trial_seconds
        self.final_confidence = final_confidence
        self.per_load, self.bracket_factor, self.unstable_width = max_trials_per_load, bracket_factor, unstable_width
        self.check_min_load, self.on_trial = check_min_load, on_trial
        self.trials: list[Measurement] = []
        self.by_load: dict[float, list[Measurement]] = {}
        self.snap_tol = min(g.relative_width for g in self.goals) / 8
        self.reached_by: dict[float, float] = {}  # load -> relative step of the expansion that chose it
        self.invalid_cap: float | None = None
        self.knee_trials = knee_trials
        self.knee_anchor: dict[Goal, float] = {}  # goal -> the mixed load its knee model is centred on
        # (goal, trials so far) -> (loads near the knee, their final trials, x_c grid, posterior mass)
        self._knee: dict[tuple[Goal, int], tuple[list[float], int, np.ndarray, np.ndarray]] = {}
        self._pools: dict[Goal, tuple[int, dict[float, tuple[int, int]]]] = {}

    # ---- evidence ------------------------------------------------------
    def snap(self, load: float) -> float:
        load = min(self.max_load, max(self.min_load, load))
        for known in self.by_load:
            if abs(known / load - 1) <= self.snap_tol:
                return known
        return float(round(load))

    def valid(self, load: float) -> list[Measurement]:
        return [m for m in self.by_load.get(load, []) if m.valid]

    def final(self, g: Goal, load: float) -> list[Measurement]:
        return [m for m in self.valid(load) if m.duration_s >= g.final_trial_duration]

    def final_counts(self, g: Goal, load: float) -> tuple[int, int]:
        """(final trials, bad ones) at the load."""
        f = self.final(g, load)
        return len(f), sum(g.is_bad(m) for m in f)

    def pooled(self, g: Goal, load: float) -> tuple[int, int] | None:
        """The load's (trials, bad) pooled under monotone loss (None: its own)."""
        key, pools = self._pools.get(g, (-1, {}))
        if key != len(self.trials):
            loads = [ld for ld in sorted(self.by_load) if ld != self.snap(self.min_load)]
            counts = [self.final_counts(g, ld) for ld in loads]
            pools = dict(zip(loads, pool_monotone(counts, g)))
            self._pools[g] = (len(self.trials), pools)
        return pools.get(load)

    def load_class(self, g: Goal, load: float, confidence: float | None = None) -> tuple[LoadClass, bool]:
        """(classification, conclusive?). Inconclusive loads get the majority
        of all their valid trials, short ones included, as a provisional kind."""
        trials = self.valid(load)
        c = classify(g, load, self.final(g, load), self.per_load, confidence, self.pooled(g, load))
        if load in self.knee_region(g):  # one monotone model decides the whole knee
            pb = self.knee_prob(g, load)
            conf = max(pb, 1 - pb)
            return replace(c, kind=LOWER if pb >= 0.5 else UPPER, confidence=conf,
                           majority=conf < max(g.confidence, confidence or 0.0)), True
        if c.kind in (LOWER, UPPER):
            return c, True
        bad = sum(g.is_bad(m) for m in trials)
        kind = PENDING if not trials else (UPPER if 2 * bad >= len(trials) else LOWER)
        return LoadClass(load, kind, trials, bad, c.confidence), False

    # ---- knee model ----------------------------------------------------
    def knee_fit(self, g: Goal) -> tuple[list[float], int, np.ndarray, np.ndarray]:
        """The knee model of an anchored goal, refitted once per new trial:
        (loads within KNEE_SPAN of the anchor, their final trials, x_c grid, mass)."""
        key = (g, len(self.trials))
        if key not in self._knee:
            anchor, base = self.knee_anchor[g], self.snap(self.min_load)
            near = [ld for ld in sorted(self.by_load)
                    if ld != base and self.final(g, ld) and anchor / KNEE_SPAN <= ld <= anchor * KNEE_SPAN]
            n, bad = (np.array(c, float) for c in zip(*(self.final_counts(g, ld) for ld in near)))
            self._knee[key] = (near, int(n.sum()), *crossing_posterior(np.array(near), n, bad, g.exceed_ratio))
        return self._knee[key]

    def knee_region(self, g: Goal) -> list[float]:
        return self.knee_fit(g)[0] if g in self.knee_anchor else []

    def knee_prob(self, g: Goal, load: float) -> float:
        """Posterior probability that the crossing lies above the load (it meets the goal)."""
        _, _, xc, mass = self.knee_fit(g)
        return float(mass[xc > math.log(load)].sum())

    def knee_summary(self, g: Goal) -> dict | None:
        if g not in self.knee_anchor:
            return None
        _, trials, xc, mass = self.knee_fit(g)
        q10, med, q90 = crossing_quantiles(xc, mass, (0.1, 0.5, 0.9))
        return {"crossing_pps": med, "interval80_pps": [q10, q90], "trials": trials}

    def knee_plan(self, g: Goal, lo: float | None, u: float | None) -> _Step | _Done:
        """Final trials where the crossing is likeliest: its median, then its
        quartiles in turn (the spread pins the slope, so a sharp knee resolves
        in a few trials), on a grid of half the width so loads repeat."""
        w = g.relative_width
        k = self.knee_summary(g)
        q10, q90 = k["interval80_pps"]
        paired = lo is not None and u is not None and (u - lo) / u <= w
        if (q90 / q10 - 1 <= w and paired) or k["trials"] >= self.knee_trials:
            where = (f"knee model: crossing {k['crossing_pps']:,.0f} pps, 80% in {q10:,.0f}..{q90:,.0f} pps "
                     f"from {k['trials']} trials near it")
            if q90 / q10 - 1 > self.unstable_width:
                return _Done("unstable", f"{where}: wider than {self.unstable_width:.0%}, the SUT does not "
                             "settle on one side")
            return _Done("found", where)
        q25, med, q75 = crossing_quantiles(*self.knee_fit(g)[2:], (0.25, 0.5, 0.75))
        aim = (med, q25, q75)[k["trials"] % 3]
        anchor, step = self.knee_anchor[g], -math.log(1 - w) / 2
        target = anchor * math.exp(step * round(math.log(aim / anchor) / step))
        return _Step(self.snap(target), g.final_trial_duration, "where the knee model puts the crossing")

    def confident(self, g: Goal, load: float, confidence: float | None = None) -> bool:
        """Classified at the confidence, not by a majority after the trial cap."""
        c, conclusive = self.load_class(g, load, confidence)
        return conclusive and not c.majority

    # ---- per-goal plan -------------------------------------------------
    def view(self, g: Goal):
        classes = {load: self.load_class(g, load) for load in sorted(self.by_load) if self.valid(load)}
        top_lower = max((ld for ld, (c, ok) in classes.items() if c.kind == LOWER and ok), default=0.0)
        # A loss inversion (upper below a lower bound) needs the final confidence; a
        # majority after the trial cap is not enough, at either confidence.
        uppers = [ld for ld, (c, _) in classes.items() if c.kind == UPPER and not (
            ld < top_lower and not self.confident(g, ld, self.final_confidence))]
        u = uppers[0] if uppers else None
        lowers = [ld for ld, (c, _) in classes.items() if c.kind == LOWER and (u is None or ld < u)]
        lo = lowers[-1] if lowers else None
        mixed = [ld for ld, (c, _) in classes.items() if c.majority]
        return classes, lo, u, mixed

    def plan(self, g: Goal) -> _Step | _Done:
        classes, lo, u, mixed = self.view(g)
        w, final, short = g.relative_width, g.final_trial_duration, g.short_duration
        if u is None:
            if lo is None:
                return _Step(self.max_load, short, "first trial at the maximum load")
            if not classes[lo][1]:
                return _Step(lo, final, "confirm the goal is met at the highest load")
            if lo >= self.max_load * (1 - w):
                return _Done("above_max_load", f"the goal is met at the maximum load {lo:,.0f} pps")
            return _Step(self.expand(lo, +1, g), short, "look for loss above the highest load")
        if lo is None:
            if u in self.reached_by and not classes[u][1]:
                # A step down that found loss: one unlucky trial must not walk the search down.
                return _Step(u, final, "confirm the loss before looking lower")
            if u > self.min_load * (1 + w):
                return _Step(self.expand(u, -1, g), short, "look for a load meeting the goal")
            if not self.load_class(g, u, self.final_confidence)[1]:
                return _Step(u, final, "confirm the loss at the minimum load")
            return _Done("min_load_fails", f"the goal is not met even at the minimum load {u:,.0f} pps")
        ratio = (u - lo) / u
        if ratio > self.bracket_factor * w:
            hint = self.forwarding_hint(g, u) * (1 + w)
            if lo * (1 + w) < hint < u * (1 - w) and self.snap(hint) not in self.by_load:
                return _Step(self.snap(hint), short, "just above where the forwarding rate points")
            return _Step(self.snap(math.sqrt(lo * u)), short, "bisect (bracketing)")
        if g not in self.knee_anchor:  # final trials disagree inside the bracket: a knee to model
            base = self.snap(self.min_load)
            for ld in classes:
                n, bad = self.final_counts(g, ld)
                if ld != base and lo <= ld <= u and 0 < bad < n:
                    self.knee_anchor[g] = ld
                    break
        if g in self.knee_anchor:
            return self.knee_plan(g, lo, u)
        for end in (lo, u):
            if not classes[end][1]:
                return _Step(end, final, "confirm a bound")
        if ratio > w:
            return _Step(self.snap(math.sqrt(lo * u)), final, "bisect")
        for end in (lo, u):  # the final pair carries the answer: it needs the final confidence
            if not self.load_class(g, end, self.final_confidence)[1]:
                return _Step(end, final, "confirm a final bound")
        # The minimum load's own coin toss (checked apart, for inversions) is no spread of the knee.
        knee_mixed = [ld for ld in mixed if ld != self.snap(self.min_load)]
        spread = max(knee_mixed) / min(knee_mixed) - 1 if len(knee_mixed) > 1 else 0.0
        if spread > self.unstable_width:
            return _Done("unstable", f"trials disagree at {len(knee_mixed)} loads spread over {spread:.1%} "
                         f"(more than {self.unstable_width:.0%}): the SUT does not settle on one side")
        note = f"; {len(mixed)} load(s) decided by majority after {self.per_load} trials" if mixed else ""
        return _Done("found", f"bounds {ratio:.3%} apart{note}")

    def forwarding_hint(self, g: Goal, above: float) -> float:
        """Where the forwarding rates of the bad trials at or above a load say
        the goal's loss ratio is reached (exact for a flat capacity)."""
        seen = [m.forwarding_rate_pps for ld, ms in self.by_load.items() if ld >= above
                for m in ms if m.valid and g.is_bad(m)]
        return min(seen, default=above) / (1 - g.loss_ratio)

    def expand(self, edge: float, direction: int, g: Goal) -> float:
        """Next load beyond ``edge``. Downwards, first where the forwarding rate
        seen at or above it points; then steps that double each time they miss
        (1x, 2x, 4x... the width, at most 50%)."""
        w = g.relative_width
        if direction < 0 and edge not in self.reached_by:
            hint = self.forwarding_hint(g, edge) * (1 - w)
            if hint < edge * (1 - w / 2):
                target = self.snap(hint)
                self.reached_by[target] = w
                return target
        step = min(0.5, 2 * self.reached_by.get(edge, w / 2))
        target = self.snap(edge * (1 - step) if direction < 0 else edge / (1 - step))
        self.reached_by[target] = step
        return target

    # ---- loop ----------------------------------------------------------
    def over_budget(self, duration: float) -> bool:
        if self.max_trials is not None and len(self.trials) + 1 > self.max_trials:
            return True
        seconds = sum(m.duration_s for m in self.trials)
        return self.max_seconds is not None and seconds + duration > self.max_seconds + 1e-9

    def run_trial(self, step: _Step) -> None:
        m = self.measure(step.load_pps, step.duration_s)
        if not isinstance(m, Measurement):
            raise TypeError(f"measurer returned {type(m).__name__}, expected softnet.search.Measurement")
        m.intended_load_pps = step.load_pps  # the load the search asked for is the key
        self.trials.append(m)
        self.by_load.setdefault(step.load_pps, []).append(m)
        if not m.valid and len(self.by_load[step.load_pps]) >= 2 and not self.valid(step.load_pps):
            # The generator cannot offer this load (or counts are broken): cap the search below it.
            achieved = (m.detail or {}).get("achieved_rate_pps")
            cap = achieved * 0.98 if achieved and achieved < step.load_pps else step.load_pps * 0.9
            self.max_load = max(self.min_load, min(self.max_load, cap))
            self.invalid_cap = self.max_load
        if self.on_trial:
            self.on_trial(m, step.why)

    def next_step(self) -> tuple[_Step | None, dict[int, _Done]]:
        done: dict[int, _Done] = {}
        for i, g in enumerate(self.goals):
            p = self.plan(g)
            if isinstance(p, _Step):
                if p.load_pps in self.by_load and len(self.by_load[p.load_pps]) >= 4 * self.per_load:
                    done[i] = _Done("unstable", f"{p.load_pps:,.0f} pps gave no valid evidence")
                    continue
                return p, done
            done[i] = p
        if self.check_min_load:
            for i, g in enumerate(self.goals):
                # Meeting the goal there needs the goal's confidence; failing it (which
                # fails the goal) the final one.
                c, conclusive = self.load_class(g, self.snap(self.min_load))
                if c.kind == UPPER and not c.majority:
                    c, conclusive = self.load_class(g, self.snap(self.min_load), self.final_confidence)
                if done[i].status in ("found", "unstable") and not conclusive:
                    return _Step(self.snap(self.min_load), g.final_trial_duration,
                                 "check the minimum load (loss inversion)"), done
        return None, done

    def run(self) -> SearchResult:
        stopped_by = "done"
        while True:
            step, done = self.next_step()
            if step is None:
                break
            if self.over_budget(step.duration_s):
                stopped_by = "budget"
                break
            self.run_trial(step)
        return SearchResult([self.result(i, g, done.get(i), stopped_by) for i, g in enumerate(self.goals)],
                            self.trials, stopped_by)

    def result(self, i: int, g: Goal, d: _Done | None, stopped_by: str) -> GoalResult:
        classes, lo, u, mixed = self.view(g)
        if d is None:
            d = _Done("budget_exhausted", "the trial budget ran out before the bounds were pinned")
        inversions = [{"meets_goal_at_pps": ld, "fails_at_pps": u} for ld, (c, ok) in classes.items()
                      if u is not None and ld > u and c.kind == LOWER and ok]
        diagnosis = d.diagnosis
        if inversions:
            diagnosis += (f"; loss inversion: the goal fails at {u:,.0f} pps but is met at "
                          f"{inversions[-1]['meets_goal_at_pps']:,.0f} pps (bounds kept below the failing load)")
        for ld, (c, _) in classes.items():  # upper evidence the inversion rule set aside
            if c.kind == UPPER and (u is None or ld < u):
                diagnosis += (f"; {ld:,.0f} pps failed the goal in {c.bad} of {len(c.trials)} trials, short of "
                              f"the final confidence: a loss inversion there is possible, not confirmed")
        if self.invalid_cap is not None:
            diagnosis += f"; loads above {self.invalid_cap:,.0f} pps could not be offered (invalid trials)"
        return GoalResult(goal=g, status=d.status, lower_bound_pps=lo, upper_bound_pps=u,
                          lower=bound_evidence(classes[lo][0]) if lo is not None else None,
                          upper=bound_evidence(classes[u][0]) if u is not None else None,
                          diagnosis=diagnosis, mixed_loads_pps=mixed, inversions=inversions,
                          knee=self.knee_summary(g))


def search(measure: Callable[[float, float], Measurement], goals: list[Goal], min_load_pps: float,
           max_load_pps: float, relative_width: float = 0.005, *, max_trials: int | None = None,
           max_trial_seconds: float | None = None, max_trials_per_load: int = 11, final_confidence: float = 0.99,
           bracket_factor: float = 4.0, knee_trials: int | None = None,
           unstable_width: float = 0.05, check_min_load: bool = True,
           on_trial: Callable[[Measurement, str], None] | None = None) -> SearchResult:
    """Find lower and upper bounds of each goal's conditional throughput.

    ``measure(intended_load_pps, duration_s)`` runs one trial. The search never
    raises for what the SUT does: a budget (``max_trials``,
    ``max_trial_seconds``, sums of intended durations), a minimum load that
    already fails, or an unstable SUT all end in a result with a status and a
    diagnosis per goal.
    """
    if not goals:
        raise ValueError("search needs at least one goal")
    if not 0 < min_load_pps < max_load_pps:
        raise ValueError(f"loads: need 0 < min_load_pps < max_load_pps, got {min_load_pps}, {max_load_pps}")
    if not 0 < relative_width < 1:
        raise ValueError(f"relative_width = {relative_width}: expected in (0, 1)")
    if max_trials_per_load < 2:
        raise ValueError("max_trials_per_load must be >= 2")
    if knee_trials is not None and knee_trials < 1:
        raise ValueError(f"knee_trials = {knee_trials}: expected >= 1")
    return _Search(measure, list(goals), min_load_pps, max_load_pps, relative_width, max_trials,
                   max_trial_seconds, max_trials_per_load, final_confidence, bracket_factor, unstable_width, check_min_load,
                   on_trial, knee_trials or 4 * max_trials_per_load).run()
