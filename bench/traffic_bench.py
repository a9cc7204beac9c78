"""Traffic shapes benchmark: softnet-gen straight into the sink (sut "none").

The target: at 1 Mpps and 500 kpps, each of constant 64 B,
IMIX, Poisson, onoff, 128 flows and bidirectional; REPEATS runs each, interleaved (the arms'
order rotates every repeat); achieved against intended rate, target within
+-0.5% at >= 1 Mpps. Each run is a softnet trial (generator on CPU 0, sink on
CPU 1, no sampler, no stall probe). Two achieved rates per run:
- "raw": (window packets - 1) / send span, from the generator's own stamps;
- "sched": what a trial reports (softnet.analysis.trial_eval.achieved_rate):
  the same at constant arrivals, else intended x schedule span / send span
  (a window need not hold whole onoff cycles).

Writes bench/results/traffic_bench-<UTC>.json (ignored by git).
Run as root: SOFTNET_WAIT=3600 .venv/bin/python bench/traffic_bench.py [REPEATS]
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.campaign.trial import TrialSpec, run_trial  # noqa: E402
from softnet.provenance import provenance  # noqa: E402
from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
import results_file  # noqa: E402

GEN_CPU, SINK_CPU = 0, 1
RATES_PPS = (1e6, 500e3)
DURATION_S, WARMUP_S = 1.0, 0.3
REPEATS = 5
TOLERANCE = 0.005
ARMS = {  # name -> TrialSpec fields
    "const 64 B": {},
    "imix": {"mix": "imix"},
    "poisson": {"arrivals": "poisson", "seed": 1},
    "onoff 32/0.5": {"arrivals": "onoff", "burst_pkts": 32, "on_duty": 0.5},
    "128 flows": {"flows": 4, "src_ips": 4, "dst_ips": 4, "dst_ports": 2},
    # both ways at once, the rate their sum; both generators on GEN_CPU
    "bidirectional": {"bidirectional": True},
}


def one_run(tb, ep, ch, rate: float, shape: dict, seed_offset: int) -> dict:
    kw = dict(shape)
    if kw.get("arrivals") == "poisson":
        kw["seed"] = kw["seed"] + seed_offset  # another draw each repeat
    spec = TrialSpec(rate_pps=rate, duration_s=DURATION_S, warmup_s=WARMUP_S, sample_interval_s=None,
                     stall_probe=False, **kw)
    r = run_trial(tb, ep, spec, ch, keep_raw=True)
    gen = r["raw_trial"]["generator"]
    span = r["send_span_s"]
    raw_rate = (r["sent_pkts"] - 1) / span if span else 0.0
    if r.get("directions"):  # each direction from its own stamps; the sum against the aggregate
        raw_rate = sum(d["achieved_rate_pps"] for d in r["directions"].values())
    sink = r["raw_trial"]["sink"]
    return {
        "raw_ratio": raw_rate / rate, "sched_ratio": r["achieved_ratio"], "sent_pkts": r["sent_pkts"],
        "received_pkts": r["received_pkts"], "lost_pkts": r["lost_pkts"],
        "sink_ring_full_pkts": r["diagnosis"]["ingress_ring_full_pkts"],
        "lag_mean_ns": gen["window_lag_mean_ns"], "lag_max_ns": gen["window_lag_max_ns"],
        "late_pkts": gen["window_late_pkts"], "throughput_bps": r.get("throughput_bps"),
        "flow_counts": r.get("flow_counts"), "size_pkts": sink.get("size_pkts"),
        "gen_cpu": gen["cpu"], "flags": r["flags"],
    }


def summary(values: list[float]) -> dict:
    return {"n": len(values), "mean": statistics.fmean(values), "min": min(values), "max": max(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def main(repeats: int) -> dict:
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    cells = [(rate, name) for rate in RATES_PPS for name in ARMS]
    runs: dict[str, list[dict]] = {f"{name} @ {rate / 1e3:g} kpps": [] for rate, name in cells}
    with HostChanges() as ch:
        tb = LocalTestbed(ch, "none", Placement(gen_cpu=GEN_CPU, sut_cpus=[SINK_CPU]), bidirectional=True)
        ep = tb.build()
        old = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {SINK_CPU})  # this process off the generator's CPU
        ch.record(f"affinity of traffic_bench (pid {os.getpid()}) -> [{SINK_CPU}]",
                  lambda: os.sched_setaffinity(0, old))
        for rep in range(repeats):
            order = cells[rep % len(cells):] + cells[:rep % len(cells)]
            for rate, name in order:
                res = one_run(tb, ep, ch, rate, ARMS[name], rep)
                key = f"{name} @ {rate / 1e3:g} kpps"
                runs[key].append(res)
                print(f"repeat {rep + 1}/{repeats} {key:28s} raw {res['raw_ratio']:.5f} sched {res['sched_ratio']:.5f}"
                      f" lost {res['lost_pkts']} late {res['late_pkts']} {','.join(res['flags'])}", flush=True)
        prov = provenance(ch, bench="traffic_bench", arms=ARMS, rates_pps=RATES_PPS)
    table = {}
    for key, rs in runs.items():
        raw, sched = [r["raw_ratio"] for r in rs], [r["sched_ratio"] for r in rs]
        table[key] = {"raw_ratio": summary(raw), "sched_ratio": summary(sched),
                      "within_tolerance_runs": sum(abs(x - 1) <= TOLERANCE for x in sched),
                      "lost_pkts": [r["lost_pkts"] for r in rs], "late_pkts": [r["late_pkts"] for r in rs]}
    return {"bench": "traffic_bench", "command": f"SOFTNET_WAIT=3600 .venv/bin/python bench/traffic_bench.py {repeats}",
            "started_utc": started.isoformat(), "elapsed_s": time.monotonic() - t0,
            "config": {"sut": "none", "gen_cpu": GEN_CPU, "sink_cpu": SINK_CPU, "rates_pps": RATES_PPS,
                       "duration_s": DURATION_S, "warmup_s": WARMUP_S, "repeats": repeats, "arms": ARMS,
                       "tolerance_ratio": TOLERANCE},
            "table": table, "runs": runs, "undo_errors": ch.undo_errors, "provenance": prov}


def print_table(result: dict) -> None:
    print(f"\n{'arm':30s} {'sched mean':>10s} {'min':>8s} {'max':>8s} {'raw mean':>9s} {'in +-0.5%':>9s} {'lost':>12s}")
    for key, row in result["table"].items():
        s, r = row["sched_ratio"], row["raw_ratio"]
        print(f"{key:30s} {s['mean']:10.5f} {s['min']:8.5f} {s['max']:8.5f} {r['mean']:9.5f} "
              f"{row['within_tolerance_runs']:>5d}/{s['n']:<3d} {max(row['lost_pkts'], key=lambda x: x or 0)!s:>12s}")


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("traffic_bench needs root (namespaces, XDP)")
        sys.exit(2)
    out = main(int(sys.argv[1]) if len(sys.argv) > 1 else REPEATS)
    path = results_file.write("traffic_bench", out)
    print_table(out)
    print(f"results: {path}")
