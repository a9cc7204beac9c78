"""`softnet run`, `analyze`, `export` and `demo`."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from rich.table import Table

from softnet.analysis.campaigns import (Configuration, PastramiMeta, SoftnetMeta, analyze_path, cell_label,
                                       host_stall_sentence)
from softnet.campaign.spec import CampaignSpec
from softnet.cli import compare_cmd, latency_cmd, soak_cmd
from softnet.cli.output import Col, Progress, console, count, eng, fixed, print_json, sci, table


def run(spec: CampaignSpec, results_dir: Path, as_json: bool, scheduler: str | None = None) -> str:
    """Run the campaign with its progress on stderr (none in --json mode);
    ``scheduler``: on a fleet's testbeds (softnet.fleet)."""
    # imported here: analyze needs none of the runner's testbeds and remote hosts
    from softnet.campaign.runner import Event, run_campaign

    with Progress(spec.name, off=as_json) as progress:
        def on_event(e: Event) -> None:
            progress.update(e.done, e.total, e.message if e.kind == "start" else None)
            if e.kind in ("plan", "probe", "search", "fleet") or (e.kind in ("trial", "start") and scheduler) or (
                    e.kind == "trial" and not progress.live):
                progress.log(e.message)

        if scheduler is not None:
            from softnet.fleet.controller import run_on_fleet

            return run_on_fleet(spec, results_dir, scheduler, on_event)
        return run_campaign(spec, results_dir, on_event)


def verdict_style(v: str) -> str:
    return {"GOOD": "green", "BAD": "red", "INCONCLUSIVE": "yellow", "found": "green", "unstable": "red",
            "min_load_fails": "red", "budget_exhausted": "yellow", "mixed": "yellow",
            "irregular": "yellow"}.get(v, "cyan")


LOAD_COLS = [Col("load"), Col("K"), Col("excl"), Col("PLR mean"), Col("PLR CI95"), Col("dUCL95", wide=True),
             Col("DR mean", wide=True), Col("T(O)"), Col("TIR next")]


def ci_text(m, fmt: Callable[[float], str], floor: float | None = None) -> str:
    """A MeanCI's interval as "[lo, hi]" ("-" when it has none: one run);
    ``floor``: the lowest value the quantity takes (a t-interval may dip below it)."""
    if m.ci_lower != m.ci_lower:
        return "-"
    return f"[{fmt(m.ci_lower if floor is None else max(floor, m.ci_lower))}, {fmt(m.ci_upper)}]"


def config_table(c: Configuration, wide: bool = False, paper_ci: bool = False) -> Table:
    """One configuration's per-load PASTRAMI statistics (rates in pps).
    The PLR's t-interval is clipped at 0 (a loss ratio is not negative)
    unless ``paper_ci``: PASTRAMI's interval as the paper computes it."""
    a = c.analysis
    tir_next = {s.from_load_pps: s.tir for s in a.stats.tir_steps}
    rows = []
    for ls in a.stats.loads:
        p = ls.plr_ratio
        rows.append([eng(ls.load_pps, "pps"), str(ls.n_runs), str(ls.n_excluded), sci(p.mean),
                     ci_text(p, sci, floor=None if paper_ci else 0.0),
                     sci(ls.plr_delta_ucl), eng(ls.dr_ratio.mean, digits=6), eng(ls.throughput_pps.mean, "pps"),
                     fixed(tir_next.get(ls.load_pps), 3)])
    return table(c.label, LOAD_COLS, rows, wide)


