"""Run a paired comparison (method kind "compare"), stored and resumable.

Round r measures every variant once at each load (the fixed loads, then the
overload), the variants one right after the other at each load, forward on
even rounds and reversed on odd ones (A B, B A, ...: ABBA), so the two
trials of a pair are seconds apart. Each trial gets a testbed of its own,
built for it and torn down after it (0.2 s here): every variant starts from
the host as it was, and no variant's changes outlive its trial. With the
search metric, each variant then runs one NDR/PDR search on its own testbed
(stored in cell n_variants + v).

With pairing "interleaved" each load of a round is one trial per variant,
all in the same seconds: their testbeds are up at once and their bursts take
turns (softnet.campaign.interleave), the slots rotating with the rounds as
the order does; capacity is then the share forwarded of the rate inside the
bursts.

Rounds go where the decision is still open: after a look, a load whose
metrics the experiment decides on all have a verdict (capacity called
slower at the overload, say) is measured no more, so the budget's
trial-seconds go to the metrics still undecided. Its verdict stands: later
looks read the same pairs. A load that carries no metric it decides on
(loss and latency alone) stays in every round.

Trials are stored as campaign trials: cell = variant, load index, run index =
round. A round is the unit of pairing, so a round a kill cut short is
measured again whole (its stored half is discarded): a pair is never made
of trials minutes apart, never lost and never counted twice. The decision
is a function of the stored complete rounds, so a resumed comparison looks
where an uninterrupted one would have, and leaves out the loads it would
have.
"""
from __future__ import annotations

import math
import time
from contextlib import ExitStack
from typing import Callable

from pydantic import BaseModel

from softnet.analysis.comparisons import ComparedTrial, paired_summary, stop_rule
from softnet.analysis.paired import round_order
from softnet.campaign.interleave import Turns, measure_together
from softnet.campaign.live import LiveWriter
from softnet.campaign.measurers import measurer_for
from softnet.campaign.search_runner import run_search
from softnet.campaign.spec import CampaignSpec
from softnet.results.comparison import ComparisonSummary
from softnet.results.search import SearchGoalRow
from softnet.results.trial import Number
from softnet.results.store import Store
from softnet.units import format_rate

BUDGET = "budget_spent"
DECIDED = "decided"


class _TrialRow(BaseModel):
    """Where a stored trial sits in the comparison (store.trials' row)."""

    load_index: int
    run_index: int


class _GoalName(BaseModel):
    name: str


class _FoundGoal(BaseModel):
    goal: _GoalName
    conditional_throughput_pps: Number | None = None


class _Found(BaseModel):
    """What a variant's search found (run_search's result), as the progress line tells it."""

    goals: list[_FoundGoal]


def plan_rounds(spec: CampaignSpec) -> int:
    """The most rounds the budget allows (trial-seconds: measurement windows;
    a search counts as its own budget, method.max_trial_seconds)."""
    c = spec.compare
    per_variant_s = len(spec.compare_loads_pps()) * spec.method.duration_s
    if "search" in c.metrics:
        per_variant_s += spec.method.max_trial_seconds
    per_round_s = len(c.variants) * per_variant_s
    n = max(2, math.floor(c.budget_s / per_round_s + 1e-9))
    return min(n, c.max_rounds) if c.max_rounds else n


def search_cell(n_variants: int, v: int) -> int:
    """The cell a variant's searches are stored in (its trials' own cell is v)."""
    return n_variants + v


def stored_searches(store: Store, cid: str, n_variants: int) -> dict[tuple[int, int], dict[str, float | None]]:
    """(variant, round) -> {goal: conditional throughput pps} of the stored complete searches."""
    out: dict[tuple[int, int], dict[str, float | None]] = {}
    for row in (SearchGoalRow.model_validate(r, from_attributes=True) for r in store.searches(cid)):
        v = row.cell_id - n_variants
        if 0 <= v < n_variants:
            out.setdefault((v, row.run_index), {})[row.goal] = row.throughput_pps
    return out


