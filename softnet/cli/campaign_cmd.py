"""`softnet run`, `analyze`, `export` and `demo`."""
from __future__ import annotations

from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from softnet.analysis.campaigns import Configuration, analyze_path
from softnet.campaign.runner import Event, run_campaign
from softnet.campaign.spec import CampaignSpec
from softnet.cli.output import console, err_console, fmt, print_json


def run(spec: CampaignSpec, results_dir: Path, as_json: bool) -> str:
    if as_json:
        return run_campaign(spec, results_dir)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=err_console) as bar:
        task = bar.add_task(spec.name, total=None)

        def on_event(e: Event) -> None:
            bar.update(task, completed=e.done, total=e.total)
            if e.kind in ("plan", "probe", "search"):
                bar.console.print(e.message)

        return run_campaign(spec, results_dir, on_event)


def verdict_style(v: str) -> str:
    return {"GOOD": "green", "BAD": "red", "INCONCLUSIVE": "yellow", "found": "green", "unstable": "red",
            "min_load_fails": "red", "budget_exhausted": "yellow", "mixed": "yellow"}.get(v, "cyan")


def config_table(c: Configuration) -> Table:
    a = c.analysis
    t = Table(title=c.label, header_style="bold")
    for col in ("load pps", "K", "excl", "PLR mean", "PLR CI95", "dUCL95", "DR mean", "T(O) pps", "TIR next"):
        t.add_column(col, justify="right")
    tir_next = {s.from_load_pps: s.tir for s in a.stats.tir_steps}
    for ls in a.stats.loads:
        p = ls.plr_ratio
        t.add_row(fmt(ls.load_pps), str(ls.n_runs), str(ls.n_excluded), f"{p.mean:.3e}",
                  "-" if p.ci_lower != p.ci_lower else f"[{p.ci_lower:.2e}, {p.ci_upper:.2e}]",
                  fmt(ls.plr_delta_ucl, 3), f"{ls.dr_ratio.mean:.6f}", fmt(ls.throughput_pps.mean),
                  fmt(tir_next.get(ls.load_pps), 3))
    return t


def show_analysis(configs: list[Configuration], tables: bool = True) -> None:
    summary = Table(title="PASTRAMI verdicts", header_style="bold")
    for col in ("configuration", "verdict", "PDR point pps", "NDR pps", "reason / flags"):
        summary.add_column(col)
    for c in configs:
        r = c.analysis.report
        if tables:
            console.print(config_table(c))
        flags = "; ".join(f.message for f in r.flags)
        summary.add_row(c.label, f"[{verdict_style(r.verdict.value)}]{r.verdict.value}[/]",
                        fmt(r.pdr_point_load_pps), fmt(r.ndr_load_pps), r.reason + (f" | flags: {flags}" if flags else ""))
    console.print(summary)


def analyze(path: Path, campaign: str | None, pdr: float, eta: float, as_json: bool, tables: bool) -> list:
    """PASTRAMI analysis of sweeps and the summaries of searches. JSON: a list of
    sweep configurations, plus one object per search goal (``"search": true``)."""
    from softnet.results.store import DB_NAME

    configs = analyze_path(path, campaign, pdr_loss_ratio=pdr, eta=eta)
    searches = search_summaries(path, campaign) if (Path(path) / DB_NAME).exists() else []
    if as_json:
        print_json([c.to_dict() for c in configs] + [{"search": True, **s.to_dict()} for s in searches])
    else:
        if configs or not searches:
            show_analysis(configs, tables)
        if searches:
            show_searches(searches)
    return configs


def search_summaries(results_dir: Path, campaign: str | None = None) -> list:
    from softnet.analysis.searches import summarize_searches
    from softnet.results.store import Store

    with Store(results_dir, read_only=True) as store:
        ids = [campaign] if campaign else [c["campaign_id"] for c in store.campaigns()]
        return [s for cid in ids for s in summarize_searches(store, cid)]


def show_searches(summaries: list) -> None:
    t = Table(title="NDR/PDR searches", header_style="bold")
    for col in ("configuration", "goal", "run", "status", "lower pps", "upper pps", "width", "conf lo/up",
                "loss at lower [CI95]", "trials"):
        t.add_column(col, justify="left" if col in ("configuration", "goal", "status") else "right")
    notes = []
    for s in summaries:
        for r in s.repeats:
            width = (r["upper_bound_pps"] - r["lower_bound_pps"]) / r["upper_bound_pps"] \
                if r["lower_bound_pps"] and r["upper_bound_pps"] else None
            ci = "-" if r["lower_loss_ratio"] is None else \
                f"{r['lower_loss_ratio']:.1e} [{r['lower_loss_ci95_low']:.1e}, {r['lower_loss_ci95_high']:.1e}]"
            t.add_row(s.label, s.goal, str(r["run_index"]), f"[{verdict_style(r['status'])}]{r['status']}[/]",
                      fmt(r["lower_bound_pps"]), fmt(r["upper_bound_pps"]), "-" if width is None else f"{width:.2%}",
                      f"{fmt(r['lower_confidence'], 3)}/{fmt(r['upper_confidence'], 3)}", ci,
                      f"{r['trial_count']} ({fmt(r['trial_seconds'])} s)")
            notes.append(f"{s.label} {s.goal} run {r['run_index']}: {r['diagnosis']}")
    console.print(t)
    for n in notes:
        console.print(f"  {n}", highlight=False)
    if any(len(s.repeats) > 1 for s in summaries):
        v = Table(title="over repeated searches", header_style="bold")
        for col in ("configuration", "goal", "searches", "verdict", "value pps (mean)", "CV"):
            v.add_column(col)
        for s in summaries:
            v.add_row(s.label, s.goal, str(len(s.repeats)), f"[{verdict_style(s.verdict)}]{s.verdict}[/]",
                      fmt(s.value_pps), "-" if s.cv is None else f"{s.cv:.2%}")
        console.print(v)
