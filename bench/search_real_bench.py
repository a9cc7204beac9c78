"""Real-SUT search bench: softnet's engine against the reference engine
(MLRsearch 1.2.1), both through softnet.search.engines, on the local testbed.

One testbed (kernel IPv4 forwarding, 64 B, generator on CPU 0, SUT on CPU 1)
is built once; both engines call the same measurer: a real 1 s trial (0.3 s
warm-up, stall probe on) whose loss is counted as ``--host-stall-loss`` says
(``count``: all loss, as RFC 2544 and MLRsearch count it). Both get the same
goals, in the MLRsearch specification's terms: NDR and PDR0.5%, exceed ratio
0.5, final trials of 1 s, duration sum ``--duration-sum`` (3 s), initial
trial duration ``--initial-duration`` (the final one), width 2%, loads
10 kpps .. 2 Mpps. Repeat i runs softnet first when i is even, MLRsearch
first otherwise.

Per engine and goal: the conditional throughput (RFC 9971) of every repeat,
its mean and CV, how many repeats reached the goal's width (``found``), and
whether the engine's bounds are the specification's over its trials
(``compliant``); per engine, trials and trial-seconds per search. The
targets: every softnet goal found and compliant, its CV at most the
reference's, at most 0.8x its trial-seconds. Every trial is kept (engine,
repeat, sequence, load, counts, flags, host-stall attribution), so traces can
be plotted (``--plot FILE``) and replayed (``--replay``).

Writes bench/results/search_real_bench-<UTC>.json (ignored by git).
Run (root): .venv/bin/python bench/search_real_bench.py --repeats 5 --host-stall-loss count
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from softnet.campaign.search_runner import as_measurement, host_stall_note  # noqa: E402
from softnet.provenance import provenance  # noqa: E402
from softnet.results.stored import StoredResult  # noqa: E402
from softnet.search import Goal, SearchConfig, search  # noqa: E402
import results_file  # noqa: E402

MIN_LOAD, MAX_LOAD, WIDTH, DURATION, WARMUP, EXCEED = 1e4, 2e6, 0.02, 1.0, 0.3, 0.5
INITIAL = None  # the goals' initial trial duration (None: the final one), --initial-duration
LOSS_RATIOS = (0.0, 0.005)
GOAL_NAMES = ("NDR", "PDR0.5%")
TOOLS = ("softnet", "mlrsearch")


class RealMeasurer:
    """Real trials on one built testbed, recorded for the bench's trace."""

    def __init__(self, tb, ep, changes, host_stall_loss: str):
        self.tb, self.ep, self.changes, self.mode = tb, ep, changes, host_stall_loss
        self.log: list[dict] = []
        self.tag: dict = {}

    def __call__(self, load_pps: float, duration_s: float):
        from softnet.campaign.trial import TrialSpec, run_trial

        t0 = time.time()
        spec = TrialSpec(rate_pps=load_pps, duration_s=duration_s, warmup_s=WARMUP, sample_interval_s=None)
        r = run_trial(self.tb, self.ep, spec, self.changes)
        m = as_measurement(r, self.mode)
        a = r.get("loss_attribution") or {}
        self.log.append({**self.tag, "seq": sum(1 for x in self.log if x.get("search") == self.tag.get("search")),
                         "intended_rate_pps": load_pps, "duration_s": duration_s,
                         "sent_pkts": r["sent_pkts"], "received_pkts": r["received_pkts"],
                         "sut_lost_pkts": r.get("sut_lost_pkts"), "counted_lost_pkts": m.offered_count - m.forwarded_count,
                         "loss_ratio": m.loss_ratio, "all_loss_ratio": r.get("loss_ratio"), "valid": m.valid,
                         "flags": list(r["flags"]), "explained_pkts": a.get("explained_pkts"),
                         "unseen_stall_pkts": a.get("unseen_stall_pkts"), "wall_s": time.time() - t0})
        m.detail = r
        return m


