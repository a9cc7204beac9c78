"""A campaign's controller on a fleet: it plans the cells still to measure
(from the store, as `softnet run` always does), submits each to the Dask
scheduler with the resources it needs, and stores each cell's trials as the
cell returns. Dask runs a cell again when its worker dies; the controller
stores a trial once (by its key); a lost scheduler is waited for, and the
cells not stored yet are submitted again when it is back. Killed, the
controller resumes on `softnet run` like any campaign."""
from __future__ import annotations

import contextlib
import queue
import time
import uuid
from concurrent.futures import CancelledError

from distributed.comm.core import CommClosedError
from dataclasses import dataclass
from typing import Callable

from softnet import interrupts
from softnet.campaign.runner import Event, _register, campaign_id, pending_cells, trial_text
from softnet.campaign.spec import CampaignSpec
from softnet.errors import InputError, SoftnetError
from softnet.fleet.resources import cell_resources, describe, satisfies, testbed_of
from softnet.fleet.task import CellDone, run_cell
from softnet.results.store import Store
from softnet.results.stored import StoredResult

CHECK_PREFIX = "softnet-check-"  # a dataset the worker launcher leaves when its testbed failed its check
RECONNECT_S = 2.0
LOOK_S = 2.0  # how often the controller asks the scheduler which workers there are


class SchedulerLost(SoftnetError):
    pass


@dataclass(frozen=True)
class Testbeds:
    """The fleet as the scheduler knows it now."""

    workers: dict[str, dict[str, float]]  # worker address -> its resources
    left_out: dict[str, str]  # testbed -> why it is not in the fleet (its check failed)

    def names(self) -> dict[str, str]:
        return {a: testbed_of(r) or a for a, r in self.workers.items()}


def testbeds(client) -> Testbeds:
    info = client.scheduler_info()
    workers = {a: dict(w.get("resources") or {}) for a, w in info.get("workers", {}).items()}
    left = {}
    for name in client.list_datasets():
        if str(name).startswith(CHECK_PREFIX):
            left[str(name)[len(CHECK_PREFIX):]] = str(client.get_dataset(name))
    running = {testbed_of(r) for r in workers.values()}
    return Testbeds(workers, {tb: why for tb, why in left.items() if tb not in running})


def connect(address: str, timeout_s: float = 5.0):
    from distributed import Client

    try:
        return Client(address, timeout=timeout_s)  # the default client: distributed.wait uses it
    except (OSError, TimeoutError) as exc:
        raise SchedulerLost(f"no Dask scheduler at {address}: {exc}") from None


def run_on_fleet(spec: CampaignSpec, results_dir, scheduler: str, on_event: Callable[[Event], None]) -> str:
    """A sweep campaign's pending cells over the fleet at ``scheduler``."""
    if spec.method.kind not in ("sweep", "back-to-back", "recovery", "reset"):
        raise InputError("--scheduler", f"a {spec.method.kind} campaign runs on one testbed; on a fleet: sweeps "
                         "and the RFC benchmarks (kind = sweep, back-to-back, recovery, reset)")
    cid = campaign_id(spec)
    with Store(results_dir) as store:
        _register(store, cid, spec, spec.cells())
        total = sum(c.n_loads() * c.method.runs for _, c in spec.cells())
    while True:
        try:
            client = connect(scheduler)
        except SchedulerLost as exc:
            # A Ctrl-C that landed in Dask's connect (its event loop's thread answers for
            # the main one) comes back as a failed connection: it still stops the wait.
            interrupts.check()
            on_event(Event("fleet", 0, total, f"{exc}; waiting for it (Ctrl-C stops; softnet run resumes)"))
            time.sleep(RECONNECT_S)
            continue
        try:
            if _submit_and_store(client, spec, cid, results_dir, total, on_event):
                return cid
        except SchedulerLost as exc:
            interrupts.check()
            on_event(Event("fleet", 0, total, f"{exc}; waiting for it (Ctrl-C stops; softnet run resumes)"))
        except (CommClosedError, ConnectionError, CancelledError, TimeoutError) as exc:  # a call to it failed
            interrupts.check()
            on_event(Event("fleet", 0, total, f"the Dask scheduler at {scheduler} is gone ({type(exc).__name__}); "
                           "waiting for it (Ctrl-C stops; softnet run resumes)"))
        finally:
            with contextlib.suppress(Exception):  # closing a client whose scheduler is gone may fail too
                client.close(timeout=2)