def open_loads(s: ComparisonSummary, loads: list[tuple[str, float]], decide_on: list[str],
               now_open: list[int]) -> list[int]:
    """The loads still to measure after a look: those with a metric the
    experiment decides on that some candidate has no verdict for, and those
    that carry none it decides on."""
    undecided = {(d.kind, d.load_pps) for _, d in s.all_differences()
                 if d.kind in decide_on and d.verdict == "undecided"}

    def kinds_at(li: int) -> set[str]:
        """The deciding metrics measured at load li."""
        return set(decide_on) & ({"capacity"} if loads[li][0] == "overload" else {"cpu", "loss", "latency"})

    return [li for li in now_open if not kinds_at(li) or any(
        (k, None if k == "capacity" else loads[li][1]) in undecided for k in kinds_at(li))]


def stored_rounds(store: Store, cid: str, n_variants: int, n_loads: int, searching: bool = False,
                  look: Callable[[dict, int, list[int]], list[int]] | None = None) -> tuple[dict, int, list[int]]:
    """The stored trials of complete rounds, how many rounds are complete,
    and the loads still measured; what the first incomplete round stored (a
    kill cut it short) is deleted, so it is measured again whole. ``look``
    (trials, rounds, loads open) -> loads open after the look at that many
    rounds, the same as the running comparison's: a round is complete with
    the loads open then."""
    trials: dict[tuple[int, int, int], dict] = {}
    for v in range(n_variants):  # rows and results come in the same (load, run) order
        for row, result in zip(store.trials(cid, v), store.trial_results(cid, v)):
            at = _TrialRow.model_validate(row, from_attributes=True)
            trials[(v, at.load_index, at.run_index)] = result
    searched = stored_searches(store, cid, n_variants) if searching else {}
    complete, measured = 0, list(range(n_loads))
    while measured and all((v, li, complete) in trials for v in range(n_variants) for li in measured) and (
            not searching or all((v, complete) in searched for v in range(n_variants))):
        complete += 1
        if look is not None:
            measured = look({k: t for k, t in trials.items() if k[2] < complete}, complete, measured)
    for v in range(n_variants):
        store.delete_trials_from_round(cid, v, complete)
        if searching:
            store.delete_trials_from_round(cid, search_cell(n_variants, v), complete)
            store.delete_searches_from_round(cid, search_cell(n_variants, v), complete)
    return {k: t for k, t in trials.items() if k[2] < complete}, complete, measured