def run_engine_search(engine: str, measure: RealMeasurer, duration_sum: float) -> dict:
    """One search by ``engine`` (softnet.search.engines) with the bench's goals."""
    from softnet.search.engines import run_engine

    goals = [Goal(loss_ratio=x, exceed_ratio=EXCEED, relative_width=WIDTH, final_trial_duration=DURATION,
                  initial_trial_duration=INITIAL, duration_sum=duration_sum) for x in LOSS_RATIOS]
    r = run_engine(engine, measure, SearchConfig(goals=goals, min_load_pps=MIN_LOAD, max_load_pps=MAX_LOAD,
                                                 relative_width=WIDTH))
    stalls = host_stall_note([StoredResult.parse(m.detail, "trial") for m in r.trials if m.detail],
                             getattr(measure, "mode", "set_apart"))
    return {"trials": r.trial_count, "trial_seconds": r.trial_seconds,
            "values": [g.spec.conditional_throughput_pps for g in r.goals],
            "lowers": [g.spec.relevant_lower_bound_pps for g in r.goals],
            "uppers": [g.spec.relevant_upper_bound_pps for g in r.goals],
            "widths": [g.spec.relative_width for g in r.goals],
            "statuses": [g.status for g in r.goals], "compliant": [g.compliant for g in r.goals],
            "confirmed": [False] * len(r.goals),
            "diagnoses": [g.diagnosis + (f"; {stalls}" if stalls else "") for g in r.goals],
            "knees": [asdict(g.knee) if g.knee else None for g in r.goals]}


RUNNERS = {"softnet": lambda m, d: run_engine_search("softnet", m, d),
           "mlrsearch": lambda m, d: run_engine_search("mlrsearch", m, d),
           "bayes": lambda m, d: run_engine_search("bayes", m, d)}


def run_or_fail(tool: str, measure, duration_sum: float) -> dict:
    """One search; a tool that raises gives a failed search (said, and the exit code), not an end to the bench."""
    try:
        return RUNNERS[tool](measure, duration_sum)
    except Exception as e:  # noqa: BLE001 - whatever the peer raises is its failure, recorded by name
        why = f"{type(e).__name__}: {e}"
        n = len(GOAL_NAMES)
        return {"trials": 0, "trial_seconds": 0.0, "values": [None] * n, "uppers": [None] * n,
                "statuses": ["failed"] * n, "confirmed": [False] * n, "compliant": [None] * n,
                "diagnoses": [why] * n, "knees": [None] * n,
                "failed": why}


def failures(searches: list[dict]) -> list[str]:
    """Each tool's searches that failed or gave no value for a goal, in words."""
    out = []
    for tool in TOOLS:
        sel = [s for s in searches if s["tool"] == tool]
        broke = [s["failed"] for s in sel if s.get("failed")]
        if broke:
            out.append(f"{tool}: {len(broke)} of {len(sel)} searches failed (first: {broke[0]})")
        for i, goal in enumerate(GOAL_NAMES):
            none = sum(s["values"][i] is None and not s.get("failed") for s in sel)
            if none:
                out.append(f"{tool}: no {goal} in {none} of {len(sel)} searches")
    return out


def cv(values: list[float]) -> float | None:
    if len(values) < 2:
        return None
    return statistics.stdev(values) / statistics.mean(values)


