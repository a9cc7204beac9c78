"""Run a campaign: cells x loads x runs, stored as they complete, resumable.

Order inside a cell is loads outer, runs inner (K runs of one load, then the
next load), as the PASTRAMI method prescribes. A cell's testbed is built once
and reused for all its trials. Loads relative to a probe use the probe stored
for that cell, so a resumed campaign measures the same loads as before.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from softnet.campaign.measurers import measurer_for
from softnet.campaign.spec import CampaignSpec
from softnet.provenance import spec_hash
from softnet.store.results import Store


@dataclass
class Event:
    kind: str  # "plan" | "probe" | "trial" | "skip"
    done: int
    total: int
    message: str


def campaign_id(spec: CampaignSpec) -> str:
    return f"{spec.name}-{spec_hash(spec.model_dump())[:8]}"


def run_campaign(spec: CampaignSpec, results_dir, on_event: Callable[[Event], None] = lambda e: None) -> str:
    cid = campaign_id(spec)
    cells = spec.cells()
    with Store(results_dir) as store:
        store.register_campaign(cid, spec.name, spec_hash(spec.model_dump()), spec.model_dump(), time.time())
        recovered = store.recover(cid)
        for cell_id, (knobs, cell) in enumerate(cells):
            store.register_cell(cid, cell_id, knobs, cell.model_dump())
        done = store.done_keys(cid)
        plan = []
        for cell_id, (knobs, cell) in enumerate(cells):
            n_loads = len(cell.explicit_loads_pps() or cell.method.relative)
            todo = [(li, ri) for li in range(n_loads) for ri in range(cell.method.runs)
                    if (cell_id, li, ri) not in done]
            plan.append((cell_id, knobs, cell, todo))
        total = len(done) + sum(len(t) for *_, t in plan)
        count = len(done)
        on_event(Event("plan", count, total, f"{cid}: {len(cells)} cell(s), {total} trials, {count} already stored"
                       + (f" ({recovered} recovered from raw files)" if recovered else "")))
        for cell_id, knobs, cell, todo in plan:
            if not todo:
                continue
            with measurer_for(cell, cell_id) as m:
                loads = cell.explicit_loads_pps()
                if loads is None:
                    probe = store.probe(cid, cell_id)
                    if probe is None:
                        probe, probe_result = m.probe_max()
                        store.set_probe(cid, cell_id, probe, probe_result)
                    on_event(Event("probe", count, total, f"cell {cell_id}: SUT maximum ~{probe:,.0f} pps"))
                    loads = [f * probe for f in cell.method.relative]
                for li, ri in todo:
                    result = m.measure(loads[li], li, ri)
                    store.add_trial(cid, cell_id, li, ri, knobs, result)
                    count += 1
                    loss = result.get("loss_ratio")
                    on_event(Event("trial", count, total,
                                   f"cell {cell_id} load {loads[li]:,.0f} pps run {ri}: "
                                   f"loss {'-' if loss is None else f'{loss:.2e}'}"))
    return cid
