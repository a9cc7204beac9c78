"""Run the searches of a campaign (method kind "search"), stored and resumable.

Each (cell, repeat) is one softnet.search over the cell's testbed or synthetic
SUT. Every trial is stored as it completes (trials table, load_index = its
sequence number in the search); the per-goal result when the search ends
(searches table). The search is a deterministic function of its trials, so a
search interrupted by a kill is resumed by replaying its stored trials: the
search asks for the same loads, gets the stored answers, and measures for real
from the first trial that was not stored. Stored trials that no longer match
what the search asks for are discarded.

With method.latency_fractions, each complete search is followed by latency
trials: one per (goal, fraction) at fraction x the goal's lower bound, for the
PDR goals (loss ratio > 0; the NDR when there is none) that have a lower
bound. Their plan is a function of the stored search rows, so a resumed
campaign measures only the latency trials not yet stored; they are stored
after the search's own trials (load_index = trial_count + k) and marked with
``latency_at`` (softnet.results.search.LATENCY_AT), which keeps them out of
the replay.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from softnet.analysis.campaigns import host_stall_summary
from softnet.analysis.loss_time import OVERLOAD_SPREAD, counted_received
from softnet.campaign.live import LiveWriter
from softnet.campaign.spec import CampaignSpec, parse_goals
from softnet.search import Goal, Measurement, SearchConfig
from softnet.search.engines import run_engine
from softnet.results import readers
from softnet.results.readers import StoredResult
from softnet.results.search import LATENCY_AT, SearchGoalRow
from softnet.results.store import Store


def goals_of(spec: CampaignSpec) -> list[Goal]:
    m = spec.method
    return [Goal(loss_ratio=parse_goals([e.name])[0], exceed_ratio=e.exceed_ratio, relative_width=e.width,
                 final_trial_duration=e.duration_s, initial_trial_duration=e.initial_duration_s,
                 duration_sum=e.duration_sum_s, confidence=m.confidence)
            for e in m.goal_entries()]


def as_measurement(result: dict, host_stall_loss: str = "set_apart") -> Measurement:
    """A trial result (a measurer's, or stored) as the search sees it; it stays the measurement's detail."""
    r = StoredResult.parse(result, "trial result")
    sent, a = int(r.sent_pkts or 0), r.loss_attribution
    return Measurement(r.intended_rate_pps, r.duration_s, sent,
                       counted_received(result, host_stall_loss), tuple(r.flags), result,
                       lost_pkts_all=max(0, sent - int(r.received_pkts or 0)) if a else None,
                       host_lost_pkts=a.explained_pkts + a.unseen_stall_pkts if a else 0,
                       sut_overloaded=a is not None and a.rest_cause == "overload"
                       and (a.loss_spread or 0.0) >= OVERLOAD_SPREAD, achieved_load_pps=r.achieved_rate_pps)


class ReplayThenMeasure:
    """The measurer a (resumed) search calls: stored trials first, then live."""

    def __init__(self, store: Store, campaign_id: str, cell_id: int, run_index: int, knobs: dict,
                 measurer, on_trial: Callable[[StoredResult, bool], None], host_stall_loss: str = "set_apart",
                 live: LiveWriter | None = None):
        self.host_stall_loss = host_stall_loss
        self.store, self.cid, self.cell_id, self.run_index, self.knobs = store, campaign_id, cell_id, run_index, knobs
        self.measurer, self.on_trial, self.live = measurer, on_trial, live
        # the search's own trials, in order: latency trials come after a complete
        # search, never among its evidence (any here are of an unfinished one: stale)
        stored = readers.stored_trials(store, campaign_id, cell_id, run_index)
        self.stored = [t for t in stored if not t.is_latency_trial]
        if len(self.stored) < len(stored):
            store.delete_trials_from(campaign_id, cell_id, run_index, len(self.stored))
        self.seq = 0
        self.replayed = 0

    def __call__(self, load_pps: float, duration_s: float) -> Measurement:
        seq = self.seq
        self.seq += 1
        if seq < len(self.stored):
            t = self.stored[seq]
            if abs(t.result.intended_rate_pps - load_pps) < 0.5 and abs(t.result.duration_s - duration_s) < 1e-9:
                self.replayed += 1
                return as_measurement(t.document, self.host_stall_loss)
            self.store.delete_trials_from(self.cid, self.cell_id, self.run_index, seq)
            self.stored = self.stored[:seq]
        result = self.measurer.measure(load_pps, seq, self.run_index, duration_s, live=self.live and self.live.trial(
            self.cell_id, seq, self.run_index, self.knobs, load_pps, self.measurer.spec, duration_s))
        self.store.add_trial(self.cid, self.cell_id, seq, self.run_index, self.knobs, result)
        self.on_trial(StoredResult.parse(result, "trial result"), False)
        return as_measurement(result, self.host_stall_loss)


def host_stall_note(trials: list[StoredResult], host_stall_loss: str) -> str | None:
    """What host stalls did in a search's trials, for its diagnosis."""
    h = host_stall_summary(trials)
    if not h.explained_pkts:
        return None
    how = "set apart" if host_stall_loss == "set_apart" else "counted as the SUT's (host_stall_loss = count)"
    unseen = sum(t.loss_attribution.unseen_stall_pkts for t in trials if t.loss_attribution)
    note = (f"host stalls explained {h.explained_pkts:,} of {h.lost_pkts:,} lost packets "
            f"({100 * h.explained_share:.0f}%; {h.trials_with_host_interference} of {len(trials)} trials "
            f"flagged host_interference), {how}")
    if unseen:
        note += (f"; {unseen:,} more followed a queue left undrained by stalls shorter than the probe sees "
                 "(counted as the SUT's: a reason the bounds vary)")
    return note


def run_search(store: Store, campaign_id: str, cell_id: int, knobs: dict, cell: CampaignSpec, measurer,
               run_index: int, on_trial: Callable[[StoredResult, bool], None], live: LiveWriter | None = None) -> dict:
    """One (cell, repeat) search, replaying what is stored; its result is stored too."""
    m = cell.method
    lo, hi = cell.search_range_pps()
    replay = ReplayThenMeasure(store, campaign_id, cell_id, run_index, knobs, measurer, on_trial,
                               m.host_stall_loss, live)
    config = SearchConfig(goals=goals_of(cell), min_load_pps=lo, max_load_pps=hi, relative_width=m.width,
                          max_trials=m.max_trials, max_trial_seconds=m.max_trial_seconds)
    found = run_engine(m.engine, replay, config)
    stalls = host_stall_note([StoredResult.parse(t.detail, "trial result") for t in found.trials], m.host_stall_loss)
    if stalls:
        for g in found.goals:
            g.diagnosis += f"; {stalls}"
    result = {**found.to_dict(), "replayed_trials": replay.replayed}
    store.add_search(campaign_id, cell_id, run_index, result)
    return result


@dataclass(frozen=True)
class LatencyTrial:
    """One planned latency-under-load trial after a search."""
    load_index: int  # after the search's trials: trial_count + its place in the plan
    goal: str
    loss_ratio: float
    goal_status: str
    fraction: float
    of_pps: float  # the goal's lower bound

    @property
    def load_pps(self) -> float:
        return self.fraction * self.of_pps

    def marker(self) -> dict:
        return {"goal": self.goal, "loss_ratio": self.loss_ratio, "goal_status": self.goal_status,
                "fraction": self.fraction, "of_pps": self.of_pps}


def latency_plan(goal_rows: list[SearchGoalRow], fractions: list[float]) -> list[LatencyTrial]:
    """The latency trials after one search, from its stored goal rows
    (readers.search_goals): the PDR goals, or the NDR when no goal is a PDR,
    that have a lower bound; goals by loss ratio, then fractions ascending."""
    if not fractions or not goal_rows:
        return []
    rows = sorted(goal_rows, key=lambda r: (r.loss_ratio, r.goal))
    pdrs = [r for r in rows if r.loss_ratio > 0] or rows
    first = rows[0].trial_count
    plan = []
    for r in pdrs:
        if r.lower_bound_pps is None:
            continue
        for f in fractions:
            plan.append(LatencyTrial(first + len(plan), r.goal, r.loss_ratio, r.status, f, r.lower_bound_pps))
    return plan


def pending_latency(store: Store, campaign_id: str, cell_id: int, run_index: int,
                    fractions: list[float] | None) -> list[LatencyTrial]:
    """The planned latency trials of a complete search that are not stored yet."""
    if not fractions:
        return []
    rows = [r for r in readers.search_goals(store, campaign_id) if (r.cell_id, r.run_index) == (cell_id, run_index)]
    done = store.done_keys(campaign_id)
    return [t for t in latency_plan(rows, fractions) if (cell_id, t.load_index, run_index) not in done]


def run_latency_trial(store: Store, campaign_id: str, cell_id: int, knobs: dict, cell: CampaignSpec, measurer,
                      run_index: int, t: LatencyTrial, live: LiveWriter | None = None) -> StoredResult:
    """One latency trial through the search's measurer (the same testbed), stored as a trial of that search."""
    m = cell.method
    duration = m.latency_duration_s or m.duration_s
    result = measurer.measure(t.load_pps, t.load_index, run_index, duration, live=live and live.trial(
        cell_id, t.load_index, run_index, knobs, t.load_pps, cell, duration))
    result[LATENCY_AT] = t.marker()
    store.add_trial(campaign_id, cell_id, t.load_index, run_index, knobs, result)
    return StoredResult.parse(result, "trial result")
