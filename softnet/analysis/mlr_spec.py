"""The MLRsearch specification's answer from a list of trials (RFC 9971,
draft-ietf-bmwg-mlrsearch-15): load classification, the relevant bounds and
the conditional throughput of one search goal.

One definition, separate from any engine: softnet's own search, the
reference engine (MLRsearch 1.2.1) and a replay of stored trials all give
their trials to ``goal_result``, and the result is the number softnet
reports. The arithmetic follows the specification's pseudocode (its
appendices A and B), which MLRsearch 1.2.1 implements in
``TargetStat.estimates`` and ``pessimistic_loss_ratio``; tests hold the two
to identical answers on the same trial lists.

In short, per load and goal: a trial is *high-loss* when its loss ratio
exceeds the goal loss ratio; *full-length* when it lasted at least the goal
final trial duration. Shorter low-loss trials may cancel shorter high-loss
ones (weighted by the exceed ratio's odds); what is left of them counts as
high-loss. Over the goal duration sum, the load is a *lower bound* when even
if all missing time were high-loss the high-loss share stays within the
exceed ratio, an *upper bound* when even if all missing time were low-loss
it exceeds it, and *undecided* otherwise. The relevant upper bound is the
smallest upper bound; the relevant lower bound the largest lower bound below
it. The conditional throughput is the relevant lower bound times one minus
the loss ratio at the exceed ratio's quantile of its full-length trials
(missing time counted as trials that lost everything).

A trial the generator could not offer or count (an invalidating flag) is a
trial that lost everything, as a tester counting unsent packets as lost
(MLRsearch's MeasurementResult) would read it: it never helps a load.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

LoadClass = Literal["lower", "upper", "undecided"]

# A trial with one of these flags says nothing about the SUT: the generator did
# not offer the intended load, or the counters do not add up.
INVALIDATING_FLAGS = frozenset({"generator_limited", "generator_overshoot", "counters_inconsistent",
                                "interrupted"})


@dataclass(frozen=True)
class SpecGoal:
    """The specification's search goal attributes that define the answer
    (the initial trial duration and the width steer a search, not the answer)."""

    loss_ratio: float
    exceed_ratio: float
    final_trial_duration_s: float
    duration_sum_s: float

    def __post_init__(self):
        problems = [(name, ok, want) for name, ok, want in (
            ("loss_ratio", 0 <= self.loss_ratio < 1, "in [0, 1)"),
            ("exceed_ratio", 0 <= self.exceed_ratio < 1, "in [0, 1)"),
            ("final_trial_duration_s", self.final_trial_duration_s > 0, "> 0"),
            ("duration_sum_s", self.duration_sum_s >= self.final_trial_duration_s, ">= final_trial_duration_s"))
            if not ok]
        if problems:
            name, _, want = problems[0]
            raise ValueError(f"SpecGoal.{name} = {getattr(self, name)!r}: expected {want}")


@dataclass(frozen=True)
class SpecTrial:
    """One trial as the specification reads it: the intended load, the
    intended duration (which also counts toward the duration sums) and the
    trial loss ratio (1.0 for a trial that is no measurement)."""

    load_pps: float
    duration_s: float
    loss_ratio: float


@dataclass(frozen=True)
class LoadStat:
    """The duration sums of one load for one goal, and its classification."""

    load_pps: float
    full_low_s: float  # full-length low-loss sum
    full_high_s: float  # full-length high-loss sum
    short_low_s: float
    short_high_s: float
    classification: LoadClass
    trials: int


@dataclass(frozen=True)
class SpecResult:
    """The specification's goal result over a list of trials. A bound is None
    when no load is classified so (an irregular goal result)."""

    relevant_lower_bound_pps: float | None
    relevant_upper_bound_pps: float | None
    conditional_throughput_pps: float | None
    loads: tuple[LoadStat, ...]

    @property
    def relative_width(self) -> float | None:
        lo, up = self.relevant_lower_bound_pps, self.relevant_upper_bound_pps
        return None if lo is None or up is None else (up - lo) / up

    def to_dict(self) -> dict:
        return {"relevant_lower_bound_pps": self.relevant_lower_bound_pps,
                "relevant_upper_bound_pps": self.relevant_upper_bound_pps,
                "conditional_throughput_pps": self.conditional_throughput_pps}


def stored_trial(load_pps: float, duration_s: float, sent: int, counted_received: int,
                 flags: Iterable[str]) -> SpecTrial:
    """A stored trial as the specification reads it, its loss counted as the caller says."""
    if not sent or INVALIDATING_FLAGS.intersection(flags):
        return SpecTrial(load_pps, duration_s, 1.0)
    return SpecTrial(load_pps, duration_s, max(0, sent - counted_received) / sent)


def load_key(load_pps: float) -> float:
    """Trials at one load share it to the micro-packet per second (a stored
    load read back, or a discrete load as a float, is the same load)."""
    return round(float(load_pps), 6)


def classify(goal: SpecGoal, trials: list[SpecTrial]) -> tuple[LoadClass, tuple[float, float, float, float]]:
    """One load's classification and its (full low, full high, short low, short high) sums."""
    fl = fh = sl = sh = 0.0
    for t in trials:
        high = t.loss_ratio > goal.loss_ratio
        if t.duration_s >= goal.final_trial_duration_s:
            fl, fh = (fl, fh + t.duration_s) if high else (fl + t.duration_s, fh)
        else:
            sl, sh = (sl, sh + t.duration_s) if high else (sl + t.duration_s, sh)
    x = goal.exceed_ratio
    balancing = sl * x / (1.0 - x)  # short low-loss time that cancels short high-loss time
    effective_high = fh + max(0.0, sh - balancing)
    effective_whole = max(fl + effective_high, goal.duration_sum_s)
    quantile = effective_whole * x
    optimistic_lower = effective_high <= quantile  # the missing time all low-loss
    pessimistic_lower = effective_whole - fl <= quantile  # the missing time all high-loss
    if optimistic_lower and pessimistic_lower:
        kind: LoadClass = "lower"
    elif not optimistic_lower and not pessimistic_lower:
        kind = "upper"
    else:
        kind = "undecided"
    return kind, (fl, fh, sl, sh)


