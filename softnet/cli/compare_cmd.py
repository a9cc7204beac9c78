"""`softnet compare`: a paired experiment on this host, or stored results
against each other; the table, the JSON and the exit code a CI job gates on."""
from __future__ import annotations

from dataclasses import replace

from rich.box import SIMPLE_HEAD
from rich.markup import escape

from softnet.analysis.paired import gate_words, regressions
from softnet.cli.output import Col, console, eng, print_json, sci, table
from softnet.results.comparison import ComparisonSummary, PairedDifference
from softnet.units import format_rate

REGRESSION_EXIT = 1
VERDICT_STYLE = {"slower": "red", "faster": "green", "equivalent": "cyan", "undecided": "yellow"}
COLS = [Col("metric", justify="left"), Col("load"), Col("A"), Col("B"), Col("change"), Col("interval"),
        Col("verdict", justify="left"), Col("n", wide=True), Col("p", wide=True)]
SHORT = {"latency_p50": "delay p50", "latency_p99": "delay p99", "loss_all": "loss, all"}


def value_text(v: float | None, d: PairedDifference) -> str:
    if d.scale == "difference":
        return sci(v)
    unit = {"ns/pkt": "ns", "pps": "pps", "ns": "ns"}.get(d.unit, d.unit)
    if unit == "ns" and v is not None:
        return eng(v * 1e-9, "s")
    return eng(v, unit)


def signed(v: float, d: PairedDifference) -> str:
    if d.scale == "difference":
        return "0" if v == 0 else ("+" if v > 0 else "-") + sci(abs(v), 1)
    x = 100 * v
    return f"{x:+.0f}" if abs(x) >= 100 else f"{x:+.1f}"


def change_text(v: float | None, d: PairedDifference) -> str:
    if v is None:
        return "-"
    return signed(v, d) + ("%" if d.scale == "ratio" else "")


def interval_text(d: PairedDifference) -> str:
    if d.ci is None:
        return "-"
    lo, hi = d.ci
    return f"[{signed(lo, d)}, {signed(hi, d)}]" + ("%" if d.scale == "ratio" else "")


def split_metric(label: str) -> tuple[str, str]:
    """"cpu@200 kpps" -> ("cpu", "200k"); a stored comparison's prefix stays with the name."""
    name, _, load = label.rpartition("@")
    if not name:
        return label, "-"
    words = name.split(" ")
    words[-1] = SHORT.get(words[-1], words[-1])
    return " ".join(words), load.replace(" ", "").removesuffix("pps")


EXPLAIN_ROWS = 12
EXPLAIN_COLS = [Col("stage / drop reason", text=True), Col("load"), Col("A"), Col("B"), Col("change"),
                Col("interval")]


def explain_value(v: float | None, d: PairedDifference, sign: bool = False) -> str:
    if v is None:
        return "-"
    if d.unit == "ns/pkt":
        return f"{v:+.0f} ns" if sign else f"{v:.0f} ns"
    return ("+" if sign and v > 0 else "") + sci(v, 2)


def explain_interval(d: PairedDifference) -> str:
    if d.ci is None:
        return "-"
    return f"[{explain_value(d.ci[0], d, True)}, {explain_value(d.ci[1], d, True)}]"


FUNCTION_ROWS = 10
FUNCTION_COLS = [Col("function", text=True), Col("self A"), Col("self B"), Col("self change"),
                 Col("self interval", wide=True), Col("with callees change"), Col("interval", wide=True),
                 Col("of busy")]


def show_functions(summary: ComparisonSummary, wide: bool = False) -> None:
    """Per candidate and load, the kernel functions whose own time changed
    most, with what they call beside, and that change's share of the busy
    time's change."""
    for cand, per_load in summary.functions.items():
        for fc in per_load:
            b = fc.busy
            rows_ = [[("* " if c.significant else "") + escape(c.function), explain_value(c.self.baseline_mean, c.self),
                      explain_value(c.self.candidate_mean, c.self), explain_value(c.self.estimate, c.self, True),
                      explain_interval(c.self), explain_value(c.incl.estimate, c.incl, True), explain_interval(c.incl),
                      "-" if (s := fc.share_of_busy(c.incl)) is None else f"{100 * s:.0f}%"]
                     for c in fc.functions[:FUNCTION_ROWS]]
            console.print(table(f"kernel functions, B = {cand} at {format_rate(fc.load_pps)} (ns per packet, with "
                                f"callees; busy {explain_value(b.estimate, b, True)} {explain_interval(b)})",
                                FUNCTION_COLS, rows_, wide, box=SIMPLE_HEAD, pad_edge=False))
            each = 1 - (1 - fc.family_confidence) / max(1, 2 * fc.tested)
            console.print(f"[dim]* an interval excludes zero: each of the {fc.tested} functions with "
                          f"{100 * fc.min_share:g}% or more of the busy time, self and with callees, read at "
                          f"{each:.4g} (Bonferroni: {fc.family_confidence:.4g} for the table); paired t over the "
                          "rounds; of busy: the change with callees over the busy change[/]", highlight=False)


def rows(diffs: list[PairedDifference], gate: set[int]) -> list[list[str]]:
    out = []
    for d in diffs:
        mark = " !" if id(d) in gate else ""
        out.append([*split_metric(d.metric), value_text(d.baseline_mean, d), value_text(d.candidate_mean, d),
                    change_text(d.estimate, d), interval_text(d),
                    f"[{VERDICT_STYLE[d.verdict]}]{d.verdict if d.n_pairs else 'no pairs'}[/]{mark}",
                    str(d.n_pairs),
                    "-" if d.p_value is None else f"{d.p_value:.2g}"])
    return out


