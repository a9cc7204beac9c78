"""Readers of a stored results directory: what the report (and any other
consumer) asks of a softnet.duckdb, as plain typed data.

Each reader takes an open ``Store`` (``open_results`` gives one, or an error
that names the file); a stored trial result is checked against the schema
versions this softnet knows, so an unknown one is an ``InputError`` naming
the version rather than a guess. Rates are in pps, times in s, as stored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from softnet.errors import InputError
from softnet.results.search import is_latency_trial
from softnet.results.store import DB_NAME, Store
from softnet.results.trial import check_schema

# Tables and columns the readers rely on; a DuckDB file without them was not
# written by softnet's store (or by one too old to read).
REQUIRED_COLUMNS = {
    "campaigns": {"campaign_id", "name", "spec_hash", "spec_json", "created_unix_s"},
    "cells": {"campaign_id", "cell_id", "knobs_json", "spec_json", "probe_max_rate_pps"},
    "trials": {"campaign_id", "cell_id", "load_index", "run_index", "result_json"},
    "searches": {"campaign_id", "cell_id", "run_index", "goal"},
}


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
    provenance dict of each trial result (kernel, host, host changes...)."""

    campaigns: list[CampaignRecord]
    trial_provenance: dict[tuple[str, int], list[dict]] = field(default_factory=dict)


@dataclass
class SweepCell:
    """One cell of a load sweep with its trial results (load order, then run)."""

    campaign_id: str
    cell_id: int
    name: str  # the cell spec's name (the campaign id when it has none)
    knobs: dict
    trials: list[dict]


def is_results_dir(path: str | Path) -> bool:
    return (Path(path) / DB_NAME).exists()


def open_results(results_dir: str | Path) -> Store:
    """A read-only Store of ``results_dir``; an InputError naming the file
    when it is missing, not a DuckDB database, or not softnet's tables."""
    db = Path(results_dir) / DB_NAME
    if not db.is_file():
        raise InputError(str(results_dir), f"no {DB_NAME} here (not a softnet results directory)")
    try:
        store = Store(results_dir, read_only=True)
    except duckdb.Error as exc:
        raise InputError(str(db), f"cannot be read as a DuckDB database ({_first_line(exc)})") from None
    try:
        _check_tables(store, db)
    except BaseException:
        store.close()
        raise
    return store


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _check_tables(store: Store, db: Path) -> None:
    rows = store.query("SELECT table_name, column_name FROM information_schema.columns")
    have: dict[str, set] = {}
    for r in rows:
        have.setdefault(r["table_name"], set()).add(r["column_name"])
    missing = [f"{t}.{c}" for t, cols in REQUIRED_COLUMNS.items() for c in sorted(cols - have.get(t, set()))]
    if missing:
        raise InputError(str(db), "not a softnet results database: it lacks " + ", ".join(missing[:6])
                         + (f" and {len(missing) - 6} more" if len(missing) > 6 else ""))


def _where(store: Store, campaign_id, cell_id, load_index, run_index) -> str:
    return (f"{store.dir / DB_NAME} (campaign {campaign_id}, cell {cell_id}, load {load_index}, "
            f"run {run_index})")


def _result(store: Store, row: dict) -> dict:
    """The stored result JSON of a trial row, parsed and schema-checked."""
    where = _where(store, row["campaign_id"], row["cell_id"], row["load_index"], row["run_index"])
    try:
        result = json.loads(row["result_json"])
    except (TypeError, ValueError):
        raise InputError(where, "the stored trial result is not a JSON document") from None
    if not isinstance(result, dict):
        raise InputError(where, "the stored trial result is not a JSON object")
    check_schema(result, where)
    return result


def _trial_rows(store: Store, where: str, args: list) -> list[dict]:
    return store.query("SELECT campaign_id, cell_id, load_index, run_index, result_json FROM trials "
                       f"WHERE {where} ORDER BY campaign_id, cell_id, load_index, run_index", args)


def campaigns(store: Store) -> list[CampaignRecord]:
    """Every campaign, oldest first."""
    out = []
    for c in store.query("SELECT * FROM campaigns ORDER BY created_unix_s"):
        text = c.get("spec_json") or ""
        try:
            spec = json.loads(text or "null")
        except ValueError:
            spec = None
        out.append(CampaignRecord(c["campaign_id"], c.get("name"), c.get("spec_hash"), spec, text,
                                  c.get("created_unix_s")))
    return out


def trial_results(store: Store, campaign_id: str, cell_id: int, run_index: int | None = None) -> list[dict]:
    """Result dicts of a cell's trials (of one run when ``run_index`` is given),
    in load order."""
    where, args = "campaign_id = ? AND cell_id = ?", [campaign_id, cell_id]
    if run_index is not None:
        where, args = where + " AND run_index = ?", args + [run_index]
    return [_result(store, r) for r in _trial_rows(store, where, args)]


def provenance(store: Store, campaign_ids: list[str] | None = None) -> ResultsProvenance:
    """The campaigns (all, or ``campaign_ids``) and each trial's provenance."""
    records = [c for c in campaigns(store) if campaign_ids is None or c.campaign_id in campaign_ids]
    out = ResultsProvenance(records)
    for cid in (c.campaign_id for c in records):
        for r in _trial_rows(store, "campaign_id = ?", [cid]):
            prov = _result(store, r).get("provenance") or {}
            out.trial_provenance.setdefault((r["campaign_id"], r["cell_id"]), []).append(prov)
    return out


def sweep_cells(store: Store, campaign_ids: list[str]) -> list[SweepCell]:
    """Every cell of a load sweep (not a search: its trials sit at loads of its
    own choosing) with its trial results."""
    out = []
    for cid in campaign_ids:
        for cell in store.cells(cid):
            spec = cell["spec"]
            if spec.get("method", {}).get("kind", "sweep") != "sweep":
                continue
            out.append(SweepCell(cid, cell["cell_id"], str(spec.get("name", cid)), cell["knobs"],
                                 trial_results(store, cid, cell["cell_id"])))
    return out


def search_trials(store: Store, campaign_id: str) -> dict[tuple[int, int], list[dict]]:
    """(cell, run) -> the trial results of that search, in search order (not
    the latency trials measured after it: analysis.searches.search_latency)."""
    out: dict[tuple[int, int], list[dict]] = {}
    rows = store.query("SELECT DISTINCT cell_id, run_index FROM searches WHERE campaign_id = ? "
                       "ORDER BY cell_id, run_index", [campaign_id])
    for r in rows:
        trials = trial_results(store, campaign_id, r["cell_id"], r["run_index"])
        out[(r["cell_id"], r["run_index"])] = [t for t in trials if not is_latency_trial(t)]
    return out