def run_compare(spec: CampaignSpec, store: Store, cid: str, on_event: Callable[[str, int, int, str], None],
                live: LiveWriter | None = None) -> ComparisonSummary:
    """Measure rounds until the stop rule decides or the budget is spent; the
    result is stored in ``comparisons`` (a finished comparison is not run again)."""
    c = spec.compare
    variants = spec.variants()
    names = [n for n, _, _ in variants]
    labels = {n: ", ".join(f"{k}={v}" for k, v in knobs.items()) for n, knobs, _ in variants}
    loads = spec.compare_loads_pps()
    max_rounds = plan_rounds(spec)
    rule, look_conf = stop_rule(max_rounds, c.min_rounds, c.decide_on, c.confidence)

    searching = "search" in c.metrics
    nv = len(variants)
    turns = Turns(nv, c.interleave_ms / 1e3) if c.pairing == "interleaved" else None

    def summary(results: dict, rounds: int, reason: str = "") -> ComparisonSummary:
        s = paired_summary(names, labels, results, loads, c.metrics, rounds, look_conf, c.margin, c.loss_margin,
                           reason, stored_searches(store, cid, nv) if searching else None, c.decide_on)
        s.pairing = c.pairing
        return s

    done = store.comparison(cid)
    if done is not None:
        return done
    for v, (_, knobs, cell) in enumerate(variants):
        store.register_cell(cid, v, knobs, cell.model_dump())
        if searching:
            store.register_cell(cid, search_cell(nv, v), knobs, cell.model_dump())
    def look(results: dict, rounds: int, measured: list[int]) -> list[int]:
        """The loads still measured after a look at ``rounds`` (unchanged between looks)."""
        if not rule.is_look(rounds):
            return measured
        return open_loads(summary(results, rounds), loads, list(c.decide_on), measured)

    results, rounds, measured = stored_rounds(store, cid, nv, len(loads), searching, look)
    total = max_rounds * len(variants) * len(loads)
    on_event("plan", rounds * len(variants) * len(loads), total,
             f"{cid}: {len(variants)} variants x {len(loads)} load(s), at most {max_rounds} rounds "
             f"({c.budget_s:g} trial-s); looks after rounds {', '.join(map(str, rule.looks))} at confidence "
             f"{look_conf:.4f} each" + (f"; {rounds} round(s) already stored" if rounds else ""))
    reason = BUDGET
    count = rounds * len(variants) * len(loads)
    while True:
        if rounds and rule.is_look(rounds):
            s = summary(results, rounds)
            on_event("look", count, total, look_text(s))
            if rule.decided([d for _, d in s.all_differences()]):
                reason = DECIDED
                break
            measured = open_loads(s, loads, list(c.decide_on), measured)
        if rounds >= max_rounds:
            break
        order = round_order(nv, rounds)

        def keep(v: int, li: int, load: float, result: dict, how: str = "") -> None:
            """Store a measured trial of this round and say so."""
            nonlocal count
            store.add_trial(cid, v, li, rounds, variants[v][1], result)
            results[(v, li, rounds)] = result
            count += 1
            on_event("trial", count, total, f"round {rounds + 1} {names[v]} at {format_rate(load)}{how}: "
                     f"forwarded {forwarded_text(result)}")

        for li, (_, load) in enumerate(loads):
            if li not in measured:
                continue
            if turns is not None:  # the variants in the same seconds, in turns
                on_event("start", count, total, f"round {rounds + 1}/{max_rounds}: "
                         f"{', '.join(names[v] for v in order)} in turns at {format_rate(load)}")
                with ExitStack() as stack:
                    ms = [stack.enter_context(measurer_for(variants[v][2], v)) for v in order]
                    together = measure_together(turns, ms, load, li, rounds)
                for v, result in zip(order, together):  # slot k: order[k], so each takes every slot in turn
                    keep(v, li, load, result, " (in turns)")
                continue
            for v in order:  # A and B back to back at each load: the pair's two trials seconds apart
                name, knobs, cell = variants[v]
                with measurer_for(cell, v) as m:
                    on_event("start", count, total, f"round {rounds + 1}/{max_rounds}: {name} at "
                             f"{format_rate(load)}")
                    result = m.measure(load, li, rounds, live=live and live.trial(v, li, rounds, knobs, load, cell))
                keep(v, li, load, result)
        for v in order if searching else []:
            name, knobs, cell = variants[v]
            with measurer_for(cell, v) as m:
                on_event("start", count, total, f"round {rounds + 1}/{max_rounds}: {name}, NDR/PDR search")
                found = run_search(store, cid, search_cell(nv, v), knobs, cell, m, rounds,
                                   lambda result, _replayed: None, live)
            on_event("trial", count, total, f"round {rounds + 1} {name}: " + "; ".join(
                f"{g.goal.name} {format_rate(g.conditional_throughput_pps or 0)}"
                for g in _Found.model_validate(found).goals))
        rounds += 1
        store.set_comparison(cid, summary(results, rounds, "unfinished"), False, time.time())
    final = summary(results, rounds, reason)
    store.set_comparison(cid, final, True, time.time())
    return final


def look_text(s: ComparisonSummary) -> str:
    parts = []
    for cand, d in s.all_differences():
        if d.estimate is None:
            continue
        est = f"{100 * d.estimate:+.1f}%" if d.scale == "ratio" else f"{d.estimate:+.1e}"
        parts.append(f"{cand} {d.metric} {est} {d.verdict}")
    return f"after {s.rounds} rounds: " + "; ".join(parts)


def forwarded_text(result: dict) -> str:
    t = ComparedTrial.of(result)
    span = t.send_span_s or 0
    return format_rate(t.received_pkts / span) if span else "-"
