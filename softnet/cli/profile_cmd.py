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
from softnet.cli.output import Col, chunks, console, eng, pct, print_json, sci, table
from softnet.results.store import Store


def profile_cells(results: Path, cid: str, pdr_loss_ratio: float) -> list[dict]:
    """Per cell of a stored campaign: stage levels, cost models and audit."""
    out = []
    with Store(results, read_only=True) as store:
        for cell in store.cells(cid):
            trials = store.trial_results(cid, cell["cell_id"])
            out.append({"cell_id": cell["cell_id"], "knobs": cell["knobs"], "levels": stage_levels(trials),
                        "models": cost_models(trials, pdr_loss_ratio), "audit": summarize_audit(trials)})
    return out


def run(spec: CampaignSpec, results: Path, pdr_loss_ratio: float, as_json: bool, wide: bool = False) -> list[dict]:
    cid = campaign_cmd.run(spec, results, as_json)
    cells = profile_cells(results, cid, pdr_loss_ratio)
    if as_json:
        print_json({"campaign_id": cid, "results_dir": str(results), "cells": cells})
        return cells
    for c in cells:
        show(c, wide)
    console.print(f"results: {results}/ (campaign {cid}); report with stage bars: softnet report {results}")
    return cells


AUDIT_COLS = [Col("load"), Col("CPU"), Col("busy % eBPF"), Col("busy % ticks"), Col("gap range (points)", wide=True),
              Col("softirq % eBPF"), Col("softirq % ticks"), Col("NET_RX % by context", text=True)]
# Loads per table: a stage name and four rate columns fit 80 characters.
LOADS_PER_TABLE = 4


def show_audit(rows: list[dict], wide: bool = False) -> None:
    """The WiFi-AP study's misaccounting, per load and CPU: eBPF against ticks."""
    if not rows:
        return
    out = [[eng(r["load_pps"], "pps"), str(r["cpu"]), pct(r["measured_busy_pct"]), pct(r["reported_busy_pct"]),
            f"{pct(r['gap_min'], signed=True)} .. {pct(r['gap_max'], signed=True)}", pct(r["measured_softirq_pct"]),
            pct(r["reported_softirq_pct"]), by_context(r["net_rx_pct_by_context"])] for r in rows]
    console.print(table("CPU accounting audit: eBPF-measured against /proc/stat ticks (mean over runs)",
                        AUDIT_COLS, out, wide))


def stage_table(levels: list[dict], wide: bool) -> Table:
    cols = [Col("stage", text=True), Col("timing", text=True, wide=True)]
    cols += [Col(eng(lv["load_pps"], "pps")) for lv in levels]
    rows = [[s, exactness, *(eng(lv["stages_ns_per_packet"][s]) for lv in levels)]
            for s, (exactness, _) in WIFI_STAGES.items()]
    rows += [
        ["[bold]all stages[/]", "", *(eng(sum(lv["stages_ns_per_packet"].values())) for lv in levels)],
        ["coverage (min)", "", *("-" if lv["coverage_min"] is None else f"{100 * lv['coverage_min']:.1f}%"
                                 for lv in levels)],
        ["SUT CPUs busy (eBPF)", "", *(f"{pct(lv['sut_busy_pct'])}%" for lv in levels)],
        ["  cross-check: nohz CPU time", "", *("-" if lv["sut_nohz_cpu_time_pct"] is None
                                               else f"{pct(lv['sut_nohz_cpu_time_pct'])}%" for lv in levels)],
        ["loss", "", *(sci(lv["loss_ratio"]) for lv in levels)],
    ]
    return table("CPU per forwarded packet by stage (ns, summed over CPUs; WiFi-AP Table V stages)", cols, rows,
                 wide)


def show(c: dict, wide: bool = False) -> None:
    levels, models = c["levels"], c["models"]
    if not levels:
        console.print("[yellow]no valid profiled trial: nothing to break down[/]")
        return
    for part in chunks(levels, len(levels) if wide else LOADS_PER_TABLE):
        console.print(stage_table(part, wide))
    console.print(f"[dim]stage events attached {100 * (levels[0]['duty'] or 1):.0f}% of the time; "
                  "coverage: named stage time / softirq and NAPI-thread time measured independently[/]")
    show_audit(c["audit"], wide)
    if not models.get("stages"):
        console.print("[yellow]fewer than 3 loads below saturation (SUT CPUs under 90% busy): no cost-vs-load fit[/]")
        return
    rows = [[s, eng(m["ns_per_packet"]), pct(m["intercept_pct"], 2), f"{m['r2']:.3f}"]
            for s, m in models["stages"].items()]
    b = models["sut_busy"]
    if b:
        rows.append(["[bold]SUT CPUs busy[/]", eng(b["ns_per_packet"]), pct(b["intercept_pct"], 2), f"{b['r2']:.3f}"])
    console.print(table(f"cost vs forwarded load, linear fit over loads "
                        f"{', '.join(eng(x, 'pps') for x in models['loads_used_pps'])}",
                        [Col("stage", text=True), Col("ns / packet (slope)"), Col("% CPU at no load"), Col("R²")],
                        rows, wide))
    pdr, pred = models["measured_pdr"], models["predicted_capacity_pps"]
    rate = (lambda v: eng(v, "pps"))
    console.print(f"predicted capacity (SUT CPUs {models['sut_cpus']} at 100%): "
                  f"{rate(pred)}; measured PDR{100 * pdr['loss_ratio']:g}%: "
                  f"{pdr_text(pdr, rate)}; highest forwarded rate {rate(models['max_forwarded_pps'])}", highlight=False)
