"""eBPF profiler overhead: forwarding capacity and CPU per packet, profiler on vs off.

Targets: under 2% capacity drop and at most 50 ns of SUT CPU per packet at
the default plan, measured interleaved in one run.

On this VM the PDR itself cannot be pinned (search bench: CV 27-57% over
repeats), so the capacity is measured where it is stable enough to compare:
the forwarding rate under overload (1.5 Mpps offered to kernel IPv4
forwarding on one CPU). Trials alternate profiler off / on (and a second
plan with --with-base B), REPEATS rounds; the drop is the mean paired
difference over mean(off), with a t interval over the pairs. The CPU per
packet comes from the same alternation at 200 kpps (no loss): the SUT CPU's
time (100 x (1 - nohz idle / wall), from the sampler) over the forwarded
packets, on minus off, in ns per packet.

Writes bench/results/profile_bench<tag>-<UTC>.json (ignored by git).
Run as root: .venv/bin/python bench/profile_bench.py [--repeats N] [--duty F | --no-per-packet] [--base-duty B]
(--duty: the share of time the stage events are attached, default 0.02 as in trials; --base-duty: the
other programs', default 0.2 as in trials). With --stack-hz N the arms are the profiler with and
without softnet-stacks at N Hz ("off" then means the profiler on, stacks off): the sampler's own cost.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.provenance import provenance  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.campaign.trial import TrialSpec, run_trial  # noqa: E402
import results_file  # noqa: E402

REPEATS = 6
OVERLOAD_PPS, LOAD_PPS, WINDOW_S = 1.5e6, 200e3, 2.0
TARGET_DROP, TARGET_NS = 0.02, 50.0


def paired(on: list[float], off: list[float]) -> dict:
    """on - off over pairs from the same repeat (run back to back: the VM's drift cancels)."""
    d = np.asarray(on) - np.asarray(off)
    t = stats.ttest_1samp(d, 0.0)
    ci = t.confidence_interval(0.95)
    return {"mean_on": float(np.mean(on)), "mean_off": float(np.mean(off)), "diff": float(d.mean()),
            "diff_ci95": [float(ci.low), float(ci.high)], "p_value": float(t.pvalue), "pairs": len(d)}


def arg(name: str, default: float) -> float:
    return float(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def main() -> None:
    repeats = int(arg("--repeats", REPEATS))
    per_packet = "--no-per-packet" not in sys.argv
    duty, base = arg("--duty", 0.02), arg("--base-duty", 0.2)
    # the plans compared with the profiler off; --with-base B adds the same plan with base duty B
    arms = {"off": None, f"base {base:g}": base}
    if "--with-base" in sys.argv:
        arms[f"base {arg('--with-base', 1.0):g}"] = arg("--with-base", 1.0)
    stack_hz = int(arg("--stack-hz", 0))
    if stack_hz:  # the profiler in both arms; the stack sampler only in the second
        arms = {"off": base, f"stacks {stack_hz} Hz": base}
    t0 = time.time()
    runs = []
    with HostChanges() as changes:
        tb = LocalTestbed(changes, "ipv4-fwd", Placement(gen_cpu=0, sut_cpus=[1]))
        ep = tb.build()
        for rep in range(repeats):
            for rate in (OVERLOAD_PPS, LOAD_PPS):
                order = list(arms) if rep % 2 == 0 else list(arms)[::-1]  # alternate the order too
                for arm in order:
                    b = arms[arm]
                    hz = stack_hz if stack_hz and arm != "off" else 0
                    r = run_trial(tb, ep, TrialSpec(rate_pps=rate, duration_s=WINDOW_S, warmup_s=0.5,
                                                    profile=b is not None, profile_per_packet=per_packet,
                                                    profile_duty=duty, profile_base_duty=b or 1.0,
                                                    profile_stack_hz=hz, sample_interval_s=1.0), changes)
                    sut = r["kernel"]["per_cpu"].get("1", r["kernel"]["per_cpu"].get(1))
                    runs.append({"repeat": rep, "rate_pps": rate, "arm": arm, "valid": r["valid"],
                                 "flags": r["flags"], "forwarded_pps": r["received_pkts"] / r["duration_s"],
                                 "received_pkts": r["received_pkts"], "sut_cpu_time_pct": sut["cpu_time_pct"],
                                 "window_s": r["kernel"]["window_s"]})
                    print(f"rep {rep} {rate:,.0f} pps {arm}: forwarded "
                          f"{runs[-1]['forwarded_pps']:,.0f} pps, SUT CPU {sut['cpu_time_pct']:.1f}%", flush=True)

    def per_arm(rate: float, value, counts) -> dict[str, list[float]]:
        # the repeats where every arm's trial counts
        ok = {}
        for rep in range(repeats):
            rs = {r["arm"]: r for r in runs if r["repeat"] == rep and r["rate_pps"] == rate}
            if len(rs) == len(arms) and all(counts(r) for r in rs.values()):
                for a, r in rs.items():
                    ok.setdefault(a, []).append(value(r))
        return ok

    # overload: loss is the point, a trial counts unless flagged otherwise; the load: valid trials
    over = per_arm(OVERLOAD_PPS, lambda r: r["forwarded_pps"], lambda r: not set(r["flags"]) - {"generator_limited"})
    ns = per_arm(LOAD_PPS, lambda r: r["sut_cpu_time_pct"] / 100 * r["window_s"] * 1e9 / r["received_pkts"],
                 lambda r: r["valid"])
    plans = {}
    for arm in list(arms)[1:]:
        cap, cpu = paired(over[arm], over["off"]), paired(ns[arm], ns["off"])
        drop = -cap["diff"] / cap["mean_off"]
        plans[arm] = {"base_duty": arms[arm], "capacity_forwarded_pps": cap, "capacity_drop": drop,
                      "sut_cpu_ns_per_pkt": cpu, "added_ns_per_pkt": cpu["diff"],
                      "pass": bool(drop < TARGET_DROP and cpu["diff"] <= TARGET_NS)}
    out = {"benchmark": "profile_overhead", "repeats": repeats, "per_packet_tracepoints": per_packet,
           "stage_duty": duty if per_packet else None, "overload_pps": OVERLOAD_PPS, "load_pps": LOAD_PPS,
           "target_drop": TARGET_DROP, "target_ns_per_pkt": TARGET_NS, "plans": plans,
           "runs": runs, "elapsed_s": time.time() - t0, "provenance": provenance(None, benchmark="profile_overhead")}
    tag = (f"_duty{duty:g}" if per_packet else "_no_per_packet") + (f"_stacks{stack_hz}" if stack_hz else "")
    results_file.write(f"profile_bench{tag}", out)
    for arm, pl in plans.items():
        cap, cpu = pl["capacity_forwarded_pps"], pl["sut_cpu_ns_per_pkt"]
        lo, hi = (-x / cap["mean_off"] for x in cap["diff_ci95"][::-1])
        Console().print(f"{arm}: capacity under {OVERLOAD_PPS:,.0f} pps offered: drop {pl['capacity_drop']:.2%} "
                        f"(95% CI {lo:.2%}..{hi:.2%}; target < {TARGET_DROP:.0%}); SUT CPU per packet at "
                        f"{LOAD_PPS:,.0f} pps: {cpu['diff']:+.0f} ns (95% CI {cpu['diff_ci95'][0]:+.0f}.."
                        f"{cpu['diff_ci95'][1]:+.0f}; target <= {TARGET_NS:.0f})")


if __name__ == "__main__":
    main()