def show_analysis(configs: list[Configuration], tables: bool = True, wide: bool = False,
                  paper_ci: bool = False) -> None:
    rows = []
    for c in configs:
        r = c.analysis.report
        if tables:
            console.print(config_table(c, wide, paper_ci))
        flags = "; ".join(f.message for f in r.flags)
        rows.append([c.label, f"[{verdict_style(r.verdict.value)}]{r.verdict.value}[/]",
                     eng(r.ndr_load_pps, "pps"), eng(r.pdr_load_pps, "pps"), eng(r.pdr_point_load_pps, "pps"),
                     r.reason + (f" | flags: {flags}" if flags else "")])
    if tables and configs:
        console.print("[dim]PLR CI95: Student-t over the K runs, " + (
            "as PASTRAMI computes it (its lower end may fall below 0)" if paper_ci
            else "its lower end clipped at 0 (--paper-ci: PASTRAMI's own)") + "[/]", highlight=False)
    cols = [Col("configuration", text=True), Col("verdict", justify="left"), Col("NDR"), Col("PDR"),
            Col("over goal"), Col("reason / flags", text=True, wide=True)]
    console.print(table("PASTRAMI verdicts", cols, rows, wide))
    if configs:
        console.print("[dim]PDR: the highest load whose mean loss meets the goal (RFC 2544, CSIT); over goal: "
                      "the first load past it (PASTRAMI's PDR point)[/]", highlight=False)
    if not wide:  # the reasons as sentences: a column of them leaves the figures no room
        for c, row in zip(configs, rows):
            console.print(f"{c.label}: {row[-1]}", highlight=False, markup=False)
    for c in configs:
        line = host_stall_line(c.meta)
        if line:
            console.print(f"{c.label}: {line}", highlight=False)
        if isinstance(c.meta, PastramiMeta) and c.meta.discards:
            console.print(f"{c.label}: {discard_line(c.meta.discards)}", highlight=False)


def discard_line(shares: list) -> str:
    """Where a PASTRAMI configuration's loss happened: the NIC's receive
    discards (the files' third field) against all the loss, and the loads
    where that share differs most."""
    lost, nic = sum(d.lost_pkts for d in shares), sum(d.discarded_pkts for d in shares)
    if nic == 0:
        return (f"the NIC's receive discard counter stayed at 0 while {lost:,} packets were lost: lost past the "
                "NIC, or a counter that did not count")
    per = ", ".join(f"{eng(d.load_pps, 'pps')} {d.share:.0%}" for d in shares[:4])
    more = f" ... ({len(shares)} loads)" if len(shares) > 4 else ""
    rest = f"; {lost - nic:,} lost past the NIC" if nic < lost else ""
    return (f"NIC receive discards {nic / lost:.0%} of the loss ({nic:,} discarded, {lost:,} lost; per load: "
            f"{per}{more}){rest}")


def host_stall_line(meta: SoftnetMeta | PastramiMeta | None) -> str | None:
    """What host stalls did to a configuration's loss (analysis.campaigns.host_stall_sentence)."""
    return host_stall_sentence(meta, lambda v: eng(v, "pps"))


def analyze(path: Path, campaign: str | None, pdr: float, eta: float, as_json: bool, tables: bool,
            wide: bool = False, paper_ci: bool = False) -> list:
    """PASTRAMI analysis of sweeps and the summaries of searches. JSON: a list of
    sweep configurations, plus one object per search goal (``"search": true``)."""
    from softnet.results.store import is_store_dir

    configs = analyze_path(path, campaign, pdr_loss_ratio=pdr, eta=eta)
    is_store = is_store_dir(path)
    searches = search_summaries(path, campaign) if is_store else []
    latency = latency_campaigns(path, campaign) if is_store else []
    compared = comparisons(path, campaign) if is_store else []
    rfc = rfc_benchmarks(path, campaign) if is_store else None
    soaks = soak_cmd.soak_summaries(path, campaign) if is_store else {}
    if compared and campaign:
        searches = []  # a comparison's own searches are in its paired figures
    if as_json:
        print_json([c.to_dict() for c in configs] + [{"search": True, **s.to_dict()} for s in searches]
                   + [{"latency": True, **latency_cmd.show(path, cid, True, wide, quiet=True)} for cid in latency]
                   + [{"comparison": True, "campaign_id": cid, **s.to_dict()} for cid, s in compared]
                   + ([{"reset": True, **s.to_dict()} for s in rfc.reset]
                      + [{"back_to_back": True, **s.to_dict()} for s in rfc.back_to_back]
                      + [{"recovery": True, **s.to_dict()} for s in rfc.recovery] if rfc else [])
                   + [{"soak": True, "campaign_id": cid, "cell": cell, **s.model_dump()}
                      for cid, cells in soaks.items() for cell, s in cells.items()])
    else:
        for _, s in compared:
            compare_cmd.show(s, None, 0.0, False, wide)
        if rfc:
            show_rfc_benchmarks(rfc, False, wide)
        if soaks:
            soak_cmd.show(soaks, False, wide)
        if configs or not (searches or latency or compared or rfc or soaks):
            show_analysis(configs, tables, wide, paper_ci)
        if is_store and compares_data_paths(configs):
            show_data_paths(data_path_rows(path, configs), wide)
        if searches:
            show_searches(searches, wide)
        for cid in latency:
            latency_cmd.show(path, cid, False, wide)
    return configs