def summarize(searches: list[dict]) -> dict:
    out: dict = {}
    for tool in TOOLS:
        sel = [s for s in searches if s["tool"] == tool]
        if not sel:
            continue
        for i, goal in enumerate(GOAL_NAMES):
            vals = [s["values"][i] for s in sel]
            got = [v for v in vals if v is not None]
            out[f"{tool}/{goal}"] = {
                "values_pps": vals, "statuses": [s["statuses"][i] for s in sel],
                "finished": sum(s["statuses"][i] == "found" for s in sel), "searches": len(sel),
                "unstable_confirmed": sum(s["confirmed"][i] for s in sel),
                "mean_pps": statistics.mean(got) if got else None, "cv": cv(got),
                "min_pps": min(got, default=None), "max_pps": max(got, default=None)}
        out[f"{tool}/cost"] = {"mean_trials": statistics.mean(s["trials"] for s in sel),
                               "mean_trial_seconds": statistics.mean(s["trial_seconds"] for s in sel),
                               "trial_seconds": [s["trial_seconds"] for s in sel]}
    if all(f"{t}/cost" in out for t in TOOLS) and all(out[f"{t}/cost"]["mean_trial_seconds"] for t in TOOLS):
        ratios = [a["trial_seconds"] / b["trial_seconds"] for a, b in zip(
            [s for s in searches if s["tool"] == "softnet"], [s for s in searches if s["tool"] == "mlrsearch"])
            if b["trial_seconds"]]
        cmp = {"trial_seconds_ratio": out["softnet/cost"]["mean_trial_seconds"]
               / out["mlrsearch/cost"]["mean_trial_seconds"],
               "per_repeat_ratio_median": statistics.median(ratios), "per_repeat_ratio_range": [min(ratios), max(ratios)]}
        for goal in GOAL_NAMES:
            s, m = out[f"softnet/{goal}"], out[f"mlrsearch/{goal}"]
            cmp[goal] = {"mean_ratio_softnet_over_mlrsearch": s["mean_pps"] / m["mean_pps"]
                         if s["mean_pps"] and m["mean_pps"] else None,
                         "cv_softnet": s["cv"], "cv_mlrsearch": m["cv"],
                         "cv_ok": s["cv"] is not None and m["cv"] is not None and s["cv"] <= m["cv"]}
        cmp["targets"] = {
            "cv_le_mlrsearch": all(cmp[g]["cv_ok"] for g in GOAL_NAMES),
            "every_softnet_goal_width_reached": all(
                out[f"softnet/{g}"]["finished"] == out[f"softnet/{g}"]["searches"] for g in GOAL_NAMES),
            "every_softnet_goal_compliant": all(all(c is not False for c in s["compliant"])
                                                for s in searches if s["tool"] == "softnet"),
            "trial_seconds_le_0.8x": cmp["trial_seconds_ratio"] <= 0.8}
        out["compare"] = cmp
    return out


def show(summary: dict) -> None:
    print(f"{'tool/goal':18} {'mean':>9} {'CV':>6} {'range':>17} {'found':>6} {'confirmed':>9}")
    for key, s in summary.items():
        if key.endswith("/cost") or key == "compare":
            continue
        rng = f"{s['min_pps'] / 1e3:,.0f}-{s['max_pps'] / 1e3:,.0f}k" if s["min_pps"] else "-"
        mean = f"{s['mean_pps'] / 1e3:>8,.0f}k" if s["mean_pps"] else f"{'none':>9}"
        cv_ = f"{s['cv']:>6.1%}" if s["cv"] is not None else f"{'-':>6}"
        print(f"{key:18} {mean} {cv_} {rng:>17} "
              f"{s['finished']:>3}/{s['searches']} {s['unstable_confirmed']:>9}")
    for tool in TOOLS:
        if f"{tool}/cost" in summary:
            c = summary[f"{tool}/cost"]
            print(f"{tool}: {c['mean_trials']:.1f} trials, {c['mean_trial_seconds']:.1f} trial-s per search")
    if "compare" in summary:
        print(json.dumps(summary["compare"], indent=1, default=float))


def verdict(searches: list[dict]) -> None:
    """FAIL lines and exit 1 when a tool could not be measured: the comparison would be one-sided."""
    bad = failures(searches)
    for line in bad:
        print(f"FAIL: {line}")
    if bad:
        sys.exit(1)


