"""`softnet latency`: one AF_XDP configuration (A pings through B's AF_XDP
forwarder to C's reflector), and the display of latency campaigns."""
from __future__ import annotations

from pathlib import Path

from softnet.analysis.latency_stats import SEVEN, knob_label
from softnet.cli.output import Col, console, count, eng, plain, print_json, table
from softnet.results.latency import KnobUnsupported, StoredLatencyRun

US = 1e-9  # ns -> s for eng(..., "s")
TAIL_NOTE = ("a percentile rests on the round trips beyond it: p99 needs 100 (then 1 lies beyond), p99.9 1,000; "
             "'-' where there are fewer")


def t(ns) -> str:
    return eng(None if ns is None else ns * US, "s")


RUN_COLS = [Col("run"), Col("sent"), Col("back"), Col("lost"), Col("impossible", wide=True), Col("median"),
            Col("p99"), Col("max", wide=True), Col("busy-poll pkts", wide=True), Col("flags", text=True)]
STAT_COLS = [Col("#"), Col("cl"), Col("n"), Col("mean"), Col("median"), Col("std", wide=True), Col("Q1"),
             Col("Q3"), Col("min", wide=True), Col("max", wide=True), Col("p99"), Col("p99 95% CI", wide=True),
             Col("flags", text=True)]


def show_runs(runs: list[StoredLatencyRun], wide: bool = False) -> None:
    rows = []
    for s in runs:
        r, rtt = s.result, s.result.rtt_stats
        rows.append([f"{s.cell_id}/{s.run_index}", count(r.sent), count(r.received), count(r.lost),
                     count(r.impossible), t(rtt.median_ns), t(rtt.p99_ns), t(rtt.max_ns),
                     count(sum(r.busy_poll_rx_pkts.values())), ", ".join(r.flags) or "-"])
    console.print(table("runs (configuration/run)", RUN_COLS, rows, wide))
    plain(TAIL_NOTE)


def show_configs(analysis, wide: bool = False) -> None:
    configs, cl = analysis.configs, analysis.clustering
    rows = []
    for i, c in enumerate(configs):
        a, p99 = c.averaged, c.percentiles["p99"]
        ci = "-" if p99.ci_low_ns != p99.ci_low_ns else f"[{t(p99.ci_low_ns)}, {t(p99.ci_high_ns)}]"
        cluster = "-" if cl is None or cl.labels[i] < 0 else str(int(cl.labels[i]))
        # the study's seven statistics, in the columns' order (STAT_COLS)
        rows.append([str(i), cluster, count(p99.n), *(t(a[k]) for k in SEVEN), t(p99.value_ns), ci,
                     ", ".join(c.flags) or "-"])
    console.print(table("round-trip time per configuration (the study's statistics, averaged over runs)",
                        STAT_COLS, rows, wide))
    plain(TAIL_NOTE + "; p99 here: of the n round trips pooled over the runs")
    for i, c in enumerate(configs):
        plain(f"  #{i}: {c.label}")
        for flag, why in c.reasons.items():
            plain(f"      {flag}: {why}")
    if cl is None:
        plain(f"clusters: none ({analysis.why_not_clustered})")
        return
    plain(f"clusters: k = {cl.k} ({cl.chosen_by}); 0 is the fastest")
    if analysis.note:
        plain(f"  note: {analysis.note}")
    for k in cl.clusters:
        std = "" if k.std_ns != k.std_ns else f" +- {t(k.std_ns)}"
        knobs = ", ".join(knob_label({n: v}) for n, v in k.always_present.items()) or "no knob common to all"
        plain(f"  cluster {k.index}: {len(k.members)} configuration(s), mean {t(k.mean_ns)}{std}; always: {knobs}")
    if analysis.rules is not None:
        plain(f"what separates the clusters (decision tree, {100 * analysis.rules.accuracy:.0f}% of configurations):")
        for rule in analysis.rules.rules:
            plain(f"  {rule}")
    if analysis.findings:
        plain("the study's findings on this host:")
        for f in analysis.findings:
            plain(f"  {f.verdict}: {f.claim} ({f.detail})")


RERUN_COLS = [Col("#"), Col("phase", justify="left"), Col("every"), Col("back"), Col("median"), Col("base median"),
              Col("p99"), Col("flags", text=True)]


def show_reruns(reruns: list[dict], wide: bool = False) -> None:
    rows = [[str(r["config"]), r["phase"], t(r["interval_s"] * 1e9), f"{count(r['received'])}/{count(r['sent'])}",
             t(r["median_ns"]), t(r["base_median_ns"]), t(r["p99_ns"]), ", ".join(r["flags"]) or "-"]
            for r in reruns]
    console.print(table("re-runs at higher rates (the study's second phase)", RERUN_COLS, rows, wide))


def show(results: Path, cid: str, as_json: bool, wide: bool = False, quiet: bool = False) -> dict:
    """The runs and the analysis of one latency campaign; ``quiet``: only return them."""
    from softnet.analysis.latency_campaigns import analyze_latency, typed_runs
    from softnet.results.store import Store

    with Store(results, read_only=True) as store:
        runs = typed_runs(store.latency_runs(cid))
        analysis = analyze_latency(store, cid, runs=runs)
    out = {"campaign_id": cid, "results_dir": str(results), "runs": [r.to_dict() for r in runs],
           **analysis.to_dict()}
    if as_json:
        if not quiet:
            print_json(out)
        return out
    show_runs([r for r in runs if r.result.phase == "base"], wide)
    show_configs(analysis, wide)
    if analysis.reruns:
        show_reruns(analysis.reruns, wide)
    unsupported = sorted({k for r in runs for k, v in r.result.applied.items() if isinstance(v, KnobUnsupported)})
    if unsupported:
        plain(f"unsupported here (recorded, not applied): {', '.join(unsupported)}")
    return out
