"""What a fleet worker runs: one cell's pending trials on its testbed. The
cell's trials come back to the controller, which stores them (the store
stays the one source of truth): a worker killed mid-cell loses nothing that
was stored, and its cell runs again whole."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from softnet.campaign.measurers import measurer_for
from softnet.campaign.spec import CampaignSpec
from softnet.fleet.resources import testbed_of

# set by `softnet fleet worker` for the worker it starts
ENV_TESTBED, ENV_INVENTORY = "SOFTNET_FLEET_TESTBED", "SOFTNET_FLEET_INVENTORY"


@dataclass
class CellDone:
    """One cell's trials as a worker measured them."""

    cell_id: int
    testbed: str
    worker: str
    probe_pps: float | None
    probe_result: dict | None
    trials: list[tuple[int, int, dict]] = field(default_factory=list)  # (load index, run index, result)
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


def run_cell(cell_doc: dict, cell_id: int, todo: list[tuple[int, int]], probe_pps: float | None,
             topic: str = "softnet") -> CellDone:
    """Measure ``todo`` of the cell on this worker's testbed; its start and
    each trial are told on ``topic`` (the controller's progress)."""
    from distributed import get_worker

    w = get_worker()
    testbed = os.environ.get(ENV_TESTBED) or testbed_of(w.state.total_resources) or w.name
    cell = on_this_testbed(CampaignSpec.model_validate(cell_doc), testbed, os.environ.get(ENV_INVENTORY))
    t0 = time.monotonic()
    out = CellDone(cell_id, testbed, str(w.name), probe_pps, None)
    w.log_event(topic, {"cell": cell_id, "testbed": testbed, "trials": len(todo)})
    with measurer_for(cell, cell_id) as m:
        if cell.needs_probe() and out.probe_pps is None:
            out.probe_pps, out.probe_result = m.probe_max()
        loads = cell.loads_pps(out.probe_pps)
        for li, ri in todo:
            result = m.measure(loads[li], li, ri)
            # which testbed and worker measured it: with the trial, where the store and exports find it
            result.setdefault("provenance", {})["fleet"] = {"testbed": testbed, "worker": out.worker}
            out.trials.append((li, ri, result))
    out.seconds = time.monotonic() - t0
    return out
