"""Run the searches of a campaign (method kind "search"), stored and resumable.

Each (cell, repeat) is one softnet.search over the cell's testbed or synthetic
SUT. Every trial is stored as it completes (trials table, load_index = its
sequence number in the search); the per-goal result when the search ends
(searches table). The search is a deterministic function of its trials, so a
search interrupted by a kill is resumed by replaying its stored trials: the
search asks for the same loads, gets the stored answers, and measures for real
from the first trial that was not stored. Stored trials that no longer match
what the search asks for are discarded.
"""
from __future__ import annotations

from typing import Callable

from softnet.campaign.spec import CampaignSpec, parse_goals
from softnet.search import Goal, Measurement, SearchConfig, search
from softnet.results.store import Store


def goals_of(spec: CampaignSpec) -> list[Goal]:
    m = spec.method
    return [Goal(loss_ratio=x, relative_width=m.width, final_trial_duration=m.duration_s,
                 initial_trial_duration=m.initial_duration_s, confidence=m.confidence)
            for x in parse_goals(m.goals)]


def as_measurement(result: dict) -> Measurement:
    return Measurement(result["intended_rate_pps"], result["duration_s"], int(result["sent_pkts"] or 0),
                       int(result["received_pkts"] or 0), tuple(result.get("flags") or ()), result)


class ReplayThenMeasure:
    """The measurer a (resumed) search calls: stored trials first, then live."""

    def __init__(self, store: Store, campaign_id: str, cell_id: int, run_index: int, knobs: dict,
                 measurer, on_trial: Callable[[dict, bool], None]):
        self.store, self.cid, self.cell_id, self.run_index, self.knobs = store, campaign_id, cell_id, run_index, knobs
        self.measurer, self.on_trial = measurer, on_trial
        self.stored = store.trial_results(campaign_id, cell_id, run_index)
        self.seq = 0
        self.replayed = 0

    def __call__(self, load_pps: float, duration_s: float) -> Measurement:
        seq = self.seq
        self.seq += 1
        if seq < len(self.stored):
            r = self.stored[seq]
            if abs(r["intended_rate_pps"] - load_pps) < 0.5 and abs(r["duration_s"] - duration_s) < 1e-9:
                self.replayed += 1
                return as_measurement(r)
            self.store.delete_trials_from(self.cid, self.cell_id, self.run_index, seq)
            self.stored = self.stored[:seq]
        result = self.measurer.measure(load_pps, seq, self.run_index, duration_s)
        self.store.add_trial(self.cid, self.cell_id, seq, self.run_index, self.knobs, result)
        self.on_trial(result, False)
        return as_measurement(result)


def run_search(store: Store, campaign_id: str, cell_id: int, knobs: dict, cell: CampaignSpec, measurer,
               run_index: int, on_trial: Callable[[dict, bool], None]) -> dict:
    """One (cell, repeat) search, replaying what is stored; its result is stored too."""
    m = cell.method
    lo, hi = cell.search_range_pps()
    replay = ReplayThenMeasure(store, campaign_id, cell_id, run_index, knobs, measurer, on_trial)
    config = SearchConfig(goals=goals_of(cell), min_load_pps=lo, max_load_pps=hi, relative_width=m.width,
                          max_trials=m.max_trials, max_trial_seconds=m.max_trial_seconds)
    result = search(replay, config).to_dict()
    result["replayed_trials"] = replay.replayed
    store.add_search(campaign_id, cell_id, run_index, result)
    return result
