"""Search benchmark: softnet.search against MLRsearch (PyPI) and a PASTRAMI grid.

The target: "On the synthetic SUT with seeded noise (several curve shapes: sharp
knee, gradual knee, loss at low load, loss inversion, and rare
host stalls at every load), over at least 20 seeds:
softnet's search against the PyPI mlrsearch package's MultipleLossRatioSearch
driven by the same simulated measurer with the same goals, and against a
PASTRAMI-style grid. Report trials, trial-seconds and the error of NDR/PDR
against the known truth. Target: accuracy equal or better than MLRsearch with
at most 0.7x its trial-seconds, and at most 1/10 of the grid's."

Goals for every engine (softnet.search.engines: softnet, mlrsearch, bayes),
in RFC 9971's terms: NDR (loss 0) and PDR (loss 0.5%), exceed ratio 0.5,
width 0.005, 1 s trials, duration sum 3 s, loads 10 kpps .. 10 Mpps; the
value is the goal's conditional throughput over the engine's trials.
MLRsearch gets CSIT's settings for the rest (2 preceding targets, no
warm-up trial). The grid is PASTRAMI's: 150 kpps steps, 30 runs per load; a
load meets a goal when at most half its runs are bad. Each (shape, seed) has
its own capacity (log-uniform 0.5..5 Mpps) and every method gets a fresh SUT
with the same seed.

Accuracy = relative error of the reported value (the conditional throughput) against the
truth (softnet/search/simulated.py): the conservative truth (every lower load
meets the goal; "none" when the minimum load fails) and, for reference, the
knee truth (the highest crossing). A method's outcome is wrong when it gives a
number where the truth is "none" or the reverse.

The real testbed against MLRsearch: bench/search_real_bench.py.

Writes bench/results/search_bench-<UTC>.json (ignored by git).
Run: .venv/bin/python bench/search_bench.py [--seeds 20] [--seed-start 0] [--shapes sharp,...]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich import box
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.provenance import provenance  # noqa: E402
from softnet.search import Goal, SearchConfig  # noqa: E402
from softnet.search.engines import run_engine  # noqa: E402
from softnet.search.simulated import SHAPES, SimulatedSut  # noqa: E402
import results_file  # noqa: E402

MIN_LOAD, MAX_LOAD, WIDTH, DURATION, EXCEED, DURATION_SUM = 1e4, 1e7, 0.005, 1.0, 0.5, 3.0
LOSS_RATIOS = (0.0, 0.005)
GRID_STEP, GRID_RUNS = 150e3, 30


def run_engine_search(engine: str, sut: SimulatedSut) -> dict:
    """One search by ``engine`` (softnet.search.engines): the bench's goals in RFC 9971's terms."""
    goals = [Goal(loss_ratio=x, exceed_ratio=EXCEED, relative_width=WIDTH, final_trial_duration=DURATION,
                  duration_sum=DURATION_SUM) for x in LOSS_RATIOS]
    r = run_engine(engine, sut, SearchConfig(goals=goals, min_load_pps=MIN_LOAD, max_load_pps=MAX_LOAD,
                                             relative_width=WIDTH))
    return {"trials": r.trial_count, "trial_seconds": r.trial_seconds,
            "values": [g.spec.conditional_throughput_pps for g in r.goals],
            "statuses": [g.status for g in r.goals]}


def run_grid(sut: SimulatedSut) -> dict:
    loads = np.arange(GRID_STEP, MAX_LOAD + 1, GRID_STEP)
    values: list[float | None] = [None] * len(LOSS_RATIOS)
    failed = [False] * len(LOSS_RATIOS)
    trials = 0
    for load in loads:
        ms = [sut(float(load), DURATION) for _ in range(GRID_RUNS)]
        trials += len(ms)
        for i, x in enumerate(LOSS_RATIOS):
            bad = sum(m.loss_ratio > x for m in ms)
            if not failed[i]:
                if bad * 2 > len(ms):
                    failed[i] = True
                else:
                    values[i] = float(load)
    return {"trials": trials, "trial_seconds": trials * DURATION, "values": values, "statuses": [None] * len(values)}


METHODS = {"softnet": lambda sut: run_engine_search("softnet", sut),
           "mlrsearch": lambda sut: run_engine_search("mlrsearch", sut),
           "bayes": lambda sut: run_engine_search("bayes", sut), "grid": run_grid}


def rel_error(value, truth):
    if value is None or truth is None:
        return None
    return (value - truth) / truth


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--seed-start", type=int, default=0,
                    help="first seed (fresh seeds check a change that was tuned on others)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--shapes", default=",".join(SHAPES), help="simulated shapes, comma-separated")
    args = ap.parse_args()
    methods = args.methods.split(",")
    rows = []
    t0 = time.time()
    shapes = args.shapes.split(",")
    for shape in shapes:
        for seed in range(args.seed_start, args.seed_start + args.seeds):
            capacity = float(np.exp(np.random.default_rng([seed, 99]).uniform(math.log(5e5), math.log(5e6))))
            truth_sut = SimulatedSut(shape, capacity, seed)
            truths = [truth_sut.truth(x, 0.5, DURATION, MIN_LOAD, MAX_LOAD) for x in LOSS_RATIOS]
            for method in methods:
                out = METHODS[method](SimulatedSut(shape, capacity, seed))
                for i, x in enumerate(LOSS_RATIOS):
                    t, v = truths[i], out["values"][i]
                    rows.append({"shape": shape, "seed": seed, "capacity_pps": capacity, "method": method,
                                 "goal": "NDR" if x == 0 else "PDR0.5%", "value_pps": v,
                                 "status": out["statuses"][i],
                                 "truth_conservative_pps": t["conservative"], "truth_knee_pps": t["knee"],
                                 "error_conservative": rel_error(v, t["conservative"]),
                                 "error_knee": rel_error(v, t["knee"]),
                                 "outcome_ok": (v is None) == (t["conservative"] is None),
                                 "trials": out["trials"], "trial_seconds": out["trial_seconds"]})
    summary = summarize(rows, methods, shapes)
    out = {"benchmark": "search", "seeds": args.seeds, "seed_start": args.seed_start, "shapes": shapes,
           "settings": {"min_load_pps": MIN_LOAD, "max_load_pps": MAX_LOAD, "relative_width": WIDTH,
                        "trial_duration_s": DURATION, "loss_ratios": LOSS_RATIOS, "exceed_ratio": 0.5,
                        "grid_step_pps": GRID_STEP, "grid_runs": GRID_RUNS},
           "summary": summary, "targets": targets(summary), "rows": rows,
           "elapsed_s": time.time() - t0, "provenance": provenance(None, benchmark="search")}
    results_file.write("search_bench", out)
    show(summary, out["targets"])


def summarize(rows: list[dict], methods: list[str], shapes: list[str]) -> dict:
    summary = {}
    for method in methods:
        for shape in (*shapes, "all"):
            sel = [r for r in rows if r["method"] == method and (shape == "all" or r["shape"] == shape)]
            runs = {(r["shape"], r["seed"]): r for r in sel}
            errs = [abs(r["error_conservative"]) for r in sel if r["error_conservative"] is not None]
            knee = [abs(r["error_knee"]) for r in sel if r["error_knee"] is not None]
            summary[f"{method}/{shape}"] = {
                "runs": len(runs), "mean_trials": float(np.mean([r["trials"] for r in runs.values()])),
                "mean_trial_seconds": float(np.mean([r["trial_seconds"] for r in runs.values()])),
                "mean_abs_error": float(np.mean(errs)) if errs else None,
                "median_abs_error": float(np.median(errs)) if errs else None,
                "p95_abs_error": float(np.percentile(errs, 95)) if errs else None,
                "max_abs_error": float(np.max(errs)) if errs else None,
                "mean_abs_error_knee": float(np.mean(knee)) if knee else None,
                "wrong_outcomes": sum(not r["outcome_ok"] for r in sel), "goal_results": len(sel)}
    return summary


def targets(summary: dict) -> dict:
    s, m, g = (summary.get(f"{k}/all") for k in ("softnet", "mlrsearch", "grid"))
    if not (s and m and g):
        return {}
    ratio_m = s["mean_trial_seconds"] / m["mean_trial_seconds"]
    ratio_g = s["mean_trial_seconds"] / g["mean_trial_seconds"]
    acc_ok = (s["mean_abs_error"] <= m["mean_abs_error"] and s["wrong_outcomes"] <= m["wrong_outcomes"])
    return {"trial_seconds_vs_mlrsearch": ratio_m, "trial_seconds_vs_grid": ratio_g,
            "accuracy_equal_or_better": acc_ok, "pass": bool(acc_ok and ratio_m <= 0.7 and ratio_g <= 0.1)}


def show(summary: dict, tg: dict) -> None:
    # Fits 80 columns: every trial here lasts 1 s, so trials = trial-s (kept in the JSON).
    t = Table(title="search bench: mean over seeds, |error| vs the conservative truth",
              header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    # p95 and the error against the knee truth are in the JSON
    for col in ("method/shape", "trial-s", "|err|", "median", "max", "wrong"):
        t.add_column(col, justify="left" if col == "method/shape" else "right", no_wrap=True)

    def pct(v):
        return "-" if v is None else f"{v:.2%}"

    for key, s in summary.items():
        t.add_row(key, f"{s['mean_trial_seconds']:.1f}", pct(s["mean_abs_error"]), pct(s["median_abs_error"]),
                  pct(s["max_abs_error"]), f"{s['wrong_outcomes']}/{s['goal_results']}")
    Console().print(t)
    Console().print(tg)


if __name__ == "__main__":
    main()
