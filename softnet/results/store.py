"""Results store: one DuckDB file per results directory, plus raw JSON per trial.

A trial is written twice, in this order: its raw JSON (tmp file + rename, so
it is whole or absent), then its row. The row's primary key is (campaign,
cell, load index, run index), so a trial can never be stored twice; a raw file
without a row (killed between the two writes) is imported on the next open.
That is what makes `softnet run` resumable after a kill -9.

A search (method kind "search") stores its trials the same way, load_index
being the trial's sequence number in the search and run_index the repeat;
its result goes to `searches`, one row per goal, once the search is complete.

A trial's kernel statistics time series (softnet.collect.sampler) is kept in
its raw file and, one row per sample and counter (raw values, cpu -1 for
host-wide ones), in `kernel_samples`; the trial row's result_json leaves it
out (it is the bulk of a trial) and keeps the per-trial aggregates.
A search is a function of its trials, so an interrupted one is resumed by
replaying its stored trials (campaign/runner.py).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from softnet import interrupts
from softnet.errors import InputError
from softnet.results.comparison import ComparisonSummary
from softnet.results.latency import LATENCY_SCHEMA_VERSION, LatencyRunResult
from softnet.results.soak import SoakSummary
from softnet.results.search import SEARCH_SCHEMA_VERSION, SearchGoalRow, StoredSearch, check_search_schema
from softnet.results.stored import StoredProvenance, StoredResult
from softnet.results.trial import KernelSamples, check_schema

DB_NAME = "softnet.duckdb"

SCHEMA = """
CREATE TABLE IF NOT EXISTS campaigns (
    campaign_id VARCHAR PRIMARY KEY, name VARCHAR, spec_hash VARCHAR, spec_json VARCHAR,
    created_unix_s DOUBLE);
CREATE TABLE IF NOT EXISTS cells (
    campaign_id VARCHAR, cell_id INTEGER, knobs_json VARCHAR, spec_json VARCHAR,
    probe_max_rate_pps DOUBLE, probe_json VARCHAR,
    PRIMARY KEY (campaign_id, cell_id));
CREATE TABLE IF NOT EXISTS trials (
    campaign_id VARCHAR, cell_id INTEGER, load_index INTEGER, run_index INTEGER,
    knobs_json VARCHAR, sut VARCHAR, ip_version INTEGER, frame_bytes INTEGER, flows INTEGER,
    intended_rate_pps DOUBLE, achieved_rate_pps DOUBLE, duration_s DOUBLE, warmup_s DOUBLE,
    sent_pkts BIGINT, received_pkts BIGINT, lost_pkts BIGINT, loss_ratio DOUBLE,
    reordered_pkts BIGINT, duplicate_pkts BIGINT,
    latency_mean_ns DOUBLE, latency_p99_upper_ns DOUBLE, ingress_ring_full_pkts BIGINT,
    flags VARCHAR[], valid BOOLEAN,
    kernel VARCHAR, cpu_model VARCHAR, softnet_version VARCHAR, spec_hash VARCHAR,
    started_unix_s DOUBLE, raw_path VARCHAR, result_json VARCHAR,
    latency_p50_ns DOUBLE, latency_p99_ns DOUBLE,
    PRIMARY KEY (campaign_id, cell_id, load_index, run_index));
-- trial result schema 3: a store made before it gains the columns (old rows: NULL)
ALTER TABLE trials ADD COLUMN IF NOT EXISTS latency_p50_ns DOUBLE;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS latency_p99_ns DOUBLE;
-- schema 4: the loss with what host stalls explain set apart, and that part
ALTER TABLE trials ADD COLUMN IF NOT EXISTS sut_lost_pkts BIGINT;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS host_stall_lost_pkts BIGINT;
-- traffic shapes (docs/how-to/traffic.md): the frame mix and the arrival process (older rows: NULL)
ALTER TABLE trials ADD COLUMN IF NOT EXISTS frame_mix VARCHAR;
ALTER TABLE trials ADD COLUMN IF NOT EXISTS arrivals VARCHAR;
CREATE TABLE IF NOT EXISTS kernel_samples (
    campaign_id VARCHAR, cell_id INTEGER, load_index INTEGER, run_index INTEGER,
    t_s DOUBLE, source VARCHAR, item VARCHAR, cpu INTEGER, value DOUBLE);