def compares_data_paths(configs: list[Configuration]) -> bool:
    """A sweep over the SUT personality (the matrix knob testbed.sut)."""
    return len(configs) > 1 and any("testbed.sut" in c.knobs for c in configs)


def data_path_rows(results_dir: Path, configs: list[Configuration]) -> list:
    from softnet.analysis.data_paths import compare
    from softnet.results.readers import stored_trials
    from softnet.results.store import Store

    with Store(results_dir, read_only=True) as store:
        full = {c.label: stored_trials(store, c.campaign_id, c.cell_id) for c in configs if c.source == "softnet"}
    return compare(configs, full)


DATA_PATH_COLS = [Col("#"), Col("data path", text=True), Col("verdict", justify="left", wide=True), Col("NDR"),
                  Col("PDR in"), Col("capacity"), Col("capacity CI95", wide=True), Col("ns/pkt"),
                  Col("ns/pkt CI95", wide=True), Col("idle CPU %", wide=True), Col("ns/pkt low load", wide=True)]


def show_data_paths(rows: list, wide: bool = False) -> None:
    """The data paths ranked: NDR, the PDR's bracket [tested load met, next
    load), capacity (largest mean throughput, CI95 over runs), SUT CPU ns per
    forwarded packet (the slope of busy CPU against forwarded rate below the
    PDR; analysis.data_paths)."""
    from softnet.analysis.data_paths import capacity_disagrees, short_label

    def ci(pair, unit=""):
        return "-" if pair is None else f"{eng(pair[0], unit)}-{eng(pair[1], unit)}"

    def ns(v):
        return "-" if v is None else f"{v:,.0f}"

    out = []
    for r in rows:
        top = "max" if r.pdr_next_pps is None else eng(r.pdr_next_pps)
        out.append([f"{r.rank}" + ("=" if r.tied_with else ""), short_label(r.label),
                    f"[{verdict_style(r.verdict)}]{r.verdict}[/]", eng(r.ndr_pps),
                    "-" if r.pdr_pps is None else f"[{eng(r.pdr_pps)}, {top})", eng(r.capacity_pps),
                    ci(r.capacity_ci), ns(r.cpu_ns_per_pkt), "-" if r.cpu_ns_ci is None else
                    f"{ns(r.cpu_ns_ci[0])}..{ns(r.cpu_ns_ci[1])}",
                    "-" if r.cpu_fixed_pct is None else f"{r.cpu_fixed_pct:.1f}", ns(r.cpu_ns_at_ref)])
    console.print(table("data paths, ranked (PDR, then capacity; pps)", DATA_PATH_COLS, out, wide))
    console.print("  PDR in [a, b): met at a, not at b. ns/pkt: SUT CPU time per forwarded packet, the slope of "
                  "busy CPU against forwarded rate up to the PDR. =: not separable from another row (PDR brackets "
                  "and capacity CI95 overlap)." + ("" if wide else " --wide: verdicts, intervals, idle cost."),
                  highlight=False)
    for lo, hi in capacity_disagrees(rows):
        console.print(f"  {short_label(lo)} carries more than {short_label(hi)} at overload (capacity CI95 "
                      "apart) though its PDR ranks lower", highlight=False)
    tied = next((r for r in rows if r.tied_with and r.label.startswith("sut=")), None)
    other = next((r for r in rows if tied and r.label in tied.tied_with and r.label.startswith("sut=")), None)
    if other is not None:  # a sweep's runs are minutes apart; a paired comparison cancels the host's drift
        suts = [x.label.removeprefix("sut=") for x in (tied, other)]
        console.print(f"  to tell tied rows apart: softnet compare --sut {suts[0]} --sut {suts[1]} (interleaved, "
                      "paired; docs/explanation/compare.md)", highlight=False, markup=False)


def latency_campaigns(results_dir: Path, campaign: str | None = None) -> list[str]:
    """Ids of the campaigns that hold AF_XDP latency runs."""
    from softnet.results.readers import campaigns
    from softnet.results.store import Store

    with Store(results_dir, read_only=True) as store:
        ids = [c.campaign_id for c in campaigns(store)]
        return [cid for cid in ids if (campaign is None or cid == campaign) and store.latency_runs(cid)]


