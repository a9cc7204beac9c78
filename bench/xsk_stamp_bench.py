"""What stamping costs a round trip: median RTT with and without hop stamps.

The target: "median RTT shift <= 1 µs between
interleaved runs with and without stamping".

On the AF_XDP lab's testbed (softnet/testbed/latency.py: A pings, B forwards,
C reflects, each role pinned as LatencyPlacement.default() places it), N
pairs of runs, one with stamping on and one with `--no-stamp` on all three
roles (docs/reference/xsk.md, "Without stamps"). Everything else is the same: poll mode
everywhere, 146 B frames (every hop slot exists when stamping is on), COUNT
packets at RATE. Each run starts its own forward and reflect processes, so
the two arms differ only in the flag. The order within a pair alternates
(on-off, off-on, ...) so that a slow drift of the host hits both arms alike.

Per run: the median RTT (t3 - t0 of every received packet not flagged
impossible). Per pair: on - off. Reported: the median of the paired
differences with a bootstrap 95% CI (percentile method, 10,000 resamples),
their mean and spread, and the verdict |median shift| <= 1 µs.

    sudo SOFTNET_WAIT=3600 .venv/bin/python bench/xsk_stamp_bench.py [--pairs 10] [--count 2000] [--rate 1000]

Writes bench/results/xsk_stamp_bench-<UTC>.json (ignored by git) and prints
one line per pair.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.provenance import provenance  # noqa: E402
from softnet.results import latency  # noqa: E402
from softnet.testbed.latency import LatencyTestbed  # noqa: E402
from softnet.testbed.lock import testbed_lock  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
from softnet.traffic.xsk import FULL_FRAME_BYTES, Forward, Ping, Reflect, XskKnobs  # noqa: E402
import results_file  # noqa: E402

TARGET_NS = 1000.0
BOOTSTRAP = 10_000


def median_rtt_ns(rec: np.ndarray) -> tuple[float, int]:
    ok = ((rec["flags"] & latency.FLAG_RECEIVED) != 0) & ((rec["flags"] & latency.FLAG_IMPOSSIBLE) == 0)
    rtt = (rec["t3_ns"][ok].astype(np.int64) - rec["t0_ns"][ok].astype(np.int64))
    return (float(np.median(rtt)) if len(rtt) else float("nan")), int(ok.sum())


def bootstrap_ci(x: np.ndarray, stat=np.median, n: int = BOOTSTRAP, seed: int = 1) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n, len(x)))
    s = stat(x[idx], axis=1)
    return float(np.percentile(s, 2.5)), float(np.percentile(s, 97.5))


def one_run(changes: HostChanges, hosts: dict, stamp: bool, count: int, rate_pps: float, records: Path) -> dict:
    a, b, c = hosts["a"], hosts["b"], hosts["c"]
    knobs = {h: XskKnobs(rx_mode="poll", stamp=stamp, cpu=hosts[h].cpu) for h in "abc"}
    reflect = Reflect(changes, c.ns, c.ifname, knobs["c"])
    forward = Forward(changes, b.ns, b.ifname, b.ifname2, a_mac=b.peer_mac, c_mac=b.peer_mac2, knobs=knobs["b"])
    try:
        ping = Ping(changes, a.ns, a.ifname, a.mac, a.peer_mac, a.ip, a.peer_ip, FULL_FRAME_BYTES, knobs["a"])
        for attempt in range(3):  # the previous run's socket may hold the queue for a moment (EBUSY)
            try:
                summary, rec = ping.run(count, records, rate_pps=rate_pps)
                break
            except Exception as exc:  # noqa: BLE001
                if "busy" not in str(exc).lower() or attempt == 2:
                    raise
                time.sleep(0.5)
        fwd = forward.read()
    finally:
        forward.close()
        reflect.close()
    med, n = median_rtt_ns(rec)
    hops_stamped = int((rec["hop_ns"] != 0).any(axis=1).sum())
    return {"stamp": stamp, "median_rtt_ns": med, "rtt_pkts": n, "sent_pkts": summary["sent_pkts"],
            "received_pkts": summary["received_pkts"], "impossible_pkts": summary["impossible_pkts"],
            "late_sends": summary["late_sends"], "rtt_min_ns": summary["rtt_min_ns"],
            "p90_rtt_ns": float(np.percentile((rec["t3_ns"] - rec["t0_ns"])[rec["t3_ns"] > 0], 90))
            if n else None,
            "pkts_with_hop_stamps": hops_stamped, "hop_slots": ping.hello["hop_slots"],
            "forward_xdp_meta_pkts": fwd["xdp"]["meta_pkts"], "hello_stamp": ping.hello.get("stamp")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--count", type=int, default=2000, help="packets per run (default 2000)")
    ap.add_argument("--rate", type=float, default=1000.0, help="packets per second (default 1000)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("xsk_stamp_bench needs root (namespaces, XDP, AF_XDP)", file=sys.stderr)
        return 2
    started = datetime.now(timezone.utc)
    t_start = time.monotonic()
    load_before = os.getloadavg()
    pairs = []
    with testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 900)), HostChanges() as changes, \
            tempfile.TemporaryDirectory(prefix="xsk_stamp_bench-") as tmp:
        tb = LatencyTestbed(changes)
        hosts = tb.build()
        for i in range(args.pairs):
            order = (True, False) if i % 2 == 0 else (False, True)
            runs = {s: one_run(changes, hosts, s, args.count, args.rate, Path(tmp) / f"rec-{i}-{int(s)}.bin")
                    for s in order}
            on, off = runs[True], runs[False]
            diff = on["median_rtt_ns"] - off["median_rtt_ns"]
            pairs.append({"pair": i, "order": ["on" if s else "off" for s in order], "on": on, "off": off,
                          "diff_ns": diff})
            print(f"pair {i + 1:2d}/{args.pairs} ({'on,off' if order[0] else 'off,on'}): median RTT on "
                  f"{on['median_rtt_ns'] / 1e3:7.2f} µs ({on['received_pkts']}/{on['sent_pkts']}), off "
                  f"{off['median_rtt_ns'] / 1e3:7.2f} µs ({off['received_pkts']}/{off['sent_pkts']}), "
                  f"on - off {diff / 1e3:+7.2f} µs", flush=True)
        testbed = tb.describe()
    d = np.array([p["diff_ns"] for p in pairs], dtype=float)
    med = float(np.median(d))
    lo, hi = bootstrap_ci(d)
    checks = {"every_packet_back": all(p[k]["received_pkts"] == p[k]["sent_pkts"] for p in pairs
                                       for k in ("on", "off")),
              "on_runs_stamped_every_hop": all(p["on"]["pkts_with_hop_stamps"] == p["on"]["received_pkts"]
                                               and p["on"]["hop_slots"] == len(latency.HOPS) for p in pairs),
              "off_runs_stamped_nothing": all(p["off"]["pkts_with_hop_stamps"] == 0
                                              and p["off"]["forward_xdp_meta_pkts"] == 0 for p in pairs)}
    result = {
        "bench": "xsk_stamp_bench", "started_utc": started.isoformat(),
        "config": {"pairs": args.pairs, "count": args.count, "rate_pps": args.rate,
                   "frame_bytes": FULL_FRAME_BYTES, "rx_mode": "poll", "bootstrap_resamples": BOOTSTRAP,
                   "target_abs_median_shift_ns": TARGET_NS},
        "pairs": pairs,
        "median_rtt_on_ns": [p["on"]["median_rtt_ns"] for p in pairs],
        "median_rtt_off_ns": [p["off"]["median_rtt_ns"] for p in pairs],
        "diff_ns": d.tolist(), "median_diff_ns": med, "median_diff_ci95_ns": [lo, hi],
        "mean_diff_ns": float(np.mean(d)), "std_diff_ns": float(np.std(d, ddof=1)) if len(d) > 1 else None,
        "min_diff_ns": float(d.min()), "max_diff_ns": float(d.max()),
        "checks": checks,
        "target_met": bool(abs(med) <= TARGET_NS),
        "target_met_by_ci": bool(-TARGET_NS <= lo and hi <= TARGET_NS),
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
        "testbed": testbed, "elapsed_s": time.monotonic() - t_start}
    with HostChanges() as ch:
        result["provenance"] = provenance(ch, bench="xsk_stamp_bench", **result["config"])
    path = results_file.write("xsk_stamp_bench", result, started)
    print(f"median RTT shift (on - off) over {len(d)} pairs: {med / 1e3:+.2f} µs, bootstrap 95% CI "
          f"[{lo / 1e3:+.2f}, {hi / 1e3:+.2f}] µs; mean {np.mean(d) / 1e3:+.2f} µs, range "
          f"[{d.min() / 1e3:+.2f}, {d.max() / 1e3:+.2f}] µs; target |shift| <= 1 µs: "
          f"{'met' if result['target_met'] else 'NOT met'} (CI within ±1 µs: "
          f"{'yes' if result['target_met_by_ci'] else 'no'}); checks {checks}; results: {path}")
    return 0 if result["target_met"] and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
