"""Campaigns of method kind "latency": the AF_XDP delay study, one matrix cell
per configuration, `method.runs` runs of `method.duration_s` each.

Per cell the three-namespace testbed is built with the cell's host knobs, C
reflects and B forwards with softnet-xsk, then each run pings from A (one
packet per `latency.interval_s`); the kernel baseline (`ping` over the same
path) follows a configuration's last run when asked. A run's raw reads and its per-packet records
are stored before its row, so a campaign resumes after kill -9 with no run
lost or repeated.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from softnet.analysis.latency_campaigns import analyze_latency, typed_runs
from softnet.analysis.latency_eval import evaluate_run
from softnet.analysis.latency_stats import knob_key
from softnet.campaign.spec import CampaignSpec
from softnet.errors import TestbedError
from softnet.provenance import provenance
from softnet.results.latency import (FULL_FRAME_BYTES, LatencyRunResult, RawLatencyRun, XskHellos,
                                     merge_side_stamps)
from softnet.results.store import Store
from softnet.hosts.xsk_lab import XskLab, XskLabHere
from softnet.testbed.latency import LatencyKnobs, LatencyPlacement
from softnet.tools.changes import HostChanges
from softnet.traffic.xsk import XskKnobs
from softnet.units import format_duration_ns

BIND_RETRIES = 3
HOST_KNOBS = ("threaded_napi", "napi_defer_hard_irqs", "gro_flush_timeout_ns", "cstate_limit_us",
              "coalesce_rx_usecs", "coalesce_tx_usecs", "irq_suspend_timeout_ns")


def host_knobs(cell: CampaignSpec) -> LatencyKnobs:
    lat = cell.latency
    return LatencyKnobs(**{k: getattr(lat, k) for k in HOST_KNOBS},
                        busy_poll_us=lat.busy_poll_us if lat.busy_poll else None)


def socket_options(cell: CampaignSpec, role: str, cpu: int, lab: XskLab | None = None) -> XskKnobs:
    """The AF_XDP tool's knobs for one role (ping | forward | reflect): without
    poll() an application busy-spins on its rings, as in the study. Hop
    stamps only where one clock takes them all (a lab on one host): across
    hosts a hop's delay would mix two clocks."""
    lat = cell.latency
    poll = {"ping": lat.poll_sender, "forward": lat.poll_forwarder, "reflect": lat.poll_receiver}[role]
    mode = {"ping": lat.rx_mode_sender, "forward": lat.rx_mode_forwarder, "reflect": lat.rx_mode_receiver}[role]
    return XskKnobs(zero_copy=lat.bind_mode == "zero-copy", need_wakeup=lat.need_wakeup,
                    rx_mode=mode or ("poll" if poll else "busy"),
                    busy_poll_us=lat.busy_poll_us if lat.busy_poll else None, prefer_busy_poll=lat.busy_poll,
                    busy_poll_budget=lat.busy_poll_budget if lat.busy_poll else None,
                    batch=lat.batch, ring_size=lat.ring_size, xdp_mode=lat.xdp_mode, cpu=cpu,
                    stamp=lab is None or lab.one_clock)


def cell_knobs(cell: CampaignSpec) -> dict:
    """The configuration's identity in results: every latency knob."""
    return cell.latency.model_dump()


@dataclass(frozen=True)
class Run:
    """One run of a configuration: a base run of the matrix, or a re-run of the
    study's second phase at a higher rate ("fast": the interval of the
    configuration's minimum RTT, Eq. 1's no-overlap rate; "flood": no gap)."""

    index: int
    phase: str = "base"
    interval_s: float | None = None  # None: latency.interval_s
    count: int | None = None  # None: method.duration_s / interval


PHASE_INDEX = {"fast": 10_000, "flood": 20_000}  # run indexes of the re-runs: apart from the base runs
FLOOD_INTERVAL_S = 1e-6  # the tool's shortest gap


