"""`softnet profile`: a profiled load sweep: stage costs per load (the
WiFi-AP study's Fig. 10), the CPU accounting audit, per-stage cost-vs-load
fits and the capacity they predict against the sweep's measured PDR."""
from __future__ import annotations

from pathlib import Path

from rich.table import Table

from softnet.analysis.cpu_audit import by_context, summarize_audit
from softnet.analysis.stage_models import cost_models, pdr_text, stage_levels
from softnet.analysis.stages import WIFI_STAGES
from softnet.campaign.spec import CampaignSpec
from softnet.cli import campaign_cmd
from softnet.cli.output import console, print_json
from softnet.results.store import Store
from softnet.units import format_rate


def profile_cells(results: Path, cid: str, pdr_loss_ratio: float) -> list[dict]:
    """Per cell of a stored campaign: stage levels, cost models and audit."""
    out = []
    with Store(results, read_only=True) as store:
        for cell in store.cells(cid):
            trials = store.trial_results(cid, cell["cell_id"])
            out.append({"cell_id": cell["cell_id"], "knobs": cell["knobs"], "levels": stage_levels(trials),
                        "models": cost_models(trials, pdr_loss_ratio), "audit": summarize_audit(trials)})
    return out


def run(spec: CampaignSpec, results: Path, pdr_loss_ratio: float, as_json: bool) -> list[dict]:
    cid = campaign_cmd.run(spec, results, as_json)
    cells = profile_cells(results, cid, pdr_loss_ratio)
    if as_json:
        print_json({"campaign_id": cid, "results_dir": str(results), "cells": cells})
        return cells
    for c in cells:
        show(c)
    console.print(f"results: {results}/ (campaign {cid}); report with stage bars: softnet report {results}")
    return cells


def show_audit(rows: list[dict]) -> None:
    """The WiFi-AP study's misaccounting, per load and CPU: eBPF against ticks."""
    if not rows:
        return
    t = Table(title="CPU accounting audit: eBPF-measured against /proc/stat ticks (mean over runs)",
              header_style="bold")
    for col in ("load", "CPU", "busy % eBPF", "busy % ticks", "gap range (points)", "softirq % eBPF",
                "softirq % ticks", "NET_RX % by context"):
        t.add_column(col, justify="right")
    for r in rows:
        f = (lambda v, fmt="{:.1f}": "-" if v is None else fmt.format(v))
        t.add_row(format_rate(r["load_pps"]), str(r["cpu"]), f(r["measured_busy_pct"]), f(r["reported_busy_pct"]),
                  f"{f(r['gap_min'], '{:+.1f}')} .. {f(r['gap_max'], '{:+.1f}')}", f(r["measured_softirq_pct"]),
                  f(r["reported_softirq_pct"]), by_context(r["net_rx_pct_by_context"]))
    console.print(t)


def show(c: dict) -> None:
    levels, models = c["levels"], c["models"]
    if not levels:
        console.print("[yellow]no valid profiled trial: nothing to break down[/]")
        return
    t = Table(title="CPU per forwarded packet by stage (ns, summed over CPUs; WiFi-AP Table V stages)",
              header_style="bold")
    t.add_column("stage")
    t.add_column("timing")
    for lv in levels:
        t.add_column(format_rate(lv["load_pps"]), justify="right")
    for s, (exactness, _) in WIFI_STAGES.items():
        t.add_row(s, exactness, *(f"{lv['stages_ns_per_packet'][s]:,.0f}" for lv in levels))
    t.add_row("[bold]all stages[/]", "", *(f"{sum(lv['stages_ns_per_packet'].values()):,.0f}" for lv in levels))
    t.add_row("coverage (min)", "", *("-" if lv["coverage_min"] is None else f"{100 * lv['coverage_min']:.1f}%"
                                      for lv in levels))
    t.add_row("SUT CPUs busy (eBPF)", "", *(f"{lv['sut_busy_pct']:.1f}%" for lv in levels))
    t.add_row("  cross-check: nohz CPU time", "", *("-" if lv["sut_nohz_cpu_time_pct"] is None
                                                    else f"{lv['sut_nohz_cpu_time_pct']:.1f}%" for lv in levels))
    t.add_row("loss", "", *(f"{100 * lv['loss_ratio']:.3f}%" for lv in levels))
    console.print(t)
    console.print(f"[dim]stage events attached {100 * (levels[0]['duty'] or 1):.0f}% of the time; "
                  "coverage: named stage time / softirq and NAPI-thread time measured independently[/]")
    show_audit(c["audit"])
    if not models.get("stages"):
        console.print("[yellow]fewer than 3 loads below saturation (SUT CPUs under 90% busy): no cost-vs-load fit[/]")
        return
    f = Table(title=f"cost vs forwarded load, linear fit over loads {', '.join(format_rate(x) for x in models['loads_used_pps'])}",
              header_style="bold")
    for col in ("stage", "ns / packet (slope)", "% CPU at no load", "R²"):
        f.add_column(col, justify="right")
    for s, m in models["stages"].items():
        f.add_row(s, f"{m['ns_per_packet']:,.0f}", f"{m['intercept_pct']:.2f}", f"{m['r2']:.3f}")
    b = models["sut_busy"]
    if b:
        f.add_row("[bold]SUT CPUs busy[/]", f"{b['ns_per_packet']:,.0f}", f"{b['intercept_pct']:.2f}", f"{b['r2']:.3f}")
    console.print(f)
    pdr, pred = models["measured_pdr"], models["predicted_capacity_pps"]
    console.print(f"predicted capacity (SUT CPUs {models['sut_cpus']} at 100%): "
                  f"{'-' if pred is None else format_rate(pred)}; measured PDR{100 * pdr['loss_ratio']:g}%: "
                  f"{pdr_text(pdr, format_rate)}; highest forwarded rate {format_rate(models['max_forwarded_pps'])}")
