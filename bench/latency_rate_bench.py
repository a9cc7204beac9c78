"""How fast the AF_XDP latency lab gets through configurations, unattended.

The target: "At 3 runs x 10 s, at least 100
configurations per hour unattended; the 64-configuration study matrix at
3 x 30 s finishes in <= 2 hours."

Runs a real latency campaign through softnet.campaign.runner.run_campaign
(the code `softnet run` uses): the study's settings from
examples/afxdp-delays.toml (64 B frames, one packet per second, its kernel
baseline of one `ping` per packet of a run, C-states limited to the
shallowest) with RUNS x DURATION s and a matrix of CONFIGS configurations
taken from the study's knobs (busy_poll x poll_forwarder, then poll_receiver).
The bench holds the testbed lock for the whole campaign, so no other run
interleaves with it; it times each phase by wrapping the functions the
campaign calls (nothing in the campaign changes):

* per configuration (fixed): testbed build, forward + reflect start, the rest
  of the cell (mostly the teardown);
* per run: the ping run (its process start, the packets, the drain), the
  kernel baseline, evaluation and storing.

Reported: configurations per hour (measured, and without the kernel
baseline: measured time less the baseline's), the overhead per
configuration beyond the runs' own DURATION s (and its parts), and the
projected time of examples/afxdp-delays.toml (its cells x runs x 30 s with
these overheads, its 30 baseline pings per run included, and without them).

    sudo SOFTNET_WAIT=3600 .venv/bin/python bench/latency_rate_bench.py [--quick]

Default: 4 configurations x 3 runs x 10 s, about 5 minutes; --quick: 2 x 2 x
3 s, under a minute. Writes bench/results/latency_rate_bench-<UTC>.json
(ignored by git).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import softnet.campaign.latency as camp  # noqa: E402
from softnet.campaign.runner import run_campaign  # noqa: E402
from softnet.campaign.spec import CampaignSpec, load_spec  # noqa: E402
from softnet.provenance import provenance  # noqa: E402
from softnet.results.store import Store  # noqa: E402
from softnet.testbed.latency import LatencyTestbed  # noqa: E402
from softnet.testbed.lock import testbed_lock  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
from softnet.traffic.xsk import Ping  # noqa: E402
import results_file  # noqa: E402

STUDY = ROOT / "examples" / "afxdp-delays.toml"
MATRIX = [("latency.busy_poll", [False, True]), ("latency.poll_forwarder", [False, True]),
          ("latency.poll_receiver", [False, True])]
TARGET_CONFIGS_PER_HOUR = 100
TARGET_STUDY_S = 2 * 3600


class Timer:
    """Wall time of each phase, per configuration (cell) and per run."""

    def __init__(self):
        self.cell: int | None = None
        self.cells: dict[int, dict] = {}
        self.phase: dict[str, list[float]] = defaultdict(list)

    def wrap(self, name: str, fn):
        def timed(*a, **kw):
            t = time.monotonic()
            try:
                return fn(*a, **kw)
            finally:
                dt = time.monotonic() - t
                self.phase[name].append(dt)
                if self.cell is not None:
                    c = self.cells[self.cell]
                    c[name] = c.get(name, 0.0) + dt
                    c.setdefault(f"{name}_calls", []).append(dt)
        return timed


def install(timer: Timer) -> None:
    real_run_cell = camp.run_cell

    def run_cell(store, cid, cell_id, cell, todo, on_run):
        timer.cell = cell_id
        timer.cells[cell_id] = {"runs": len(todo)}
        t = time.monotonic()
        try:
            return real_run_cell(store, cid, cell_id, cell, todo, on_run)
        finally:
            timer.cells[cell_id]["cell_s"] = time.monotonic() - t
            timer.cell = None

    camp.run_cell = run_cell
    LatencyTestbed.build = timer.wrap("build_s", LatencyTestbed.build)
    camp.Reflect = timer.wrap("reflect_start_s", camp.Reflect)
    camp.Forward = timer.wrap("forward_start_s", camp.Forward)
    Ping.run = timer.wrap("ping_run_s", Ping.run)
    camp.kernel_ping = timer.wrap("baseline_s", camp.kernel_ping)
    camp.evaluate_run = timer.wrap("evaluate_s", camp.evaluate_run)
    camp.measure_run = timer.wrap("measure_run_s", camp.measure_run)
    Store.add_latency_run = timer.wrap("store_s", Store.add_latency_run)


def bench_spec(n_configs: int, runs: int, duration_s: float, baseline_count: int | None) -> CampaignSpec:
    data = load_spec(STUDY).model_dump()
    data["name"] = f"latency-rate-bench-{os.getpid()}"
    data["method"].update(runs=runs, duration_s=duration_s)
    if baseline_count is not None:
        data["latency"]["baseline_count"] = baseline_count
    else:  # as the study: one kernel ping per packet of the run
        data["latency"]["baseline_count"] = round(duration_s / data["latency"]["interval_s"])
    data["latency"]["cstate_limit_us"] = 0
    matrix, n = {}, 1
    for path, values in MATRIX:
        if n >= n_configs:
            break
        matrix[path] = values
        n *= len(values)
    data["matrix"] = matrix
    spec = CampaignSpec.model_validate(data)
    if len(spec.cells()) != n_configs:
        raise SystemExit(f"--configs: expected 1, 2, 4 or 8, got {n_configs}")
    return spec


def mean(xs):
    return statistics.fmean(xs) if xs else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", type=int, default=4, help="configurations: 1, 2, 4 or 8 (default 4)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per run (default 10)")
    ap.add_argument("--baseline-count", type=int, default=None,
                    help="kernel pings per run (default: one per packet, as the study)")
    ap.add_argument("--quick", action="store_true", help="2 configurations x 2 runs x 3 s")
    args = ap.parse_args()
    if args.quick:
        args.configs, args.runs, args.duration = 2, 2, 3.0
    if os.geteuid() != 0:
        print("latency_rate_bench needs root (namespaces, XDP, AF_XDP)", file=sys.stderr)
        return 2
    spec = bench_spec(args.configs, args.runs, args.duration, args.baseline_count)
    study = load_spec(STUDY)
    lat = spec.latency
    timer = Timer()
    install(timer)
    events = []

    def on_event(e):
        events.append((time.monotonic(), e.kind, e.message))
        if e.kind in ("plan", "trial"):
            print(f"[{e.done}/{e.total}] {e.message}", flush=True)

    started = datetime.now(timezone.utc)
    load_before = os.getloadavg()
    with testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 900)), \
            tempfile.TemporaryDirectory(prefix="latency_rate_bench-") as store_dir:
        t0 = time.monotonic()
        cid = run_campaign(spec, store_dir, on_event)
        wall_s = time.monotonic() - t0
    cells = [timer.cells[i] for i in sorted(timer.cells)]
    n_cfg, runs = len(cells), spec.method.runs
    duration = spec.method.duration_s
    per_cfg = []
    for c in cells:
        runs_c = c["runs"]
        baseline = c.get("baseline_s", 0.0)
        measure = c.get("measure_run_s", 0.0)
        evaluate = c.get("evaluate_s", 0.0) + c.get("store_s", 0.0)
        fixed = c["cell_s"] - measure - evaluate  # build, tools, teardown
        per_cfg.append({
            "cell_s": c["cell_s"], "runs": runs_c, "build_s": c.get("build_s", 0.0),
            "tools_start_s": c.get("reflect_start_s", 0.0) + c.get("forward_start_s", 0.0),
            "ping_run_s": c.get("ping_run_s", 0.0), "baseline_s": baseline, "evaluate_s": evaluate,
            "store_s": c.get("store_s", 0.0), "measure_run_s": measure, "fixed_s": fixed,
            "overhead_s": c["cell_s"] - runs_c * duration,
            "overhead_without_baseline_s": c["cell_s"] - runs_c * duration - baseline,
            "per_run_overhead_s": (measure + evaluate - baseline) / runs_c - duration,
            "teardown_s": fixed - c.get("build_s", 0.0) - c.get("reflect_start_s", 0.0)
            - c.get("forward_start_s", 0.0)})
    campaign_overhead_s = wall_s - sum(c["cell_s"] for c in cells)  # registering, the store
    baseline_total = sum(c["baseline_s"] for c in per_cfg)
    cfg_per_hour = n_cfg / wall_s * 3600
    cfg_per_hour_no_baseline = n_cfg / (wall_s - baseline_total) * 3600
    fixed_s = mean([c["fixed_s"] for c in per_cfg])
    per_run_s = mean([c["per_run_overhead_s"] for c in per_cfg])
    n_baseline_calls = len(timer.phase["baseline_s"])
    # a baseline call costs (count - 1) x interval (ping waits no gap after its last
    # echo) plus a constant (ping's start, its last reply)
    baseline_const_s = (mean(timer.phase["baseline_s"]) - (lat.baseline_count - 1) * max(lat.interval_s, 0.01)
                        if n_baseline_calls else 0.0)

    def project(s: CampaignSpec, with_baseline: bool) -> float:
        total = campaign_overhead_s
        for _, cell in s.cells():
            lc = cell.latency
            base = ((lc.baseline_count - 1) * max(lc.interval_s, 0.01) + baseline_const_s
                    if with_baseline and lc.baseline_count else 0.0)
            total += fixed_s + cell.method.runs * (cell.method.duration_s + per_run_s + base)
        return total

    # 3 runs x 10 s with these overheads, for the configurations-per-hour target
    ten = spec.model_copy(deep=True)
    ten.method.runs, ten.method.duration_s = 3, 10.0
    ten.latency.baseline_count = round(10.0 / lat.interval_s)  # as the study: a ping per packet
    proj_3x10 = project(ten, True) / n_cfg
    proj_3x10_nb = project(ten, False) / n_cfg
    study_s, study_nb_s = project(study, True), project(study, False)
    result = {
        "bench": "latency_rate_bench", "started_utc": started.isoformat(), "campaign_id": cid,
        "config": {"configurations": n_cfg, "runs": runs, "duration_s": duration, "interval_s": lat.interval_s,
                   "baseline_count": lat.baseline_count, "frame_bytes": spec.traffic.frame_bytes,
                   "matrix": spec.matrix, "quick": args.quick},
        "wall_s": wall_s, "configurations_per_hour": cfg_per_hour,
        "configurations_per_hour_without_baseline": cfg_per_hour_no_baseline,
        "campaign_overhead_s": campaign_overhead_s,
        "per_configuration": per_cfg,
        "overhead_per_configuration_s": {k: {"mean": mean([c[k] for c in per_cfg]),
                                             "min": min(c[k] for c in per_cfg), "max": max(c[k] for c in per_cfg)}
                                         for k in ("overhead_s", "overhead_without_baseline_s", "fixed_s",
                                                   "build_s", "tools_start_s", "teardown_s",
                                                   "baseline_s", "per_run_overhead_s")},
        "phases_s": {k: {"n": len(v), "mean": mean(v), "min": min(v), "max": max(v)}
                     for k, v in timer.phase.items() if v},
        "baseline_constant_s": baseline_const_s,
        "projection": {
            "config_s_at_3x10": proj_3x10, "configurations_per_hour_at_3x10": 3600 / proj_3x10,
            "config_s_at_3x10_without_baseline": proj_3x10_nb,
            "configurations_per_hour_at_3x10_without_baseline": 3600 / proj_3x10_nb,
            "study_spec": str(STUDY.relative_to(ROOT)), "study_configurations": len(study.cells()),
            "study_runs": study.method.runs, "study_duration_s": study.method.duration_s,
            "study_baseline_count": study.latency.baseline_count,
            "study_s": study_s, "study_h": study_s / 3600,
            "study_without_baseline_s": study_nb_s, "study_without_baseline_h": study_nb_s / 3600},
        "targets": {
            "configs_per_hour_at_3x10_ge_100": 3600 / proj_3x10 >= TARGET_CONFIGS_PER_HOUR,
            "configs_per_hour_at_3x10_without_baseline_ge_100": 3600 / proj_3x10_nb >= TARGET_CONFIGS_PER_HOUR,
            "study_le_2h": study_s <= TARGET_STUDY_S,
            "study_without_baseline_le_2h": study_nb_s <= TARGET_STUDY_S},
        "load_average_before": load_before, "load_average_after": os.getloadavg()}
    with HostChanges() as ch:
        result["provenance"] = provenance(ch, bench="latency_rate_bench", **result["config"])
    path = results_file.write("latency_rate_bench", result, started)
    o = result["overhead_per_configuration_s"]
    p = result["projection"]
    print(f"{n_cfg} configurations x {runs} runs x {duration:g} s (baseline {lat.baseline_count} pings/run) in "
          f"{wall_s:.1f} s: {cfg_per_hour:.0f} configurations/hour ({cfg_per_hour_no_baseline:.0f} without the "
          f"baseline)")
    print(f"overhead per configuration beyond its runs: {o['overhead_s']['mean']:.1f} s "
          f"[{o['overhead_s']['min']:.1f}..{o['overhead_s']['max']:.1f}] of which baseline "
          f"{o['baseline_s']['mean']:.1f} s; without it {o['overhead_without_baseline_s']['mean']:.2f} s "
          f"[{o['overhead_without_baseline_s']['min']:.2f}..{o['overhead_without_baseline_s']['max']:.2f}]: "
          f"build {o['build_s']['mean']:.2f}, tool start {o['tools_start_s']['mean']:.2f}, teardown "
          f"{o['teardown_s']['mean']:.2f}, per run {o['per_run_overhead_s']['mean']:+.2f} s")
    print(f"at 3 x 10 s: {p['configurations_per_hour_at_3x10']:.0f} configurations/hour with the baseline, "
          f"{p['configurations_per_hour_at_3x10_without_baseline']:.0f} without (target >= 100)")
    print(f"{p['study_spec']} ({p['study_configurations']} x {p['study_runs']} x {p['study_duration_s']:g} s, "
          f"{p['study_baseline_count']} baseline pings/run): projected {p['study_h']:.2f} h, "
          f"{p['study_without_baseline_h']:.2f} h without the baseline (target <= 2 h)")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
