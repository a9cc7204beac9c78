"""A stored search goal: one row per (campaign, cell, repeat, goal), validated
on write and on read. The whole goal (bounds' evidence, knee fit) is kept in
the row's result_json with the schema version it was written with."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from softnet.errors import InputError

SEARCH_SCHEMA_VERSION = 1
Number = int | float


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

    @classmethod
    def from_goal(cls, campaign_id: str, cell_id: int, run_index: int, search: dict, g: dict) -> "SearchGoalRow":
        """One goal of softnet.search's SearchResult.to_dict()."""
        lo, b = g.get("lower") or {}, g["goal"]
        ci = lo.get("loss_ratio_ci95") or (None, None)
        return cls(campaign_id=campaign_id, cell_id=cell_id, run_index=run_index, goal=b["name"],
                   loss_ratio=b["loss_ratio"], status=g["status"], value_pps=g["value_pps"],
                   lower_bound_pps=g["lower_bound_pps"], upper_bound_pps=g["upper_bound_pps"],
                   lower_confidence=lo.get("confidence"), upper_confidence=(g.get("upper") or {}).get("confidence"),
                   lower_loss_ratio=lo.get("loss_ratio"), lower_loss_ci95_low=ci[0], lower_loss_ci95_high=ci[1],
                   diagnosis=g["diagnosis"], trial_count=search["trial_count"], trial_seconds=search["trial_seconds"])


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