def show(summary: ComparisonSummary, threshold: float | None, loss_threshold: float, as_json: bool,
         wide: bool = False, extra: dict | None = None) -> int:
    """Print the comparison; the exit code: REGRESSION_EXIT when a threshold
    is given and some metric is significantly worse by more than it."""
    diffs = [d for _, d in summary.all_differences()]
    bad_of: dict[str, list] = {}
    if threshold is not None:  # each candidate and configuration against its own capacity
        for cand in summary.candidates:
            ds = summary.differences.get(cand, [])
            for config in dict.fromkeys(d.configuration for d in ds):
                bad_of.setdefault(cand, []).extend(
                    regressions([d for d in ds if d.configuration == config], threshold, loss_threshold))
    bad = [d for ds in bad_of.values() for d in ds]
    if as_json:
        print_json({**(extra or {}), **summary.to_dict(), "threshold": threshold, "loss_threshold": loss_threshold,
                    "regressions": [{"candidate": c, "metric": d.metric, "kind": d.kind, "worse_by": d.worse_by}
                                    for c, ds in bad_of.items() for d in ds],
                    "regressed_metrics": {c: list(dict.fromkeys(d.family for d in ds))
                                          for c, ds in bad_of.items() if ds}})
        return REGRESSION_EXIT if bad else 0
    gate = {id(d) for d in bad}
    for cand in summary.candidates:
        ds = summary.differences.get(cand, [])
        # one table per configuration of stored campaigns, named in its title: as a column it leaves none for numbers
        for config in dict.fromkeys(d.configuration for d in ds):
            title = f"B = {cand}\nA = {summary.baseline}" + (f"\n{config}" if config else "")
            pairs = [(d, replace(d, metric=d.metric.removeprefix(f"{config} ")) if config else d) for d in ds
                     if d.configuration == config]
            console.print(table(title, COLS, rows([x for _, x in pairs], {id(x) for d, x in pairs if id(d) in gate}),
                                wide, box=SIMPLE_HEAD, pad_edge=False))
    for cand, rows_ in summary.explain.items():
        shown = sorted(rows_, key=lambda d: (not d.significant, -abs(d.estimate or 0)))[:EXPLAIN_ROWS]
        if shown:
            console.print(table(f"what changed inside, B = {cand} (profiled; ns per packet, drops per packet)",
                                EXPLAIN_COLS, [[*split_metric(d.metric), explain_value(d.baseline_mean, d),
                                                explain_value(d.candidate_mean, d), explain_value(d.estimate, d, True),
                                                explain_interval(d)] for d in shown], wide,
                                box=SIMPLE_HEAD, pad_edge=False))
    show_functions(summary, wide)
    d0 = diffs[0] if diffs else None
    how = (f"paired over {summary.rounds} rounds ({summary.pairing_words()}); Hodges-Lehmann estimate, "
           "signed-rank interval" if summary.paired else
           "unpaired: measured apart, so the host's drift between the runs is in the difference (Welch's t)")
    ended = {"decided": "stopped: every metric it decides on has a verdict",
             "budget_spent": "stopped: the budget was spent before every metric had a verdict",
             "unfinished": "unfinished: interrupted (softnet run SPEC resumes it)", "stored": ""}
    lines = [how + "."]
    if d0 is not None:
        confs = sorted({d.confidence for d in diffs}, reverse=True)
        at = (f"Interval at confidence {confs[0]:.4g}" if len(confs) == 1 else
              f"Intervals at confidence {confs[-1]:.4g} (the metrics it decides on, at each look) and "
              f"{confs[0]:.4g} (the others, sharing the rest among them: no false verdict in the table at more than "
              "the experiment's error rate)") if summary.paired else f"Interval at confidence {confs[0]:.4g}"
        what = ("A, B: each side's mean; change: the paired estimate." if summary.paired else
                "A, B: each side's mean; change: B's against A's (geometric for rates).")
        lines.append(f"{at}; equivalent: TOST's interval (at 1 - 2 x (1 - confidence), narrower than the one shown) "
                     f"inside +-{100 * d0.margin:g}% (loss: its own absolute margin); slower: worse on that metric. "
                     f"{what}")
    sides = {n: summary.provenance.get(n) or {} for n in (summary.baseline, *summary.candidates)}
    for key in ("kernel", "softnet_version", "hostname", "cpu_model"):
        seen = {p.get(key) for p in sides.values() if p}
        if len(seen) > 1:  # what tells the sides apart besides the variants' knobs
            lines.append(f"{key} differs: " + "; ".join(f"{n}: {p.get(key)}" for n, p in sides.items()))
    for name, flags in summary.unusable.items():
        if flags:  # trials flagged for more than the host's stalls give no figure
            lines.append(f"{name}: trials left out (flags): " + ", ".join(
                f"{f} {n}" for f, n in sorted(flags.items(), key=lambda kv: -kv[1])))
    for name, n in summary.overlapped.items():  # kept, but the sides were no longer apart in time
        lines.append(f"{name}: {n} trial(s) sent bursts into their partners' slots (the generator fell behind; "
                     "a lower --overload keeps each to its own)")
    if ended.get(summary.stop_reason):
        lines.append(ended[summary.stop_reason] + ".")
    if threshold is not None:
        n = sum(len({d.family for d in ds}) for ds in bad_of.values())
        lines.append(f"gate: {n} metric(s) significantly worse by more than {100 * threshold:g}% "
                     f"(loss: by {100 * loss_threshold:g} points)"
                     + (": " + "; ".join(f"B = {c}: {gate_words(ds)}" if len(summary.candidates) > 1
                                         else gate_words(ds) for c, ds in bad_of.items() if ds) + " (marked !)"
                        if bad else ""))
    for line in lines:
        console.print(line, highlight=False, markup=False)
    return REGRESSION_EXIT if bad else 0
