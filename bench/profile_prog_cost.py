"""Where the eBPF profiler's cost goes: each of its programs' own run time
per forwarded packet (the kernel's BPF run-time statistics, on only while
this runs), at the default plan (per-packet events 2% of the time, the
others 20%), with the others attached all along (the plan before), and with
every packet timed.

Kernel IPv4 forwarding on CPU 1, 200 kpps (no loss), a profiled trial per
plan; the programs are read every 0.2 s while the trial runs (they unload
with it). The programs split into the base ones (softirq, irq,
sched_switch, napi_poll: once per softirq, interrupt, context switch or
poll, attached base duty of the time) and the per-packet ones (sn_pp_*,
attached only in the sampled windows, inside that time).

Writes bench/results/profile_prog_cost-<UTC>.json (ignored by git).
Run as root: .venv/bin/python bench/profile_prog_cost.py [--rate PPS] [--seconds S]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from results_file import write  # noqa: E402

from softnet.campaign.trial import TrialSpec, run_trial  # noqa: E402
from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.tools.bpf_stats import enable_bpf_stats, watched  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402


def profiler_program(p: dict) -> bool:
    # the trial runs no stall probe: the tracing programs named sn_* are the profiler's
    return p.get("type") == "tracing" and p.get("name", "").startswith("sn_")


def one(tb, ep, changes, rate: float, seconds: float, duty: float, base_duty: float) -> dict:
    with watched(profiler_program) as last:
        r = run_trial(tb, ep, TrialSpec(rate_pps=rate, duration_s=seconds, warmup_s=0.5, profile=True,
                                        profile_duty=duty, profile_base_duty=base_duty, sample_interval_s=None,
                                        stall_probe=False), changes)
    pkts = r["received_pkts"] / seconds * (seconds + 0.5)  # forwarded over the profiler's life, about
    progs = sorted(({"name": p["name"], "runs": p.get("run_cnt", 0), "ns": p.get("run_time_ns", 0)}
                    for p in last.values()), key=lambda x: -x["ns"])
    for p in progs:
        p["ns_per_pkt"] = p["ns"] / pkts
        p["runs_per_pkt"] = p["runs"] / pkts
        p["ns_per_run"] = p["ns"] / p["runs"] if p["runs"] else None
    base = sum(p["ns_per_pkt"] for p in progs if not p["name"].startswith("sn_pp_"))
    per_pkt = sum(p["ns_per_pkt"] for p in progs if p["name"].startswith("sn_pp_"))
    return {"duty": duty, "base_duty": base_duty, "rate_pps": rate, "loss_ratio": r["loss_ratio"], "programs": progs,
            "base_ns_per_pkt": base, "per_packet_ns_per_pkt": per_pkt}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=200e3)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    fd = enable_bpf_stats()
    out = []
    try:
        with HostChanges() as ch:
            tb = LocalTestbed(ch, "ipv4-fwd", Placement(gen_cpu=0, sut_cpus=[1]))
            ep = tb.build()
            for duty, base in ((0.02, 0.2), (0.02, 1.0), (1.0, 1.0)):
                out.append(one(tb, ep, ch, a.rate, a.seconds, duty, base))
    finally:
        os.close(fd)
    for o in out:
        print(f"duty {o['duty']:g}, base duty {o['base_duty']:g}: base {o['base_ns_per_pkt']:.0f} ns/pkt, "
              f"per-packet {o['per_packet_ns_per_pkt']:.0f} ns/pkt (loss {o['loss_ratio']:.1e})")
        for p in o["programs"][:8]:
            print(f"  {p['name']:<32} {p['ns_per_pkt']:7.1f} ns/pkt  {p['runs_per_pkt']:5.2f} runs/pkt  "
                  f"{p['ns_per_run'] or 0:6.0f} ns/run")
    print(write("profile_prog_cost", {"runs": out}))


if __name__ == "__main__":
    main()