def plot(result_file: Path, out: Path, which: list[int]) -> None:
    """Trial-by-trial traces of the chosen repeats, both tools side by side."""
    import matplotlib.pyplot as plt

    from softnet.report.plots import search_figure

    data = json.loads(result_file.read_text())
    for rep in which:
        for tool in TOOLS:
            s = next(x for x in data["searches"] if x["tool"] == tool and x["repeat"] == rep)
            trials = [t for t in data["trials"] if t["search"] == s["search"]]
            bounds = [(g, x, s.get("lowers", s["values"])[i], s["uppers"][i])
                      for i, (g, x) in enumerate(zip(GOAL_NAMES, LOSS_RATIOS))]
            status = ", ".join(f"{g} {st}" for g, st in zip(GOAL_NAMES, s["statuses"]))
            fig = search_figure(trials, bounds, f"{tool}, repeat {rep}: {len(trials)} trials ({status})")
            path = out.parent / f"{out.stem}-r{rep}-{tool}{out.suffix or '.png'}"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            print(path)


def replay(args) -> None:
    """Both tools on this host's sweep replayed (ResampledSut), one fresh SUT
    per (tool, seed): the same summary as the real bench, plus each goal's
    error against the sweep's truth."""
    from softnet.search.simulated import ResampledSut

    trials = [t for path in args.replay for t in json.loads(path.read_text())["trials"]]
    truth = ResampledSut(trials, 0)
    truths = [truth.truth(x, 0.5, MIN_LOAD, MAX_LOAD) for x in LOSS_RATIOS]
    searches = []
    for seed in range(args.seed_start, args.seed_start + args.repeats):
        for tool in args.tools.split(","):
            sut = ResampledSut(trials, seed)
            out = run_or_fail(tool, lambda load, d, sut=sut: sut(load, d), args.mlr_duration_sum)
            searches.append({"tool": tool, "repeat": seed, **out})
    summary = summarize(searches)
    for tool in args.tools.split(","):
        for i, goal in enumerate(GOAL_NAMES):
            errs = [abs(s["values"][i] / truths[i] - 1) for s in searches if s["tool"] == tool and s["values"][i]]
            summary[f"{tool}/{goal}"]["mean_abs_error"] = statistics.mean(errs) if errs else None
    show(summary)
    print("truth:", ", ".join(f"{g} {t and round(t):,}" for g, t in zip(GOAL_NAMES, truths)))
    for tool in args.tools.split(","):
        print(tool, "mean |error|:", ", ".join(f"{g} {summary[f'{tool}/{g}']['mean_abs_error'] or 0:.1%}"
                                                for g in GOAL_NAMES))
    verdict(searches)


def bootstrap(searches: list[dict], draws: int = 4000, seed: int = 1) -> dict:
    """95% intervals, resampling the repeats (each softnet search with the
    MLRsearch search it was interleaved with): the trial-seconds ratio and,
    per goal, softnet's CV over MLRsearch's."""
    import numpy as np

    pairs = [(a, b) for a, b in zip([s for s in searches if s["tool"] == "softnet"],
                                    [s for s in searches if s["tool"] == "mlrsearch"])]
    rng = np.random.default_rng(seed)
    ts = np.array([[a["trial_seconds"], b["trial_seconds"]] for a, b in pairs])
    out: dict = {"pairs": len(pairs)}
    idx = rng.integers(0, len(pairs), (draws, len(pairs)))
    ratios = ts[idx, 0].mean(axis=1) / ts[idx, 1].mean(axis=1)
    out["trial_seconds_ratio_ci95"] = [float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))]
    for i, goal in enumerate(GOAL_NAMES):
        v = np.array([[a["values"][i] or np.nan, b["values"][i] or np.nan] for a, b in pairs])
        cv = np.nanstd(v[idx], axis=1, ddof=1) / np.nanmean(v[idx], axis=1)
        r = cv[:, 0] / cv[:, 1]
        out[f"{goal}_cv_ratio_ci95"] = [float(np.nanpercentile(r, 2.5)), float(np.nanpercentile(r, 97.5))]
    return out


