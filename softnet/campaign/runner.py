"""Run a campaign: cells x loads x runs, stored as they complete, resumable.

Order inside a cell is loads outer, runs inner (K runs of one load, then the
next load), as the PASTRAMI method prescribes. A cell's testbed is built once
and reused for all its trials. Loads relative to a probe use the probe stored
for that cell, so a resumed campaign measures the same loads as before.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from softnet.campaign.live import LiveWriter
from softnet.campaign.measurers import measurer_for
from softnet.campaign.search_runner import pending_latency, run_latency_trial, run_search
from softnet.campaign.spec import CampaignSpec
from softnet.provenance import spec_hash
from softnet.results.search import GoalDocument, StoredSearch
from softnet.results.store import Store
from softnet.results.stored import StoredResult
from softnet.units import format_rate


@dataclass
class Event:
    kind: str  # "plan" | "probe" | "start" (a trial or search begins) | "trial" (one ended) | "search"
    done: int
    total: int
    message: str


def campaign_id(spec: CampaignSpec) -> str:
    # Only what the spec sets: a field a later softnet adds (at its default)
    # leaves the id, and so the resume of a stored campaign, unchanged.
    return f"{spec.name}-{spec_hash(spec.model_dump(exclude_defaults=True))[:8]}"


def run_campaign(spec: CampaignSpec, results_dir, on_event: Callable[[Event], None] = lambda e: None) -> str:
    """Any method's campaign; while it runs, its progress and the trial in
    progress go to its live file for viewers (softnet.campaign.live)."""
    cid = campaign_id(spec)
    kind = spec.method.kind
    with LiveWriter(Path(results_dir) / "raw" / cid, cid, kind) as live:
        def tell(e: Event) -> None:
            live.progress(e.kind, e.done, e.total)
            on_event(e)

        run = {"search": run_search_campaign, "latency": run_latency_campaign_in,
               "compare": run_compare_campaign, "soak": run_soak_campaign}.get(kind, run_sweep_campaign)
        return run(spec, results_dir, tell, live)


def run_sweep_campaign(spec: CampaignSpec, results_dir, on_event: Callable[[Event], None], live: LiveWriter) -> str:
    cid = campaign_id(spec)
    cells = spec.cells()
    with Store(results_dir) as store:
        recovered = _register(store, cid, spec, cells)
        done = store.done_keys(cid)
        plan = pending_cells(done, cells)
        total = len(done) + sum(len(t) for *_, t in plan)
        count = len(done)
        on_event(Event("plan", count, total, f"{cid}: {len(cells)} cell(s), {total} trials, {count} already stored"
                       + (f" ({recovered} recovered from raw files)" if recovered else "")))
        for cell_id, knobs, cell, todo in plan:
            count = measure_cell(store, cid, cell_id, knobs, cell, todo, count, total, on_event, live)
    return cid


def measure_cell(store: Store, cid: str, cell_id: int, knobs: dict, cell: CampaignSpec, todo: list[tuple[int, int]],
                 count: int, total: int, on_event: Callable[[Event], None], live: LiveWriter | None) -> int:
    """The cell's (load, run) keys in ``todo``, each stored as it ends (its
    probe first, where its loads need one); the count of trials stored."""
    with measurer_for(cell, cell_id) as m:
        probe = None
        if cell.needs_probe():
            probe = store.probe(cid, cell_id)
            if probe is None:
                probe, probe_result = m.probe_max()
                store.set_probe(cid, cell_id, probe, probe_result)
            on_event(Event("probe", count, total, f"cell {cell_id}: SUT maximum ~{format_rate(probe)}"))
        loads = cell.loads_pps(probe)
        for li, ri in todo:
            on_event(Event("start", count, total, f"cell {cell_id} load {li + 1}/{len(loads)} "
                           f"({format_rate(loads[li])}) run {ri + 1}/{cell.method.runs}"))
            result = m.measure(loads[li], li, ri, live=live and live.trial(cell_id, li, ri, knobs, loads[li], cell))
            store.add_trial(cid, cell_id, li, ri, knobs, result)
            count += 1
            on_event(Event("trial", count, total, f"cell {cell_id} run {ri}: "
                           f"{trial_text(StoredResult.parse(result, 'trial result'))}"))
    return count


def pending_cells(done: set[tuple[int, int, int]], cells) -> list[tuple[int, dict, CampaignSpec, list]]:
    """(cell id, knobs, cell, its (load, run) keys not stored yet) of every cell with some."""
    plan = []
    for cell_id, (knobs, cell) in enumerate(cells):
        todo = [(li, ri) for li in range(cell.n_loads()) for ri in range(cell.method.runs)
                if (cell_id, li, ri) not in done]
        if todo:
            plan.append((cell_id, knobs, cell, todo))
    return plan


def trial_text(result: StoredResult) -> str:
    loss = result.loss_ratio
    return f"load {format_rate(result.intended_rate_pps)}: loss {'-' if loss is None else '0' if loss == 0 else f'{loss:.1e}'}"


def _register(store: Store, cid: str, spec: CampaignSpec, cells) -> int:
    store.register_campaign(cid, spec.name, spec_hash(spec.model_dump()), spec.model_dump(), time.time())
    recovered = store.recover(cid)
    for cell_id, (knobs, cell) in enumerate(cells):
        store.register_cell(cid, cell_id, knobs, cell.model_dump())
    return recovered


def run_compare_campaign(spec: CampaignSpec, results_dir, on_event: Callable[[Event], None],
                         live: LiveWriter | None = None) -> str:
    """A paired comparison (softnet.campaign.compare); progress counts trials
    up to the budget (a decided comparison ends sooner)."""
    from softnet.campaign.compare import run_compare
    from softnet.testbed.lock import testbed_lock

    cid = campaign_id(spec)
    local = not spec.testbed.inventory and any(c.testbed.sut != "synthetic" for _, _, c in spec.variants())
    # held for the whole experiment: another run between two turns would fall inside a pair
    lock = testbed_lock(results_dir, float(os.environ.get("SOFTNET_WAIT") or 0)) if local else contextlib.nullcontext()
    with lock, Store(results_dir) as store:
        store.register_campaign(cid, spec.name, spec_hash(spec.model_dump()), spec.model_dump(), time.time())
        store.recover(cid)
        run_compare(spec, store, cid, lambda kind, done, total, text: on_event(Event(kind, done, total, text)), live)
    return cid


def run_soak_campaign(spec: CampaignSpec, results_dir, on_event: Callable[[Event], None],
                      live: LiveWriter | None = None) -> str:
    """Each cell's soak in turn (softnet.campaign.soak); progress counts the soak's seconds."""
    from softnet.campaign.soak import soak_cell

    cid = campaign_id(spec)
    cells = spec.cells()
    with Store(results_dir) as store:
        _register(store, cid, spec, cells)
        for cell_id, (knobs, cell) in enumerate(cells):
            soak_cell(store, cid, cell_id, knobs, cell, lambda kind, done, total, text: on_event(
                Event(kind, done, total, text)), live)
    return cid


def run_latency_campaign_in(spec: CampaignSpec, results_dir, on_event: Callable[[Event], None],
                            live: LiveWriter | None = None) -> str:
    """The AF_XDP latency lab (softnet.campaign.latency); progress counts runs
    (a run's delays come from the lab's own tools, not the kernel sampler)."""
    from softnet.campaign.latency import run_latency_campaign  # the AF_XDP tool is needed only here

    cid = campaign_id(spec)
    cells = spec.cells()
    with Store(results_dir) as store:
        _register(store, cid, spec, cells)
        run_latency_campaign(spec, store, cid, cells, lambda kind, done, total, text: on_event(
            Event(kind, done, total, text)))
    return cid


def rate_or_none(pps: float | None) -> str:
    """A bound for the progress line; "-" where there is none (not "0 pps")."""
    return "-" if pps is None else format_rate(pps)


def run_search_campaign(spec: CampaignSpec, results_dir, on_event: Callable[[Event], None],
                        live: LiveWriter | None = None) -> str:
    """Progress counts searches (their trial count is not known in advance)."""
    cid = campaign_id(spec)
    cells = spec.cells()
    with Store(results_dir) as store:
        recovered = _register(store, cid, spec, cells)
        done = store.done_searches(cid)
        total = len(cells) * spec.method.runs
        count = len(done)
        on_event(Event("plan", count, total, f"{cid}: {len(cells)} cell(s) x {spec.method.runs} search(es), "
                       f"{count} already complete" + (f" ({recovered} trials recovered)" if recovered else "")))
        for cell_id, (knobs, cell) in enumerate(cells):
            todo = [r for r in range(cell.method.runs) if (cell_id, r) not in done]
            count = search_cell(store, cid, cell_id, knobs, cell, todo, count, total, on_event, live)
    return cid


def search_cell(store: Store, cid: str, cell_id: int, knobs: dict, cell: CampaignSpec, todo: list[int], count: int,
                total: int, on_event: Callable[[Event], None], live: LiveWriter | None) -> int:
    """The cell's searches in ``todo`` (run indexes), then the latency trials
    of every search not stored yet; the count of searches stored."""
    fractions = cell.method.latency_fractions
    finished = [r for r in range(cell.method.runs) if r not in todo]
    if not todo and not any(pending_latency(store, cid, cell_id, r, fractions) for r in finished):
        return count

    def on_trial(result: StoredResult, _replayed: bool) -> None:
        on_event(Event("trial", count, total, f"cell {cell_id}: {trial_text(result)}"))
        on_event(Event("start", count, total, f"cell {cell_id} search {run_index + 1}/{cell.method.runs}, "
                       f"last {trial_text(result)}"))

    with measurer_for(cell, cell_id) as m:
        for run_index in range(cell.method.runs):
            if run_index in todo:
                on_event(Event("start", count, total, f"cell {cell_id} search {run_index + 1}/{cell.method.runs}"))
                found = StoredSearch.model_validate(
                    run_search(store, cid, cell_id, knobs, cell, m, run_index, on_trial, live))
                count += 1
                goals = "; ".join(f"{g.goal.name} {g.status} [{rate_or_none(g.lower_bound_pps)}, "
                                  f"{rate_or_none(g.upper_bound_pps)}]"
                                  for g in map(GoalDocument.model_validate, found.goals))
                on_event(Event("search", count, total, f"cell {cell_id} search {run_index}: "
                               f"{found.trial_count} trials: {goals}"))
            # latency under load at fractions of the PDR found (only those not stored yet)
            for t in pending_latency(store, cid, cell_id, run_index, fractions):
                what = f"cell {cell_id} search {run_index}: latency at {t.fraction:.0%} of {t.goal}"
                on_event(Event("start", count, total, f"{what} ({format_rate(t.load_pps)})"))
                result = run_latency_trial(store, cid, cell_id, knobs, cell, m, run_index, t, live)
                p99 = result.latency_p99_ns
                on_event(Event("trial", count, total, f"{what}: {trial_text(result)}, latency p99 "
                               + ("-" if p99 is None else f"{p99 / 1e3:.3g} us")))
    return count