CREATE TABLE IF NOT EXISTS searches (
    campaign_id VARCHAR, cell_id INTEGER, run_index INTEGER, goal VARCHAR, loss_ratio DOUBLE,
    status VARCHAR, value_pps DOUBLE, lower_bound_pps DOUBLE, upper_bound_pps DOUBLE,
    lower_confidence DOUBLE, upper_confidence DOUBLE, lower_loss_ratio DOUBLE,
    lower_loss_ci95_low DOUBLE, lower_loss_ci95_high DOUBLE, diagnosis VARCHAR,
    trial_count INTEGER, trial_seconds DOUBLE, result_json VARCHAR,
    PRIMARY KEY (campaign_id, cell_id, run_index, goal));
-- RFC 9971's goal result, the engine and the goal's attributes (rows stored before: NULL)
ALTER TABLE searches ADD COLUMN IF NOT EXISTS relevant_lower_bound_pps DOUBLE;
ALTER TABLE searches ADD COLUMN IF NOT EXISTS relevant_upper_bound_pps DOUBLE;
ALTER TABLE searches ADD COLUMN IF NOT EXISTS conditional_throughput_pps DOUBLE;
ALTER TABLE searches ADD COLUMN IF NOT EXISTS engine VARCHAR;
ALTER TABLE searches ADD COLUMN IF NOT EXISTS exceed_ratio DOUBLE;
ALTER TABLE searches ADD COLUMN IF NOT EXISTS duration_sum_s DOUBLE;
ALTER TABLE searches ADD COLUMN IF NOT EXISTS final_trial_duration_s DOUBLE;
CREATE TABLE IF NOT EXISTS comparisons (
    campaign_id VARCHAR PRIMARY KEY, rounds INTEGER, stop_reason VARCHAR, finished BOOLEAN,
    updated_unix_s DOUBLE, result_json VARCHAR);
CREATE TABLE IF NOT EXISTS soaks (
    campaign_id VARCHAR, cell_id INTEGER, finished BOOLEAN, updated_unix_s DOUBLE, critical_load_pps DOUBLE,
    lower_pps DOUBLE, upper_pps DOUBLE, trials INTEGER, flags VARCHAR[], result_json VARCHAR,
    PRIMARY KEY (campaign_id, cell_id));
CREATE TABLE IF NOT EXISTS latency_runs (
    campaign_id VARCHAR, cell_id INTEGER, run_index INTEGER, knobs_json VARCHAR,
    sent BIGINT, received BIGINT, lost BIGINT, impossible BIGINT,
    mean_ns DOUBLE, median_ns DOUBLE, std_ns DOUBLE, q1_ns DOUBLE, q3_ns DOUBLE, min_ns DOUBLE, max_ns DOUBLE,
    p90_ns DOUBLE, p99_ns DOUBLE, p999_ns DOUBLE, baseline_median_ns DOUBLE,
    flags VARCHAR[], valid BOOLEAN, started_unix_s DOUBLE, records_path VARCHAR, result_json VARCHAR,
    PRIMARY KEY (campaign_id, cell_id, run_index));
"""
EXPORTED = ("campaigns", "cells", "trials", "searches", "kernel_samples", "latency_runs", "comparisons", "soaks")
# the testbed that measured a trial: a fleet's (its provenance), else the inventory's testbed it names, else this host
TRIAL_TESTBED = ("coalesce(json_extract_string(result_json, '$.provenance.fleet.testbed'), "
                 "json_extract_string(knobs_json, '$.\"testbed.name\"'), 'local')")
# the SUT host's kernel release (an inventory's SUT host, else this host's) and its NIC drivers (none named: veth)
TRIAL_KERNEL = ("coalesce(json_extract_string(result_json, '$.provenance.hosts.sut.kernel'), "
                "json_extract_string(result_json, '$.provenance.kernel'))")
_DRIVERS = "json_extract_string(result_json, '$.provenance.hosts.sut.interfaces.*.driver')"
TRIAL_DRIVERS = f"CASE WHEN len(coalesce({_DRIVERS}, [])) = 0 THEN ['veth'] ELSE {_DRIVERS} END"


@dataclass(frozen=True)
class LabSlice:
    """The part of a lab a read command looks at: the trials measured on
    these testbeds, SUT kernels and NIC drivers (each: any when empty), and
    the campaigns that have such trials."""

    testbeds: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    drivers: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.testbeds or self.kernels or self.drivers)

    def where(self) -> str:
        """The trials' condition, values inlined (a view takes no parameters)."""
        def listed(values: tuple[str, ...]) -> str:
            return "[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]"
        parts = ([f"list_contains({listed(self.testbeds)}, {TRIAL_TESTBED})"] if self.testbeds else []) + \
            ([f"list_contains({listed(self.kernels)}, {TRIAL_KERNEL})"] if self.kernels else []) + \
            ([f"len(list_intersect({listed(self.drivers)}, {TRIAL_DRIVERS})) > 0"] if self.drivers else [])
        return " AND ".join(parts) or "true"


