"""A stored search goal: one row per (campaign, cell, repeat, goal), validated
on write and on read. The whole goal (bounds' evidence, knee fit) is kept in
the row's result_json with the schema version it was written with."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from softnet.errors import InputError

SEARCH_SCHEMA_VERSION = 1
Number = int | float


class GoalName(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    loss_ratio: Number
    exceed_ratio: Number | None = None
    duration_sum: Number | None = None  # the goal duration sum, seconds (RFC 9971)
    final_trial_duration: Number | None = None


class BoundSummary(BaseModel):
    """Of a bound's evidence (softnet.search.BoundEvidence), what a goal row keeps."""

    model_config = ConfigDict(extra="ignore")

    confidence: Number | None = None
    loss_ratio: Number | None = None
    loss_ratio_ci95: tuple[Number | None, Number | None] | None = None


class GoalDocument(BaseModel):
    """One goal of softnet.search's SearchResult.to_dict(), as a goal row reads it
    (the row's result_json keeps the whole goal)."""

    model_config = ConfigDict(extra="ignore")

    goal: GoalName
    status: str
    value_pps: Number | None
    lower_bound_pps: Number | None
    upper_bound_pps: Number | None
    lower: BoundSummary | None = None
    upper: BoundSummary | None = None
    diagnosis: str
    # RFC 9971's goal result over the search's trials (softnet.analysis.mlr_spec); absent before it
    relevant_lower_bound_pps: Number | None = None
    relevant_upper_bound_pps: Number | None = None
    conditional_throughput_pps: Number | None = None
    engine: str | None = None


class StoredSearch(BaseModel):
    """What the store reads of a search's result (SearchResult.to_dict())."""

    model_config = ConfigDict(extra="ignore")

    trial_count: int
    trial_seconds: Number
    goals: list[dict]  # each stored whole in its goal's row


class SearchGoalRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    campaign_id: str
    cell_id: int
    run_index: int
    goal: str
    loss_ratio: Number
    status: str
    value_pps: Number | None
    lower_bound_pps: Number | None
    upper_bound_pps: Number | None
    lower_confidence: Number | None
    upper_confidence: Number | None
    lower_loss_ratio: Number | None
    lower_loss_ci95_low: Number | None
    lower_loss_ci95_high: Number | None
    diagnosis: str
    trial_count: int
    trial_seconds: Number
    # RFC 9971's goal result and the goal's attributes; None in rows stored before softnet reported them
    relevant_lower_bound_pps: Number | None = None
    relevant_upper_bound_pps: Number | None = None
    conditional_throughput_pps: Number | None = None
    engine: str | None = None
    exceed_ratio: Number | None = None
    duration_sum_s: Number | None = None
    final_trial_duration_s: Number | None = None

    @property
    def throughput_pps(self) -> float | None:
        """What a comparison or trend takes of the goal: RFC 9971's conditional
        throughput (the lower bound in rows stored before softnet reported it)."""
        if self.conditional_throughput_pps is not None:
            return self.conditional_throughput_pps
        return None if self.engine else self.lower_bound_pps

    @classmethod
    def from_goal(cls, campaign_id: str, cell_id: int, run_index: int, search: StoredSearch,
                  goal: dict) -> "SearchGoalRow":
        """One goal of a search's result."""
        g = GoalDocument.model_validate(goal)
        lo, up = g.lower or BoundSummary(), g.upper or BoundSummary()
        ci = lo.loss_ratio_ci95 or (None, None)
        return cls(campaign_id=campaign_id, cell_id=cell_id, run_index=run_index, goal=g.goal.name,
                   loss_ratio=g.goal.loss_ratio, status=g.status, value_pps=g.value_pps,
                   lower_bound_pps=g.lower_bound_pps, upper_bound_pps=g.upper_bound_pps,
                   lower_confidence=lo.confidence, upper_confidence=up.confidence,
                   lower_loss_ratio=lo.loss_ratio, lower_loss_ci95_low=ci[0], lower_loss_ci95_high=ci[1],
                   diagnosis=g.diagnosis, trial_count=search.trial_count, trial_seconds=search.trial_seconds,
                   relevant_lower_bound_pps=g.relevant_lower_bound_pps,
                   relevant_upper_bound_pps=g.relevant_upper_bound_pps,
                   conditional_throughput_pps=g.conditional_throughput_pps, engine=g.engine,
                   exceed_ratio=g.goal.exceed_ratio, duration_sum_s=g.goal.duration_sum,
                   final_trial_duration_s=g.goal.final_trial_duration)


def check_search_schema(goal_json: dict, where: str) -> int:
    version = goal_json.get("schema_version", SEARCH_SCHEMA_VERSION)
    if version != SEARCH_SCHEMA_VERSION:
        raise InputError(where, f"search result schema version {version!r}: this softnet reads version "
                         f"{SEARCH_SCHEMA_VERSION} (a newer softnet wrote it?)")
    return version


# A search campaign with method.latency_fractions measures, after each search,
# one trial per (PDR goal, fraction) at fraction x the goal's lower bound. It is
# stored as a trial of that search (load_index after the search's own trials)
# and marked by this key in its result: {"goal", "loss_ratio", "goal_status",
# "fraction", "of_pps"} (softnet.results.readers.LatencyAt reads it). A
# search's replay and its trajectory leave it out.
LATENCY_AT = "latency_at"
