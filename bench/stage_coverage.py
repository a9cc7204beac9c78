"""How much of the SUT CPU's packet time the profiler's named stages cover,
trial after trial: kernel IPv4 forwarding on CPU 1 at 50 kpps, every packet
timed (duty 1), with and without a tbf qdisc on the egress (the two profiled
trials the tests check), then a sampled plan at 100 kpps (duty 0.02).

Coverage is named stage time over the softirq and NAPI-thread time measured
independently (sched_switch, softirq_entry/exit). Each row also gives the
context switches the profiler did not see on the SUT CPU (a task switched out
that the last switch seen had not switched in) and how often the kernel
skipped its sched_switch program (recursion_misses, bpftool).

Writes bench/results/stage_coverage-<UTC>.json (ignored by git).
Run as root: .venv/bin/python bench/stage_coverage.py [--runs N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import write  # noqa: E402

from softnet.campaign.trial import TrialSpec, run_trial  # noqa: E402
from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.tools import hostcmd  # noqa: E402
from softnet.tools.bpf_stats import watched  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402

PLANS = (("50 kpps, duty 1", 50e3, 1.0, False), ("50 kpps, duty 1, tbf", 50e3, 1.0, True),
         ("100 kpps, duty 0.02", 100e3, 0.02, False))


def one(rate: float, duty: float, tbf: bool) -> dict:
    # the profiler's sched_switch program (loaded for the trial only): how often the kernel skipped it
    with watched(lambda p: p.get("name") == "sn_sched_switch") as switch_progs, HostChanges() as ch:
        tb = LocalTestbed(ch, "ipv4-fwd", Placement(gen_cpu=0, sut_cpus=[1]))
        ep = tb.build()
        if tbf:
            hostcmd.in_netns(tb.ns["sut"], ["tc", "qdisc", "add", "dev", tb.ifs["sut_out"], "root", "tbf", "rate",
                                            "10gbit", "burst", "1mb", "latency", "50ms"])
        r = run_trial(tb, ep, TrialSpec(rate_pps=rate, duration_s=1.0 if duty == 1 else 2.0, warmup_s=0.2,
                                        profile=True, profile_duty=duty, sample_interval_s=None), ch)
    misses = sum(x.get("recursion_misses", 0) for x in switch_progs.values())
    p = r["profile"]
    gaps = [s["duration_ms"] for s in (r["host_stalls"] or {}).get("stalls") or []
            if s["cpu"] == 1 and s["kind"] == "gap" and 0 <= s["start_s"] <= p["window_s"]]
    return {"coverage": p["stages"][1]["coverage"], "unseen_switches": p["per_cpu"][1]["unseen_switches"],
            "vcpu_gaps_ms": gaps, "sched_switch_misses": misses}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10, help="trials per plan, interleaved")
    a = ap.parse_args()
    rows: dict[str, list[dict]] = {name: [] for name, *_ in PLANS}
    for _ in range(a.runs):
        for name, rate, duty, tbf in PLANS:
            rows[name].append(one(rate, duty, tbf))
    print(f"{'plan':<22} {'coverage min':>12} {'median':>7} {'max':>7} {'unseen sw/trial':>16}")
    for name, rs in rows.items():
        c = [x["coverage"] for x in rs]
        print(f"{name:<22} {min(c):12.4f} {statistics.median(c):7.4f} {max(c):7.4f} "
              f"{statistics.mean(x['unseen_switches'] for x in rs):16.1f}")
    print("sched_switch program skipped by the kernel (recursion_misses):",
          sum(x["sched_switch_misses"] for rs in rows.values() for x in rs))
    print(write("stage_coverage", {"plans": rows}))


if __name__ == "__main__":
    main()
