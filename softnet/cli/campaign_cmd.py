"""`softnet run`, `analyze`, `export` and `demo`."""
from __future__ import annotations

from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from softnet.campaign.analysis import Configuration, analyze_path
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
            if e.kind in ("plan", "probe"):
                bar.console.print(e.message)

        return run_campaign(spec, results_dir, on_event)


def verdict_style(v: str) -> str:
    return {"GOOD": "green", "BAD": "red", "INCONCLUSIVE": "yellow"}.get(v, "cyan")


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
    configs = analyze_path(path, campaign, pdr_loss_ratio=pdr, eta=eta)
    if as_json:
        print_json([c.to_dict() for c in configs])
    else:
        show_analysis(configs, tables)
    return configs
