"""A fleet worker's store writes, relayed to the controller's store as they
happen. The worker runs a campaign's part (a cell, a comparison, a latency
lab's configurations) with the same code as on one testbed, against a
scratch store; every write there (a trial, a search, a probe, a comparison's
state, a latency run, a search's or comparison's resume cutting its stored
tail) is also sent as an operation on the Dask scheduler's event log under
the campaign's topic. The controller applies each operation as it arrives,
so a controller, worker or cell killed mid-way loses at most the trial in
flight; a part that starts again (on this worker or another) applies what
the controller had stored and what the log holds for it first, so it
measures nothing twice. Why the event log: it outlives the controller's
connection (a controller started again reads the operations it missed), and
any worker can read it (a part Dask runs again after its worker died)."""
from __future__ import annotations

import json
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from softnet.results.comparison import ComparisonSummary
from softnet.results.soak import SoakSummary
from softnet.results.store import Store, TrialRecord


class StoreOp(BaseModel):
    """One write of a store: its name, its arguments, and a file's bytes
    (compressed) where the write is one (a raw trial, a latency run's records)."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    part: str  # the campaign part it belongs to ("cell3", "compare", ...)
    testbed: str = ""  # where it was made (a seed: the controller's store, "")
    op: str
    args: dict = Field(default_factory=dict)
    blob: bytes | None = None

    def doc(self) -> dict:
        return self.model_dump()


def pack(text: str | bytes) -> bytes:
    return zlib.compress(text.encode() if isinstance(text, str) else text, 6)


def unpack(blob: bytes) -> bytes:
    return zlib.decompress(blob)


@dataclass(frozen=True)
class Applied:
    """What ``apply`` stored: in words ("trial", "search", ...; None: the
    store had it already, or it is not told), and a trial's record."""

    what: str | None
    trial: TrialRecord | None = None


def apply(store: Store, op: StoreOp) -> Applied:
    """Make the write in ``store``."""
    what = _apply(store, op)
    return what if isinstance(what, Applied) else Applied(what)


def _apply(store: Store, op: StoreOp) -> Applied | str | None:
    a = op.args
    if op.op == "add_trial":
        rec = TrialRecord(**json.loads(unpack(op.blob)))
        if rec.key in store.done_keys(rec.campaign_id):
            return None
        store.add_trial(rec.campaign_id, rec.cell_id, rec.load_index, rec.run_index, rec.knobs,
                        {**rec.result, "raw_trial": rec.raw_trial})
        return Applied("trial", rec)
    if op.op == "set_probe":
        if store.probe(a["cid"], a["cell_id"]) is not None:
            return None
        store.set_probe(a["cid"], a["cell_id"], a["max_rate_pps"], a["probe"])
        return "probe"
    if op.op == "register_cell":
        store.register_cell(a["cid"], a["cell_id"], a["knobs"], a["spec"])
        return None
    if op.op == "add_search":
        if (a["cell_id"], a["run_index"]) in store.done_searches(a["cid"]):
            return None
        store.add_search(a["cid"], a["cell_id"], a["run_index"], a["result"])
        return "search"
    if op.op == "set_comparison":
        store.set_comparison(a["cid"], ComparisonSummary.from_dict(a["summary"], "a fleet worker"), a["finished"],
                             a["now"])
        return "comparison" if a["finished"] else None
    if op.op == "set_soak":
        summary = SoakSummary.model_validate(a["summary"])
        store.set_soak(a["cid"], a["cell_id"], summary, a["now"])
        return "soak" if summary.finished else None
    if op.op in ("delete_trials_from", "delete_trials_from_round", "delete_searches_from_round"):
        getattr(store, op.op)(**a)
        return None
    if op.op == "add_latency_run":
        if (a["cell_id"], a["run_index"]) in store.done_latency_runs(a["cid"]):
            return None
        # the records where this store keeps them, not where the worker wrote them
        path = store.records_path(a["cid"], a["cell_id"], a["run_index"])
        path.parent.mkdir(parents=True, exist_ok=True)
        if op.blob is not None:
            path.write_bytes(unpack(op.blob))
        result, raw = a["result"], a["raw"]
        if result.get("records_path"):
            result = {**result, "records_path": str(path)}
        if raw.get("records_path"):
            raw = {**raw, "records_path": str(path)}
        store.add_latency_run(a["cid"], a["cell_id"], a["run_index"], result, raw)
        return "latency run"
    raise ValueError(f"unknown store operation {op.op!r}")


def seed_ops(store: Store, cid: str, part: str, cells: set[int] | None) -> list[StoreOp]:
    """What ``store`` holds of the campaign's cells (all: None), as the
    operations that write it: what a part starting on a worker needs."""
    def mine(cell_id: int) -> bool:
        return cells is None or cell_id in cells
    ops = []
    for row in store.cells(cid):
        if mine(row["cell_id"]) and row["probe_max_rate_pps"] is not None:
            ops.append(StoreOp(part=part, op="set_probe", args={
                "cid": cid, "cell_id": row["cell_id"], "max_rate_pps": row["probe_max_rate_pps"],
                "probe": json.loads(row["probe_json"] or "{}")}))
    for path in store.raw_trial_files(cid):
        if mine(int(path.name[4:7])):
            ops.append(StoreOp(part=part, op="add_trial", blob=pack(path.read_bytes())))
    for cell_id, run, path in store.raw_latency_files(cid):
        if mine(cell_id):
            doc = json.loads(path.read_text())
            records = store.records_path(cid, cell_id, run)
            ops.append(StoreOp(part=part, op="add_latency_run", args={
                "cid": cid, "cell_id": cell_id, "run_index": run, "result": doc["result"], "raw": doc["raw"]},
                blob=pack(records.read_bytes()) if records.is_file() else None))
    return ops


