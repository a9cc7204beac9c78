"""A campaign's controller on a fleet: it plans the parts still to measure
(from the store, as `softnet run` always does: a sweep's or search's cells,
a latency lab's configurations and then its re-runs, a whole comparison),
submits each to the Dask scheduler with the resources it needs, and stores
every trial, search and run as the worker's store writes arrive
(softnet.fleet.relay). Dask runs a part again when its worker dies, and the
part goes on from what was stored; a lost scheduler is waited for, and the
parts not finished are submitted again when it is back. Killed, the
controller resumes like any campaign, first storing what the scheduler
kept for it."""
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
from softnet.campaign.runner import Event, _register, campaign_id, trial_text
from softnet.campaign.spec import CampaignSpec
from softnet.provenance import spec_hash
from softnet.errors import InputError, SoftnetError
from softnet.fleet.relay import Applied, StoreOp, apply, seed_ops
from softnet.fleet.resources import cell_resources, describe, satisfies, testbed_of
from softnet.fleet.task import Part, PartDone, run_part
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
    """A campaign's parts not stored yet, over the fleet at ``scheduler``."""
    cid = campaign_id(spec)
    with Store(results_dir) as store:
        if spec.method.kind == "compare":
            store.register_campaign(cid, spec.name, spec_hash(spec.model_dump()), spec.model_dump(), time.time())
            store.recover(cid)
        else:
            _register(store, cid, spec, spec.cells())
            store.recover_latency(cid)
    while True:
        try:
            client = connect(scheduler)
        except SchedulerLost as exc:
            # A Ctrl-C that landed in Dask's connect (its event loop's thread answers for
            # the main one) comes back as a failed connection: it still stops the wait.
            interrupts.check()
            on_event(Event("fleet", 0, 0, f"{exc}; waiting for it (Ctrl-C stops; softnet run resumes)"))
            time.sleep(RECONNECT_S)
            continue
        try:
            with Store(results_dir) as store:  # held while the parts run, as a campaign on one testbed holds it
                Controller(client, store, spec, cid, on_event).run()
            return cid
        except SchedulerLost as exc:
            interrupts.check()
            on_event(Event("fleet", 0, 0, f"{exc}; waiting for it (Ctrl-C stops; softnet run resumes)"))
        except (CommClosedError, ConnectionError, CancelledError, TimeoutError) as exc:  # a call to it failed
            interrupts.check()
            on_event(Event("fleet", 0, 0, f"the Dask scheduler at {scheduler} is gone ({type(exc).__name__}); "
                           "waiting for it (Ctrl-C stops; softnet run resumes)"))
        finally:
            with contextlib.suppress(Exception):  # closing a client whose scheduler is gone may fail too
                client.close(timeout=2)


def plan_parts(spec: CampaignSpec, store: Store, cid: str, phase: int) -> list[tuple[str, list[int], dict]]:
    """(key, cells, resources) of the parts of ``phase`` not finished: every
    kind's cells first (a comparison: itself), a latency lab's re-runs second."""
    kind, cells = spec.method.kind, spec.cells()
    if phase == 1:
        if kind == "latency" and spec.latency.rerun_per_cluster:
            return [("rerun", [], cell_resources(spec))]
        return []
    if kind == "compare":
        return [] if store.comparison(cid) is not None else [("compare", [], cell_resources(spec))]
    if kind == "search":
        from softnet.campaign.search_runner import pending_latency

        done = store.done_searches(cid)
        left = [i for i, (_, c) in enumerate(cells) if any(
            (i, r) not in done or pending_latency(store, cid, i, r, c.method.latency_fractions)
            for r in range(c.method.runs))]
    elif kind == "latency":
        done = store.done_latency_runs(cid)
        left = [i for i, (_, c) in enumerate(cells) if any((i, r) not in done for r in range(c.method.runs))]
    elif kind == "soak":
        soaks = store.soaks(cid)
        left = [i for i in range(len(cells)) if i not in soaks or not soaks[i].finished]
    else:
        done = store.done_keys(cid)
        left = [i for i, (_, c) in enumerate(cells) if any(
            (i, li, ri) not in done for li in range(c.n_loads()) for ri in range(c.method.runs))]
    return [(f"cell{i}", [i], cell_resources(cells[i][1])) for i in left]


# what progress counts (else trials)
COUNTED = {"search": "search", "latency": "latency run", "soak": "soak"}


def progress_total(spec: CampaignSpec) -> int:
    kind, cells = spec.method.kind, spec.cells()
    if kind == "compare":
        from softnet.campaign.compare import plan_rounds

        return plan_rounds(spec) * len(spec.variants()) * len(spec.compare_loads_pps())
    if kind in ("search", "latency"):
        return sum(c.method.runs for _, c in cells)
    if kind == "soak":
        return len(cells)
    return sum(c.n_loads() * c.method.runs for _, c in cells)


def progress_done(spec: CampaignSpec, store: Store, cid: str) -> int:
    kind = spec.method.kind
    if kind == "soak":
        return sum(1 for s in store.soaks(cid).values() if s.finished)
    return len(store.done_searches(cid) if kind == "search" else store.done_latency_runs(cid) if kind == "latency"
               else store.done_keys(cid))