# what read-only stores show, for the process (a read command's --testbed, --kernel, --driver)
_SLICE = LabSlice()


def slice_lab(lab: LabSlice) -> None:
    """Every store this process opens read-only shows ``lab``'s part only."""
    global _SLICE
    _SLICE = lab


LATENCY_STATS = ("mean_ns", "median_ns", "std_ns", "q1_ns", "q3_ns", "min_ns", "max_ns", "p90_ns", "p99_ns",
                 "p999_ns")

# the trials table's columns in the order _insert gives them (named: a store
# migrated by ALTER TABLE has its newer columns last, whatever SCHEMA says)
INSERT_COLUMNS = ("campaign_id", "cell_id", "load_index", "run_index", "knobs_json", "sut", "ip_version",
                  "frame_bytes", "flows", "intended_rate_pps", "achieved_rate_pps", "duration_s", "warmup_s",
                  "sent_pkts", "received_pkts", "lost_pkts", "loss_ratio", "reordered_pkts", "duplicate_pkts",
                  "latency_mean_ns", "latency_p99_upper_ns",
                  "ingress_ring_full_pkts", "flags", "valid", "kernel", "cpu_model", "softnet_version", "spec_hash",
                  "started_unix_s", "raw_path", "result_json", "latency_p50_ns", "latency_p99_ns",
                  "sut_lost_pkts", "host_stall_lost_pkts", "frame_mix", "arrivals")


@dataclass(frozen=True)
class TrialRecord:
    """A trial's raw file: its key, knobs, result (what the row is made of)
    and the raw trial it was evaluated from."""

    campaign_id: str
    cell_id: int
    load_index: int
    run_index: int
    knobs: dict
    result: dict
    raw_trial: dict | None

    def to_json(self) -> dict:
        return {"campaign_id": self.campaign_id, "cell_id": self.cell_id, "load_index": self.load_index,
                "run_index": self.run_index, "knobs": self.knobs, "result": self.result, "raw_trial": self.raw_trial}

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.cell_id, self.load_index, self.run_index)


def is_export_dir(path: str | Path) -> bool:
    """A folder `softnet export --format parquet` wrote (one store's or a
    lab's many): its Parquet trees, and no database."""
    p = Path(path)
    return not (p / DB_NAME).exists() and (p / "trials").is_dir() and (p / "campaigns").is_dir()


def is_store_dir(path: str | Path) -> bool:
    """A results directory (its database) or a Parquet export of one or more."""
    return (Path(path) / DB_NAME).exists() or is_export_dir(path)