def comparisons(results_dir: Path, campaign: str | None = None) -> list:
    """(campaign id, ComparisonSummary) of the paired comparisons stored there."""
    from softnet.results.readers import campaigns
    from softnet.results.store import Store

    with Store(results_dir, read_only=True) as store:
        ids = [campaign] if campaign else [c.campaign_id for c in campaigns(store)]
        return [(cid, s) for cid in ids if (s := store.comparison(cid, finished_only=False)) is not None]


def search_summaries(results_dir: Path, campaign: str | None = None) -> list:
    from softnet.analysis.searches import summarize_searches
    from softnet.results.readers import campaigns
    from softnet.results.store import Store

    with Store(results_dir, read_only=True) as store:
        ids = [campaign] if campaign else [c.campaign_id for c in campaigns(store)
                                           if '"kind": "compare"' not in c.spec_text]
        return [s for cid in ids for s in summarize_searches(store, cid)]


# Bounds take 4 significant digits: a search's width is typically 0.5%.
# The status wraps at its underscores ("budget exhausted") rather than be cut.
# lower / upper: RFC 9971's relevant bounds; throughput: its conditional throughput.
SEARCH_COLS = [Col("configuration", text=True), Col("goal", justify="left"), Col("run"),
               Col("status", text=True), Col("lower"), Col("upper"), Col("width", wide=True), Col("throughput"),
               Col("conf lo/up", wide=True), Col("loss at lower [CI95]", wide=True), Col("trials"),
               Col("trial time", wide=True)]


def definition_lines(summaries: list) -> list[str]:
    """What the numbers are: each goal's RFC 9971 attributes, how loss was
    counted and the engine, one line per distinct setting (its goals named)."""
    by_setting: dict[str, list[str]] = {}
    for s in summaries:
        r = s.repeats[0]
        if r.exceed_ratio is None:  # stored before softnet reported RFC 9971's terms
            continue
        counted = "stall loss apart" if s.all_loss is not None else "all loss counted"
        setting = (f"{r.engine}, exceed {r.exceed_ratio:g}, {r.final_trial_duration_s:g} s trials, sum "
                   f"{r.duration_sum_s:g} s, {counted}")
        by_setting.setdefault(setting, [])
        if s.goal not in by_setting[setting]:
            by_setting[setting].append(s.goal)
    return [f"{', '.join(goals)}: {setting}" for setting, goals in by_setting.items()]


def show_searches(summaries: list, wide: bool = False) -> None:
    rows, notes = [], []
    for s in summaries:
        for r in s.repeats:
            lo, up = (r.relevant_lower_bound_pps, r.relevant_upper_bound_pps) if r.engine else (
                r.lower_bound_pps, r.upper_bound_pps)
            width = (up - lo) / up if lo and up else None
            ci = "-" if r.lower_loss_ratio is None else \
                f"{sci(r.lower_loss_ratio)} [{sci(r.lower_loss_ci95_low)}, {sci(r.lower_loss_ci95_high)}]"
            rows.append([s.label, s.goal, str(r.run_index),
                         f"[{verdict_style(r.status)}]{r.status.replace('_', ' ')}[/]",
                         eng(lo, "pps", 4), eng(up, "pps", 4),
                         "-" if width is None else f"{width:.2%}", eng(r.conditional_throughput_pps, "pps", 4),
                         f"{eng(r.lower_confidence)}/{eng(r.upper_confidence)}", ci,
                         str(r.trial_count), eng(r.trial_seconds, "s")])
            notes.append(f"{s.label} {s.goal} run {r.run_index}: {r.diagnosis}")
    # One table per configuration, named in its title: a configuration column
    # would leave the numbers no room in 80 columns.
    # one search per goal: no run column (its room lets "budget exhausted" wrap between its words)
    keep = [i for i in range(1, len(SEARCH_COLS)) if i != 2 or any(len(s.repeats) > 1 for s in summaries)]
    for label in dict.fromkeys(r[0] for r in rows):
        title = f"NDR/PDR searches: {label}" if label else "NDR/PDR searches"
        console.print(table(title, [SEARCH_COLS[i] for i in keep], [[r[i] for i in keep] for r in rows
                                                                    if r[0] == label], wide))
    lines = definition_lines(summaries)
    if lines:
        lines.insert(0, "RFC 9971 goal results: lower, upper: relevant bounds; throughput: conditional")
    lines += [x for s in summaries if (x := all_loss_line(s))] + notes
    lines += [x for s in summaries if (x := at_or_below_line(s))]
    for line in lines:
        console.print(f"  {line}", highlight=False)
    if any(len(s.repeats) > 1 for s in summaries):
        cols = [Col("configuration", text=True), Col("goal", justify="left"), Col("searches"),
                Col("verdict", justify="left"), Col("throughput (mean)"), Col("CV")]
        rows = [[s.label, s.goal, str(len(s.repeats)), f"[{verdict_style(s.verdict)}]{s.verdict}[/]",
                 eng(s.value_pps, "pps", 4), "-" if s.cv is None else f"{s.cv:.2%}"] for s in summaries]
        console.print(table("over repeated searches", cols, rows, wide))
    show_search_latency(summaries, wide)


