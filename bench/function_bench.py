"""Known-truth bench of the kernel functions behind a comparison
(softnet compare --profile, softnet-stacks) on the local testbed.

* ``--repeats`` comparisons of nft-fw:rules=R0 against rules=R1: the rule
  walk runs in nft_do_chain, so it must be the function whose own time grew
  most, and with what it calls account for most of the busy time's change;
* ``--xdp`` comparisons of xdp-router against ipv4-fwd: the kernel's
  forwarding functions shrink and the XDP program's grow;
* ``--aa`` comparisons of A against itself: how many have any function
  interval excluding zero (the table states a 5% family-wise rate).

Each comparison: --rounds rounds (min_rounds = max_rounds) of 1 s trials at
--load, sequential pairing (the profiler refuses interleaving).

Writes bench/results/function_bench-<UTC>.json (ignored by git).

Run (root): .venv/bin/python bench/function_bench.py [--repeats 5] [--xdp 2] [--aa 10] [--rounds 10]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.analysis.comparisons import stored_paired  # noqa: E402
from softnet.campaign.runner import run_campaign  # noqa: E402
from softnet.campaign.spec import CampaignSpec  # noqa: E402
import results_file  # noqa: E402
from softnet.provenance import provenance  # noqa: E402

FORWARDING = ("ip_forward", "ip_rcv", "ip_list_rcv", "fib_table_lookup", "ip_finish_output2",
              "__netif_receive_skb_list_core",
              "netif_receive_skb_list_internal", "ip_sublist_rcv")


def one(name: str, a: dict, b: dict, args) -> dict:
    spec = CampaignSpec.model_validate({
        "name": name, "testbed": {"sut": a["testbed.sut"]},
        "method": {"kind": "compare", "loads": [args.load], "duration_s": 1.0, "warmup_s": 0.5},
        "collect": {"profile": True, "profile_stack_hz": args.hz},
        "compare": {"variants": [a, b], "metrics": ["cpu"], "decide_on": ["cpu"], "budget_s": 4 * args.rounds,
                    "min_rounds": args.rounds, "max_rounds": args.rounds}})
    with tempfile.TemporaryDirectory() as d:
        t0 = time.time()
        cid = run_campaign(spec, d)
        s = stored_paired(d, cid)
    cand = s.candidates[0]
    fcs = s.functions.get(cand) or []
    out = {"name": name, "rounds": s.rounds, "wall_s": time.time() - t0,
           "cpu": [d.to_dict() for d in s.differences.get(cand, [])],
           "functions": fcs[0].to_dict() if fcs else None}
    if fcs:
        fc = fcs[0]
        top = fc.functions[0]
        out["summary"] = {"busy_change_ns": fc.busy.estimate, "top_self": top.function,
                          "top_self_change_ns": top.self.estimate, "top_incl_share": fc.share_of_busy(top.incl),
                          "significant": [c.function for c in fc.functions if c.significant], "tested": fc.tested}
        print(f"{name}: busy {fc.busy.estimate:+.0f} ns, top {top.function} self {top.self.estimate:+.0f} ns, "
              f"with callees {100 * (fc.share_of_busy(top.incl) or 0):.0f}% of busy; "
              f"{len(out['summary']['significant'])} of {fc.tested} significant", flush=True)
    else:
        print(f"{name}: no function changes", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--xdp", type=int, default=2)
    ap.add_argument("--aa", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--r0", type=int, default=10)
    ap.add_argument("--r1", type=int, default=100)
    ap.add_argument("--load", default="200kpps")
    ap.add_argument("--hz", type=int, default=None, help="collect.profile_stack_hz (default: softnet's)")
    args = ap.parse_args()
    if args.hz is None:
        from softnet.results.trial import TrialSpec
        args.hz = TrialSpec.profile_stack_hz
    runs: dict[str, list] = {"rules": [], "xdp": [], "aa": []}
    path = results_file.path_for("function_bench")
    prov = provenance(None, benchmark="function_bench")
    a = {"testbed.sut": f"nft-fw:rules={args.r0}"}
    for i in range(max(args.repeats, args.xdp, args.aa)):
        if i < args.repeats:
            runs["rules"].append(one(f"rules{i}", a, {"testbed.sut": f"nft-fw:rules={args.r1}"}, args))
        if i < args.xdp:
            runs["xdp"].append(one(f"xdp{i}", {"testbed.sut": "ipv4-fwd"}, {"testbed.sut": "xdp-router"}, args))
        if i < args.aa:
            runs["aa"].append(one(f"aa{i}", {**a, "name": "A"}, {**a, "name": "A-again"}, args))
        results_file.dump(path, {"provenance": prov, "args": vars(args), **runs, "summary": summary(runs)})
    print(json.dumps(summary(runs), indent=1))
    print(f"wrote {path}")


def summary(runs: dict) -> dict:
    out = {}
    rules = [r["summary"] for r in runs["rules"] if "summary" in r]
    if rules:
        out["rules"] = {"n": len(rules), "nft_do_chain_top": sum(r["top_self"] == "nft_do_chain" for r in rules),
                        "incl_share": sorted(r["top_incl_share"] for r in rules if r["top_self"] == "nft_do_chain")}
    xdp = []
    for r in runs["xdp"]:
        f = r.get("functions")
        if not f:
            continue
        ch = {c["function"]: c for c in f["functions"]}
        fwd = {n: ch[n]["incl"]["estimate"] for n in FORWARDING if n in ch}
        prog = {n: c["self"]["estimate"] for n, c in ch.items() if n.startswith("bpf_prog_")}
        xdp.append({"forwarding_incl_change_ns": fwd, "xdp_program_self_change_ns": prog})
    if xdp:
        out["xdp"] = xdp
    aa = [r["summary"] for r in runs["aa"] if "summary" in r]
    if aa:
        out["aa"] = {"n": len(aa), "with_any_significant": sum(bool(r["significant"]) for r in aa),
                     "significant_rows": sum(len(r["significant"]) for r in aa),
                     "tested_rows": sum(2 * r["tested"] for r in aa)}
    return out


if __name__ == "__main__":
    main()
