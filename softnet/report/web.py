"""`softnet serve`: results stores in the browser, and their figures for
Prometheus. An ASGI application (Starlette, served by uvicorn): Starlette
because it is small, typed and async without a framework's ORM or admin;
the figures go out in the OpenMetrics text format through prometheus_client,
the format every scraper reads.

Pages list the campaigns of each store and a campaign's trials; /api/...
gives the same as JSON; /metrics gives each campaign's last stored trial
(rates, loss, latency percentiles, validity and flags), labelled by
campaign, cell and trial, so an alert can ignore a figure softnet cannot
vouch for. Only the stores given are read; the one file served from them
is a trial's raw file, named by its validated key; a bad request gets a 4xx
naming what was wrong, never a traceback.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import re
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from softnet.errors import InputError
from softnet.report.web_trends import trend_routes
from softnet.report.html import VerdictRow, campaign_verdicts, plotly_bundle, report_html
from softnet.results import readers
from softnet.results.soak import CriticalLoad
from softnet.results.live import LIVE_FILE, LiveCampaign, LiveCpu, read_live
from softnet.results.store import TrialRecord
from softnet.results.stored import StoredResult, StoredTrial, knobs_label

CAMPAIGN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
QUANTILES = (("0.5", "latency_p50_ns"), ("0.9", "latency_p90_ns"), ("0.99", "latency_p99_ns"),
             ("0.999", "latency_p99_9_ns"))
RAW_TRIALS = "cell*-load*-run*.json"
POLL_S = 0.25  # how often a live page's stream looks for new raw files
_PLOTTING = threading.Lock()


class HttpError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class CampaignRow:
    store: int
    results_dir: str
    campaign_id: str
    name: str | None
    kind: str
    created_unix_s: float | None
    trials: int
    valid: int
    status: str  # "running", "interrupted" (its run ended early or was killed) or "done"
    testbeds: str = ""  # where its trials were measured (a lab's testbeds, or "local"), "" while running


@dataclass(frozen=True)
class CampaignSummary:
    """A campaign as the index shows it: when, what it varied, what it found."""

    row: CampaignRow
    date: str  # UTC, to the minute
    configurations: list[str]  # the cells' knobs ("" for a campaign of one cell)
    differs: str  # its spec's settings that differ from other campaigns of its name
    verdict: str  # the verdicts its analysis gives, each once ("" while running or without)
    headline: str  # its first verdict's figure (a sweep's PDR and NDR, a search's, a comparison's)


def flat(spec: dict | None, prefix: str = "") -> dict[str, str]:
    """A spec as dotted keys ("synthetic.o_sat_pps": "400000")."""
    out: dict[str, str] = {}
    for k, v in (spec or {}).items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v) if not isinstance(v, str) else v
    return out


def spec_differences(specs: dict[str, dict | None]) -> dict[str, str]:
    """Per campaign, the settings whose values differ among campaigns of one
    name ("synthetic.o_sat_pps=400000"); empty when the name is unique."""
    flats = {cid: flat(s) for cid, s in specs.items()}
    keys = sorted({k for f in flats.values() for k in f})
    varied = [k for k in keys if len({f.get(k) for f in flats.values()}) > 1]
    return {cid: ", ".join(f"{k}={f[k]}" for k in varied if k in f) for cid, f in flats.items()}


@dataclass(frozen=True)
class TrialRow:
    cell_id: int
    load_index: int
    run_index: int
    intended_rate_pps: float
    achieved_rate_pps: float | None
    loss_ratio: float | None
    latency_p50_ns: float | None
    latency_p90_ns: float | None
    latency_p99_ns: float | None
    latency_p99_9_ns: float | None
    valid: bool | None
    flags: list[str]
    configuration: str  # the cell's knobs ("" without)
    per_cpu: dict[int, LiveCpu]  # over the window: the result's kernel statistics ({} without)
    stalls: int | None  # host stalls the probe saw on the data path's CPUs (None: no probe)
    stall_ms: float | None

    @classmethod
    def of(cls, t: StoredTrial, knobs: dict) -> "TrialRow":
        return cls.made(t.cell_id, t.load_index, t.run_index, t.result, knobs)

    @classmethod
    def made(cls, cell_id: int, load_index: int, run_index: int, r: StoredResult, knobs: dict) -> "TrialRow":
        per_cpu = {int(c): LiveCpu(busy_pct=v["cpu_time_pct"], net_rx_softirqs_per_s=v["net_rx_softirqs_per_s"],
                                   net_tx_softirqs_per_s=v["net_tx_softirqs_per_s"],
                                   softirq_tick_pct=v.get("softirq_tick_pct"))
                   for c, v in ((r.kernel or {}).get("per_cpu") or {}).items()}
        cpus = (r.host_stalls.per_cpu or {}) if r.host_stalls and not r.host_stalls.missing else None
        return cls(cell_id, load_index, run_index, r.intended_rate_pps, r.achieved_rate_pps, r.loss_ratio,
                   r.latency_p50_ns, r.latency_p90_ns, r.latency_p99_ns, r.latency_p99_9_ns, r.valid, list(r.flags),
                   knobs_label(knobs), per_cpu, None if cpus is None else sum(c.count for c in cpus.values()),
                   None if cpus is None else sum(c.total_ms for c in cpus.values()))

    @property
    def forwarded_rate_pps(self) -> float | None:
        """What came out of the SUT per second: the sent rate less the loss."""
        if self.achieved_rate_pps is None or self.loss_ratio is None:
            return None
        return self.achieved_rate_pps * (1 - self.loss_ratio)

    def to_json(self) -> dict:
        return {**asdict(self), "per_cpu": {c: v.model_dump() for c, v in self.per_cpu.items()},
                "forwarded_rate_pps": self.forwarded_rate_pps}

    @property
    def key(self) -> str:
        return f"{self.cell_id}-{self.load_index}-{self.run_index}"


def status(live: LiveCampaign | None, otherwise: str) -> str:
    """A campaign's state from its live file: "running" while its writer
    runs, "interrupted" once it is gone without finishing."""
    if live is None:
        return otherwise
    return "running" if live.writer_alive() else "interrupted"


def raw_trial(path: Path) -> TrialRow:
    """A trial from its raw file (written before its row: a running campaign's)."""
    rec = TrialRecord(**json.loads(path.read_text()))
    return TrialRow.made(rec.cell_id, rec.load_index, rec.run_index, StoredResult.parse(rec.result, str(path)),
                         rec.knobs)


class Results:
    """The results stores served, by their index on the command line."""

    def __init__(self, dirs: list[Path]):
        for d in dirs:
            if not readers.is_results_dir(d):
                raise InputError(str(d), "no softnet.duckdb here (not a softnet results directory)")
        self.dirs = [Path(d).resolve() for d in dirs]
        self._verdicts: dict[tuple[int, str, int], tuple[str, str]] = {}

    def _known(self, store: int, campaign_id: str | None = None) -> None:
        if not 0 <= store < len(self.dirs):
            raise HttpError(404, f"no results store {store}; there are {len(self.dirs)} (0..{len(self.dirs) - 1})")
        if campaign_id is not None and not CAMPAIGN_ID_RE.match(campaign_id):
            raise HttpError(400, f"'{campaign_id[:80]}' is not a campaign id (letters, digits, '.', '_', '-')")

    def _open(self, store: int):
        """The store, read-only; None while a run writing it holds DuckDB's lock."""
        self._known(store)
        try:
            return readers.open_results(self.dirs[store])
        except InputError:
            return None

    def campaigns(self) -> list[CampaignRow]:
        return [c for c, _, _ in self.campaign_trials()]

    def campaign_trials(self) -> list[tuple[CampaignRow, list[TrialRow], LiveCampaign | None]]:
        """Every campaign of every store with its trials and its live state, each store opened once."""
        out = []
        for i, d in enumerate(self.dirs):
            st = self._open(i)
            if st is None:  # a run writes it: its campaigns from their raw folders
                for folder in sorted(p for p in (d / "raw").glob("*") if p.is_dir()):
                    rows = self.raw_rows(i, folder.name)
                    live = read_live(folder)
                    out.append((CampaignRow(i, str(d), folder.name, None, "-", None, len(rows),
                                            sum(1 for r in rows if r.valid), status(live, "running")), rows, live))
                continue
            with st:
                for c in readers.campaigns(st):
                    rows = self._stored_rows(st, c.campaign_id)
                    kind = readers.CellSpec.model_validate(c.spec).method.kind if isinstance(c.spec, dict) \
                        else "sweep"
                    live = read_live(d / "raw" / c.campaign_id)
                    where = ", ".join(sorted({t for tbs in readers.cell_testbeds(st, c.campaign_id).values()
                                              for t in tbs}))
                    out.append((CampaignRow(i, str(d), c.campaign_id, c.name, kind, c.created_unix_s, len(rows),
                                            sum(1 for r in rows if r.valid), status(live, "done"), where), rows, live))
        return out

    def summaries(self) -> list[CampaignSummary]:
        """The index: every campaign with its date, configurations, what sets
        it apart from others of its name, and its verdicts (analysed once per
        count of trials, then kept)."""
        import datetime

        rows = self.campaigns()
        stored: dict[int, tuple[list, dict[str, list[str]]]] = {}  # store -> its campaigns, their cells' knobs
        for i in {c.store for c in rows if c.status != "running"}:
            st = self._open(i)
            if st is not None:  # one open per store, not per campaign
                with st:
                    recs = readers.campaigns(st)
                    knobs = {r.campaign_id: [knobs_label(x.knobs) for x in readers.cells(st, r.campaign_id)]
                             for r in recs}
                    stored[i] = (recs, knobs)
        out = []
        for c in rows:
            recs, cells = stored.get(c.store, ([], {})) if c.status != "running" else ([], {})
            specs = {r.campaign_id: r.spec for r in recs if r.name == c.name}
            configs = cells.get(c.campaign_id, [])
            verdict, headline = self._verdict(c) if c.campaign_id in cells else ("", "")
            date = "" if c.created_unix_s is None else datetime.datetime.fromtimestamp(
                c.created_unix_s, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
            differs = spec_differences(specs).get(c.campaign_id, "") if len(specs) > 1 else ""
            out.append(CampaignSummary(c, date, [x for x in configs if x], differs, verdict, headline))
        return out

    def _verdict(self, c: CampaignRow) -> tuple[str, str]:
        key = (c.store, c.campaign_id, c.trials)
        if key not in self._verdicts:
            try:
                rows = self.verdicts(c.store, c.campaign_id) or []
            except InputError:
                rows = []
            self._verdicts[key] = (", ".join(dict.fromkeys(r.verdict for r in rows)),
                                   f"{rows[0].figure}: {rows[0].value}" if rows else "")
        return self._verdicts[key]

    def trials(self, store: int, campaign_id: str) -> list[TrialRow]:
        self._known(store, campaign_id)
        st = self._open(store)
        if st is None:
            return self.raw_rows(store, campaign_id)
        with st:
            if campaign_id not in {c.campaign_id for c in readers.campaigns(st)}:
                raise HttpError(404, f"no campaign {campaign_id} in results store {store}")
            return self._stored_rows(st, campaign_id)

    @staticmethod
    def _stored_rows(st, campaign_id: str) -> list[TrialRow]:
        knobs = {c.cell_id: c.knobs for c in readers.cells(st, campaign_id)}
        return [TrialRow.of(t, knobs.get(t.cell_id, {})) for t in readers.stored_trials(st, campaign_id)]

    def soak_estimates(self, store: int, campaign_id: str) -> dict[int, CriticalLoad]:
        """Each soak cell's last stored estimate (none while a run writes the store)."""
        st = self._open(store)
        if st is None:
            return {}
        with st:
            return {cell: s.estimate for cell, s in st.soaks(campaign_id).items() if s.estimate}

    def verdicts(self, store: int, campaign_id: str) -> list[VerdictRow] | None:
        """None while a run writes the store (the analysis needs its rows)."""
        st = self._open(store)
        if st is None:
            return None
        st.close()  # the analysis opens it again, read-only
        with _PLOTTING:
            return campaign_verdicts(self.dirs[store], campaign_id)

    def report(self, store: int, campaign_id: str, plotly_js: str) -> str:
        with _PLOTTING:  # matplotlib's pyplot is not thread-safe: one report at a time
            return report_html(self.dirs[store], campaign_id=campaign_id, plotly_js=plotly_js)

    def raw_folder(self, store: int, campaign_id: str) -> Path:
        self._known(store, campaign_id)
        folder = self.dirs[store] / "raw" / campaign_id
        if not folder.is_dir() and readers.is_export_dir(self.dirs[store]):
            raise HttpError(404, f"results store {store} is a Parquet export: the raw trial files stay in the "
                            "results directory it was exported from")
        if not folder.is_dir():
            raise HttpError(404, f"no campaign {campaign_id} in results store {store}")
        return folder

    def raw_rows(self, store: int, campaign_id: str) -> list[TrialRow]:
        return [raw_trial(p) for p in sorted(self.raw_folder(store, campaign_id).glob(RAW_TRIALS))]


class Gauges:
    """The figures of one scrape, in a registry of their own."""

    TRIAL = ("results", "campaign", "configuration", "cell", "trial")

    def __init__(self) -> None:
        self.reg = CollectorRegistry()

    def gauge(self, name: str, doc: str, *extra: str, labels: tuple[str, ...] = TRIAL) -> Gauge:
        return Gauge(name, doc, (*labels, *extra), registry=self.reg)


def metrics(results: Results) -> bytes:
    """Each campaign's last stored trial (rates, loss, latency percentiles,
    per-CPU busy time and softirqs over its window, host stalls, validity
    and flags) and, while a campaign runs, its trial in progress (the kernel's
    figures over the last sample interval), in the OpenMetrics text format."""
    g = Gauges()
    done = {name: g.gauge(f"softnet_trial_{name}", doc) for name, doc in (
        ("offered_rate_pps", "load offered (packets per second)"),
        ("achieved_rate_pps", "load the generator achieved (packets per second)"),
        ("loss_ratio", "lost packets over packets sent in the window"),
        ("valid", "1 when softnet vouches for the trial's figures, 0 when a flag invalidates them"),
        ("host_stalls", "host stalls the probe saw on the data path's CPUs in the trial"),
        ("host_stall_seconds", "their total duration"))}
    latency = g.gauge("softnet_trial_latency_seconds", "one-way latency percentile", "quantile")
    flag = g.gauge("softnet_trial_flag", "a flag raised on the trial (1)", "flag")
    cpu = {name: g.gauge(f"softnet_trial_{name}", doc, "cpu") for name, doc in CPU_GAUGES}
    live = {name: g.gauge(f"softnet_live_{name}", doc) for name, doc in (
        ("offered_rate_pps", "packets per second into the SUT over the last sample interval"),
        ("forwarded_rate_pps", "packets per second out of the SUT over the last sample interval"),
        ("received_rate_pps", "packets per second at the sink over the last sample interval"),
        ("loss_ratio", "1 - received / offered over the last sample interval (packets in flight blur it)"),
        ("progress_ratio", "the trial's elapsed time over its warm-up and window"))}
    live_cpu = {name: g.gauge(f"softnet_live_{name}", doc, "cpu") for name, doc in CPU_GAUGES}
    camp = ("results", "campaign")
    state = g.gauge("softnet_campaign_state", "1 for the campaign's state", "state", labels=camp)
    trials = g.gauge("softnet_campaign_trials", "trials stored", labels=camp)
    planned = g.gauge("softnet_campaign_planned", "what the running campaign plans (its unit: trials, searches "
                      "or runs)", "unit", labels=camp)
    left = g.gauge("softnet_campaign_time_left_seconds", "at the pace of the trials run so far", labels=camp)
    soak = g.gauge("softnet_soak_critical_load_pps", "a soak's critical load: its estimate (bound=\"median\") and "
                   "interval (\"lower\", \"upper\") at the target loss ratio; live while it runs", "cell", "bound",
                   "target_loss_ratio", labels=camp)
    for c, rows, lv in results.campaign_trials():
        state.labels(c.results_dir, c.campaign_id, c.status).set(1)
        trials.labels(c.results_dir, c.campaign_id).set(c.trials)
        if rows:
            r = rows[-1]
            key = (c.results_dir, c.campaign_id, r.configuration, str(r.cell_id),
                   f"load {r.load_index} run {r.run_index}")
            for name, value in (("offered_rate_pps", r.intended_rate_pps), ("achieved_rate_pps", r.achieved_rate_pps),
                                ("loss_ratio", r.loss_ratio), ("valid", None if r.valid is None else int(r.valid)),
                                ("host_stalls", r.stalls),
                                ("host_stall_seconds", None if r.stall_ms is None else r.stall_ms / 1e3)):
                if value is not None:
                    done[name].labels(*key).set(value)
            for q, field in QUANTILES:
                ns = getattr(r, field)
                if ns is not None:
                    latency.labels(*key, q).set(ns / 1e9)
            for f in r.flags:
                flag.labels(*key, f).set(1)
            _set_cpus(cpu, key, r.per_cpu)
        estimates = ({str(lv.estimate_cell): lv.estimate} if lv is not None and lv.estimate is not None else
                     {str(cell): e for cell, e in results.soak_estimates(c.store, c.campaign_id).items()}
                     if c.kind == "soak" else {})
        for cell, e in estimates.items():
            for bound, v in (("median", e.median_pps), ("lower", e.lower_pps), ("upper", e.upper_pps)):
                soak.labels(c.results_dir, c.campaign_id, cell, bound, f"{e.target_loss_ratio:g}").set(v)
        if c.status != "running" or lv is None:
            continue
        planned.labels(c.results_dir, c.campaign_id, lv.unit).set(lv.planned)
        if (t_left := lv.time_left_s(time.time())) is not None:
            left.labels(c.results_dir, c.campaign_id).set(t_left)
        t = lv.trial
        if t is None:
            continue
        key = (c.results_dir, c.campaign_id, t.configuration, str(t.cell_id), f"load {t.load_index} run {t.run_index}")
        live["progress_ratio"].labels(*key).set(min(1.0, (time.time() - t.started_unix_s) / t.expected_s))
        if (s := t.latest) is not None:
            for name, value in (("offered_rate_pps", s.offered_pps), ("forwarded_rate_pps", s.forwarded_pps),
                                ("received_rate_pps", s.received_pps), ("loss_ratio", s.loss_ratio)):
                if value is not None:
                    live[name].labels(*key).set(value)
            _set_cpus(live_cpu, key, s.per_cpu)
    return generate_latest(g.reg)


CPU_GAUGES = (("cpu_busy_ratio", "share of the CPU's time not idle (1 - idle / wall)"),
              ("net_rx_softirqs_per_second", "NET_RX softirqs run on the CPU per second"),
              ("net_tx_softirqs_per_second", "NET_TX softirqs run on the CPU per second"))


def _set_cpus(gauges: dict[str, Gauge], key: tuple[str, ...], per_cpu: dict[int, LiveCpu]) -> None:
    for c, v in per_cpu.items():
        for name, value in (("cpu_busy_ratio", v.busy_pct / 100), ("net_rx_softirqs_per_second", v.net_rx_softirqs_per_s),
                            ("net_tx_softirqs_per_second", v.net_tx_softirqs_per_s)):
            gauges[name].labels(*key, str(c)).set(value)


def make_app(dirs: list[Path], token: str | None = None) -> Starlette:
    """``token``: required of every request (``Authorization: Bearer T`` or
    ``?token=T``) when given; `softnet serve` demands one off loopback."""
    results = Results(dirs)
    env = Environment(loader=PackageLoader("softnet.report", "templates"), autoescape=select_autoescape())

    def page(name: str, **kw) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**kw))

    async def index(request: Request) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse([asdict(r) for r in results.campaigns()])
        rows = await run_in_threadpool(results.summaries)
        return page("serve_index.html.j2", campaigns=rows, stores=results.dirs)

    async def campaign(request: Request) -> Response:
        store, cid = _store_index(request.path_params["store"]), request.path_params["campaign_id"]
        rows = results.trials(store, cid)
        if request.url.path.startswith("/api/"):
            return JSONResponse([r.to_json() for r in rows])
        token = request.query_params.get("token", "")
        return page("serve_campaign.html.j2", campaign_id=cid, store=store, results_dir=str(results.dirs[store]),
                    trials=rows, tq=f"?token={token}" if token else "", raw_base=f"/api/c/{store}/{cid}/raw",
                    status=status(read_live(results.dirs[store] / "raw" / cid), "done"),
                    verdicts=await run_in_threadpool(results.verdicts, store, cid))

    async def verdicts(request: Request) -> Response:
        store, cid = _store_index(request.path_params["store"]), request.path_params["campaign_id"]
        results.trials(store, cid)  # a 404 for an unknown campaign
        got = await run_in_threadpool(results.verdicts, store, cid)
        if got is None:
            raise HttpError(409, f"campaign {cid} is being written by a run: its verdicts come when it ends")
        return JSONResponse([asdict(v) for v in got])

    async def report(request: Request) -> Response:
        """The campaign's HTML report (every figure), as `softnet report --campaign` writes it."""
        store, cid = _store_index(request.path_params["store"]), request.path_params["campaign_id"]
        results.trials(store, cid)
        try:
            token = request.query_params.get("token", "")
            text = await run_in_threadpool(results.report, store, cid,
                                           "/static/plotly.min.js" + (f"?token={token}" if token else ""))
        except InputError as exc:
            raise HttpError(409, f"no report of campaign {cid} now: {exc}") from None
        except ValueError as exc:  # nothing a report can show yet
            raise HttpError(404, f"no report of campaign {cid}: {exc}") from None
        return HTMLResponse(text)

    async def events(request: Request) -> Response:
        """Server-sent events: each trial of the campaign as its raw file lands
        (those there already first), checked every POLL_S."""
        folder = results.raw_folder(_store_index(request.path_params["store"]), request.path_params["campaign_id"])

        async def stream():
            seen: set[Path] = set()
            live_stamp: int | None = None
            while not await request.is_disconnected():
                for path in sorted(set(folder.glob(RAW_TRIALS)) - seen):
                    seen.add(path)
                    yield f"data: {json.dumps(raw_trial(path).to_json())}\n\n"
                # the trial in progress, at each kernel sample (null: the campaign ended)
                stamp = _mtime(folder / LIVE_FILE)
                if stamp != live_stamp:
                    live_stamp, lv = stamp, read_live(folder)
                    body = None if lv is None else {**lv.model_dump(), "status": status(lv, "done"),
                                                    "time_left_s": lv.time_left_s(time.time())}
                    yield f"event: live\ndata: {json.dumps(body)}\n\n"
                await asyncio.sleep(POLL_S)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def raw(request: Request) -> Response:
        """One trial's raw file (its key, knobs, result and the raw reads it was evaluated from)."""
        p = request.path_params
        folder = results.raw_folder(_store_index(p["store"]), p["campaign_id"])
        cell, load, run = (_index(p[k], k) for k in ("cell", "load", "run"))
        path = folder / f"cell{cell:03d}-load{load:03d}-run{run:03d}.json"
        if not path.is_file():
            raise HttpError(404, f"no trial cell {cell} load {load} run {run} in campaign {p['campaign_id']}")
        return FileResponse(path, media_type="application/json")

    async def plotly_js(request: Request) -> Response:
        """The charting library, from the installed plotly package: the pages need no internet."""
        return FileResponse(plotly_bundle(), media_type="text/javascript")

    async def prometheus(request: Request) -> Response:
        return Response(metrics(results), media_type=CONTENT_TYPE_LATEST)

    async def refused(request: Request, exc: HttpError) -> Response:
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    async def not_found(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": f"no page {request.url.path[:200]}"}, status_code=404)

    routes = [Route("/", index), Route("/api/campaigns", index),
              Route("/c/{store}/{campaign_id}", campaign), Route("/api/c/{store}/{campaign_id}/trials", campaign),
              Route("/events/c/{store}/{campaign_id}", events),
              Route("/api/c/{store}/{campaign_id}/raw/{cell}/{load}/{run}", raw),
              Route("/api/c/{store}/{campaign_id}/verdicts", verdicts), Route("/report/{store}/{campaign_id}", report),
              Route("/metrics", prometheus), Route("/static/plotly.min.js", plotly_js),
              Route("/favicon.ico", lambda request: Response(status_code=204))]
    routes += trend_routes(results, page)  # /trends, /api/trends (web_trends)
    app = Starlette(routes=routes, exception_handlers={HttpError: refused, 404: not_found})
    if token:
        app.add_middleware(TokenRequired, token=token)
    return app


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def _store_index(text: str) -> int:
    return _index(text, "results store")


def _index(text: str, what: str) -> int:
    if not text.isdigit() or len(text) > 9:
        raise HttpError(400, f"'{text[:40]}' is not a {what} number")
    return int(text)


class TokenRequired:
    """Every request carries the token, or gets 401 (compared in constant time)."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            request = Request(scope)
            given = request.query_params.get("token") or \
                request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), self.token):
                await JSONResponse({"error": "a token is required: ?token=T or Authorization: Bearer T"},
                                   status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def check_bind(host: str, token: str | None) -> None:
    """Off loopback, a token: the results and the host's figures are not for everyone on the network."""
    if host not in LOOPBACK and not token:
        raise InputError("--token", f"serving on {host} (not loopback) needs a token: give --token T "
                         "(requests then carry ?token=T or Authorization: Bearer T)")