def all_loss_line(s) -> str | None:
    """With host-stall loss set apart: the same trials read counting every lost packet."""
    if not s.all_loss or not any(s.all_loss):
        return None
    got = [r for r in s.all_loss if r is not None]
    ct = s.all_loss_throughput_pps
    what = f"throughput {eng(ct, 'pps', 4)}" if ct else "no lower bound"
    if len(got) > 1 and ct:
        what += f" (mean of {len(got)})"
    return f"{s.goal}, all loss counted, same trials: {what}"


def at_or_below_line(s) -> str | None:
    """How many trials at or below a goal's lower bound lost more than the
    goal allows, and how much of that the search's reading set apart."""
    b = s.at_or_below
    if b is None or not b.over_goal:
        return None
    goal = s.goal
    head = (f"{(s.label + ' ') if s.label else ''}{goal}: {b.over_goal} of {b.trials} trials at or below the "
            f"lower bound lost more than {goal} allows (up to {b.max_loss_ratio:.2%} of their packets)")
    stalls = b.over_goal - b.over_goal_as_read
    if stalls:
        return (f"{head}; {stalls} of them only through loss host stalls explain, which this search sets apart: a "
                f"tester counting all loss (RFC 2544, MLRsearch) reports a lower {goal} (--host-stall-loss count)")
    return f"{head}: the bound holds at the search's confidence, not in every trial"


def ms3(v: float) -> str:
    """Milliseconds, 3 significant digits, whole ones from 1 s (no exponent); "-" for NaN."""
    return "-" if v != v else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def latency_us(ns) -> str:
    """ns -> microseconds, 3 significant digits (whole ones from 1 ms): "12.3", "4120"; "-" when absent."""
    if ns is None:
        return "-"
    return eng(ns / 1e3) if ns < 1e6 else f"{ns / 1e3:.0f}"


LATENCY_KEYS = ("latency_p50_ns", "latency_p90_ns", "latency_p99_ns", "latency_p99_9_ns")
LATENCY_COLS = [Col("configuration", text=True), Col("goal", justify="left"), Col("of"),
                Col("load", wide=True), Col("p50"), Col("p90"), Col("p99"), Col("p99.9"),
                Col("p99 min-max", wide=True), Col("p99.9 min-max", wide=True), Col("loss"),
                Col("loss max", wide=True), Col("valid")]


def show_search_latency(summaries: list, wide: bool = False) -> None:
    """Latency under load at fractions of each goal's lower bound (method.latency_fractions):
    medians over the valid repeats; a trial without latency (synthetic SUT) shows "-"."""
    found = [x for s in summaries for x in s.latency]
    if not found:
        return
    rows = []
    for x in found:
        med = [latency_us(None if x.latency[k] is None else x.latency[k].median) for k in LATENCY_KEYS]
        spread = ["-" if (st := x.latency[k]) is None else f"{latency_us(st.min)}-{latency_us(st.max)}"
                  for k in LATENCY_KEYS[2:]]
        rows.append([x.label, x.goal, f"{x.fraction:.0%}", eng(x.load_pps, "pps"), *med, *spread,
                     sci(x.loss_ratio_median), sci(x.loss_ratio_max),
                     ("" if x.valid == x.repeats else "[yellow]") + f"{x.valid}/{x.repeats}"
                     + ("" if x.valid == x.repeats else "[/]")])
    console.print(table("one-way latency under load, us (median of valid repeats)", LATENCY_COLS, rows, wide))
    for x in found:
        why = x.note or (", ".join(f"{f} x{n}" for f, n in x.flags.items()) if x.valid < x.repeats else "")
        if why:
            console.print(f"  {x.label} {x.goal} at {x.fraction:.0%}: {why}", highlight=False)
    show_rfc8219(found, wide)


