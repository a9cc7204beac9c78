"""Summaries of stored searches: per cell and goal, over the repeated searches.

A goal's verdict over R repeats:
- "unstable" when a search said so, or when the lower bounds of R >= 3
  searches vary with a coefficient of variation above UNSTABLE_CV: the SUT
  cannot be pinned down, and no value is given;
- otherwise the status all searches agree on ("found", "min_load_fails", ...)
  or "mixed" when they disagree.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from softnet.analysis.campaigns import cell_label
from softnet.results.store import Store

UNSTABLE_CV = 0.05


@dataclass
class SearchSummary:
    campaign_id: str
    cell_id: int
    label: str
    goal: str
    loss_ratio: float
    verdict: str
    value_pps: float | None  # mean of the repeats' values when the verdict is "found"
    cv: float | None  # of the repeats' lower bounds
    repeats: list[dict] = field(default_factory=list)
    trials: list[list[dict]] = field(default_factory=list, repr=False)  # per repeat, only with_trials

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("trials")
        return d


def summarize_searches(store: Store, campaign_id: str, with_trials: bool = False) -> list[SearchSummary]:
    """``with_trials``: also load every repeat's trial results (the report's plots)."""
    rows = store.searches(campaign_id)
    cells = {c["cell_id"]: c for c in store.cells(campaign_id)}
    out = []
    for key in dict.fromkeys((r["cell_id"], r["goal"]) for r in rows):
        sel = [r for r in rows if (r["cell_id"], r["goal"]) == key]
        cell = cells[key[0]]
        lowers = [r["lower_bound_pps"] for r in sel if r["lower_bound_pps"] is not None]
        values = [r["value_pps"] for r in sel if r["value_pps"] is not None]
        cv = float(np.std(lowers, ddof=1) / np.mean(lowers)) if len(lowers) >= 2 else None
        statuses = {r["status"] for r in sel}
        if "unstable" in statuses or (len(sel) >= 3 and cv is not None and cv > UNSTABLE_CV):
            verdict = "unstable"
        else:
            verdict = statuses.pop() if len(statuses) == 1 else "mixed"
        trials = [store.trial_results(campaign_id, key[0], r["run_index"]) for r in sel] if with_trials else []
        out.append(SearchSummary(campaign_id, key[0], cell_label(cell["knobs"], cell["spec"]), key[1],
                                 sel[0]["loss_ratio"], verdict,
                                 float(np.mean(values)) if verdict == "found" and values else None,
                                 cv, [dict(r) for r in sel], trials))
    return out
