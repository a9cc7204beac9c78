"""Readers of a stored results directory: what the report (and any other
consumer) asks of a softnet.duckdb, as plain typed data.

Each reader takes an open ``Store`` (``open_results`` gives one, or an error
that names the file); a stored trial result is checked against the schema
versions this softnet knows, so an unknown one is an ``InputError`` naming
the version rather than a guess. Rates are in pps, times in s, as stored.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
from pydantic import BaseModel, ConfigDict

from softnet.errors import InputError
from softnet.results.search import SearchGoalRow
from softnet.results.store import DB_NAME, TRIAL_TESTBED, Store, is_export_dir, is_store_dir
from softnet.results.stored import LatencyAt, StoredProvenance, StoredResult, StoredTrial
from softnet.results.trial import check_schema

__all__ = ["CampaignRecord", "CellRecord", "LatencyAt", "ResultsProvenance", "StoredProvenance", "StoredResult",
           "StoredTrial", "SweepCell"]

# Tables and columns the readers rely on; a DuckDB file without them was not
# written by softnet's store (or by one too old to read).
REQUIRED_COLUMNS = {
    "campaigns": {"campaign_id", "name", "spec_hash", "spec_json", "created_unix_s"},
    "cells": {"campaign_id", "cell_id", "knobs_json", "spec_json", "probe_max_rate_pps"},
    "trials": {"campaign_id", "cell_id", "load_index", "run_index", "result_json"},
    "searches": {"campaign_id", "cell_id", "run_index", "goal"},
}


class _SpecPart(BaseModel):
    model_config = ConfigDict(extra="ignore")


class TestbedPart(_SpecPart):
    sut: str | None = None


class SyntheticPart(_SpecPart):
    """The synthetic SUT's model parameters (PASTRAMI eq. 3-5), as the cell's spec has them."""

    o_sat_pps: float = 500_000
    plr_at_sat: float = 0.0
    o_trash_pps: float | None = None
    m_pps: float = 1e6
    pre_sat_exponent: float = 8.0


class MethodPart(_SpecPart):
    kind: str = "sweep"
    host_stall_loss: str = "set_apart"
    throughput: str | float | None = None  # a back-to-back campaign's


class TrafficPart(_SpecPart):
    frame_bytes: int = 64
    rate_layer: str = "l1"


class AnalysisPart(_SpecPart):
    pdr_loss_ratio: float
    eta: float
    confidence: float


class CellSpec(_SpecPart):
    """What the analyses read of a cell's stored spec (softnet.campaign.spec.CampaignSpec, dumped)."""

    name: str | None = None
    testbed: TestbedPart = TestbedPart()
    method: MethodPart = MethodPart()
    traffic: TrafficPart = TrafficPart()
    analysis: AnalysisPart | None = None
    synthetic: SyntheticPart = SyntheticPart()


@dataclass(frozen=True)
class CellRecord:
    """One cell of a campaign as stored: its knob values and its spec (JSON)."""

    campaign_id: str
    cell_id: int
    knobs: dict  # knob name -> value, as the matrix gave them
    spec: dict  # the cell's campaign spec (softnet.campaign.spec), as stored
    probe_max_rate_pps: float | None

    @functools.cached_property
    def settings(self) -> CellSpec:
        return CellSpec.model_validate(self.spec)

    @property
    def method_kind(self) -> str:
        return self.settings.method.kind


@dataclass(frozen=True)
class CampaignRecord:
    campaign_id: str
    name: str | None
    spec_hash: str | None
    spec: dict | None  # None when the stored text is not JSON
    spec_text: str  # as stored
    created_unix_s: float | None


@dataclass
class ResultsProvenance:
    """The campaigns of a results directory and, per (campaign, cell), the
    provenance of each trial result (kernel, host, host changes...)."""

    campaigns: list[CampaignRecord]
    trial_provenance: dict[tuple[str, int], list[StoredProvenance]] = field(default_factory=dict)


@dataclass
class SweepCell:
    """One cell of a load sweep with its trial results (load order, then run)."""

    campaign_id: str
    cell_id: int
    name: str  # the cell spec's name (the campaign id when it has none)
    knobs: dict
    trials: list[StoredTrial]
    synthetic: SyntheticPart | None = None  # the model, when the cell's SUT is the synthetic one


