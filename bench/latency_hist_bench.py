"""Latency histogram benchmark: the sink's p50/p90/p99/p99.9 against the exact
delays of the same packets.

The task: "replace the XDP sink's log2 histogram with a log-linear
HDR-style histogram with <= 1% relative error, so `softnet trial` reports
p50/p90/p99/p99.9 one-way latency within 1%."

Each run is a softnet trial whose sink also keeps every window packet's delay
one by one (--exact): the truth. Per trial and percentile: the histogram's
value (bucket midpoint), the exact nearest-rank value (numpy inverted_cdf on
the kept delays), their relative error, numpy's interpolated ("linear")
percentile for reference, and what the old log2 histogram would have reported
(the upper edge of the power of two holding the exact value). A trial counts
only if the sink kept every delay (latency_exact.complete).

Writes bench/results/latency_hist_bench-<UTC>.json (ignored by git).
Run as root: .venv/bin/python bench/latency_hist_bench.py
"""
from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.analysis import latency_hist  # noqa: E402
from softnet.campaign.trial import TrialSpec, run_trial  # noqa: E402
from softnet.provenance import provenance  # noqa: E402
from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.testbed.lock import testbed_lock  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
import results_file  # noqa: E402

# Loads from idle to where this VM starts losing packets (long queues: a wide tail).
CASES = [("ipv4-fwd", 10e3), ("ipv4-fwd", 100e3), ("ipv4-fwd", 300e3), ("none", 100e3)]
REPEATS = 3
DURATION_S, WARMUP_S = 2.0, 0.5
console = Console()


def log2_upper(v: int) -> int:
    return 2 ** int(v).bit_length()


def one(sut: str, rate_pps: float) -> dict:
    spec = TrialSpec(rate_pps=rate_pps, duration_s=DURATION_S, warmup_s=WARMUP_S, sample_interval_s=None)
    with HostChanges() as ch:
        tb = LocalTestbed(ch, sut, Placement(gen_cpu=0, sut_cpus=[1]))
        ep = tb.build()
        r = run_trial(tb, ep, spec, ch, keep_raw=True, exact_pkts=spec.window_pkts)
    delays = np.asarray(r.pop("raw_trial")["sink"]["latency_exact_ns"], dtype=np.int64)
    x = r["latency_exact"]
    rows = {}
    for q in latency_hist.PERCENTILES:
        key = latency_hist.percentile_key(q)
        hist, exact = r[key], x[key]
        rows[f"p{q:g}"] = {
            "hist_ns": hist, "exact_ns": exact, "rel_error": abs(hist - exact) / exact if exact else None,
            "numpy_inverted_cdf_ns": float(np.percentile(delays, q, method="inverted_cdf")) if len(delays) else None,
            "numpy_linear_ns": float(np.percentile(delays, q)) if len(delays) else None,
            "log2_upper_ns": log2_upper(exact) if exact else None,
            "log2_upper_rel_error": (log2_upper(exact) - exact) / exact if exact else None}
    return {"sut": sut, "rate_pps": rate_pps, "received_pkts": r["received_pkts"], "loss_ratio": r["loss_ratio"],
            "flags": r["flags"], "complete": x["complete"], "max_rel_error": x["max_rel_error"],
            "bound": r["latency_percentile_rel_error"], "buckets_used": len(r["latency_hist"]["buckets"]),
            "latency_min_ns": r["latency_min_ns"], "latency_max_ns": r["latency_max_ns"], "percentiles": rows}


def main() -> int:
    if os.geteuid() != 0:
        console.print("latency_hist_bench needs root (namespaces, XDP)")
        return 2
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    config = {"cases": CASES, "repeats": REPEATS, "duration_s": DURATION_S, "warmup_s": WARMUP_S,
              "sub_bucket_bits": latency_hist.SUB_BITS, "bound": latency_hist.rel_error_bound()}
    # one lock for the whole bench: no other measuring run between its trials
    with testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 900)):
        trials = [one(sut, rate) for sut, rate in CASES for _ in range(REPEATS)]
    complete = [t for t in trials if t["complete"]]
    errors = [p["rel_error"] for t in complete for p in t["percentiles"].values() if p["rel_error"] is not None]
    result = {"bench": "latency_hist_bench", "started_utc": started.isoformat(), "config": config,
              "trials": trials, "complete_trials": len(complete),
              "max_rel_error": max(errors) if errors else None,
              "mean_rel_error": float(np.mean(errors)) if errors else None,
              "max_log2_upper_rel_error": max(p["log2_upper_rel_error"] for t in complete
                                              for p in t["percentiles"].values()) if complete else None,
              "within_bound": all(e <= latency_hist.rel_error_bound() for e in errors),
              "elapsed_s": time.monotonic() - t0}
    with HostChanges() as ch:
        result["provenance"] = provenance(ch, bench="latency_hist_bench", **config)
    path = results_file.write("latency_hist_bench", result, started)
    table = Table("SUT", "load", "pkts", "p50 µs", "p99 µs", "p99.9 µs", "max rel. error", "log2 edge err.")
    for t in trials:
        p = t["percentiles"]
        table.add_row(t["sut"], f"{t['rate_pps'] / 1e3:g}k", str(t["received_pkts"]),
                      *(f"{p[k]['hist_ns'] / 1e3:.5g}" for k in ("p50", "p99", "p99.9")),
                      f"{t['max_rel_error']:.3%}" if t["complete"] else "incomplete",
                      f"{max(v['log2_upper_rel_error'] for v in p.values()):.0%}")
    console.print(table)
    console.print(f"max relative error over {len(complete)} complete trials x 4 percentiles: "
                  f"{result['max_rel_error']:.3%} (bound {latency_hist.rel_error_bound():.3%}); "
                  f"results: {path}")
    return 0 if result["within_bound"] else 1


if __name__ == "__main__":
    sys.exit(main())
