"""Known-truth bench of paired comparisons (softnet compare) on the local testbed.

``nft-fw:rules=N`` walks N non-matching rules per packet (15-18 ns each on
this VM), so B = rules R0 + K against A = rules R0 is a slowdown that grows
in proportion to K, and A against itself has none. The bench runs:

* ``--repeats`` comparisons of A against B (K = ``--k``, about a 5% lower
  capacity here) and as many of A against itself (two named variants),
  interleaved (AB comparison, then AA), each with at most ``--budget``
  trial-seconds; counts how often each verdict came, and the trial-seconds
  each comparison spent;
* one comparison per K of ``--sweep`` (the estimated change against K: a
  line through the origin, with its fit and residuals).

Metrics: capacity (the forwarded rate at 3 Mpps) and the SUT's CPU ns per
packet at 200 kpps (its NAPI kthread's run time); both decide.

Writes bench/results/compare_bench-<UTC>.json (ignored by git).
Per metric also the intervals' coverage (A/A: of zero; A/B: of the A/B
estimates' median, the best figure of the truth there is) and the trial-seconds
each comparison took to its verdict.

Run (root): .venv/bin/python bench/compare_bench.py [--repeats 10] [--k 6] [--sweep 3,12,24]
            [--metrics capacity,cpu] [--report loss,latency] [--no-aa] [--pairing sequential|interleaved] [--duration 1] [--overload 3Mpps]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.analysis.comparisons import stored_paired  # noqa: E402
from softnet.campaign.runner import run_campaign  # noqa: E402
from softnet.campaign.spec import CampaignSpec  # noqa: E402
import results_file  # noqa: E402
from softnet.provenance import provenance  # noqa: E402
from softnet.results.store import Store  # noqa: E402



METHOD = {"metrics": ["capacity", "cpu"], "report": [], "pairing": "sequential", "duration_s": 1.0, "overload": "3Mpps"}


def spec(name: str, variants: list[dict], budget: float) -> CampaignSpec:
    return CampaignSpec.model_validate({
        "name": name, "testbed": {"sut": variants[0]["testbed.sut"]},
        "method": {"kind": "compare", "loads": ["200kpps"], "duration_s": METHOD["duration_s"], "warmup_s": 0.5},
        "compare": {"variants": variants, "metrics": METHOD["metrics"] + METHOD["report"],
                    "decide_on": METHOD["metrics"],
                    "budget_s": budget, "pairing": METHOD["pairing"], "overload": METHOD["overload"]}})


def one(name: str, variants: list[dict], budget: float, keep: Path | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = str(keep / name) if keep else tmp  # --keep: each comparison's results folder, to look at its pairs
        t0 = time.time()
        cid = run_campaign(spec(name, variants, budget), d)
        s = stored_paired(d, cid)
        wall = time.time() - t0
        with Store(d, read_only=True) as st:  # decided loads leave the rounds: count what was measured
            trials = st.query("SELECT count(*) AS n FROM trials")[0]["n"]
    out = {"name": name, "rounds": s.rounds, "stop_reason": s.stop_reason, "wall_s": wall,
           "trial_s": trials * METHOD["duration_s"], "differences": [d.to_dict() for _, d in s.all_differences()]}
    verdicts = ", ".join(f"{d['metric']} {100 * (d['estimate'] or 0):+.1f}% {d['verdict']}"
                         for d in out["differences"])
    print(f"{name}: {s.rounds} rounds, {s.stop_reason}, {wall:.0f} s: {verdicts}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--r0", type=int, default=10)
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--sweep", default="3,12,24")
    ap.add_argument("--keep", action="store_true", help="keep each comparison's results folder beside the JSON")
    ap.add_argument("--metrics", default="capacity,cpu", help="measured and decided on")
    ap.add_argument("--report", default="", help="also measured and reported, not decided on: loss,latency")
    ap.add_argument("--aa", action=argparse.BooleanOptionalAction, default=True,
                    help="each repeat also compares A against itself")
    ap.add_argument("--pairing", default="sequential", help="sequential or interleaved (compare.pairing)")
    ap.add_argument("--duration", type=float, default=1.0, help="each trial's window, s (method.duration_s)")
    ap.add_argument("--overload", default="3Mpps", help="capacity's load (compare.overload)")
    args = ap.parse_args()
    METHOD.update(metrics=args.metrics.split(","), report=[m for m in args.report.split(",") if m], pairing=args.pairing, duration_s=args.duration,
                  overload=args.overload)
    a = {"testbed.sut": f"nft-fw:rules={args.r0}"}
    b = {"testbed.sut": f"nft-fw:rules={args.r0 + args.k}"}
    runs = {"ab": [], "aa": [], "sweep": [], "k": args.k}
    path = results_file.path_for("compare_bench")
    keep = path.with_suffix("") if args.keep else None
    prov = provenance(None, benchmark="compare_bench")  # once: the file is rewritten after every run

    def save() -> None:
        results_file.dump(path, {"provenance": prov, "args": vars(args), **runs, "summary": summary(runs)})

    for i in range(args.repeats):
        runs["ab"].append(one(f"ab{i}", [a, b], args.budget, keep))
        if args.aa:
            runs["aa"].append(one(f"aa{i}", [{**a, "name": "A"}, {**a, "name": "A-again"}], args.budget, keep))
        save()
    for k in [int(x) for x in args.sweep.split(",") if x.strip()]:
        bk = {"testbed.sut": f"nft-fw:rules={args.r0 + k}"}
        runs["sweep"].append({"k": k, **one(f"k{k}", [a, {**bk, "name": f"+{k}"}] if k else
                                            [{**a, "name": "A"}, {**a, "name": "A-again"}], args.budget, keep)})
        save()
    print(json.dumps(summary(runs), indent=1))
    print(f"wrote {path}")


# The alternative: two separately run searches per side, told apart by their
# spread. CVs and trial-seconds per search measured on this VM over 20
# interleaved repeats each (CHANGELOG.md, "Sixth pass": pooled CVs).
SEARCH_SPREAD = {"softnet NDR": (0.098, 92.0), "softnet PDR0.5%": (0.082, 92.0),
                 "MLRsearch NDR": (0.075, 157.3), "MLRsearch PDR0.5%": (0.118, 157.3)}


def searches_needed(cv: float, effect: float = 0.05, alpha: float = 0.05, power: float = 0.9) -> int:
    """Searches per side for a two-sided two-sample test at ``alpha`` to see a
    relative change ``effect`` with ``power``, each search's answer spread by
    ``cv`` (normal approximation, n = 2 (z_a/2 + z_b)^2 cv^2 / effect^2)."""
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return int(np.ceil(2 * z ** 2 * cv ** 2 / effect ** 2))


def alternative() -> dict:
    return {tool: {"cv": cv, "trial_s_per_search": ts, "searches_per_side": (n := searches_needed(cv)),
                   "trial_s": 2 * n * ts} for tool, (cv, ts) in SEARCH_SPREAD.items()}


def summary(runs: dict) -> dict:
    out = {"alternative": alternative()}
    for kind in ("ab", "aa"):
        rs = runs[kind]
        if not rs:
            continue
        per_metric = {}
        for m in {d["metric"] for r in rs for d in r["differences"]}:
            ds = [d for r in rs for d in r["differences"] if d["metric"] == m]
            per_metric[m] = {v: sum(d["verdict"] == v for d in ds) for v in ("slower", "faster", "equivalent",
                                                                              "undecided")}
            per_metric[m]["median_estimate"] = float(np.median([d["estimate"] for d in ds]))
        for m, row in per_metric.items():
            ds = [d for r in rs for d in r["differences"] if d["metric"] == m and d["ci"]]
            truth = 0.0 if kind == "aa" else row["median_estimate"]
            row["coverage"] = {"of": len(ds), "covered": sum(d["ci"][0] <= truth <= d["ci"][1] for d in ds),
                               "against": "zero" if kind == "aa" else "the median of the A/B estimates"}
            row["trial_s_to_verdict"] = sorted(r["trial_s"] for r in rs for d in r["differences"]
                                               if d["metric"] == m and d["verdict"] != "undecided")
        out[kind] = {"n": len(rs), "verdicts": per_metric,
                     "trial_s_median": float(np.median([r["trial_s"] for r in rs])),
                     "trial_s_max": max(r["trial_s"] for r in rs),
                     "decided": sum(r["stop_reason"] == "decided" for r in rs),
                     # no slower or faster on any row of the table (the A/A criterion)
                     "without_direction": sum(all(d["verdict"] not in ("slower", "faster") for d in r["differences"])
                                              for r in rs)}
    # every comparison is a point of the fit: A/B at k, A/A at 0, the sweep's
    points = ([{"k": runs["k"], **r} for r in runs["ab"]] + [{"k": 0, **r} for r in runs["aa"]] + runs["sweep"])
    if len({r["k"] for r in points}) >= 3:
        fits = {}
        for m in {d["metric"] for r in points for d in r["differences"]}:
            pts = [(r["k"], d["estimate"]) for r in points for d in r["differences"] if d["metric"] == m]
            k = np.array([p[0] for p in pts], float)
            y = np.array([p[1] for p in pts], float)
            f = stats.linregress(k, y)
            fits[m] = {"slope_per_rule": f.slope, "intercept": f.intercept, "r": f.rvalue,
                       "residuals": (y - (f.intercept + f.slope * k)).tolist(), "points": pts}
        out["sweep_fit"] = fits
    return out


if __name__ == "__main__":
    main()