def _submit_and_store(client, spec, cid, results_dir, total, on_event) -> bool:
    """True when every cell is stored; raises SchedulerLost when the scheduler goes."""
    with Store(results_dir) as store:  # held while the cells run, as a campaign on one testbed holds it
        return _run_cells(client, store, spec, cid, total, on_event)


def _run_cells(client, store: Store, spec, cid, total, on_event) -> bool:
    from distributed import wait

    done = store.done_keys(cid)
    plan, count = pending_cells(done, spec.cells()), len(done)
    fleet = testbeds(client)
    names = fleet.names()
    on_event(Event("plan", count, total, f"{cid}: {len(plan)} cell(s) to measure on "
                   f"{len(fleet.workers)} testbed(s): {', '.join(sorted(names.values())) or 'none yet'}"
                   + "".join(f"; {tb} left out: {why}" for tb, why in sorted(fleet.left_out.items()))))
    futures = {}
    topic, started = f"softnet-{cid}", queue.SimpleQueue()
    client.subscribe_topic(topic, lambda event: started.put(event[1]))  # run_cell tells when it starts
    waiting = []
    for cell_id, knobs, cell, todo in plan:
        need = cell_resources(cell)
        if fleet.workers and not any(satisfies(r, need) for r in fleet.workers.values()):
            raise InputError("fleet", f"cell {cell_id} ({describe(need)}): no testbed of the fleet has it "
                             f"({', '.join(sorted(names.values()))})")
        waiting.append((cell_id, knobs, cell, todo, need))
    pending: set = set()
    workers, looked = list(fleet.workers.values()), time.monotonic()
    while pending or waiting:
        # At most one cell per testbed that can take it in flight: Dask hands a cell with resources to a
        # worker at once, so more would queue behind each other there, and another controller's cells
        # behind all of them; this way the testbeds take the campaigns' cells in turn.
        if waiting and time.monotonic() - looked > LOOK_S:  # workers come and go
            workers, looked = list(testbeds(client).workers.values()), time.monotonic()
        for item in list(waiting):
            need = item[4]
            able = [r for r in workers if satisfies(r, need)]
            busy = sum(1 for f in pending if futures[f][2] == need)
            if len(pending) < len(workers) and busy < len(able):
                waiting.remove(item)
                pending.add(_submit(client, store, cid, topic, futures, *item))
        if not pending:
            time.sleep(RECONNECT_S)  # no worker yet
            looked = 0.0
            continue
        try:
            done, pending = wait(pending, timeout=1.0, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        except CancelledError:  # distributed's FuturesCancelledError: the scheduler went
            raise SchedulerLost(f"the Dask scheduler at {client.scheduler.address} is gone") from None
        if client.status not in ("running", "connecting"):
            raise SchedulerLost(f"the Dask scheduler {client.scheduler.address} is gone")
        while not started.empty():
            s = started.get()
            on_event(Event("start", count, total, f"{s['testbed']}: cell {s['cell']} ({s['trials']} trials)"))
        for fut in done:
            cell_id, knobs, _ = futures[fut]
            if fut.status == "cancelled":
                raise SchedulerLost(f"the Dask scheduler at {client.scheduler.address} dropped cell {cell_id} "
                                    "(lost?)")
            if fut.status == "error":
                exc = fut.exception()
                raise SoftnetError(f"cell {cell_id} failed on the fleet: {type(exc).__name__}: {exc}")
            count = _store(store, cid, knobs, fut.result(), count, total, on_event)
    return True


def _submit(client, store: Store, cid, topic, futures, cell_id, knobs, cell, todo, need):
    probe = store.probe(cid, cell_id) if cell.needs_probe() else None
    key = f"softnet-{cid}-cell{cell_id}-{uuid.uuid4().hex[:8]}"
    fut = client.submit(run_cell, cell.model_dump(mode="json"), cell_id, todo, probe, topic, key=key,
                        resources=need, pure=False, retries=2)
    futures[fut] = (cell_id, knobs, need)
    return fut


def _store(store: Store, cid: str, knobs: dict, done: CellDone, count: int, total: int, on_event) -> int:
    have = store.done_keys(cid)
    if done.probe_pps is not None and store.probe(cid, done.cell_id) is None:
        store.set_probe(cid, done.cell_id, done.probe_pps, done.probe_result or {})
    for li, ri, result in done.trials:
        if (done.cell_id, li, ri) in have:  # a cell run twice (its first worker died after sending)
            continue
        store.add_trial(cid, done.cell_id, li, ri, knobs, result)
        count += 1
        on_event(Event("trial", count, total, f"{done.testbed}: cell {done.cell_id} run {ri}: "
                       f"{trial_text(StoredResult.parse(result, 'trial result'))}"))
    return count