def pooled(paths: list[Path]) -> None:
    """Several result files of the same settings as one: the summary and the bootstrap intervals."""
    searches, settings = [], None
    for path in paths:
        data = json.loads(path.read_text())
        s = {k: v for k, v in data["settings"].items() if k != "repeats"}
        if settings is not None and s != settings:
            sys.exit(f"{path}: other settings than {paths[0]} ({s} vs {settings})")
        settings = s
        searches += data["searches"]
    summary = summarize(searches)
    show(summary)
    print(json.dumps(bootstrap(searches), indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--host-stall-loss", choices=("set_apart", "count"), default="set_apart")
    ap.add_argument("--duration-sum", "--mlr-duration-sum", dest="mlr_duration_sum", type=float, default=3.0,
                    help="every goal's duration sum, both engines (3: softnet's default; 21: MLRsearch's)")
    ap.add_argument("--initial-duration", type=float, default=None,
                    help="every goal's initial trial duration (default: the final one)")
    ap.add_argument("--plot", type=Path, help="plot traces from this result file instead of measuring")
    ap.add_argument("--plot-out", type=Path,
                    default=Path(__file__).resolve().parent / "results" / "search-real-trace.png")
    ap.add_argument("--plot-repeats", default="0,1")
    ap.add_argument("--replay", type=Path, nargs="+", help="host sweeps (bench/search_host_sweep.py), their "
                    "trials pooled: run both tools on a ResampledSut of them, --repeats seeds each, instead of "
                    "measuring")
    ap.add_argument("--seed-start", type=int, default=0, help="first seed with --replay")
    ap.add_argument("--pool", type=Path, nargs="+", help="result files of the same settings: summarize them "
                    "as one run, with bootstrap intervals, instead of measuring")
    args = ap.parse_args()
    if args.pool:
        return pooled(args.pool)
    global INITIAL
    INITIAL = args.initial_duration
    if args.plot:
        return plot(args.plot, args.plot_out, [int(x) for x in args.plot_repeats.split(",")])
    if args.replay:
        return replay(args)

    from softnet.testbed.local import LocalTestbed, Placement
    from softnet.tools.changes import HostChanges

    tools = args.tools.split(",")
    searches: list[dict] = []
    t0 = time.time()
    path = results_file.path_for("search_real_bench")
    prov = provenance(None, benchmark="search_real")  # once: the file is rewritten after every search
    with HostChanges() as changes:
        tb = LocalTestbed(changes, "ipv4-fwd", Placement.default())
        ep = tb.build()
        measure = RealMeasurer(tb, ep, changes, args.host_stall_loss)
        for rep in range(args.repeats):
            for tool in (tools if rep % 2 == 0 else tools[::-1]):
                measure.tag = {"search": len(searches), "tool": tool, "repeat": rep}
                s0 = time.time()
                out = run_or_fail(tool, measure, args.mlr_duration_sum)
                searches.append({**measure.tag, **out, "elapsed_s": time.time() - s0})
                print(f"[{time.time() - t0:5.0f} s] {tool:9} repeat {rep}: "
                      + ", ".join(f"{g} {v and round(v)} ({st})" for g, v, st in
                                  zip(GOAL_NAMES, out["values"], out["statuses"]))
                      + f"; {out['trials']} trials", flush=True)
                # Written after every search: a bench stopped early still leaves its trials.
                result = {"benchmark": "search_real", "settings": {
                    "sut": "ipv4-fwd", "frame_bytes": 64, "min_load_pps": MIN_LOAD, "max_load_pps": MAX_LOAD,
                    "relative_width": WIDTH, "trial_duration_s": DURATION, "warmup_s": WARMUP,
                    "loss_ratios": LOSS_RATIOS, "exceed_ratio": EXCEED, "initial_duration_s": INITIAL,
                    "host_stall_loss": args.host_stall_loss,
                    "mlr_duration_sum": args.mlr_duration_sum,
                    "repeats": args.repeats}, "summary": summarize(searches), "searches": searches,
                    "trials": measure.log, "elapsed_s": time.time() - t0,
                    "provenance": prov}
                results_file.dump(path, result)
    show(summarize(searches))
    print(json.dumps(bootstrap(searches), indent=1))
    print(f"{path} ({time.time() - t0:.0f} s)")
    verdict(searches)


if __name__ == "__main__":
    main()
