"""What a search knows: its trials by load, and per goal how each measured
load is classified (the view the strategies plan from).

Every trial is evidence for every goal (a trial is bad or good for each loss
ratio), so goals share loads. Per goal, a load with final-duration trials is
classified from them and from the window of neighbouring loads that, under
monotone loss, says most about it (classify.pool_monotone; the minimum load
keeps its own evidence, which the inversion check needs); loads near a
modelled knee are classified by the knee model's posterior. Until a load is
conclusive it is *provisional*: the majority of all its valid trials, short
ones included (ties count as bad).

With the specification's rule (SearchConfig.rule = "spec") a load is
conclusive once its duration sums decide it (softnet.analysis.mlr_spec), every
trial counting as the specification lets it; the posterior confidence of its
final trials is kept beside, as a statement, and decides nothing.

The view: U is the lowest load classified upper, L the highest lower below U
(the conservative pair: a lower bound above U is a loss inversion, reported).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from softnet.analysis.mlr_spec import classify as spec_classify
from softnet.search.classify import LOWER, PENDING, UPPER, LoadClass, classify, pool_monotone, statement
from softnet.search.config import SearchConfig
from softnet.search.model import Goal, Measurement
from softnet.search.strategy.knee import KneeModel


@dataclass
class View:
    """One goal's picture of the measured loads: each load's (class,
    conclusive?), the bounds L and U, and the loads decided by majority."""

    classes: dict[float, tuple[LoadClass, bool]]
    lower_pps: float | None
    upper_pps: float | None
    mixed_pps: list[float]


class SearchState:
    def __init__(self, config: SearchConfig):
        self.config = config
        width = config.relative_width
        self.goals = [g if g.relative_width else replace(g, relative_width=width) for g in config.goals]
        self.min_load, self.max_load = float(config.min_load_pps), float(config.max_load_pps)
        self.trials: list[Measurement] = []
        self.by_load: dict[float, list[Measurement]] = {}
        self.snap_tol = min(g.relative_width for g in self.goals) / 8
        self.invalid_cap: float | None = None  # max_load after invalid trials lowered it
        # The knee model is evidence as well as a strategy: it classifies the loads near a knee.
        self.knee = KneeModel(self)
        self._pools: dict[Goal, tuple[int, dict[float, tuple[int, int]]]] = {}

    def add_trial(self, load: float, m: Measurement) -> None:
        m.intended_load_pps = load  # the load the search asked for is the key
        self.trials.append(m)
        self.by_load.setdefault(load, []).append(m)
        if not m.valid and len(self.by_load[load]) >= 2 and not self.valid(load):
            # The generator cannot offer this load (or counts are broken): cap the search below it.
            achieved = m.achieved_load_pps
            cap = achieved * 0.98 if achieved and achieved < load else load * 0.9
            self.max_load = max(self.min_load, min(self.max_load, cap))
            self.invalid_cap = self.max_load

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
        if self.config.spec_rule:
            return self.spec_class(g, load)
        trials = self.valid(load)
        c = classify(g, load, self.final(g, load), self.config.max_trials_per_load, confidence, self.pooled(g, load))
        if load in self.knee.region(g):  # one monotone model decides the whole knee
            pb = self.knee.prob(g, load)
            conf = max(pb, 1 - pb)
            return replace(c, kind=LOWER if pb >= 0.5 else UPPER, confidence=conf,
                           majority=conf < max(g.confidence, confidence or 0.0)), True
        if c.kind in (LOWER, UPPER):
            return c, True
        bad = sum(g.is_bad(m) for m in trials)
        kind = PENDING if not trials else (UPPER if 2 * bad >= len(trials) else LOWER)
        return LoadClass(load, kind, trials, bad, c.confidence), False

    def spec_class(self, g: Goal, load: float) -> tuple[LoadClass, bool]:
        """The specification's classification; the posterior of the final trials beside it."""
        every = self.by_load.get(load, [])
        kind, _ = spec_classify(g.spec, [m.spec_trial() for m in every])
        final = self.final(g, load)
        if kind != "undecided":
            return statement(g, load, final, UPPER if kind == "upper" else LOWER), True
        seen = [m for m in every if m.valid] or every
        seen_bad = sum(not m.valid or g.is_bad(m) for m in seen)
        said = statement(g, load, final)  # the likelier side's confidence
        kind_now = PENDING if not seen else (UPPER if 2 * seen_bad >= len(seen) else LOWER)
        return replace(said, kind=kind_now), False

    def confident(self, g: Goal, load: float, confidence: float | None = None) -> bool:
        """Classified at the confidence, not by a majority after the trial cap."""
        c, conclusive = self.load_class(g, load, confidence)
        return conclusive and not c.majority

    def view(self, g: Goal) -> View:
        if self.config.spec_rule:  # a load the generator could not offer is an upper bound there
            classes = {load: self.load_class(g, load) for load in sorted(self.by_load)}
            uppers = [ld for ld, (c, _) in classes.items() if c.kind == UPPER]
            u = uppers[0] if uppers else None
            lowers = [ld for ld, (c, _) in classes.items() if c.kind == LOWER and (u is None or ld < u)]
            return View(classes, lowers[-1] if lowers else None, u, [])
        classes = {load: self.load_class(g, load) for load in sorted(self.by_load) if self.valid(load)}
        top_lower = max((ld for ld, (c, ok) in classes.items() if c.kind == LOWER and ok), default=0.0)
        # A loss inversion (upper below a lower bound) needs the final confidence; a
        # majority after the trial cap is not enough, at either confidence.
        uppers = [ld for ld, (c, _) in classes.items() if c.kind == UPPER and not (
            ld < top_lower and not self.confident(g, ld, self.config.final_confidence))]
        u = uppers[0] if uppers else None
        lowers = [ld for ld, (c, _) in classes.items() if c.kind == LOWER and (u is None or ld < u)]
        lo = lowers[-1] if lowers else None
        mixed = [ld for ld, (c, _) in classes.items() if c.majority]
        return View(classes, lo, u, mixed)
