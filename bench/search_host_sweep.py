"""Characterise this host for the search: K real 1 s trials at each of a grid
of loads, in a shuffled order (drift spreads over every load), on the real
bench's testbed and measurer (bench/search_real_bench.py).

What a search on this host is up against: per load, each trial's offered
count, the loss softnet counts (host-stall loss set apart), all loss, the
loss that followed unseen stalls, and the flags. The file is what
``softnet.search.simulated.ResampledSut`` replays: a simulated SUT whose
trials are drawn from the measured trials of the nearest loads, so the
search can be tuned on this host's own behaviour and checked on seeds.

Writes bench/results/search_host_sweep-<UTC>.json (ignored by git).
Run (root): .venv/bin/python bench/search_host_sweep.py [--runs 10] [--loads 100e3:1.6e6:16]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_real_bench import RESULTS, WARMUP, RealMeasurer  # noqa: E402

from softnet.provenance import provenance  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="trials per load")
    ap.add_argument("--loads", default="100e3:1.6e6:16", help="LOW:HIGH:N, geometric")
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0, help="of the shuffled order")
    args = ap.parse_args()
    try:
        low, high, n = args.loads.split(":")
        loads = [float(round(x)) for x in np.geomspace(float(low), float(high), int(n))]
    except ValueError:
        sys.exit(f"--loads {args.loads!r}: expected LOW:HIGH:N, e.g. 100e3:1.6e6:16")
    order = [ld for ld in loads for _ in range(args.runs)]
    random.Random(args.seed).shuffle(order)

    from softnet.testbed.local import LocalTestbed, Placement
    from softnet.tools.changes import HostChanges

    RESULTS.mkdir(exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = RESULTS / f"search_host_sweep-{stamp}.json"
    t0 = time.time()
    with HostChanges() as changes:
        tb = LocalTestbed(changes, "ipv4-fwd", Placement.default())
        measure = RealMeasurer(tb, tb.build(), changes, "set_apart")
        measure.tag = {"search": 0, "tool": "sweep"}
        for i, load in enumerate(order):
            measure(load, args.duration)
            if i % 20 == 19 or i == len(order) - 1:
                print(f"[{time.time() - t0:5.0f} s] {i + 1}/{len(order)} trials", flush=True)
    out = {"benchmark": "search_host_sweep", "settings": {
        "sut": "ipv4-fwd", "frame_bytes": 64, "loads_pps": loads, "runs": args.runs, "duration_s": args.duration,
        "warmup_s": WARMUP, "host_stall_loss": "set_apart", "order_seed": args.seed},
        "trials": [{k: t[k] for k in ("intended_rate_pps", "duration_s", "sent_pkts", "received_pkts",
                                      "counted_lost_pkts", "all_loss_ratio", "unseen_stall_pkts", "valid", "flags")}
                   for t in measure.log],
        "elapsed_s": time.time() - t0, "provenance": provenance(None, benchmark="search_host_sweep")}
    path.write_text(json.dumps(out, indent=1, default=float))
    for load in loads:
        ts = [t for t in measure.log if t["intended_rate_pps"] == load and t["valid"]]
        sent = [t["sent_pkts"] for t in ts]
        ndr = np.mean([t["counted_lost_pkts"] > 0 for t in ts]) if ts else float("nan")
        pdr = np.mean([t["counted_lost_pkts"] > 0.005 * s for t, s in zip(ts, sent)]) if ts else float("nan")
        print(f"{load / 1e3:8,.0f} kpps: {len(ts):2} valid, bad share NDR {ndr:4.0%}, PDR0.5% {pdr:4.0%}")
    print(f"{path} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
