"""`softnet profile`: a profiled load sweep: stage costs per load (the
WiFi-AP study's Fig. 10), the CPU accounting audit, per-stage cost-vs-load
fits and the capacity they predict against the sweep's measured PDR."""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict
from rich.table import Table

from softnet.analysis.cpu_audit import by_context, summarize_audit
from softnet.analysis.stage_models import cost_models, pdr_text, stage_levels
from softnet.analysis.stages import EBPF_STAGES, WIFI_STAGES
from softnet.analysis.victim_check import summarize_victims
from softnet.campaign.spec import CampaignSpec
from softnet.cli import campaign_cmd
from softnet.cli.output import Col, chunks, console, eng, pct, print_json, sci, table
from softnet.results import readers
from softnet.results.store import Store
from softnet.results.trial import Number


class Part(BaseModel):
    """What softnet.analysis gives for a profiled sweep, exactly these
    fields (--json prints them as they are); read from its dicts or from
    objects with these attributes."""

    model_config = ConfigDict(extra="forbid", frozen=True, from_attributes=True)


class StageLevel(Part):
    """One load's mean over its valid profiled runs (stage_levels)."""

    load_pps: Number
    runs: int
    forwarded_pps: Number | None
    loss_ratio: Number | None
    stages_ns_per_packet: dict[str, Number]
    stages_pct_of_cpu: dict[str, Number]
    ebpf_ns_per_packet: dict[str, Number | None] = {}  # a store written before the grouping was kept: none
    coverage_min: Number | None
    sut_busy_pct: Number | None
    sut_nohz_cpu_time_pct: Number | None
    duty: Number | None


class CostFit(Part):
    """A linear fit of CPU time against the forwarded load."""

    ns_per_packet: Number
    intercept_pct: Number
    r2: Number
    points: int


class MeasuredPdr(Part):
    """The sweep's PDR on its own grid: between lower and upper."""

    loss_ratio: Number
    lower_pps: Number | None
    upper_pps: Number | None


class CostModels(Part):
    loads_used_pps: list[Number]
    stages: dict[str, CostFit]
    sut_cpus: list[int]
    sut_busy: CostFit | None
    predicted_capacity_pps: Number | None
    measured_pdr: MeasuredPdr
    max_forwarded_pps: Number
    predicted_over_pdr: Number | None


class AuditRow(Part):
    """One load and CPU: eBPF-measured against reported shares (summarize_audit)."""

    load_pps: Number
    cpu: int
    runs: int
    measured_busy_pct: Number | None
    reported_busy_pct: Number | None
    measured_softirq_pct: Number | None
    reported_softirq_pct: Number | None
    gap_min: Number | None
    gap_max: Number | None
    napi_work_per_poll: Number | None
    net_rx_pct_by_context: dict[str, Number | None]


class StoredCell(BaseModel):
    """A campaign cell as the store lists it (only what a profile needs)."""

    model_config = ConfigDict(from_attributes=True)

    cell_id: int
    knobs: dict


class ProfileCell(Part):
    """A cell of the sweep: stage levels per load, cost models (None: no
    valid profiled trial), audit rows."""

    cell_id: int
    knobs: dict
    levels: list[StageLevel]
    models: CostModels | None
    audit: list[AuditRow]
    victim: list[dict] = []  # victim_check.VictimSummary per load, with a pinned victim

    def to_json(self) -> dict:
        return {"cell_id": self.cell_id, "knobs": self.knobs, "levels": [lv.model_dump() for lv in self.levels],
                "models": {} if self.models is None else self.models.model_dump(),
                "audit": [a.model_dump() for a in self.audit], "victim": self.victim}


def profile_cells(results: Path, cid: str, pdr_loss_ratio: float) -> list[ProfileCell]:
    """Per cell of a stored campaign: stage levels, cost models and audit."""
    out = []
    with Store(results, read_only=True) as store:
        for c in store.cells(cid):
            cell = StoredCell.model_validate(c)
            trials = store.trial_results(cid, cell.cell_id)
            models = cost_models(trials, pdr_loss_ratio)
            victims = summarize_victims(readers.stored_trials(store, cid, cell.cell_id), {})
            out.append(ProfileCell(cell_id=cell.cell_id, knobs=cell.knobs, levels=stage_levels(trials),
                                   models=models or None, audit=summarize_audit(trials),
                                   victim=[v.to_dict() for v in victims]))
    return out