class RelayStore(Store):
    """A scratch store whose writes are also sent (``emit``) while ``relaying``."""

    def __init__(self, results_dir: str | Path, part: str, emit: Callable[[StoreOp], None],
                 fleet: dict | None = None):
        super().__init__(results_dir)
        self.part, self.emit, self.relaying, self.fleet = part, emit, False, fleet
        self.sent: list[str] = []

    def _send(self, op: str, args: dict | None = None, blob: bytes | None = None) -> None:
        if self.relaying:
            o = StoreOp(part=self.part, testbed=(self.fleet or {}).get("testbed", ""), op=op, args=args or {},
                        blob=blob)
            self.emit(o)
            self.sent.append(o.id)

    def add_trial(self, campaign_id: str, cell_id: int, load_index: int, run_index: int, knobs: dict,
                  result: dict) -> None:
        if self.relaying and self.fleet:  # which testbed and worker measured it, where stores and exports find it
            result.setdefault("provenance", {})["fleet"] = self.fleet
        super().add_trial(campaign_id, cell_id, load_index, run_index, knobs, result)
        self._send("add_trial", blob=pack(self.raw_path(campaign_id, cell_id, load_index, run_index).read_bytes()))

    def set_probe(self, campaign_id: str, cell_id: int, max_rate_pps: float, probe: dict) -> None:
        super().set_probe(campaign_id, cell_id, max_rate_pps, probe)
        self._send("set_probe", {"cid": campaign_id, "cell_id": cell_id, "max_rate_pps": max_rate_pps,
                                 "probe": json.loads(json.dumps(probe, default=str))})

    def register_cell(self, campaign_id: str, cell_id: int, knobs: dict, spec: dict) -> None:
        super().register_cell(campaign_id, cell_id, knobs, spec)
        self._send("register_cell", {"cid": campaign_id, "cell_id": cell_id, "knobs": knobs,
                                     "spec": json.loads(json.dumps(spec, default=str))})

    def add_search(self, campaign_id: str, cell_id: int, run_index: int, result: dict) -> None:
        super().add_search(campaign_id, cell_id, run_index, result)
        self._send("add_search", {"cid": campaign_id, "cell_id": cell_id, "run_index": run_index,
                                  "result": json.loads(json.dumps(result, default=str))})

    def set_comparison(self, campaign_id: str, summary: ComparisonSummary, finished: bool, now: float) -> None:
        super().set_comparison(campaign_id, summary, finished, now)
        self._send("set_comparison", {"cid": campaign_id, "summary": json.loads(json.dumps(summary.to_dict())),
                                      "finished": finished, "now": now})

    def set_soak(self, campaign_id: str, cell_id: int, summary: SoakSummary, now: float) -> None:
        super().set_soak(campaign_id, cell_id, summary, now)
        self._send("set_soak", {"cid": campaign_id, "cell_id": cell_id, "summary": summary.model_dump(mode="json"),
                                "now": now})

    def delete_trials_from(self, campaign_id: str, cell_id: int, run_index: int, first_load_index: int) -> None:
        super().delete_trials_from(campaign_id, cell_id, run_index, first_load_index)
        self._send("delete_trials_from", {"campaign_id": campaign_id, "cell_id": cell_id, "run_index": run_index,
                                          "first_load_index": first_load_index})

    def delete_trials_from_round(self, campaign_id: str, cell_id: int, first_run_index: int) -> None:
        super().delete_trials_from_round(campaign_id, cell_id, first_run_index)
        self._send("delete_trials_from_round", {"campaign_id": campaign_id, "cell_id": cell_id,
                                                "first_run_index": first_run_index})

    def delete_searches_from_round(self, campaign_id: str, cell_id: int, first_run_index: int) -> None:
        super().delete_searches_from_round(campaign_id, cell_id, first_run_index)
        self._send("delete_searches_from_round", {"campaign_id": campaign_id, "cell_id": cell_id,
                                                  "first_run_index": first_run_index})

    def add_latency_run(self, campaign_id: str, cell_id: int, run_index: int, result: dict, raw: dict) -> None:
        super().add_latency_run(campaign_id, cell_id, run_index, result, raw)
        records = self.records_path(campaign_id, cell_id, run_index)
        self._send("add_latency_run", {"cid": campaign_id, "cell_id": cell_id, "run_index": run_index,
                                       "result": json.loads(json.dumps(result, default=str)),
                                       "raw": json.loads(json.dumps(raw, default=str))},
                   blob=pack(records.read_bytes()) if records.is_file() else None)