def open_lab(cell: CampaignSpec, changes: HostChanges) -> XskLab:
    """The lab of a configuration, built: on this host's namespaces, or on
    the inventory's hosts (testbed.inventory) through their agents."""
    knobs = host_knobs(cell)
    placement = LatencyPlacement(dict(cell.latency.app_cpus), dict(cell.latency.napi_cpus))
    t = cell.testbed
    if t.inventory:
        from softnet.hosts.inventory import load
        from softnet.hosts.xsk_remote import XskLabRemote

        lab = XskLabRemote(load(t.inventory), t.name, knobs, placement)
        changes.record(f"AF_XDP lab on testbed {t.name}", lab.close)
    else:
        lab = XskLabHere(changes, knobs, placement)
    lab.build()
    return lab


def run_cell(store: Store, cid: str, cell_id: int, cell: CampaignSpec, todo: list[Run],
             on_run: Callable[[int, LatencyRunResult], None]) -> None:
    with HostChanges() as changes:
        lab = open_lab(cell, changes)
        c, b = lab.hosts["c"], lab.hosts["b"]
        lab.start(socket_options(cell, "reflect", c.cpu, lab), socket_options(cell, "forward", b.cpu, lab))
        for run in todo:
            raw, records = measure_run(lab, cell, store.records_path(cid, cell_id, run.index), run,
                                       name=f"cell {cell_id} run {run.index}")
            result = evaluate_run(raw, records)
            store.add_latency_run(cid, cell_id, run.index, result.to_dict(), raw.model_dump(exclude_unset=True))
            on_run(run.index, result)


def measure_run(lab: XskLab, cell: CampaignSpec, records_path, run: Run = Run(0),
                name: str = "run") -> tuple[RawLatencyRun, object]:
    lat, m = cell.latency, cell.method
    interval_s = run.interval_s or lat.interval_s
    count = run.count or max(1, round(m.duration_s / interval_s))
    records_path.parent.mkdir(parents=True, exist_ok=True)
    before = {h: lab.netstat(h) for h in ("b", "c")}
    started = time.time()
    knobs = socket_options(cell, "ping", lab.hosts["a"].cpu, lab)
    for attempt in range(BIND_RETRIES):
        try:
            summary, hello, records = lab.ping(knobs, count, max(1000, round(interval_s * 1e9)), lat.arrivals,
                                               cell.traffic.frame_bytes, records_path)
            break
        except TestbedError as exc:
            # The previous run's socket can still hold the queue for a moment: EBUSY on bind.
            if "busy" not in str(exc).lower() or attempt == BIND_RETRIES - 1:
                raise
            time.sleep(0.5)
    side = None
    if cell.traffic.frame_bytes < FULL_FRAME_BYTES and knobs.stamp:
        # 64 B frames carry no hop slot: B and C kept their stamps beside them, by sequence number
        side = sum(merge_side_stamps(records, lab.stamps(role, records_path.with_suffix(f".{role}.bin")))
                   for role in ("forward", "reflect"))
        records.tofile(records_path)
    after = {h: lab.netstat(h) for h in ("b", "c")}
    observed = lab.observe()
    baseline = None
    # The kernel baseline once per configuration, after its last run, at its interval:
    # per run it would double a campaign at the study's 1 s interval.
    if lat.baseline_count and run.phase == "base" and run.index == m.runs - 1:
        baseline = lab.kernel_ping(lat.baseline_count, lat.interval_s, cell.traffic.frame_bytes)
    testbed = lab.describe()
    prov = provenance(None, latency=cell_knobs(cell), method=m.model_dump())
    prov["host_changes_applied"] = lab.changes_applied()
    raw = RawLatencyRun(
        knobs=cell_knobs(cell), interval_s=interval_s, phase=run.phase, count=count, ping=summary,
        hello=XskHellos(ping=hello, forward=lab.hellos["forward"], reflect=lab.hellos["reflect"]),
        forward_counters=lab.read("forward"),
        reflect_counters=lab.read("reflect"), netstat_before=before, netstat_after=after,
        kernel_baseline=baseline, observed=observed, requested_cpus={h: lab.hosts[h].cpu for h in ("a", "b", "c")},
        applied=testbed.applied, testbed=testbed, started_unix_s=started, records_path=str(records_path),
        provenance=prov, run=name, **({"side_stamps": side} if side is not None else {}))
    return raw, records


