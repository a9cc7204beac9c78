"""Summaries of stored searches: per cell and goal, over the repeated searches.

A goal's verdict over R repeats:
- "unstable" when a search said so, or when the conditional throughputs of R >= 3
  searches vary with a coefficient of variation above UNSTABLE_CV: the SUT
  cannot be pinned down, and no value is given;
- otherwise the status all searches agree on ("found", "min_load_fails", ...)
  or "mixed" when they disagree.

Latency under load (method.latency_fractions): per cell, goal and fraction of
the goal's lower bound, the one-way latency percentiles of the trials taken
after each repeat, as the median over the valid repeats with their min-max
spread; a trial without latency (the synthetic SUT's) gives none, never a
made-up number.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from softnet.analysis.campaigns import cell_label
from softnet.analysis.mlr_spec import SpecGoal, SpecResult, goal_result, stored_trial
from softnet.results import readers
from softnet.results.readers import StoredResult, StoredTrial
from softnet.results.search import SearchGoalRow
from softnet.results.store import Store

UNSTABLE_CV = 0.05


@dataclass(frozen=True)
class LossAtOrBelow:
    """A goal's trials at or below their search's lower bound, counting all
    their loss: how many lost more than the goal allows. With host-stall
    loss set apart (the search's default reading) those trials still met the
    goal; a tester counting all loss (RFC 2544) would put the bound lower."""

    trials: int
    over_goal: int  # counting all their loss
    over_goal_as_read: int  # counting the loss the search counts (host-stall loss apart when it sets it apart)
    max_loss_ratio: float | None  # the largest all-loss ratio among them
    host_stall_loss: str  # how the search read loss: "set_apart" or "count"


@dataclass
class SearchSummary:
    campaign_id: str
    cell_id: int
    label: str
    goal: str
    loss_ratio: float
    verdict: str
    value_pps: float | None  # mean of the repeats' values (conditional throughputs) when the verdict is "found"
    cv: float | None  # of the repeats' conditional throughputs (lower bounds in rows stored before them)
    repeats: list[SearchGoalRow] = field(default_factory=list)
    trials: list[list[StoredTrial]] = field(default_factory=list, repr=False)  # per repeat, only with_trials
    latency: list["LatencyAtFraction"] = field(default_factory=list)  # at fractions of this goal's lower bound
    at_or_below: LossAtOrBelow | None = None
    # With host-stall loss set apart: per repeat, RFC 9971's goal result from the same trials counting all
    # their loss (what a tester counting all loss reads from them); None when the search counted it all.
    all_loss: list[SpecResult | None] | None = None

    @property
    def all_loss_throughput_pps(self) -> float | None:
        """Mean conditional throughput of the repeats read counting all loss."""
        got = [r.conditional_throughput_pps for r in self.all_loss or [] if r and r.conditional_throughput_pps]
        return float(np.mean(got)) if got else None

    def to_dict(self) -> dict:
        return {"campaign_id": self.campaign_id, "cell_id": self.cell_id, "label": self.label, "goal": self.goal,
                "loss_ratio": self.loss_ratio, "verdict": self.verdict, "value_pps": self.value_pps, "cv": self.cv,
                "repeats": [r.model_dump() for r in self.repeats], "latency": [x.to_dict() for x in self.latency],
                "at_or_below_lower_bound": None if self.at_or_below is None else asdict(self.at_or_below),
                "all_loss": None if self.all_loss is None else [r and r.to_dict() for r in self.all_loss],
                "definition": self.definition()}

    def definition(self) -> dict | None:
        """What the numbers are: RFC 9971's goal result, with the goal's
        attributes, the engine and how loss was counted (None: a search
        stored before softnet reported them)."""
        r = self.repeats[0] if self.repeats else None
        if r is None or r.exceed_ratio is None:
            return None
        return {"standard": "RFC 9971 (MLRsearch)", "engine": r.engine, "goal_loss_ratio": r.loss_ratio,
                "goal_exceed_ratio": r.exceed_ratio, "goal_final_trial_duration_s": r.final_trial_duration_s,
                "goal_duration_sum_s": r.duration_sum_s,
                "loss_counted": "all" if self.all_loss is None else "host-stall loss set apart"}


def loss_at_or_below(rows: list[SearchGoalRow], trials: dict[tuple[int, int], list[StoredTrial]],
                     host_stall_loss: str) -> LossAtOrBelow | None:
    """Over a goal's repeats: the trials at loads up to each one's lower
    bound, and those whose whole loss (lost / sent) exceeds the goal's."""
    sel = [t.result for r in rows if r.lower_bound_pps is not None
           for t in trials.get((r.cell_id, r.run_index), [])
           if t.result.intended_rate_pps <= r.lower_bound_pps * (1 + 1e-9) and t.result.sent_pkts]
    if not sel:
        return None
    goal = rows[0].loss_ratio
    ratios = [(t.lost_pkts or 0) / t.sent_pkts for t in sel]
    own = [((t.sut_lost_pkts if host_stall_loss == "set_apart" and t.sut_lost_pkts is not None else t.lost_pkts)
            or 0) / t.sent_pkts for t in sel]
    return LossAtOrBelow(len(sel), sum(x > goal for x in ratios), sum(x > goal for x in own), max(ratios),
                         host_stall_loss)


def all_loss_results(rows: list[SearchGoalRow], trials: dict[tuple[int, int], list[StoredTrial]]
                     ) -> list[SpecResult | None]:
    """Per repeat, RFC 9971's goal result over its trials with every lost packet counted."""
    out = []
    for r in rows:
        if r.exceed_ratio is None or r.duration_sum_s is None or r.final_trial_duration_s is None:
            out.append(None)  # stored before the goal's attributes were
            continue
        goal = SpecGoal(r.loss_ratio, r.exceed_ratio, r.final_trial_duration_s, r.duration_sum_s)
        out.append(goal_result(goal, [
            stored_trial(t.result.intended_rate_pps, t.result.duration_s, int(t.result.sent_pkts or 0),
                         int(t.result.received_pkts or 0), t.result.flags)
            for t in trials.get((r.cell_id, r.run_index), [])]))
    return out


def summarize_searches(store: Store, campaign_id: str, with_trials: bool = False) -> list[SearchSummary]:
    """``with_trials``: also load every repeat's trial results (the report's plots)."""
    rows = readers.search_goals(store, campaign_id)
    cells = {c.cell_id: c for c in readers.cells(store, campaign_id)}
    latency = search_latency(store, campaign_id)
    by_repeat = readers.search_trials(store, campaign_id)
    out = []
    for key in dict.fromkeys((r.cell_id, r.goal) for r in rows):
        sel = [r for r in rows if (r.cell_id, r.goal) == key]
        cell = cells[key[0]]
        # the spread of RFC 9971's conditional throughput (of the lower bounds in rows stored before it)
        spread = [r.conditional_throughput_pps for r in sel if r.conditional_throughput_pps is not None] \
            or [r.lower_bound_pps for r in sel if r.lower_bound_pps is not None]
        values = [r.value_pps for r in sel if r.value_pps is not None]
        cv = float(np.std(spread, ddof=1) / np.mean(spread)) if len(spread) >= 2 else None
        statuses = {r.status for r in sel}
        if "unstable" in statuses or (len(sel) >= 3 and cv is not None and cv > UNSTABLE_CV):
            verdict = "unstable"
        else:
            verdict = statuses.pop() if len(statuses) == 1 else "mixed"
        trials = [[t for t in readers.stored_trials(store, campaign_id, key[0], r.run_index) if not t.is_latency_trial]
                  for r in sel] if with_trials else []
        mode = cell.settings.method.host_stall_loss
        out.append(SearchSummary(campaign_id, key[0], cell_label(cell), key[1],
                                 sel[0].loss_ratio, verdict,
                                 float(np.mean(values)) if verdict == "found" and values else None,
                                 cv, list(sel), trials,
                                 [x for x in latency if (x.cell_id, x.goal) == key],
                                 loss_at_or_below(sel, by_repeat, mode),
                                 all_loss_results(sel, by_repeat) if mode == "set_apart" else None))
    return out


LATENCY_PERCENTILES = ("latency_p50_ns", "latency_p90_ns", "latency_p99_ns", "latency_p99_9_ns")


RFC8219_KEYS = ("typical_ns", "worst_case_ns", "pdv_ns", "ipdv_median_ns", "ipdv_max_ns")


def rfc8219_figures(r: StoredResult) -> dict[str, float | None]:
    """A trial's RFC 8219 latency figures by RFC8219_KEYS (None: not measured)."""
    f = r.rfc8219
    return {k: getattr(f, k) if f is not None else None for k in RFC8219_KEYS}


def percentiles(r: StoredResult) -> dict[str, float | None]:
    """A trial's latency percentiles by the names LATENCY_PERCENTILES gives them."""
    return dict(zip(LATENCY_PERCENTILES, (r.latency_p50_ns, r.latency_p90_ns, r.latency_p99_ns, r.latency_p99_9_ns)))


@dataclass(frozen=True)
class Spread:
    median: float
    min: float
    max: float


@dataclass(frozen=True)
class LatencyRun:
    """One repeat's latency trial at a fraction of the goal's lower bound."""

    run_index: int
    load_pps: float
    of_pps: float
    goal_status: str | None
    loss_ratio: float | None
    valid: bool
    flags: list[str]
    latency_p50_ns: float | None
    latency_p90_ns: float | None
    latency_p99_ns: float | None
    latency_p99_9_ns: float | None


@dataclass
class LatencyAtFraction:
    """Latency under load at one fraction of a goal's lower bound, over the repeated searches."""
    campaign_id: str
    cell_id: int
    label: str
    goal: str
    goal_loss_ratio: float
    fraction: float
    load_pps: float  # median over repeats of fraction x that repeat's lower bound
    of_pps: float  # median of the lower bounds
    repeats: int
    valid: int  # trials not flagged (only these count below)
    measured: int  # valid trials that carry latency percentiles
    # per percentile name (LATENCY_PERCENTILES): the spread over the valid trials that have it (None: no such trial)
    latency: dict[str, Spread | None]
    loss_ratio_median: float | None
    loss_ratio_max: float | None
    flags: dict[str, int]  # flag -> trials (the invalid ones say why they do not count)
    note: str
    runs: list[LatencyRun] = field(default_factory=list)  # per repeat: load, loss, valid, flags, percentiles
    # RFC 8219 7.2-7.3 by RFC8219_KEYS: the median over the valid repeats is what the RFC reports (with min, max)
    rfc8219: dict[str, Spread | None] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _spread(values: list[float]) -> Spread | None:
    if not values:
        return None
    return Spread(float(np.median(values)), float(min(values)), float(max(values)))


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v))