class Controller:
    """One connection's work: the campaign's parts run, their writes stored."""

    def __init__(self, client, store: Store, spec: CampaignSpec, cid: str, on_event: Callable[[Event], None]):
        self.client, self.store, self.spec, self.cid, self.on_event = client, store, spec, cid, on_event
        self.topic = f"softnet-{cid}"
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.applied: set[str] = set()
        self.total = progress_total(spec)
        self.count = progress_done(spec, store, cid)

    def run(self) -> None:
        self.client.subscribe_topic(self.topic, lambda event: self.inbox.put(event[1]))
        for _, msg in self.client.get_events(self.topic):  # what workers sent while no controller listened
            self._handle(msg, quiet=True)
        self.count = progress_done(self.spec, self.store, self.cid)
        for phase in (0, 1):
            self._run_phase(plan_parts(self.spec, self.store, self.cid, phase))
        with contextlib.suppress(Exception):  # the campaign is stored whole: the scheduler may forget its writes
            self.client.run_on_scheduler(_forget_topic, topic=self.topic)

    def _handle(self, msg, quiet: bool = False) -> None:
        if not isinstance(msg, dict):
            return
        if "progress" in msg:
            if not quiet:
                self.on_event(Event("start", self.count, self.total, f"{msg['testbed']}: {msg['progress']}"))
            return
        op = StoreOp.model_validate(msg)
        if op.id in self.applied:
            return
        self.applied.add(op.id)
        done = apply(self.store, op)
        if done.what == COUNTED.get(self.spec.method.kind, "trial"):
            self.count += 1
        if done.what and not quiet:
            self.on_event(Event("trial", self.count, self.total, _op_text(op, done)))

    def _drain(self) -> None:
        while not self.inbox.empty():
            self._handle(self.inbox.get())

    def _run_phase(self, parts: list[tuple[str, list[int], dict]]) -> None:
        from distributed import wait

        if not parts:
            return
        client = self.client
        fleet = testbeds(client)
        names = fleet.names()
        self.on_event(Event("plan", self.count, self.total, f"{self.cid}: {len(parts)} part(s) to measure on "
                            f"{len(fleet.workers)} testbed(s): {', '.join(sorted(names.values())) or 'none yet'}"
                            + "".join(f"; {tb} left out: {why}" for tb, why in sorted(fleet.left_out.items()))))
        for key, _, need in parts:
            if fleet.workers and not any(satisfies(r, need) for r in fleet.workers.values()):
                raise InputError("fleet", f"{key.replace('cell', 'cell ')} ({describe(need)}): no testbed of the "
                                 f"fleet has it ({', '.join(sorted(names.values()))})")
        waiting, pending, futures = list(parts), set(), {}
        workers, looked = list(fleet.workers.values()), time.monotonic()
        while pending or waiting:
            # At most one part per testbed that can take it in flight: Dask hands a part with resources to a
            # worker at once, so more would queue behind each other there, and another controller's parts
            # behind all of them; this way the testbeds take the campaigns' parts in turn.
            if waiting and time.monotonic() - looked > LOOK_S:  # workers come and go
                workers, looked = list(testbeds(client).workers.values()), time.monotonic()
            for item in list(waiting):
                need = item[2]
                able = [r for r in workers if satisfies(r, need)]
                busy = sum(1 for f in pending if futures[f][2] == need)
                if len(pending) < len(workers) and busy < len(able):
                    waiting.remove(item)
                    pending.add(self._submit(futures, *item))
            self._drain()
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
            self._drain()
            for fut in done:
                key = futures[fut][0]
                if fut.status == "cancelled":
                    raise SchedulerLost(f"the Dask scheduler at {client.scheduler.address} dropped {key} (lost?)")
                if fut.status == "error":
                    exc = fut.exception()
                    raise SoftnetError(f"{key} failed on the fleet: {type(exc).__name__}: {exc}")
                self._settle(fut.result())

    def _submit(self, futures, key: str, cells: list[int], need: dict):
        part = Part(cid=self.cid, key=key, topic=self.topic, spec=self.spec.model_dump(mode="json"), cells=cells,
                    seed=[o.doc() for o in seed_ops(self.store, self.cid, key, set(cells) if cells else None)])
        fut = self.client.submit(run_part, part.model_dump(), key=f"softnet-{self.cid}-{key}-{uuid.uuid4().hex[:8]}",
                                 resources=need, pure=False, retries=2)
        futures[fut] = (key, cells, need)
        return fut

    def _settle(self, done: PartDone) -> None:
        """Every write the part sent stored: those the subscription has not
        brought yet are read from the scheduler's log."""
        end = time.monotonic() + SETTLE_S
        while set(done.sent) - self.applied and time.monotonic() < end:
            time.sleep(0.05)
            self._drain()
        if set(done.sent) - self.applied:
            for _, msg in self.client.get_events(self.topic):
                self._handle(msg)
        missing = set(done.sent) - self.applied
        if missing:
            raise SoftnetError(f"{done.key} on {done.testbed}: {len(missing)} of its writes are not on the "
                               "scheduler's log (its events-log-length too short?)")


SETTLE_S = 5.0


def _forget_topic(dask_scheduler, topic: str) -> None:
    dask_scheduler._broker.truncate(topic)


def _op_text(op: StoreOp, done: Applied) -> str:
    """A stored write in words, for the progress log."""
    if done.trial is not None:
        t = done.trial
        return (f"{op.testbed}: cell {t.cell_id} run {t.run_index}: "
                f"{trial_text(StoredResult.parse(t.result, 'trial result'))}")
    a = op.args
    run = f" run {a['run_index']}" if "run_index" in a else ""
    return f"{op.testbed}: {op.part.replace('cell', 'cell ')}{run}: {done.what} stored"
