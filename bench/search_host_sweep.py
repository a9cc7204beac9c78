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
      or:  .venv/bin/python bench/search_host_sweep.py --show SWEEP.json [...]  (no measuring)
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from search_real_bench import WARMUP, RealMeasurer  # noqa: E402

from softnet.provenance import provenance  # noqa: E402
import results_file  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10, help="trials per load")
    ap.add_argument("--loads", default="100e3:1.6e6:16", help="LOW:HIGH:N, geometric")
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0, help="of the shuffled order")
    ap.add_argument("--show", type=Path, nargs="+", help="print these sweeps' bad shares and serial "
                    "correlation instead of measuring")
    args = ap.parse_args()
    if args.show:
        for f in args.show:
            print(f)
            show(json.loads(f.read_text())["trials"])
        return
    try:
        low, high, n = args.loads.split(":")
        loads = [float(round(x)) for x in np.geomspace(float(low), float(high), int(n))]
    except ValueError:
        sys.exit(f"--loads {args.loads!r}: expected LOW:HIGH:N, e.g. 100e3:1.6e6:16")
    order = [ld for ld in loads for _ in range(args.runs)]
    random.Random(args.seed).shuffle(order)

    from softnet.testbed.local import LocalTestbed, Placement
    from softnet.tools.changes import HostChanges

    path = results_file.path_for("search_host_sweep")
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
    results_file.dump(path, out)
    show(measure.log)
    print(f"{path} ({time.time() - t0:.0f} s)")


def is_bad(t: dict, loss_ratio: float) -> bool:
    return t["counted_lost_pkts"] > loss_ratio * t["sent_pkts"]


def show(trials: list[dict]) -> None:
    """Per load, the bad-trial share of NDR and PDR0.5%; for loads with 30
    trials or more, whether bad trials come in runs (trials in time order):
    the lag-1 correlation of the bad indicator and the Wald-Wolfowitz runs
    z (below -2: fewer, longer runs than independent trials give)."""
    loads = sorted({t["intended_rate_pps"] for t in trials})
    for load in loads:
        ts = [t for t in trials if t["intended_rate_pps"] == load and t["valid"]]
        line = f"{load / 1e3:8,.0f} kpps: {len(ts):3} valid, bad share"
        for name, x in (("NDR", 0.0), ("PDR0.5%", 0.005)):
            bad = np.array([is_bad(t, x) for t in ts], dtype=float)
            line += f" {name} {bad.mean() if len(bad) else float('nan'):4.0%}"
            if len(bad) >= 30 and 0 < bad.mean() < 1:
                line += f" (lag-1 r {np.corrcoef(bad[:-1], bad[1:])[0, 1]:+.2f}, runs z {runs_z(bad):+.1f})"
        print(line)


def runs_z(bad: np.ndarray) -> float:
    """Wald-Wolfowitz runs test statistic of a 0/1 sequence."""
    n, n1 = len(bad), bad.sum()
    n0 = n - n1
    runs = 1 + int(np.sum(bad[1:] != bad[:-1]))
    mean = 2 * n1 * n0 / n + 1
    var = 2 * n1 * n0 * (2 * n1 * n0 - n) / (n * n * (n - 1))
    return float((runs - mean) / math.sqrt(var))


if __name__ == "__main__":
    main()