class Store:
    """A results directory's database; read-only, also a Parquet export
    folder: its trees are the tables (views in an in-memory database), so
    every reader works on a lab's exports as on one store."""

    def __init__(self, results_dir: str | Path, read_only: bool = False):
        self.dir = Path(results_dir)
        self.is_export = read_only and is_export_dir(self.dir)
        if self.is_export:
            self.db = duckdb.connect(":memory:")
            interrupts.stop_on_signal(self, self.db.interrupt)
            self.db.execute(SCHEMA)
            self._attach_export()
            self._restrict(_SLICE)
            return
        if read_only and not (self.dir / DB_NAME).exists():
            raise FileNotFoundError(f"{self.dir}: no {DB_NAME} here (not a softnet results directory)")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.db = duckdb.connect(str(self.dir / DB_NAME), read_only=read_only)
        interrupts.stop_on_signal(self, self.db.interrupt)
        if not read_only:
            self.db.execute(SCHEMA)
        else:
            self._restrict(_SLICE)

    def _restrict(self, lab: LabSlice) -> None:
        """Temporary views over the tables, by their names, that hold only
        ``lab``'s trials and the rows of the campaigns that have any: every
        reader then sees the slice as a whole store."""
        if not lab:
            return
        db = self.db.execute("SELECT current_database()").fetchone()[0]
        keys: dict[str, set[str]] = {}
        for table, column in self.db.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_catalog = ? "
                "AND table_schema = 'main' AND column_name IN ('campaign_id', 'cell_id')", [db]).fetchall():
            keys.setdefault(table, set()).add(column)
        self.db.execute(f'CREATE TEMP VIEW trials AS SELECT * FROM "{db}".main.trials WHERE {lab.where()}')
        for t, cols in sorted(keys.items()):
            if t != "trials" and "campaign_id" in cols:  # a cell's rows with its trials, a campaign's with its own
                key = "(campaign_id, cell_id)" if "cell_id" in cols else "campaign_id"
                self.db.execute(f'CREATE TEMP VIEW {t} AS SELECT * FROM "{db}".main.{t} '
                                f"WHERE {key} IN (SELECT {key} FROM temp.main.trials)")

    def lab_values(self) -> dict[str, list[str]]:
        """The testbeds, SUT kernels and NIC drivers its trials (all of them, whatever the slice) were
        measured on."""
        db = self.db.execute("SELECT current_database()").fetchone()[0]
        src = f'"{db}".main.trials'
        one = lambda expr: [r[0] for r in self.db.execute(  # noqa: E731
            f"SELECT DISTINCT v FROM (SELECT {expr} AS v FROM {src}) WHERE v IS NOT NULL ORDER BY v").fetchall()]
        return {"testbed": one(TRIAL_TESTBED), "kernel": one(TRIAL_KERNEL), "driver": one(f"unnest({TRIAL_DRIVERS})")}

    @property
    def source(self) -> str:
        """What errors name: the database file, or the export folder."""
        return f"{self.dir} (Parquet export)" if self.is_export else str(self.dir / DB_NAME)

    def _attach_export(self) -> None:
        """Each exported tree as a view with its table's columns (the
        partition keys come back from the folder names, kept as text); a
        table no export holds rows of stays empty. Raw trial files stay in
        the stores; what needs them says so."""
        for table in EXPORTED:
            if not any((self.dir / table).rglob("*.parquet")):
                continue
            cols = [r[0] for r in self.db.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                [table]).fetchall()] + (["testbed"] if table == "trials" else [])
            files = str(self.dir / table / "**" / "*.parquet").replace("'", "''")
            self.db.execute(f"DROP TABLE {table}")
            self.db.execute(f"CREATE VIEW {table} AS SELECT {', '.join(cols)} FROM read_parquet('{files}', "
                            "hive_partitioning = true, hive_types_autocast = false, union_by_name = true)")

    def close(self) -> None:
        interrupts.stop_on_signal(self, None)
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- campaigns and cells -------------------------------------------
    def register_campaign(self, campaign_id: str, name: str, spec_hash: str, spec: dict, now: float) -> None:
        self.db.execute("INSERT INTO campaigns VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                        [campaign_id, name, spec_hash, json.dumps(spec), now])

    def register_cell(self, campaign_id: str, cell_id: int, knobs: dict, spec: dict) -> None:
        self.db.execute("INSERT INTO cells (campaign_id, cell_id, knobs_json, spec_json) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT DO NOTHING", [campaign_id, cell_id, json.dumps(knobs), json.dumps(spec)])

    def probe(self, campaign_id: str, cell_id: int) -> float | None:
        row = self.db.execute("SELECT probe_max_rate_pps FROM cells WHERE campaign_id = ? AND cell_id = ?",
                              [campaign_id, cell_id]).fetchone()
        return row[0] if row else None

    def set_probe(self, campaign_id: str, cell_id: int, max_rate_pps: float, probe: dict) -> None:
        self.db.execute("UPDATE cells SET probe_max_rate_pps = ?, probe_json = ? WHERE campaign_id = ? AND cell_id = ?",
                        [max_rate_pps, json.dumps(probe, default=str), campaign_id, cell_id])

    def campaigns(self) -> list[dict]:
        return self.query("SELECT * FROM campaigns ORDER BY created_unix_s")

    def cells(self, campaign_id: str) -> list[dict]:
        """A campaign's cells as dicts (softnet.results.readers.cells: typed)."""
        rows = self.db.execute("SELECT campaign_id, cell_id, probe_max_rate_pps, probe_json, knobs_json, spec_json "
                               "FROM cells WHERE campaign_id = ? ORDER BY cell_id", [campaign_id]).fetchall()
        return [{"campaign_id": cid, "cell_id": cell, "probe_max_rate_pps": probe, "probe_json": probe_json,
                 "knobs": json.loads(knobs), "spec": json.loads(spec)}
                for cid, cell, probe, probe_json, knobs, spec in rows]

    # ---- trials -----------------------------------------------------------
    def raw_folder(self, campaign_id: str) -> Path:
        return self.dir / "raw" / campaign_id

    def raw_path(self, campaign_id: str, cell_id: int, load_index: int, run_index: int) -> Path:
        return self.raw_folder(campaign_id) / f"cell{cell_id:03d}-load{load_index:03d}-run{run_index:03d}.json"

    def add_trial(self, campaign_id: str, cell_id: int, load_index: int, run_index: int,
                  knobs: dict, result: dict) -> None:
        path = self.raw_path(campaign_id, cell_id, load_index, run_index)
        path.parent.mkdir(parents=True, exist_ok=True)
        # The raw trial (what was read; evaluate(raw) gives the result again)
        # goes to the raw file only: taken off the caller's result here.
        record = TrialRecord(campaign_id, cell_id, load_index, run_index, knobs, result,
                             result.pop("raw_trial", None))
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record.to_json(), default=str))
        os.replace(tmp, path)
        self._insert(record, path)

    def _insert(self, record: TrialRecord, path: Path) -> None:
        r = StoredResult.parse(record.result, str(path))
        prov = r.provenance or StoredProvenance()
        stall_loss = r.loss_explained_by_host_stalls
        values = [record.campaign_id, record.cell_id, record.load_index, record.run_index, json.dumps(record.knobs),
                  r.sut, r.ip_version, r.frame_bytes, r.flows, r.intended_rate_pps, r.achieved_rate_pps, r.duration_s,
                  r.warmup_s, r.sent_pkts, r.received_pkts, r.lost_pkts, r.loss_ratio, r.reordered_pkts,
                  r.duplicate_pkts, r.latency_mean_ns, r.latency_p99_upper_ns,
                  r.diagnosis.ingress_ring_full_pkts if r.diagnosis else None, list(r.flags), bool(r.valid),
                  prov.kernel, prov.cpu_model, prov.softnet_version, prov.spec_hash, r.started_unix_s, str(path),
                  json.dumps({k: v for k, v in record.result.items() if k != "kernel_samples"}, default=str),
                  r.latency_p50_ns, r.latency_p99_ns, r.sut_lost_pkts, stall_loss.pkts if stall_loss else None,
                  r.frame_mix, r.arrivals]
        marks = ", ".join("?" * len(values))
        self.db.execute("BEGIN TRANSACTION")
        try:
            inserted = self.db.execute(f"INSERT INTO trials ({', '.join(INSERT_COLUMNS)}) VALUES ({marks}) "
                                       "ON CONFLICT DO NOTHING RETURNING 1",
                                       values).fetchall()
            if inserted and r.kernel_samples is not None:
                key = (record.campaign_id, record.cell_id, record.load_index, record.run_index)
                self._insert_samples(key, r.kernel_samples)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _insert_samples(self, key: tuple, series: KernelSamples) -> None:
        t_s, sources, items, cpus, values = [], [], [], [], []
        for (source, item, cpu), column in zip(series.keys, series.values):
            for ts, v in zip(series.t_s, column):
                if v is not None:
                    t_s.append(ts)
                    sources.append(source)
                    items.append(item)
                    cpus.append(cpu)
                    values.append(float(v))
        n = len(t_s)
        table = pa.table({"campaign_id": [key[0]] * n, "cell_id": pa.array([key[1]] * n, pa.int32()),
                          "load_index": pa.array([key[2]] * n, pa.int32()),
                          "run_index": pa.array([key[3]] * n, pa.int32()),
                          "t_s": t_s, "source": sources, "item": items, "cpu": cpus, "value": values})
        self.db.register("_samples", table)
        self.db.execute("INSERT INTO kernel_samples SELECT * FROM _samples")
        self.db.unregister("_samples")

    def recover(self, campaign_id: str) -> int:
        """Import raw files whose row is missing (a kill between the two writes)."""
        done = self.done_keys(campaign_id)
        n = 0
        for path in self.raw_trial_files(campaign_id):
            record = TrialRecord(**json.loads(path.read_text()))
            if record.key not in done:
                self._insert(record, path)
                n += 1
        return n

    def raw_trial_files(self, campaign_id: str) -> list[Path]:
        """The campaign's raw trial files (not its latency runs), by name."""
        folder = self.raw_folder(campaign_id)
        return sorted(folder.glob("cell*-load*-run*.json")) if folder.is_dir() else []

    def raw_latency_files(self, campaign_id: str) -> list[tuple[int, int, Path]]:
        """(cell, run, path) of the campaign's raw latency run files, by name."""
        out = []
        for path in sorted(self.raw_folder(campaign_id).glob("cell*-latency-run*.json")):
            cell, run = (int(x) for x in path.stem.replace("cell", "").split("-latency-run"))
            out.append((cell, run, path))
        return out

    def done_keys(self, campaign_id: str) -> set[tuple[int, int, int]]:
        rows = self.db.execute("SELECT cell_id, load_index, run_index FROM trials WHERE campaign_id = ?",
                               [campaign_id]).fetchall()
        return {tuple(r) for r in rows}

    def trials(self, campaign_id: str, cell_id: int | None = None) -> list[dict]:
        sql = "SELECT * EXCLUDE (result_json) FROM trials WHERE campaign_id = ?"
        args: list = [campaign_id]
        if cell_id is not None:
            sql += " AND cell_id = ?"
            args.append(cell_id)
        return self.query(sql + " ORDER BY cell_id, load_index, run_index", args)

    def delete_trials_from(self, campaign_id: str, cell_id: int, run_index: int, first_load_index: int) -> None:
        """Forget stored trials of a search from ``first_load_index`` on (they no
        longer match what the resumed search asks for)."""
        rows = self.db.execute("SELECT raw_path FROM trials WHERE campaign_id = ? AND cell_id = ? AND run_index = ? "
                               "AND load_index >= ?", [campaign_id, cell_id, run_index, first_load_index]).fetchall()
        for (path,) in rows:
            Path(path).unlink(missing_ok=True)
        for table in ("trials", "kernel_samples"):
            self.db.execute(f"DELETE FROM {table} WHERE campaign_id = ? AND cell_id = ? AND run_index = ? "
                            "AND load_index >= ?", [campaign_id, cell_id, run_index, first_load_index])

    def delete_trials_from_round(self, campaign_id: str, cell_id: int, first_run_index: int) -> None:
        """Forget a cell's stored trials of runs ``first_run_index`` on (a
        comparison's round that a kill cut short is measured again whole)."""
        rows = self.db.execute("SELECT raw_path FROM trials WHERE campaign_id = ? AND cell_id = ? AND run_index >= ?",
                               [campaign_id, cell_id, first_run_index]).fetchall()
        for (path,) in rows:
            Path(path).unlink(missing_ok=True)
        for table in ("trials", "kernel_samples"):
            self.db.execute(f"DELETE FROM {table} WHERE campaign_id = ? AND cell_id = ? AND run_index >= ?",
                            [campaign_id, cell_id, first_run_index])

    def delete_searches_from_round(self, campaign_id: str, cell_id: int, first_run_index: int) -> None:
        self.db.execute("DELETE FROM searches WHERE campaign_id = ? AND cell_id = ? AND run_index >= ?",
                        [campaign_id, cell_id, first_run_index])

    def trial_results(self, campaign_id: str, cell_id: int, run_index: int | None = None) -> list[dict]:
        """Result dicts of a cell's trials (of one run when ``run_index`` is given)."""
        sql, args = "SELECT result_json FROM trials WHERE campaign_id = ? AND cell_id = ?", [campaign_id, cell_id]
        if run_index is not None:
            sql, args = sql + " AND run_index = ?", args + [run_index]
        rows = self.db.execute(sql + " ORDER BY load_index, run_index", args).fetchall()
        results = [json.loads(r[0]) for r in rows]
        for r in results:
            check_schema(r, f"{self.source}: campaign {campaign_id} cell {cell_id}")
        return results

    def kernel_samples(self, campaign_id: str, cell_id: int, load_index: int, run_index: int) -> list[dict]:
        return self.query("SELECT t_s, source, item, cpu, value FROM kernel_samples WHERE campaign_id = ? AND "
                          "cell_id = ? AND load_index = ? AND run_index = ? ORDER BY source, item, cpu, t_s",
                          [campaign_id, cell_id, load_index, run_index])

    def add_search(self, campaign_id: str, cell_id: int, run_index: int, result: dict) -> None:
        """All goals of a search or none (a search with some goal rows is complete)."""
        search = StoredSearch.model_validate(result)
        rows = [SearchGoalRow.from_goal(campaign_id, cell_id, run_index, search, g).model_dump() for g in search.goals]
        self.db.execute("BEGIN TRANSACTION")
        try:
            for row, g in zip(rows, search.goals):
                # named: a store migrated by ALTER TABLE has its newer columns last
                row = {**row, "result_json": json.dumps({"schema_version": SEARCH_SCHEMA_VERSION, **g}, default=str)}
                self.db.execute(f"INSERT INTO searches ({', '.join(row)}) VALUES ({', '.join('?' * len(row))}) "
                                "ON CONFLICT DO NOTHING", list(row.values()))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def done_searches(self, campaign_id: str) -> set[tuple[int, int]]:
        rows = self.db.execute("SELECT DISTINCT cell_id, run_index FROM searches WHERE campaign_id = ?",
                               [campaign_id]).fetchall()
        return {tuple(r) for r in rows}

    def search_goals(self, campaign_id: str) -> list[SearchGoalRow]:
        """Stored goals, validated, of every search of a campaign (by cell, loss ratio, run)."""
        cur = self.db.execute("SELECT * FROM searches WHERE campaign_id = ? ORDER BY cell_id, loss_ratio, run_index",
                              [campaign_id])
        names = [d[0] for d in cur.description]
        out = []
        for row in cur.fetchall():
            columns = dict(zip(names, row))
            check_search_schema(json.loads(columns.pop("result_json")), f"{self.source}: search {campaign_id}")
            out.append(SearchGoalRow.model_validate(columns))
        return out

    def searches(self, campaign_id: str) -> list[dict]:
        """``search_goals`` as dicts, for callers that read them by key."""
        return [r.model_dump() for r in self.search_goals(campaign_id)]

    # ---- comparisons (method kind "compare") -------------------------------
    def set_comparison(self, campaign_id: str, summary: ComparisonSummary, finished: bool, now: float) -> None:
        """A comparison's result as of its last complete round, or final
        (``finished``); its trials are stored as they end."""
        self.db.execute("INSERT OR REPLACE INTO comparisons VALUES (?, ?, ?, ?, ?, ?)",
                        [campaign_id, summary.rounds, summary.stop_reason, finished, now,
                         json.dumps(summary.to_dict())])

    def comparison(self, campaign_id: str, finished_only: bool = True) -> ComparisonSummary | None:
        if not self.db.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'comparisons'").fetchall():
            return None  # a store written before comparisons
        row = self.db.execute("SELECT result_json, finished FROM comparisons WHERE campaign_id = ?",
                              [campaign_id]).fetchone()
        if row is None or (finished_only and not row[1]):
            return None
        return ComparisonSummary.from_dict(json.loads(row[0]), self.source)

    # ---- soaks (method kind "soak") ----------------------------------------
    def set_soak(self, campaign_id: str, cell_id: int, summary: SoakSummary, now: float) -> None:
        """A cell's soak summary (its trials are stored as they end)."""
        e = summary.estimate
        self.db.execute("INSERT OR REPLACE INTO soaks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [campaign_id, cell_id, summary.finished, now, e.median_pps if e else None,
                         e.lower_pps if e else None, e.upper_pps if e else None, summary.trials, summary.flags,
                         summary.model_dump_json()])

    def soaks(self, campaign_id: str) -> dict[int, SoakSummary]:
        """Each cell's stored soak summary."""
        if not self.db.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'soaks'").fetchall():
            return {}  # a store written before soaks
        rows = self.db.execute("SELECT cell_id, result_json FROM soaks WHERE campaign_id = ? ORDER BY cell_id",
                               [campaign_id]).fetchall()
        return {c: SoakSummary.model_validate_json(j) for c, j in rows}

    # ---- latency runs (the AF_XDP lab) -------------------------------------
    def records_path(self, campaign_id: str, cell_id: int, run_index: int) -> Path:
        """Per-packet records of a run (softnet.results.latency.RECORD_DTYPE)."""
        return self.dir / "records" / campaign_id / f"cell{cell_id:03d}-run{run_index:03d}.bin"

    def raw_latency_path(self, campaign_id: str, cell_id: int, run_index: int) -> Path:
        return self.dir / "raw" / campaign_id / f"cell{cell_id:03d}-latency-run{run_index:03d}.json"

    def add_latency_run(self, campaign_id: str, cell_id: int, run_index: int, result: dict, raw: dict) -> None:
        """The raw run (what was read, beside its records file) first, then its row."""
        path = self.raw_latency_path(campaign_id, cell_id, run_index)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"raw": raw, "result": result}, default=str))
        os.replace(tmp, path)
        self._insert_latency_row(campaign_id, cell_id, run_index, result)

    def _insert_latency_row(self, campaign_id: str, cell_id: int, run_index: int, result: dict) -> None:
        r = LatencyRunResult.model_validate(result)
        base = None if r.kernel_baseline is None else r.kernel_baseline.median_ns
        rtt = r.rtt.model_dump()
        values = [campaign_id, cell_id, run_index, json.dumps(r.knobs.to_dict(), default=str), r.sent, r.received,
                  r.lost, r.impossible, *(rtt[k] for k in LATENCY_STATS), base, r.flags, r.valid, r.started_unix_s,
                  r.records_path, json.dumps(result, default=str)]
        self.db.execute(f"INSERT INTO latency_runs VALUES ({', '.join('?' * len(values))}) ON CONFLICT DO NOTHING",
                        values)

    def latency_runs(self, campaign_id: str) -> list[dict]:
        """Stored latency runs, validated, with their cell id."""
        if not self.db.execute("SELECT 1 FROM information_schema.tables WHERE table_name = 'latency_runs'").fetchall():
            return []  # a store written before the latency lab
        rows = self.db.execute("SELECT cell_id, run_index, result_json FROM latency_runs WHERE campaign_id = ? "
                               "ORDER BY cell_id, run_index", [campaign_id]).fetchall()
        out = []
        for cell_id, run_index, j in rows:
            d = json.loads(j)
            if d.get("schema_version") != LATENCY_SCHEMA_VERSION:
                raise InputError(self.source, f"latency result schema version "
                                 f"{d.get('schema_version')!r}: this softnet reads {LATENCY_SCHEMA_VERSION}")
            out.append({"cell_id": cell_id, "run_index": run_index, **LatencyRunResult.model_validate(d).to_dict()})
        return out

    def recover_latency(self, campaign_id: str) -> int:
        """Rows for raw latency files whose row is missing (a kill between the two writes)."""
        done, n = self.done_latency_runs(campaign_id), 0
        for cell, run, path in self.raw_latency_files(campaign_id):
            if (cell, run) not in done:
                self._insert_latency_row(campaign_id, cell, run, json.loads(path.read_text())["result"])
                n += 1
        return n

    def done_latency_runs(self, campaign_id: str) -> set[tuple[int, int]]:
        rows = self.db.execute("SELECT cell_id, run_index FROM latency_runs WHERE campaign_id = ?",
                               [campaign_id]).fetchall()
        return {tuple(r) for r in rows}

    def query(self, sql: str, args: list | None = None) -> list[dict]:
        cur = self.db.execute(sql, args or [])
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def export(self, out_dir: str | Path, fmt: str) -> list[Path]:
        """CSV: one file per table. Parquet: one Hive-partitioned tree per
        table, by campaign (trials by the testbed that measured them first),
        so that the stores of a lab export into one folder and DuckDB reads
        them all (read_parquet('DIR/trials/**/*.parquet', hive_partitioning =
        true)); a campaign exported again replaces its partitions."""
        if fmt not in ("csv", "parquet"):
            raise ValueError(f"format '{fmt}': accepted csv, parquet")
        if self.is_export:
            raise InputError(self.source, "is an export already: export the results directories it came from")
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        have = {r[0] for r in self.db.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for table in EXPORTED:
            if table not in have:  # a store written before that table existed
                continue
            if fmt == "csv":
                path = out / f"{table}.csv"
                self.db.execute(f"COPY {table} TO '{path}' (HEADER, DELIMITER ',')")
            else:
                path = self._export_partitioned(table, out)
            paths.append(path)
        return paths

    def _export_partitioned(self, table: str, out: Path) -> Path:
        tree = out / table
        staging = Path(tempfile.mkdtemp(prefix=f".{table}-", dir=out))
        try:
            query, by = (f"SELECT *, {TRIAL_TESTBED} AS testbed FROM trials", "testbed, campaign_id") \
                if table == "trials" else (f"SELECT * FROM {table}", "campaign_id")
            self.db.execute(f"COPY ({query}) TO '{staging / table}' (FORMAT parquet, PARTITION_BY ({by}))")
            for part in sorted((staging / table).rglob("campaign_id=*")):
                dest = tree / part.relative_to(staging / table)
                if dest.exists():
                    shutil.rmtree(dest)
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(part, dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        tree.mkdir(exist_ok=True)
        return tree
