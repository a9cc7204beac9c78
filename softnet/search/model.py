"""What the search takes and returns: goals, measurements, results."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from softnet.analysis.loss_time import HOST_INTERFERENCE
from softnet.analysis.mlr_spec import INVALIDATING_FLAGS, SpecGoal, SpecResult, SpecTrial, stored_trial

# The default goal duration sum, in final trials: the median of three, which a
# drifting host still answers (21 s, CSIT's, costs 7 trials a load).
DURATION_SUM_TRIALS = 3

# The stall probe saw host stalls during the trial: still evidence, but a knee
# blurred by them is the host's, not the SUT's.
STALL_FLAG = HOST_INTERFERENCE


def check_fields(obj, checks) -> None:
    """Raise a ValueError naming the first (field, ok, accepted range) that is not ok."""
    for name, ok, accepted in checks:
        if not ok:
            raise ValueError(f"{type(obj).__name__}.{name} = {getattr(obj, name)!r}: expected {accepted}")


@dataclass(frozen=True)
class Goal:
    """One conditional-throughput goal.

    The MLRsearch specification's search goal (RFC 9971): a trial is *bad*
    (high-loss) for the goal when its loss ratio exceeds ``loss_ratio``; a
    load meets the goal when, over ``duration_sum`` seconds of trials (None:
    3 x ``final_trial_duration``, the median of three full-length trials),
    the high-loss share is at most ``exceed_ratio`` (0.5: the median trial;
    0 with duration_sum = final_trial_duration: RFC 2544's single trial).
    ``relative_width``: (upper - lower) / upper at the end; None takes the
    search's. Trials shorter than the final duration
    (``initial_trial_duration``) count as the specification lets short
    trials count. The Bayesian rule (SearchConfig.rule = "bayes") classifies
    a load once the posterior probability (Jeffreys prior on the bad-trial
    share) that it is on one side reaches ``confidence``.
    """

    loss_ratio: float = 0.0
    exceed_ratio: float = 0.5
    relative_width: float | None = None
    initial_trial_duration: float | None = None
    final_trial_duration: float = 1.0
    confidence: float = 0.9
    duration_sum: float | None = None

    def __post_init__(self):
        checks = (("loss_ratio", 0 <= self.loss_ratio < 1, "in [0, 1)"),
                  ("exceed_ratio", 0 <= self.exceed_ratio < 1, "in [0, 1)"),
                  ("relative_width", self.relative_width is None or 0 < self.relative_width < 1, "in (0, 1)"),
                  ("final_trial_duration", self.final_trial_duration > 0, "> 0"),
                  ("initial_trial_duration", self.initial_trial_duration is None
                   or 0 < self.initial_trial_duration <= self.final_trial_duration, "in (0, final_trial_duration]"),
                  ("confidence", 0.5 < self.confidence < 1, "in (0.5, 1)"),
                  ("duration_sum", self.duration_sum is None or self.duration_sum >= self.final_trial_duration,
                   ">= final_trial_duration"))
        check_fields(self, checks)

    @property
    def duration_sum_s(self) -> float:
        return self.duration_sum if self.duration_sum is not None else DURATION_SUM_TRIALS * self.final_trial_duration

    @property
    def spec(self) -> SpecGoal:
        """The attributes that define the specification's answer for this goal."""
        return SpecGoal(self.loss_ratio, self.exceed_ratio, self.final_trial_duration, self.duration_sum_s)

    @property
    def name(self) -> str:
        return "NDR" if self.loss_ratio == 0 else f"PDR{self.loss_ratio * 100:g}%"

    @property
    def short_duration(self) -> float:
        return self.initial_trial_duration or self.final_trial_duration

    def is_bad(self, m: "Measurement") -> bool:
        return m.loss_ratio > self.loss_ratio


@dataclass
class Measurement:
    """One trial as the search sees it. ``flags`` from softnet.trial mark
    trials that are not evidence (INVALIDATING_FLAGS); ``detail`` carries the
    measurer's full result for storage."""

    intended_load_pps: float
    duration_s: float
    offered_count: int
    forwarded_count: int
    flags: tuple[str, ...] = ()
    detail: dict | None = field(default=None, repr=False)
    # What the stall attribution says of the trial's loss (0 and None without a
    # probe): all lost packets, and those it ties to the host (in stalls the
    # probe saw, or after a queue left undrained by a stall too short to see).
    lost_pkts_all: int | None = None
    host_lost_pkts: int = 0
    # The rest of the loss (beyond host stalls) was spread over most of the trial: the SUT's
    # capacity fell below the load then; it was not held up for a moment.
    sut_overloaded: bool = False
    # What the generator offered, as the measurer's result says (None: not said)
    achieved_load_pps: float | None = None

    @property
    def valid(self) -> bool:
        return self.offered_count > 0 and not INVALIDATING_FLAGS.intersection(self.flags)

    @property
    def loss_ratio(self) -> float:
        # Duplicates can make forwarded > offered; loss is never negative.
        if self.offered_count <= 0:
            return math.nan
        return max(0, self.offered_count - self.forwarded_count) / self.offered_count

    @property
    def all_lost(self) -> int:
        """Every lost packet, whether counted or set apart."""
        counted = max(0, self.offered_count - self.forwarded_count)
        return counted if self.lost_pkts_all is None else max(counted, self.lost_pkts_all)

    @property
    def forwarding_rate_pps(self) -> float:
        return self.forwarded_count / self.duration_s

    def spec_trial(self) -> SpecTrial:
        """The trial as the specification reads it: no measurement (invalid) lost everything."""
        return stored_trial(self.intended_load_pps, self.duration_s, self.offered_count, self.forwarded_count,
                            self.flags)


@dataclass
class BoundEvidence:
    """What the trials at one bound say: counts, the posterior confidence of
    the classification (from ``pooled_trials``: this load's trials plus those
    of neighbours pooled under monotone loss), and a 95% Clopper-Pearson
    interval of the loss ratio over this load's packets (binomial, so narrower
    than the trial-to-trial spread when trials differ)."""

    load_pps: float
    trials: int
    bad_trials: int
    confidence: float
    pooled_trials: int
    loss_ratio: float
    loss_ratio_ci95: tuple[float, float]
    worst_trial_loss_ratio: float


@dataclass(frozen=True)
class Inversion:
    """A load that meets the goal above one that fails it."""

    meets_goal_at_pps: float
    fails_at_pps: float


@dataclass(frozen=True)
class KneeStalls:
    """What the stall attribution says of the final trials near a knee
    (KneeModel.stalled)."""

    flagged_trials: int  # flagged host_interference
    trials: int
    lost_pkts: int  # by its bad trials
    host_lost_pkts: int  # of those, what the attribution ties to the host
    host_share: float | None
    bad_trials: int  # bad trials with an attribution
    host_bad_trials: int  # of those, the ones most of whose loss is the host's
    overloaded_bad_trials: int  # of those, the ones whose SUT was overloaded over most of the trial
    host_trial_share: float | None  # host_bad_trials / bad_trials


@dataclass(frozen=True)
class KneeSummary:
    """The knee model's crossing of a goal and its 80% credible interval."""

    crossing_pps: float
    interval80_pps: list[float]  # [q10, q90]
    trials: int  # near the knee
    asked: int  # trials the knee placed
    resolved: bool  # the interval lies between loads that were tried
    host_stalls: KneeStalls


@dataclass
class GoalResult:
    goal: Goal
    status: str  # found | unstable | min_load_fails | above_max_load | budget_exhausted
    lower_bound_pps: float | None
    upper_bound_pps: float | None
    lower: BoundEvidence | None
    upper: BoundEvidence | None
    diagnosis: str
    mixed_loads_pps: list[float] = field(default_factory=list)  # decided by majority
    inversions: list[Inversion] = field(default_factory=list)
    # When trials disagreed inside the final bracket: the knee model's crossing,
    # its 80% credible interval and the trials it used (knee.py).
    knee: KneeSummary | None = None
    # The specification's relevant bounds and conditional throughput over every trial of the search
    # (softnet.analysis.mlr_spec), whatever the engine; ``compliant``: the engine's own bounds are them.
    spec: SpecResult | None = None
    compliant: bool | None = None
    engine: str = "softnet"

    @property
    def value_pps(self) -> float | None:
        """The number to report: the conditional throughput, and only when the
        bounds were pinned to the goal's width (no number for an unstable SUT)."""
        if self.status != "found":
            return None
        return self.spec.conditional_throughput_pps if self.spec else self.lower_bound_pps

    @property
    def relative_width(self) -> float | None:
        if self.lower_bound_pps is None or self.upper_bound_pps is None:
            return None
        return (self.upper_bound_pps - self.lower_bound_pps) / self.upper_bound_pps

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("spec")
        spec = self.spec.to_dict() if self.spec else dict.fromkeys(
            ("relevant_lower_bound_pps", "relevant_upper_bound_pps", "conditional_throughput_pps"))
        goal = {**asdict(self.goal), "name": self.goal.name, "duration_sum": self.goal.duration_sum_s}
        return {**d, **spec, "goal": goal, "value_pps": self.value_pps, "achieved_relative_width": self.relative_width}


@dataclass
class SearchResult:
    goals: list[GoalResult]
    trials: list[Measurement]
    stopped_by: str  # done | budget

    @property
    def trial_count(self) -> int:
        return len(self.trials)

    @property
    def trial_seconds(self) -> float:
        """Sum of intended trial durations (what a budget in seconds counts)."""
        return sum(m.duration_s for m in self.trials)

    def to_dict(self) -> dict:
        return {"stopped_by": self.stopped_by, "trial_count": self.trial_count,
                "trial_seconds": self.trial_seconds, "goals": [g.to_dict() for g in self.goals],
                "trials": [{"intended_load_pps": m.intended_load_pps, "duration_s": m.duration_s,
                            "offered_count": m.offered_count, "forwarded_count": m.forwarded_count,
                            "loss_ratio": m.loss_ratio, "flags": list(m.flags), "valid": m.valid}
                           for m in self.trials]}
