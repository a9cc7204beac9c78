"""A soak's typed records (method kind "soak", softnet.campaign.soak): each
trial of a soak carries, under the key SOAK in its stored result, where it
fell in the soak, the critical-load estimate after it, and the SUT host's
resources read at its end; the soak's summary (softnet.analysis.soak) is
stored when it ends."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

SOAK = "soak"
SOAK_SCHEMA_VERSION = 1


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CriticalLoad(_Doc):
    """The critical load's posterior after some trials (softnet.analysis.plr_model)."""
    target_loss_ratio: float
    median_pps: float  # the estimate
    lower_pps: float  # the interval at ``confidence``, equal tails
    upper_pps: float
    confidence: float
    mean_pps: float  # PLRsearch's average and standard deviation, for comparison with CSIT's figures
    stdev_pps: float
    fits: dict[str, tuple[float, float]] = Field(default_factory=dict)  # per fitting function: (median, stdev)
    log_evidence: float = 0.0  # log marginal likelihood of the trials (the fits mixed): how well the shapes fit
    trials: int = 0  # how many trials it reads

    @property
    def relative_width(self) -> float:
        """(upper - lower) / median."""
        return (self.upper_pps - self.lower_pps) / self.median_pps if self.median_pps else float("inf")


class DriftSample(_Doc):
    """The SUT host's resources at one instant (softnet.collect.drift)."""
    t_unix_s: float
    levels: dict[str, float]  # series -> value (bytes, entries, elements, pages: the series' name says)
    missing: dict[str, str] = Field(default_factory=dict)  # sources the host lacked -> why


class SoakMark(_Doc):
    """Where a trial fell in its soak (its stored result's SOAK key)."""
    index: int  # the trial's place in the soak, from 0
    elapsed_s: float  # the soak's wall time when the trial ended (trials and what lies between, summed)
    wall_s: float  # this trial's wall time, set-up and reads included
    estimate: CriticalLoad | None = None  # after this trial
    drift: DriftSample | None = None  # read when the trial ended
    segment_start: bool = False  # the first trial after the soak (re)built its testbed (a resume starts one)
    # the trial's loss under the estimate before it: the smaller predictive tail, and which side
    # ("more" loss than expected, or "less"); None: no estimate yet
    surprise: float | None = None
    surprise_side: str | None = None
    suspect: bool = False  # surprising: the next trial repeats its load to confirm
    witness: int | None = None  # the earlier trial at about its load that lost 10x less (or more)
    model_from: int = 0  # the first trial the estimate reads (after a capacity step: the step's)
    step_from: int | None = None  # this trial confirmed a step in the SUT that began at that trial


class DriftFit(_Doc):
    """One watched series over the soak: its trend and its change point."""
    series: str
    samples: int
    first: float  # the first sample's value
    last: float
    slope_per_h: float | None  # Theil-Sen slope, units per hour of soak
    slope_ci_per_h: tuple[float, float] | None  # its interval at the soak's confidence
    change_at_s: float | None = None  # soak time of the largest change point jumpavg finds (None: none)
    change_by: float | None = None  # the mean after it minus the mean before
    # "leak_suspected" (a level grows; available memory falls), "trend" (a level moves the other way),
    # "cost_rising" / "cost_falling" (a per-packet figure, beside the load), "step" (a change point); None: steady
    flag: str | None = None
    reason: str = ""  # the flag in words, with the figures


class CapacityStepDoc(_Doc):
    """A step in the SUT: a trial the estimate called impossible, and its repeat at the same load too."""
    at_trial: int  # the first trial after the step
    at_s: float  # soak time when that trial began
    surprise: tuple[float, float]  # the two trials' predictive tails (each below the soak's threshold)
    side: str  # "more": the SUT lost more than before (capacity fell), "less": it rose
    witness: int  # the earlier trial at about the same load that lost 10x less (or more)
    before: CriticalLoad  # the estimate just before the step
    after: CriticalLoad | None  # from the step's trials on, at the end of that stretch


class SoakSummary(_Doc):
    """A soak's result: the critical load over time, the watched series, the flags."""
    schema_version: int = SOAK_SCHEMA_VERSION
    trials: int
    elapsed_s: float
    trial_seconds: float  # the trials' own windows, summed
    estimate: CriticalLoad | None  # after the last trial
    # (soak time, median, lower, upper) after each trial: the estimate's path
    path: list[tuple[float, float, float, float]] = Field(default_factory=list)
    capacity_steps: list[CapacityStepDoc] = Field(default_factory=list)
    drift: list[DriftFit] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)  # each flag with the series and figures
    finished: bool = False  # the soak ran its wall time (False: stopped early, or still running)