def is_results_dir(path: str | Path) -> bool:
    """A results directory, or a Parquet export of one or more (softnet export)."""
    return is_store_dir(path)


def open_results(results_dir: str | Path) -> Store:
    """A read-only Store of ``results_dir``; an InputError naming the file
    when it is missing, not a DuckDB database, or not softnet's tables."""
    db = Path(results_dir) / DB_NAME
    if not db.is_file() and not is_export_dir(results_dir):
        raise InputError(str(results_dir), f"no {DB_NAME} here, nor the Parquet trees of `softnet export` "
                         "(not a softnet results directory)")
    try:
        store = Store(results_dir, read_only=True)
    except duckdb.Error as exc:
        what = "a DuckDB database" if db.is_file() else "softnet's Parquet export"
        raise InputError(str(db if db.is_file() else results_dir),
                         f"cannot be read as {what} ({_first_line(exc)})") from None
    try:
        _check_tables(store, store.source)
    except BaseException:
        store.close()
        raise
    return store


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _check_tables(store: Store, db: str) -> None:
    have: dict[str, set] = {}
    for table, column in store.db.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall():
        have.setdefault(table, set()).add(column)
    missing = [f"{t}.{c}" for t, cols in REQUIRED_COLUMNS.items() for c in sorted(cols - have.get(t, set()))]
    if missing:
        raise InputError(str(db), "not a softnet results database: it lacks " + ", ".join(missing[:6])
                         + (f" and {len(missing) - 6} more" if len(missing) > 6 else ""))


def _where(store: Store, campaign_id, cell_id, load_index, run_index) -> str:
    return (f"{store.source} (campaign {campaign_id}, cell {cell_id}, load {load_index}, "
            f"run {run_index})")


def _document(store: Store, key: tuple[str, int, int, int], text) -> dict:
    """The stored result JSON of a trial row, parsed and schema-checked."""
    where = _where(store, *key)
    try:
        result = json.loads(text)
    except (TypeError, ValueError):
        raise InputError(where, "the stored trial result is not a JSON document") from None
    if not isinstance(result, dict):
        raise InputError(where, "the stored trial result is not a JSON object")
    check_schema(result, where)
    return result


def _stored(store: Store, where: str, args: list) -> list[StoredTrial]:
    rows = store.db.execute("SELECT campaign_id, cell_id, load_index, run_index, result_json FROM trials "
                            f"WHERE {where} ORDER BY campaign_id, cell_id, load_index, run_index", args).fetchall()
    out = []
    for cid, cell, load, run, text in rows:
        doc = _document(store, (cid, cell, load, run), text)
        out.append(StoredTrial(cid, cell, load, run, StoredResult.parse(doc, _where(store, cid, cell, load, run)),
                               doc))
    return out


def campaigns(store: Store) -> list[CampaignRecord]:
    """Every campaign, oldest first."""
    out = []
    rows = store.db.execute("SELECT campaign_id, name, spec_hash, spec_json, created_unix_s FROM campaigns "
                            "ORDER BY created_unix_s").fetchall()
    for campaign_id, name, spec_hash, text, created in rows:
        text = text or ""
        try:
            spec = json.loads(text or "null")
        except ValueError:
            spec = None
        out.append(CampaignRecord(campaign_id, name, spec_hash, spec, text, created))
    return out


def cells(store: Store, campaign_id: str) -> list[CellRecord]:
    """A campaign's cells in cell order."""
    rows = store.db.execute("SELECT cell_id, knobs_json, spec_json, probe_max_rate_pps FROM cells "
                            "WHERE campaign_id = ? ORDER BY cell_id", [campaign_id]).fetchall()
    return [CellRecord(campaign_id, cell_id, json.loads(knobs), json.loads(spec), probe)
            for cell_id, knobs, spec, probe in rows]


def stored_trials(store: Store, campaign_id: str, cell_id: int | None = None,
                  run_index: int | None = None) -> list[StoredTrial]:
    """A campaign's trials (of one cell, of one run of it), by cell, then
    load index, then run; each result parsed and schema-checked."""
    where, args = "campaign_id = ?", [campaign_id]
    if cell_id is not None:
        where, args = where + " AND cell_id = ?", args + [cell_id]
    if run_index is not None:
        where, args = where + " AND run_index = ?", args + [run_index]
    return _stored(store, where, args)


