"""Several generators: the maximum rate with 1 and 2 generator CPUs.

The target: "Several generator CPUs (one per TX queue) so a real NIC can
be driven past one core's rate". Here: softnet-gen straight into the sink
(SUT "none"), 64 B frames, asked for a rate no CPU reaches (UNREACHABLE_PPS),
so each generator sends back to back. Arms, run interleaved (the order
rotates every repeat) REPEATS times:

- 1 gen:           softnet-gen on CPU 0; the sink's NAPI kthread on CPU 1
                   (threaded NAPI, the default placement);
- 2 gens threaded: softnet-gen on CPUs 0 and 1 (two streams of one schedule);
                   the sink's NAPI kthread on CPU 1, beside the second one;
- 1 gen rps / 2 gens rps: the same with RPS steering: no NAPI kthread, the
                   sink's veth NAPI (and its XDP program, which comes before
                   RPS) runs in softirq on a sending CPU, preempting that
                   generator instead of queueing behind it (the placement
                   check then says the sink ran on CPU 0 too).

Per run: the generators' aggregate send rate ((window packets - 1) / span of
their send stamps: what they handed to the veth), the rate the sink counted
(received / the same span; the rest overflowed the sink's 256-frame ring),
loss. The figures per arm: median, min-max, (max - min) / median.

This VM has 2 CPUs: with two generators every CPU also runs the sink's receive
work, so two may well not beat one here; on a host with spare CPUs (and a NIC
with a TX queue per generator) they would not compete.

Writes bench/results/multigen.json (bench/results/ is ignored by git).
Run as root: SOFTNET_WAIT=3600 .venv/bin/python bench/multigen_bench.py [REPEATS]
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.campaign.trial import TrialSpec, run_trial  # noqa: E402
from softnet.provenance import provenance  # noqa: E402
from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402

FRAME_BYTES = 64
UNREACHABLE_PPS = 20e6  # neither one nor two generators reach it here (about 5-8 Mpps each)
DURATION_S, WARMUP_S = 0.4, 0.1  # of schedule at UNREACHABLE_PPS: 10 M packets, 1-3 s of sending
REPEATS = 5
ARMS = {  # name -> (steering, generator CPUs)
    "1 gen": ("threaded", [0]),
    "2 gens threaded": ("threaded", [0, 1]),
    "1 gen rps": ("rps", [0]),
    "2 gens rps": ("rps", [0, 1]),
}
OUT = Path(__file__).resolve().parent / "results" / "multigen.json"


def one_run(tb, ep, ch, cpus: list[int]) -> dict:
    spec = TrialSpec(rate_pps=UNREACHABLE_PPS, duration_s=DURATION_S, warmup_s=WARMUP_S, frame_bytes=FRAME_BYTES,
                     sample_interval_s=None, stall_probe=False, gen_cpus=cpus if len(cpus) > 1 else None)
    r = run_trial(tb, ep, spec, ch, keep_raw=True)
    gen = r["raw_trial"]["generator"]
    streams = gen["streams"] if isinstance(gen.get("streams"), list) else [gen]
    span = r["send_span_s"]
    return {
        "gen_rate_pps": r["achieved_rate_pps"],
        "sink_rate_pps": r["received_pkts"] / span if span else None,
        "sent_pkts": r["sent_pkts"], "received_pkts": r["received_pkts"], "loss_ratio": r["loss_ratio"],
        "sink_ring_full_pkts": r["diagnosis"]["ingress_ring_full_pkts"],
        "send_span_s": span,
        "per_stream": [{"cpu": s["cpu"], "sent_pkts": s["sent_pkts"],
                        "rate_pps": (s["sent_pkts"] - s["warmup_pkts"] - 1) / ((s["last_send_ns"] -
                                                                                 s["window_start_ns"]) / 1e9)}
                       for s in streams],
        "sink_cpus": r["placement"]["observed"]["sink_cpus"],
        "sink_rx_pkts_per_cpu": r["placement"]["observed"]["sink_rx_pkts_per_cpu"],
        "placement_as_requested": r["placement"]["as_requested"], "flags": r["flags"],
    }


def summary(values: list[float]) -> dict:
    med = statistics.median(values)
    return {"n": len(values), "median": med, "min": min(values), "max": max(values),
            "spread_ratio": (max(values) - min(values)) / med if med else None}


def main(repeats: int) -> dict:
    runs: dict[str, list[dict]] = {name: [] for name in ARMS}
    names = list(ARMS)
    for rep in range(repeats):
        order = names[rep % len(names):] + names[:rep % len(names)]  # rotate: no arm always first
        for steering in dict.fromkeys(ARMS[n][0] for n in order):
            with HostChanges() as ch:
                tb = LocalTestbed(ch, "none", Placement(gen_cpu=0, sut_cpus=[1], steering=steering))
                ep = tb.build()
                for name in (n for n in order if ARMS[n][0] == steering):
                    res = one_run(tb, ep, ch, ARMS[name][1])
                    runs[name].append(res)
                    print(f"repeat {rep + 1}/{repeats} {name:16s} gen {res['gen_rate_pps'] / 1e6:6.3f} Mpps  "
                          f"sink {res['sink_rate_pps'] / 1e6:6.3f} Mpps  loss {res['loss_ratio']:.4f}  "
                          f"streams {[round(s['rate_pps'] / 1e6, 3) for s in res['per_stream']]}", flush=True)
    out = {
        "bench": "multigen", "command": f"SOFTNET_WAIT=3600 .venv/bin/python bench/multigen_bench.py {repeats}",
        "config": {"sut": "none", "frame_bytes": FRAME_BYTES, "intended_rate_pps": UNREACHABLE_PPS,
                   "duration_s": DURATION_S, "warmup_s": WARMUP_S, "repeats": repeats,
                   "arms": {n: {"steering": s, "gen_cpus": c} for n, (s, c) in ARMS.items()}},
        "summary": {name: {"gen_rate_pps": summary([r["gen_rate_pps"] for r in rs]),
                           "sink_rate_pps": summary([r["sink_rate_pps"] for r in rs]),
                           "loss_ratio": summary([r["loss_ratio"] for r in rs])} for name, rs in runs.items()},
        "runs": runs,
        "provenance": provenance(sut="none", bench="multigen"),
        "finished_unix_s": time.time(),
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"\n{'arm':16s} {'gen Mpps median (min-max)':>30s} {'sink Mpps median (min-max)':>30s} {'loss median':>12s}")
    for name, s in out["summary"].items():
        g, k = s["gen_rate_pps"], s["sink_rate_pps"]
        print(f"{name:16s} {g['median'] / 1e6:13.3f} ({g['min'] / 1e6:.3f}-{g['max'] / 1e6:.3f})"
              f" {k['median'] / 1e6:13.3f} ({k['min'] / 1e6:.3f}-{k['max'] / 1e6:.3f})"
              f" {s['loss_ratio']['median']:12.4f}")
    print(f"written to {OUT}")
    return out


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else REPEATS)