def search_latency(store: Store, campaign_id: str) -> list[LatencyAtFraction]:
    """Per cell, goal and fraction: the latency trials measured after the searches."""
    cells = {c.cell_id: c for c in readers.cells(store, campaign_id)}
    groups: dict[tuple, list[tuple[int, StoredResult]]] = {}
    for t in sorted(readers.stored_trials(store, campaign_id), key=lambda t: (t.cell_id, t.run_index, t.load_index)):
        at = t.result.latency_at
        if at is None:
            continue
        groups.setdefault((t.cell_id, at.loss_ratio, at.goal, at.fraction), []).append((t.run_index, t.result))
    out = []
    for (cell_id, loss_ratio, goal, fraction), trials in sorted(groups.items()):
        valid = [r for _, r in trials if r.valid]
        measured = [r for r in valid if _finite(r.latency_p50_ns)]
        flags: dict[str, int] = {}
        for _, r in trials:
            for f in r.flags:
                flags[f] = flags.get(f, 0) + 1
        losses = [r.loss_ratio for r in valid if _finite(r.loss_ratio)]
        if not valid:
            note = "no valid trial: see the flags"
        elif not measured:
            note = ("no latency (the synthetic SUT models packet counts only)"
                    if all(r.sut == "synthetic" for r in valid) else "no valid trial carried a delay")
        else:
            note = ""
        cell = cells[cell_id]
        per_trial = [percentiles(r) for r in valid]
        out.append(LatencyAtFraction(
            campaign_id, cell_id, cell_label(cell), goal, loss_ratio, fraction,
            float(np.median([r.intended_rate_pps for _, r in trials])),
            float(np.median([r.latency_at.of_pps for _, r in trials])), len(trials), len(valid), len(measured),
            {k: _spread([p[k] for p in per_trial if _finite(p[k])]) for k in LATENCY_PERCENTILES},
            float(np.median(losses)) if losses else None, float(max(losses)) if losses else None, flags, note,
            [LatencyRun(run, r.intended_rate_pps, r.latency_at.of_pps, r.latency_at.goal_status, r.loss_ratio,
                        bool(r.valid), list(r.flags), *percentiles(r).values()) for run, r in trials],
            {k: _spread([f[k] for f in map(rfc8219_figures, valid) if _finite(f[k])]) for k in RFC8219_KEYS}))
    return out