RFC8219_COLS = [Col("configuration", text=True), Col("goal", justify="left"), Col("of"), Col("TL"), Col("WCL"),
                Col("PDV"), Col("IPDV med", wide=True), Col("IPDV max"), Col("repeats")]


def show_rfc8219(found: list, wide: bool = False) -> None:
    """RFC 8219's figures at each fraction: typical (median) and worst-case
    (99.9th percentile) latency, PDV and IPDV, each the median over the valid
    repeats as the RFC reports them (it asks for at least 20)."""
    rows = [[x.label, x.goal, f"{x.fraction:.0%}",
             *[latency_us(None if x.rfc8219.get(k) is None else x.rfc8219[k].median)
               for k in ("typical_ns", "worst_case_ns", "pdv_ns")],
             "-" if x.rfc8219.get("ipdv_median_ns") is None else f"{x.rfc8219['ipdv_median_ns'].median / 1e3:.2f}",
             latency_us(None if x.rfc8219.get("ipdv_max_ns") is None else x.rfc8219["ipdv_max_ns"].median),
             f"{x.valid}/{x.repeats}"] for x in found if x.rfc8219.get("typical_ns") is not None]
    if not rows:
        return
    console.print(table("RFC 8219 latency, us (TL: median, WCL: 99.9th percentile, PDV: WCL - min)",
                        RFC8219_COLS, rows, wide))
    if all(x.rfc8219.get("ipdv_max_ns") is None for x in found):
        console.print("  IPDV: give collect.exact_delays = N (the sink keeps N delays one by one)", highlight=False)


RESET_COLS = [Col("configuration", text=True, justify="left"), Col("load"), Col("runs"),
              Col("interruption ms"), Col("95% CI"), Col("frame loss ms"), Col("spoilt", wide=True)]


def rfc_benchmarks(results_dir: Path, campaign: str | None):
    """The back-to-back, recovery and reset summaries of a store's campaigns (or of one)."""
    from softnet.analysis.rfc_benchmarks import RfcBenchmarks, stored_rfc_benchmarks
    from softnet.results import readers

    out = RfcBenchmarks()
    with readers.open_results(results_dir) as st:
        for c in readers.campaigns(st):
            if campaign is None or c.campaign_id == campaign:
                out = out + stored_rfc_benchmarks(st, c.campaign_id)
    return out


def show_rfc_benchmarks(rfc, as_json: bool, wide: bool = False) -> None:
    """The reset, back-to-back and recovery summaries (softnet run of such a
    campaign, softnet analyze of a store): a table for each kind found."""
    if as_json:
        print_json([s.to_dict() for s in rfc.reset + rfc.back_to_back + rfc.recovery])
        return
    for found, show in ((rfc.reset, show_resets), (rfc.back_to_back, show_back_to_back),
                        (rfc.recovery, show_recoveries)):
        if found:
            show(found, False, wide)


RECOVERY_COLS = [Col("configuration", text=True, justify="left"), Col("overload"), Col("then"), Col("runs"),
                 Col("recovery ms"), Col("95% CI"), Col("drain ms"), Col("lost after", wide=True),
                 Col("stalls", wide=True)]


