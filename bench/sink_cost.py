"""What the sink's timeline (--bin-pkts) costs per packet: the XDP program's
own run time per packet (kernel BPF run-time statistics, on only while this
runs) and the rate the sink takes, with and without --bin-pkts, interleaved.

The generator sends straight to the sink (SUT "none": the sink's XDP runs in
the veth NAPI kthread on CPU 1, the generator on CPU 0). Run as root on a
quiet host: .venv/bin/python bench/sink_cost.py [RUNS]
Prints one JSON document (per run and summary)."""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.tools.bpf_stats import enable_bpf_stats, prog_stats  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
from softnet.traffic.native import GeneratorJob, Sink, timeline_bin_pkts  # noqa: E402

CASES = [(1e6, 2_000_000), (12e6, 4_000_000)]  # (rate_pps, packets): paced, and flat out


def drain(sink: Sink) -> dict:
    last, stable = sink.read(), 0
    while stable < 3:
        time.sleep(0.02)
        cur = sink.read()
        stable = stable + 1 if cur["rx_test_pkts"] == last["rx_test_pkts"] else 0
        last = cur
    return last


def one(tb, ep, rate: float, total: int, timeline: bool) -> dict:
    with HostChanges() as tc:
        sink = Sink(tc, ep.sink_ns, ep.sink_if, total, 0, bin_pkts=timeline_bin_pkts(rate, total) if timeline else 0)
        gen = GeneratorJob.start(tc, ep, rate, total, 0, 64, 1, tb.placement.gen_cpu).wait(timeout=60)
        counts = drain(sink)
        cnt, ns = prog_stats(sink.prog_id)
        t0 = time.monotonic()
        tl = sink.timeline(gen["sent_pkts"]) if timeline else None
        tl_s = time.monotonic() - t0
    send_s = (gen["last_send_ns"] - gen["first_send_ns"]) / 1e9
    return {"timeline": timeline, "rate_pps": rate, "sent_pkts": gen["sent_pkts"], "xdp_runs": cnt,
            "xdp_ns_per_pkt": ns / cnt, "rx_pkts": counts["rx_window_pkts"], "send_s": send_s,
            "rx_rate_pps": counts["rx_window_pkts"] / send_s, "timeline_cmd_s": tl_s if tl else None}


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    fd = enable_bpf_stats()
    rows = []
    try:
        with HostChanges() as ch:
            tb = LocalTestbed(ch, "none", Placement(gen_cpu=0, sut_cpus=[1]))
            ep = tb.build()
            for rate, total in CASES:
                for _ in range(runs):
                    for timeline in (False, True):  # interleaved
                        rows.append(one(tb, ep, rate, total, timeline))
    finally:
        os.close(fd)
    summary = []
    for rate, _ in CASES:
        arm = {t: [r for r in rows if r["rate_pps"] == rate and r["timeline"] is t] for t in (False, True)}
        ns = {t: [r["xdp_ns_per_pkt"] for r in arm[t]] for t in arm}
        rx = {t: [r["rx_rate_pps"] for r in arm[t]] for t in arm}
        summary.append({
            "rate_pps": rate,
            "xdp_ns_per_pkt": {str(t).lower(): {"median": statistics.median(ns[t]), "min": min(ns[t]),
                                                "max": max(ns[t])} for t in arm},
            "xdp_ns_ratio_median": statistics.median(ns[True]) / statistics.median(ns[False]),
            "rx_rate_pps": {str(t).lower(): {"median": statistics.median(rx[t]), "min": min(rx[t]),
                                             "max": max(rx[t])} for t in arm},
        })
    print(json.dumps({"runs": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