def trial_results(store: Store, campaign_id: str, cell_id: int, run_index: int | None = None) -> list[dict]:
    """Result dicts of a cell's trials (of one run when ``run_index`` is given),
    in load order: the stored JSON, for callers that read it by key
    (``stored_trials`` gives them typed)."""
    return [t.document for t in stored_trials(store, campaign_id, cell_id, run_index)]


def search_goals(store: Store, campaign_id: str) -> list[SearchGoalRow]:
    """Stored goals, validated, of every search of a campaign (by cell, loss ratio, run)."""
    return store.search_goals(campaign_id)


def provenance(store: Store, campaign_ids: list[str] | None = None) -> ResultsProvenance:
    """The campaigns (all, or ``campaign_ids``) and each trial's provenance."""
    records = [c for c in campaigns(store) if campaign_ids is None or c.campaign_id in campaign_ids]
    out = ResultsProvenance(records)
    for cid in (c.campaign_id for c in records):
        for t in stored_trials(store, cid):
            out.trial_provenance.setdefault((t.campaign_id, t.cell_id), []).append(
                t.result.provenance or StoredProvenance())
    return out


def sweep_cells(store: Store, campaign_ids: list[str]) -> list[SweepCell]:
    """Every cell of a load sweep (not a search: its trials sit at loads of its
    own choosing) with its trials."""
    out = []
    for cid in campaign_ids:
        for cell in cells(store, cid):
            if cell.method_kind != "sweep":
                continue
            name = cell.settings.name
            s = cell.settings
            out.append(SweepCell(cid, cell.cell_id, cid if name is None else name, cell.knobs,
                                 stored_trials(store, cid, cell.cell_id),
                                 s.synthetic if s.testbed.sut == "synthetic" else None))
    return out


def search_trials(store: Store, campaign_id: str) -> dict[tuple[int, int], list[StoredTrial]]:
    """(cell, run) -> the trials of that search, in search order (not the
    latency trials measured after it: analysis.searches.search_latency)."""
    out: dict[tuple[int, int], list[StoredTrial]] = {}
    for cell_id, run_index in sorted(store.done_searches(campaign_id)):
        trials = stored_trials(store, campaign_id, cell_id, run_index)
        out[(cell_id, run_index)] = [t for t in trials if not t.is_latency_trial]
    return out


@dataclass
class TrialStacks:
    """A trial's sampled kernel stacks (its raw file's) and the packets it forwarded in the window."""

    load_index: int
    run_index: int
    intended_rate_pps: float
    stacks: "RawStacks"
    forwarded_pkts: int
    threads: set[int] | None = None  # only these threads' samples are the trial's (see FunctionProfile.threads)


def trial_stacks(store: Store, campaign_id: str, cell_id: int, load_index: int | None = None) -> list[TrialStacks]:
    """The kernel stacks of a cell's profiled trials (of one load), from
    their raw files; trials without stacks or raw files are left out."""
    from softnet.results.raw import RawStacks

    out = []
    for t in stored_trials(store, campaign_id, cell_id):
        if load_index is not None and t.load_index != load_index:
            continue
        path = store.raw_path(campaign_id, cell_id, t.load_index, t.run_index)
        try:
            raw = json.loads(path.read_text()).get("raw_trial") or {}
        except (OSError, ValueError):
            continue
        stacks = (raw.get("profile") or {}).get("stacks")
        if stacks:
            threads = ((t.document.get("profile") or {}).get("functions") or {}).get("threads")
            out.append(TrialStacks(t.load_index, t.run_index, t.document.get("intended_rate_pps") or 0.0,
                                   RawStacks.model_validate(stacks), t.document.get("received_pkts") or 0,
                                   None if threads is None else set(threads)))
    return out


LOCAL = "local"  # the testbed of trials measured on the controller's own host (no fleet, no inventory)


def cell_testbeds(store: Store, campaign_id: str) -> dict[int, list[str]]:
    """Each cell's testbeds, sorted: those that measured its trials (a
    fleet's, an inventory's testbed, else "local")."""
    rows = store.db.execute(f"SELECT cell_id, list(DISTINCT {TRIAL_TESTBED} ORDER BY {TRIAL_TESTBED}) FROM trials "
                            "WHERE campaign_id = ? GROUP BY cell_id", [campaign_id]).fetchall()
    return dict(rows)
