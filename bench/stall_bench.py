"""Host-stall benchmark: does softnet tell a stalled host from a
slow data path, what does watching for stalls cost, and does setting
host-stall loss apart make NDR/PDR repeatable on a noisy host?

Parts (each interleaved, on the real local testbed, kernel IPv4 forwarding, 64 B):
- attribution: trials at a load well below capacity with the injector taking
  the SUT CPU for 5 ms every 500 ms (SCHED_FIFO), beside the same trials
  without it; and trials at 2x the probed maximum without injection. Per
  trial: lost packets, the share attributed to host stalls, injected stalls
  found. Targets: >= 90% attributed and every injected stall found with
  injection; < 10% attributed at overload.
- cost: flood trials (the SUT's forwarding capacity) with and without the
  stall probe, alternated; the ratio of received rates, median and spread.
  Target: the probe costs < 1% of forwarding capacity.
- search: N interleaved pairs of searches (NDR and PDR0.5%, width 2%, 1 s
  trials), one counting only the SUT's loss (host-stall loss set apart), one
  counting all loss; per goal the values, CV, statuses and trial counts.
  Target: CV <= 5% with loss set apart, or a reason.

Writes bench/results/stall_bench-<part>-<UTC>.json (ignored by git).
Run (root): .venv/bin/python bench/stall_bench.py --part attribution|cost|search [--repeats N]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.campaign.trial import TrialSpec, run_trial  # noqa: E402
from softnet.provenance import provenance  # noqa: E402
from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
import results_file  # noqa: E402

LOW_LOAD_PPS = 150e3  # well below kernel forwarding's capacity here (0.7-0.96 Mpps)
FLOOD_PPS = 30e6


def summary_of(r: dict) -> dict:
    a = r.get("loss_attribution") or {}
    h = r.get("host_stalls") or {}
    return {"rate_pps": r["intended_rate_pps"], "achieved_pps": r["achieved_rate_pps"],
            "sent": r["sent_pkts"], "lost": r["lost_pkts"], "received_pps": r["received_pkts"] / r["send_span_s"]
            if r["send_span_s"] else None,
            "explained": a.get("explained_pkts"), "explained_share": a.get("explained_share"),
            "rest_cause": a.get("rest_cause"), "words": a.get("words"), "flags": r["flags"],
            "stalls_per_cpu": {c: {k: v[k] for k in ("count", "total_ms", "max_ms")}
                               for c, v in (h.get("per_cpu") or {}).items()},
            "injected": h.get("injected")}


def trial(tb, ep, changes, rate: float, duration: float, **kw) -> dict:
    spec = TrialSpec(rate_pps=rate, duration_s=duration, warmup_s=0.5, sample_interval_s=None, **kw)
    return run_trial(tb, ep, spec, changes)


def part_attribution(repeats: int) -> dict:
    rows = []
    with HostChanges() as changes:
        tb = LocalTestbed(changes, "ipv4-fwd", Placement.default())
        ep = tb.build()
        probe = trial(tb, ep, changes, FLOOD_PPS, 1.0)
        cap = probe["received_pkts"] / probe["send_span_s"]
        for i in range(repeats):
            for kind, rate, kw in (("injected", LOW_LOAD_PPS, {"inject_busy_ms": 5.0, "inject_every_ms": 500.0}),
                                   ("control", LOW_LOAD_PPS, {}), ("overload", 2 * cap, {})):
                s = summary_of(trial(tb, ep, changes, rate, 5.0, **kw))
                rows.append({"kind": kind, "repeat": i, **s})
                print(f"{kind:9} {i}: lost {s['lost']}, explained {s['explained']} "
                      f"({s['explained_share']}), injected {s['injected'] and (s['injected']['found'], s['injected']['injected'])}",
                      flush=True)

    def agg(kind: str) -> dict:
        sel = [r for r in rows if r["kind"] == kind]
        lost = sum(r["lost"] or 0 for r in sel)
        expl = sum(r["explained"] or 0 for r in sel)
        inj = [r["injected"] for r in sel if r["injected"]]
        return {"trials": len(sel), "lost": lost, "explained": expl, "share": expl / lost if lost else None,
                "injected": sum(i["injected"] for i in inj), "found": sum(i["found"] for i in inj)}

    out = {k: agg(k) for k in ("injected", "control", "overload")}
    out["probed_max_pps"] = cap
    out["targets"] = {
        "injected_share_ge_90pct": (out["injected"]["share"] or 0) >= 0.9,
        "every_injected_stall_found": out["injected"]["found"] == out["injected"]["injected"],
        "overload_share_lt_10pct": (out["overload"]["share"] or 0) < 0.1}
    return {"summary": out, "trials": rows}


def part_cost(repeats: int) -> dict:
    rows = []
    with HostChanges() as changes:
        tb = LocalTestbed(changes, "ipv4-fwd", Placement.default())
        ep = tb.build()
        for i in range(repeats):
            for on in (True, False) if i % 2 == 0 else (False, True):
                r = trial(tb, ep, changes, FLOOD_PPS, 2.0, stall_probe=on)
                rows.append({"probe": on, "repeat": i, "received_pps": r["received_pkts"] / r["send_span_s"]})
                print(f"probe {'on ' if on else 'off'} {i}: {rows[-1]['received_pps']:.0f} pps", flush=True)
    ratios = []
    for i in range(repeats):
        on = next(r["received_pps"] for r in rows if r["repeat"] == i and r["probe"])
        off = next(r["received_pps"] for r in rows if r["repeat"] == i and not r["probe"])
        ratios.append(on / off)
    return {"summary": {"ratio_on_off_median": statistics.median(ratios), "ratio_min": min(ratios),
                        "ratio_max": max(ratios), "ratios": ratios,
                        "cost_pct_median": 100 * (1 - statistics.median(ratios))}, "trials": rows}


def part_search(repeats: int, max_trials: int, period_us: int) -> dict:
    from softnet.analysis.searches import summarize_searches
    from softnet.campaign.runner import run_campaign
    from softnet.campaign.spec import CampaignSpec
    from softnet.results.store import Store

    rows = []
    with tempfile.TemporaryDirectory(prefix="softnet-stall-bench-") as tmp:
        for i in range(repeats):
            for mode in ("set_apart", "count") if i % 2 == 0 else ("count", "set_apart"):
                spec = CampaignSpec.model_validate({
                    "name": f"stall-bench-{mode}-{i}", "testbed": {"sut": "ipv4-fwd"},
                    "collect": {"sample": False, "stall_period_us": period_us},
                    "method": {"kind": "search", "goals": ["ndr", "pdr0.5"], "width": 0.02, "min_load": "10kpps",
                               "max_load": "2Mpps", "duration_s": 1.0, "warmup_s": 0.3, "runs": 1,
                               "max_trials": max_trials, "host_stall_loss": mode}})
                t0 = time.time()
                cid = run_campaign(spec, tmp, lambda e: None)
                with Store(tmp, read_only=True) as store:
                    for s in summarize_searches(store, cid):
                        rep = s.to_dict()["repeats"][0]
                        rows.append({"mode": mode, "repeat": i, "goal": s.goal, "value_pps": rep["lower_bound_pps"],
                                     "status": rep["status"], "trials": rep["trial_count"],
                                     "trial_seconds": rep["trial_seconds"],
                                     "elapsed_s": time.time() - t0})
                        print(f"{mode:9} {i} {s.goal}: {rep['lower_bound_pps']} ({rep['status']}, "
                              f"{rep['trial_count']} trials)", flush=True)
    summary = {}
    for mode in ("set_apart", "count"):
        for goal in sorted({r["goal"] for r in rows}):
            sel = [r for r in rows if r["mode"] == mode and r["goal"] == goal]
            vals = [r["value_pps"] for r in sel if r["value_pps"]]
            mean = statistics.mean(vals) if vals else None
            summary[f"{mode}/{goal}"] = {
                "values": [r["value_pps"] for r in sel], "statuses": [r["status"] for r in sel],
                "trials": [r["trials"] for r in sel], "mean_pps": mean,
                "cv": statistics.stdev(vals) / mean if len(vals) > 1 and mean else None}
    return {"summary": summary, "trials": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("attribution", "cost", "search"), required=True)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--max-trials", type=int, default=40, help="search: trial budget per search")
    ap.add_argument("--stall-period-us", type=int, default=2000, help="search: the stall probe's period")
    args = ap.parse_args()
    t0 = time.time()
    if args.part == "attribution":
        out = part_attribution(args.repeats or 3)
    elif args.part == "cost":
        out = part_cost(args.repeats or 5)
    else:
        out = part_search(args.repeats or 10, args.max_trials, args.stall_period_us)
    out.update(benchmark=f"stall_{args.part}", elapsed_s=time.time() - t0,
               command=" ".join(["bench/stall_bench.py", *sys.argv[1:]]),
               provenance=provenance(None, benchmark=f"stall_{args.part}"))
    path = results_file.write(f"stall_bench-{args.part}", out)
    print(json.dumps(out["summary"], indent=1, default=str))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
