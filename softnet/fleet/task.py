"""What a fleet worker runs: one part of a campaign on its testbed (a sweep's
or search's cell, a latency lab's configuration or its re-runs, a whole
comparison: the testbed is part of what a comparison pairs). The part runs
with the same code as on one testbed, against a scratch store whose every
write reaches the controller's store as it happens (softnet.fleet.relay)."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field

from pydantic import BaseModel

# at import: `softnet fleet worker` preloads this module, so a worker pays for them before its first part
from softnet.campaign.compare import run_compare
from softnet.campaign.runner import Event, measure_cell, search_cell
from softnet.campaign.spec import CampaignSpec
from softnet.fleet.relay import RelayStore, StoreOp, apply
from softnet.fleet.resources import testbed_of
from softnet.provenance import spec_hash

# set by `softnet fleet worker` for the worker it starts
ENV_TESTBED, ENV_INVENTORY = "SOFTNET_FLEET_TESTBED", "SOFTNET_FLEET_INVENTORY"


class Part(BaseModel):
    """A campaign's part as the controller hands it to a worker."""

    cid: str
    key: str  # "cell3", "compare", "rerun": its operations on the topic carry it
    topic: str  # the campaign's topic on the scheduler's event log
    spec: dict  # the campaign's spec (as the controller read it)
    cells: list[int]  # the cells it measures (a comparison: all)
    seed: list[dict]  # StoreOps: what the controller had stored of them when it handed the part out


@dataclass
class PartDone:
    key: str
    testbed: str
    worker: str
    sent: list[str] = field(default_factory=list)  # the ids of the operations it sent, in order
    seconds: float = 0.0


def on_this_testbed(cell: CampaignSpec, testbed: str, inventory: str | None) -> CampaignSpec:
    """The cell as this worker runs it: an inventory's cell on the worker's
    inventory file and testbed (the controller's path means nothing here)."""
    if not cell.testbed.inventory:
        return cell
    if inventory is None:
        raise RuntimeError(f"the cell runs on an inventory's testbed; this worker ({testbed}) was started "
                           "without --inventory")
    tb = cell.testbed.model_copy(update={"inventory": inventory, "name": testbed})
    return cell.model_copy(update={"testbed": tb})


def this_host(spec: CampaignSpec, cells):
    """A part measured on the worker's own host (no inventory, a real SUT)
    holds its testbed lock, as `softnet run` there would, and first undoes
    what a killed run left; the wait for another user: SOFTNET_WAIT seconds
    in the worker's environment (default 600)."""
    pool = [c for _, _, c in spec.variants()] if spec.method.kind == "compare" else [c for _, c in cells]
    if spec.testbed.inventory or all(c.testbed.sut == "synthetic" for c in pool):
        return contextlib.nullcontext()
    from softnet.testbed import cleanup
    from softnet.testbed.lock import testbed_lock

    return cleanup.restoring(testbed_lock(None, float(os.environ.get("SOFTNET_WAIT") or 600)))


def history(client, part: Part) -> list[StoreOp]:
    """The part's operations the event log holds (sent by an earlier run of it)."""
    return [StoreOp.model_validate(m) for _, m in client.get_events(part.topic)
            if isinstance(m, dict) and m.get("part") == part.key and "op" in m]


def run_part(doc: dict) -> PartDone:
    """Measure the part on this worker's testbed; its progress and every
    store write are told on the part's topic."""
    from distributed import get_client, get_worker

    w = get_worker()
    part = Part.model_validate(doc)
    testbed = os.environ.get(ENV_TESTBED) or testbed_of(w.state.total_resources) or w.name
    inventory = os.environ.get(ENV_INVENTORY)
    spec = on_this_testbed(CampaignSpec.model_validate(part.spec), testbed, inventory)
    cells = [(knobs, on_this_testbed(c, testbed, inventory)) for knobs, c in spec.cells()]
    out = PartDone(part.key, testbed, str(w.name))
    t0 = time.monotonic()

    def tell(e: Event) -> None:
        if e.kind in ("start", "plan", "look"):
            w.log_event(part.topic, {"progress": e.message, "testbed": testbed, "part": part.key})

    # in the worker's own folder: `softnet fleet worker` removes it even after a SIGKILL mid-part
    scratch = tempfile.mkdtemp(prefix=f"softnet-part-{part.key}-", dir=w.local_directory)
    try:
        with this_host(spec, cells), RelayStore(scratch, part.key, lambda op: w.log_event(part.topic, op.doc()),
                        fleet={"testbed": testbed, "worker": out.worker}) as store:
            store.register_campaign(part.cid, spec.name, spec_hash(spec.model_dump()), spec.model_dump(), time.time())
            # the part's cells (the latency re-runs: all); a comparison registers its variants itself
            for i in [] if spec.method.kind == "compare" else part.cells or range(len(cells)):
                store.register_cell(part.cid, i, cells[i][0], cells[i][1].model_dump())
            for op in [*map(StoreOp.model_validate, part.seed), *history(get_client(), part)]:
                apply(store, op)
            store.relaying = True
            _measure(spec, store, part, cells, tell)
            out.sent = store.sent
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out.seconds = time.monotonic() - t0
    return out


def _measure(spec: CampaignSpec, store: RelayStore, part: Part, cells, tell) -> None:
    kind, cid = spec.method.kind, part.cid
    if kind == "compare":
        run_compare(spec, store, cid, lambda k, done, total, text: tell(Event(k, done, total, text)))
    elif kind == "latency":
        from softnet.campaign.latency import run_latency_campaign

        run_latency_campaign(spec, store, cid, cells, lambda k, done, total, text: tell(Event(k, done, total, text)),
                             only=set(part.cells), rerun=part.key == "rerun")
    elif kind == "soak":
        from softnet.campaign.soak import soak_cell

        for cell_id in part.cells:
            knobs, cell = cells[cell_id]
            soak_cell(store, cid, cell_id, knobs, cell, lambda k, done, total, text: tell(Event(k, done, total, text)),
                      None)
    elif kind == "search":
        done = store.done_searches(cid)
        for cell_id in part.cells:
            knobs, cell = cells[cell_id]
            todo = [r for r in range(cell.method.runs) if (cell_id, r) not in done]
            search_cell(store, cid, cell_id, knobs, cell, todo, 0, 0, tell, None)
    else:
        done = store.done_keys(cid)
        for cell_id in part.cells:
            knobs, cell = cells[cell_id]
            todo = [(li, ri) for li in range(cell.n_loads()) for ri in range(cell.method.runs)
                    if (cell_id, li, ri) not in done]
            measure_cell(store, cid, cell_id, knobs, cell, todo, 0, 0, tell, None)