def show_recoveries(summaries: list, as_json: bool, wide: bool = False) -> None:
    """System recovery (RFC 2544 26.5): from the drop to the recovery load
    (A) to the last frame lost (B), mean over the runs with its interval,
    and how long the queue the overload left took to drain."""
    if as_json:
        print_json([s.to_dict() for s in summaries])
        return
    from softnet.analysis.data_paths import short_label


    rows = [[short_label(s.label), eng(s.overload_pps, "pps"), eng(s.recovery_pps, "pps"),
             f"{s.recovery_ms.n}/{s.runs}", ms3(s.recovery_ms.mean),
             ci_text(s.recovery_ms, ms3, floor=0.0),
             ms3(s.drain_ms.mean), ms3(s.lost_after_step_pkts.mean), str(s.stall_runs)] for s in summaries]
    console.print(table("system recovery: from the load's drop to the last loss (RFC 2544 26.5)", RECOVERY_COLS,
                        rows, wide=wide))
    for s in summaries:
        note = f"{short_label(s.label)}: {s.overload_s:g} s of overload, then the recovery load"
        if s.stall_runs:
            note += (f"; in {s.stall_runs} run(s) host stalls explained loss after the SUT's last: set apart "
                     "(recovery_ms ends at the last loss no stall explains)")
        if s.spoilt_runs:
            note += (f"; in {s.spoilt_runs} run(s) a host stall at the drop or the last loss moved that end: "
                     "left out of the mean (each run's recovery_spoilt names it)")
        console.print(note, markup=False, highlight=False)


B2B_COLS = [Col("configuration", text=True, justify="left"), Col("burst rate"), Col("bursts"),
            Col("frames"), Col("95% CI"), Col("min-max", wide=True), Col("buffer ms"), Col("corr. ms"),
            Col("spoilt", wide=True)]


def show_back_to_back(summaries: list, as_json: bool, wide: bool = False) -> None:
    """The back-to-back frames benchmark (RFC 2544 26.4, RFC 9004): the
    longest lossless burst per configuration and burst rate, its interval,
    and the buffer times RFC 9004 derives from it."""
    if as_json:
        print_json([s.to_dict() for s in summaries])
        return
    from softnet.analysis.data_paths import short_label

    def num(v: float | None, f: str = ".4g") -> str:
        return "-" if v is None or v != v else format(v, f)

    # bursts that went through whole count at the length sent: the mean is then a lower bound
    rows = [[short_label(s.label), eng(s.burst_rate_pps, "pps"), str(s.bursts),
             (">=" if s.whole else "") + num(s.lossless_pkts.mean, ".0f"),
             ci_text(s.lossless_pkts, lambda v: f"{v:.0f}"),
             f"{s.min_pkts}-{s.max_pkts}" if s.min_pkts is not None else "-",
             num(s.implied_buffer_s * 1e3 if s.implied_buffer_s is not None else None, ".3g"),
             num(s.corrected_buffer_s * 1e3 if s.corrected_buffer_s is not None else None, ".3g"),
             str(s.spoilt)] for s in summaries]
    console.print(table("back-to-back frames: longest burst forwarded whole (RFC 2544 26.4, RFC 9004)", B2B_COLS,
                        rows, wide=wide))
    for s in summaries:
        notes = []
        if s.whole:
            notes.append(f"{s.whole} of {s.bursts} bursts went through whole, counted as {s.burst_pkts} (the "
                         "frames sent): the mean is a lower bound; send longer bursts")
        if s.spoilt:
            notes.append("left out: " + ", ".join(f"{n} {why}" for why, n in s.reasons.items()))
        if s.unknown:
            notes.append(f"{s.unknown} burst(s) past the sink's kept lost runs: unknown")
        if s.throughput_pps is None:
            notes.append("corrected buffer time: give method.throughput (the SUT's measured throughput)")
        if notes:
            console.print(f"{short_label(s.label)}: " + "; ".join(notes), markup=False, highlight=False)


def show_resets(summaries: list, as_json: bool, wide: bool = False) -> None:
    """The reset benchmark (RFC 2544 26.6, RFC 6201): the interruption per
    configuration and load, timestamp method with its interval, frame-loss method."""
    if as_json:
        print_json([s.to_dict() for s in summaries])
        return


    from softnet.analysis.data_paths import short_label

    rows = [[short_label(s.label), eng(s.load_pps, "pps"), f"{s.runs - s.failed}/{s.runs}", ms3(s.interruption_ms.mean),
             ci_text(s.interruption_ms, ms3, floor=0.0),
             ms3(s.frame_loss_ms.mean), str(s.host_interference)] for s in summaries]
    console.print(table("reset: time the data path did not forward (RFC 6201)", RESET_COLS, rows, wide=wide))
    for s in summaries:
        note = f"{short_label(s.label)}: {s.what}"
        if s.host_interference:
            note += (f"; {s.host_interference} run(s) a host stall spoilt at the interruption's start or end"
                     " (left out of the mean; each trial names its stall)")
        console.print(note, markup=False, highlight=False)