def run_latency_campaign(spec: CampaignSpec, store: Store, cid: str, cells, on_event,
                         only: set[int] | None = None, rerun: bool = True) -> None:
    """Every cell's runs not yet stored (of the cells in ``only``), then the
    re-runs per cluster (``rerun``); ``on_event(kind, done, total, text)``."""
    recovered = store.recover_latency(cid)
    done = store.done_latency_runs(cid)
    plan = [(cell_id, cell, [Run(r) for r in range(cell.method.runs) if (cell_id, r) not in done])
            for cell_id, (_knobs, cell) in enumerate(cells) if only is None or cell_id in only]
    total, count = len(done) + sum(len(t) for *_, t in plan), len(done)
    on_event("plan", count, total, f"{cid}: {len(plan)} configuration(s), {total} runs, {count} already stored"
             + (f" ({recovered} recovered from raw files)" if recovered else ""))
    for cell_id, cell, todo in plan:
        if not todo:
            continue

        def on_run(run_index: int, result: LatencyRunResult, cell_id=cell_id) -> None:
            nonlocal count
            count += 1
            on_event("trial", count, total, f"configuration {cell_id} run {run_index}: median RTT "
                     f"{_median(result)}, {result.received}/{result.sent} back"
                     + (f" [{', '.join(result.flags)}]" if result.flags else ""))
        run_cell(store, cid, cell_id, cell, todo, on_run)
    if rerun and spec.latency.rerun_per_cluster:
        rerun_phase(spec, store, cid, cells, on_event)


def _median(result: LatencyRunResult) -> str:
    med = result.rtt_stats.median_ns
    return "-" if med is None else format_duration_ns(med)


def rerun_phase(spec: CampaignSpec, store: Store, cid: str, cells, on_event) -> None:
    """The study's second phase: per cluster the configurations nearest its
    mean, re-run at the rate of their minimum RTT (one packet in flight: the
    highest rate where batches do not overlap) and then without a gap."""
    runs = store.latency_runs(cid)
    analysis = analyze_latency(store, cid, n_resamples=200, runs=runs)
    if analysis.clustering is None:
        on_event("plan", 0, 0, f"{cid}: no re-runs at higher rates ({analysis.why_not_clustered})")
        return
    cell_of = {knob_key(r.result.knobs.to_dict()): r.cell_id for r in typed_runs(runs)}
    done = store.done_latency_runs(cid)
    todo = []
    for cl in analysis.clustering.clusters:
        nearest = sorted(cl.members, key=lambda i: abs(analysis.configs[i].mean_ns - cl.mean_ns))
        for i in nearest[:spec.latency.rerun_per_cluster]:
            c = analysis.configs[i]
            cell_id = cell_of[knob_key(c.knobs)]
            min_rtt_s = float(np.median([r.rtt.min_ns for r in c.runs if r.rtt.n])) / 1e9
            runs = [Run(PHASE_INDEX["fast"], "fast", max(min_rtt_s, FLOOD_INTERVAL_S), spec.latency.rerun_count),
                    Run(PHASE_INDEX["flood"], "flood", FLOOD_INTERVAL_S, spec.latency.rerun_count)]
            todo.append((cell_id, [r for r in runs if (cell_id, r.index) not in done]))
    total = sum(len(t) for _, t in todo)
    on_event("plan", 0, total, f"{cid}: re-runs of {len(todo)} configuration(s) at higher rates, {total} to do")
    count = 0
    for cell_id, runs in todo:
        if runs:
            def on_run(run_index: int, result: LatencyRunResult, cell_id=cell_id) -> None:
                nonlocal count
                count += 1
                on_event("trial", count, total, f"configuration {cell_id} {result.phase} "
                         f"(every {format_duration_ns(result.interval_s * 1e9)}): median RTT {_median(result)}, "
                         f"{result.received}/{result.sent} back")
            run_cell(store, cid, cell_id, cells[cell_id][1], runs, on_run)