def run(spec: CampaignSpec, results: Path, pdr_loss_ratio: float, as_json: bool,
        wide: bool = False) -> list[ProfileCell]:
    cid = campaign_cmd.run(spec, results, as_json)
    cells = profile_cells(results, cid, pdr_loss_ratio)
    if as_json:
        print_json({"campaign_id": cid, "results_dir": str(results), "cells": [c.to_json() for c in cells]})
        return cells
    for c in cells:
        show(c, wide)
    console.print(f"results: {results}/ (campaign {cid}); report with stage bars: softnet report {results}")
    return cells


AUDIT_COLS = [Col("load"), Col("CPU"), Col("busy % eBPF"), Col("busy % ticks"), Col("gap range (points)", wide=True),
              Col("softirq % eBPF"), Col("softirq % ticks"), Col("NET_RX % by context", text=True)]
# Loads per table: a stage name and four rate columns fit 80 characters.
LOADS_PER_TABLE = 4


def show_audit(rows: list[AuditRow], wide: bool = False) -> None:
    """The WiFi-AP study's misaccounting, per load and CPU: eBPF against ticks."""
    if not rows:
        return
    out = [[eng(r.load_pps, "pps"), str(r.cpu), pct(r.measured_busy_pct), pct(r.reported_busy_pct),
            f"{pct(r.gap_min, signed=True)} .. {pct(r.gap_max, signed=True)}", pct(r.measured_softirq_pct),
            pct(r.reported_softirq_pct), by_context(r.net_rx_pct_by_context)] for r in rows]
    console.print(table("CPU accounting audit: eBPF-measured against /proc/stat ticks (mean over runs)",
                        AUDIT_COLS, out, wide))


VICTIM_COLS = [Col("load"), Col("runs"), Col("victim lost %"), Col("eBPF %"), Col("gap %"), Col("gap 95% CI"),
               Col("us/irq")]


def show_victim(rows: list[dict], wide: bool = False) -> None:
    """The eBPF profile study's cross-check: what the pinned victim lost
    against what the profiler measured on its CPU."""
    if not rows:
        return

    def ci(m: dict) -> str:
        return "-" if m["ci_lower"] is None else f"[{m['ci_lower']:+.1f}, {m['ci_upper']:+.1f}]"

    def num(m: dict, fmt: str = ".1f") -> str:
        return "-" if m["mean"] is None else format(m["mean"], fmt)

    out = [[eng(r["load_pps"], "pps"), str(r["runs"]), num(r["stolen_victim_pct"]), num(r["stolen_ebpf_pct"]),
            num(r["gap_pct"], "+.1f"), ci(r["gap_pct"]), num(r["gap_us_per_interrupt"])] for r in rows]
    console.print(table(f"victim cross-check: a {rows[0]['kind']} victim on CPU {rows[0]['cpu']} against the "
                        "profiler's softirq + irq time there (% of the CPU)", VICTIM_COLS, out, wide))
    console.print("[dim]gap: victim lost minus eBPF; per interrupt (us/irq), what in-guest tracing cannot see "
                  "(interrupt delivery, VM exits)[/]")
    out_runs = [f"{n} run{'s' if n > 1 else ''} at {eng(r['load_pps'], 'pps')}"
                for r in rows if (n := r["spoilt_runs"])]
    if out_runs:
        console.print(f"[yellow]left out (the victim disturbed at rest: no baseline): {', '.join(out_runs)}[/]")


