"""What a search is asked to do: its goals, load range, width and budgets.

One frozen object instead of a dozen arguments (as MLRsearch's Config): the
caller builds it once, it is validated once, and the controller and every
strategy read the same settings from it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from softnet.search.model import Goal, check_fields


@dataclass(frozen=True)
class SearchConfig:
    """Settings of one search.

    ``goals``: at least one Goal; a goal without its own ``relative_width``
    takes ``relative_width`` here ((upper - lower) / upper at the end).
    Loads are searched in [``min_load_pps``, ``max_load_pps``].
    Budgets (None: none): ``max_trials`` trials, ``max_trial_seconds`` as the
    sum of intended trial durations. Away from a modelled knee, a load still
    mixed after ``max_trials_per_load`` trials is decided by the majority.
    ``final_confidence``: what the final bounds, a loss inversion and a
    failing minimum load need. Bracketing with short trials goes on while the
    bounds are wider than ``bracket_factor`` x the width. ``knee_trials``:
    final trials each goal's knee model may ask for (None: 4 x
    ``max_trials_per_load``); trials near its knee that other goals asked for
    inform it for free.
    ``unstable_width``: mixed loads (or a knee's 80% interval) spread wider
    than this make the goal unstable. ``check_min_load``: measure the minimum
    load after the goals converge, to find loss inversions.
    ``rule``: how a load is classified. "spec": by the MLRsearch
    specification's duration sums (softnet.analysis.mlr_spec), so the bounds
    the search ends with are the specification's relevant bounds; the knee
    model, pooling and the minimum-load check are off (the specification's
    bounds are conservative on their own). "bayes": by the posterior
    confidence, pooled under monotone loss, with the knee model.
    """

    goals: tuple[Goal, ...]
    min_load_pps: float
    max_load_pps: float
    relative_width: float = 0.005
    max_trials: int | None = None
    max_trial_seconds: float | None = None
    max_trials_per_load: int = 11
    final_confidence: float = 0.99
    bracket_factor: float = 4.0
    knee_trials: int | None = None
    unstable_width: float = 0.05
    check_min_load: bool = True
    rule: Literal["spec", "bayes"] = "spec"

    def __post_init__(self):
        object.__setattr__(self, "goals", tuple(self.goals))  # a list is accepted; frozen keeps a tuple
        if not self.goals:
            raise ValueError("SearchConfig.goals is empty: expected at least one Goal")
        for g in self.goals:
            if not isinstance(g, Goal):
                raise ValueError(f"SearchConfig.goals holds {g!r}: expected softnet.search.Goal objects")
        if not 0 < self.min_load_pps < self.max_load_pps:
            raise ValueError(f"SearchConfig loads: expected 0 < min_load_pps < max_load_pps, got "
                             f"{self.min_load_pps}, {self.max_load_pps}")
        checks = (("relative_width", 0 < self.relative_width < 1, "in (0, 1)"),
                  ("max_trials", self.max_trials is None or self.max_trials >= 1, "None or >= 1"),
                  ("max_trial_seconds", self.max_trial_seconds is None or self.max_trial_seconds > 0,
                   "None or > 0"),
                  ("max_trials_per_load", self.max_trials_per_load >= 2, ">= 2"),
                  ("final_confidence", 0.5 < self.final_confidence < 1, "in (0.5, 1)"),
                  ("bracket_factor", self.bracket_factor >= 1, ">= 1"),
                  ("knee_trials", self.knee_trials is None or self.knee_trials >= 1, "None or >= 1"),
                  ("unstable_width", self.unstable_width >= 0, ">= 0"),
                  ("rule", self.rule in ("spec", "bayes"), '"spec" or "bayes"'))
        check_fields(self, checks)
        if self.rule == "bayes" and any(g.exceed_ratio == 0 for g in self.goals):
            raise ValueError("Goal.exceed_ratio = 0: the Bayesian rule needs a share of bad trials above 0 to "
                             'classify a load; use rule = "spec"')

    def over_budget(self, trials: list, duration: float) -> bool:
        """Would one more trial of ``duration`` exceed a budget, after ``trials``?"""
        if self.max_trials is not None and len(trials) + 1 > self.max_trials:
            return True
        seconds = sum(m.duration_s for m in trials)
        return self.max_trial_seconds is not None and seconds + duration > self.max_trial_seconds + 1e-9

    @property
    def spec_rule(self) -> bool:
        return self.rule == "spec"

    @property
    def knee_trial_budget(self) -> int:
        return self.knee_trials or 4 * self.max_trials_per_load