def quantile_loss_ratio(goal: SpecGoal, trials: list[SpecTrial]) -> float:
    """The loss ratio at the exceed ratio's quantile of the full-length
    trials, the duration sum's missing time counted as total loss; a tie (as
    the median of an even count) takes the lower value (being at the exceed
    ratio is allowed)."""
    by_ratio: dict[float, float] = {}
    for t in trials:
        if t.duration_s >= goal.final_trial_duration_s:
            by_ratio[t.loss_ratio] = by_ratio.get(t.loss_ratio, 0.0) + t.duration_s
    whole = max(goal.duration_sum_s, sum(by_ratio.values()))
    remaining = whole * (1.0 - goal.exceed_ratio)
    ratio = None
    for r in sorted(by_ratio):
        if ratio is not None and remaining <= 0.0:
            return ratio
        ratio = r
        remaining -= by_ratio[r]
    return 1.0 if ratio is None or remaining > 0.0 else ratio


def load_stats(goal: SpecGoal, trials: Iterable[SpecTrial]) -> list[LoadStat]:
    """Every load's sums and classification, loads ascending."""
    by_load: dict[float, list[SpecTrial]] = {}
    for t in trials:
        by_load.setdefault(load_key(t.load_pps), []).append(t)
    out = []
    for key in sorted(by_load):
        at = by_load[key]
        kind, (fl, fh, sl, sh) = classify(goal, at)
        # the load as the trials were asked for (not its rounded key): a bound compares with stored loads
        out.append(LoadStat(at[0].load_pps, fl, fh, sl, sh, kind, len(at)))
    return out


def goal_result(goal: SpecGoal, trials: Iterable[SpecTrial]) -> SpecResult:
    """The relevant bounds and the conditional throughput of the trials."""
    trials = list(trials)
    stats = load_stats(goal, trials)
    lower = upper = None
    for s in stats:  # from the lowest load up to the first upper bound (the conservative pair)
        if s.classification == "upper":
            upper = s
            break
        if s.classification == "lower":
            lower = s
    throughput = None
    if lower is not None:
        at = [t for t in trials if load_key(t.load_pps) == load_key(lower.load_pps)]
        throughput = lower.load_pps * (1.0 - quantile_loss_ratio(goal, at))
    return SpecResult(lower.load_pps if lower else None, upper.load_pps if upper else None, throughput,
                      tuple(stats))