def stage_table(levels: list[StageLevel], wide: bool) -> Table:
    cols = [Col("stage", text=True), Col("timing", text=True, wide=True)]
    cols += [Col(eng(lv.load_pps, "pps")) for lv in levels]
    rows = [[s, exactness, *(eng(lv.stages_ns_per_packet[s]) for lv in levels)]
            for s, (exactness, _) in WIFI_STAGES.items()]
    rows += [
        ["[bold]all stages[/]", "", *(eng(sum(lv.stages_ns_per_packet.values())) for lv in levels)],
        ["coverage (min)", "", *("-" if lv.coverage_min is None else f"{100 * lv.coverage_min:.1f}%"
                                 for lv in levels)],
        ["SUT CPUs busy (eBPF)", "", *(f"{pct(lv.sut_busy_pct)}%" for lv in levels)],
        ["  cross-check: nohz CPU time", "", *("-" if lv.sut_nohz_cpu_time_pct is None
                                               else f"{pct(lv.sut_nohz_cpu_time_pct)}%" for lv in levels)],
        ["loss", "", *(sci(lv.loss_ratio) for lv in levels)],
    ]
    return table("CPU per forwarded packet by stage (ns, summed over CPUs; WiFi-AP Table V stages)", cols, rows,
                 wide)


def ebpf_stage_table(levels: list[StageLevel], wide: bool) -> Table:
    """The same intervals grouped as the eBPF receive-path study groups them;
    a stage this host cannot time is named, not shown as 0."""
    cols = [Col("stage", text=True), Col("timing", text=True, wide=True)]
    cols += [Col(eng(lv.load_pps, "pps")) for lv in levels]
    rows = [[s, exactness, *("n/a" if exactness == "unavailable" else eng(lv.ebpf_ns_per_packet.get(s) or 0)
                             for lv in levels)] for s, (exactness, _) in EBPF_STAGES.items()]
    return table("the same time in the eBPF receive-path study's stages (ns per packet)", cols, rows, wide)


def show(c: ProfileCell, wide: bool = False) -> None:
    levels, models = c.levels, c.models
    if not levels:
        console.print("[yellow]no valid profiled trial: nothing to break down[/]")
        return
    for part in chunks(levels, len(levels) if wide else LOADS_PER_TABLE):
        console.print(stage_table(part, wide))
    if any(lv.ebpf_ns_per_packet for lv in levels):
        for part in chunks(levels, len(levels) if wide else LOADS_PER_TABLE):
            console.print(ebpf_stage_table(part, wide))
        console.print("[dim]IP to transport: " + EBPF_STAGES["IP to transport"][1] + "[/]", highlight=False)
    console.print(f"[dim]stage events attached {100 * (levels[0].duty or 1):.0f}% of the time; "
                  "coverage: named stage time / softirq and NAPI-thread time measured independently[/]")
    show_audit(c.audit, wide)
    show_victim(c.victim, wide)
    if models is None or not models.stages:
        console.print("[yellow]fewer than 3 loads below saturation (SUT CPUs under 90% busy): no cost-vs-load fit[/]")
        return
    rows = [[s, eng(m.ns_per_packet), pct(m.intercept_pct, 2), f"{m.r2:.3f}"] for s, m in models.stages.items()]
    b = models.sut_busy
    if b is not None:
        rows.append(["[bold]SUT CPUs busy[/]", eng(b.ns_per_packet), pct(b.intercept_pct, 2), f"{b.r2:.3f}"])
    console.print(table(f"cost vs forwarded load, linear fit over loads "
                        f"{', '.join(eng(x, 'pps') for x in models.loads_used_pps)}",
                        [Col("stage", text=True), Col("ns / packet (slope)"), Col("% CPU at no load"), Col("R²")],
                        rows, wide))
    pdr, pred = models.measured_pdr, models.predicted_capacity_pps
    rate = (lambda v: eng(v, "pps"))
    console.print(f"predicted capacity (SUT CPUs {models.sut_cpus} at 100%): "
                  f"{rate(pred)}; measured PDR{100 * pdr.loss_ratio:g}%: "
                  f"{pdr_text(pdr.model_dump(), rate)}; highest forwarded rate {rate(models.max_forwarded_pps)}",
                  highlight=False)
