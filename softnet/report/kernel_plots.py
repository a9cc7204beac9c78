"""Kernel-statistics and packet-path stage panels (the WiFi-AP study's
Figs. 4, 5, 8, 9 and 10), one figure per configuration, bars per load level.

The loads sit on a categorical axis (one bar group per level); their tick
labels are in engineering form (50k, 1.2M) and thinned to what fits the
panel, so a sweep of 10+ loads stays readable.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator
from pydantic import BaseModel, ConfigDict

from softnet.analysis.stages import WIFI_STAGES

from .plots import DPI, FORMATS, STYLE, _colors, _mpl_text, save_figure, wrap_title

Number = int | float


class ReadModel(BaseModel):
    """A summary as the report reads it: a dict or an object with these fields."""

    model_config = ConfigDict(extra="ignore", from_attributes=True)


class KernelNormalized(ReadModel):
    utilization_per_mbps: Number | None = None
    cycles_per_mbps: Number | None = None
    cpu_time_per_mbps: Number | None = None
    power_mw_per_mbps: Number | None = None
    traffic_power_mw_per_mbps: Number | None = None
    cache_misses_per_mbps: Number | None = None


class KernelLevel(ReadModel):
    """One load of ``kernel_stats.summarize_by_load``."""

    load_pps: Number
    runs: int
    throughput_mbps: Number | None
    sut_cpus: list[int] = []
    per_cpu: dict[int | str, dict[str, Number | None]]  # cpu -> per-CPU rate by name
    normalized: KernelNormalized
    cost_basis: str | None = None
    dev_weight: Number | None = None
    missing: dict[str, str] = {}  # source -> why it was not read
    nic_losses_per_s: dict[str, Number] = {}  # ethtool -S "role.counter" -> per s


class StageLevel(ReadModel):
    """One load of ``stage_models.stage_levels``."""

    load_pps: Number
    stages_ns_per_packet: dict[str, Number]
    stages_pct_of_cpu: dict[str, Number]
    coverage_min: Number | None
    sut_busy_pct: Number
    sut_nohz_cpu_time_pct: Number | None
    duty: Number | None = None
    ebpf_ns_per_packet: dict[str, Number | None] = {}  # the eBPF receive-path study's grouping


def kernel_levels(levels: Sequence) -> list[KernelLevel]:
    return [KernelLevel.model_validate(lv) for lv in levels]


def stage_levels_read(levels: Sequence) -> list[StageLevel]:
    return [StageLevel.model_validate(lv) for lv in levels]

_CHAR_WIDTH_EM = 0.62  # a DejaVu Sans digit is about 0.6 em wide
_LABEL_GAP_PT = 8.0
TITLE_PT = 12.0


def eng_rate(pps: float) -> str:
    """3 significant digits, as a tick label: 96181.8 -> "96.2k", 1250000 -> "1.25M"."""
    for suffix, scale in (("M", 1e6), ("k", 1e3)):
        if abs(pps) >= scale:
            return f"{pps / scale:.3g}{suffix}"
    return f"{pps:.3g}"


def load_ticks(ax, labels: Sequence[str], fontsize: float) -> None:
    """Ticks at the bar positions 0..n-1 with ``labels``, thinned (MaxNLocator,
    whole positions) so that neighbouring labels cannot meet at this panel's
    width."""
    n = len(labels)
    fig = ax.get_figure()
    width_pt = ax.get_position().width * fig.get_figwidth() * 72
    widest = max((len(line) for s in labels for line in s.split("\n")), default=1)
    fit = max(1, math.floor(width_pt / (widest * _CHAR_WIDTH_EM * fontsize + _LABEL_GAP_PT)))
    ax.set_xlim(-0.5, n - 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=max(fit - 1, 1), integer=True, min_n_ticks=1))

    def label(v, _pos):
        i = int(round(v))
        return labels[i] if abs(v - i) < 1e-9 and 0 <= i < n else ""

    ax.xaxis.set_major_formatter(FuncFormatter(label))


def kernel_figure(levels: Sequence[KernelLevel], title: str) -> Figure:
    """The WiFi-AP study's four panels (Figs. 4, 5, 8, 9) for one configuration,
    per load level (``kernel_stats.summarize_by_load``): (a) IRQs and RX/TX
    softirqs per second per CPU, (b) utilization per CPU (/proc/stat ticks,
    as mpstat) next to CPU time (wall minus nohz idle), (c) cycles per CPU, or
    CPU time where the host counts no cycles, (d) power, or why there is none."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(10.0, 8.2), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(2, 2)
        cpus = sorted({c for lv in levels for c in lv.per_cpu})
        x = np.arange(len(levels))
        xt = [f"{eng_rate(lv.load_pps)}\n{lv.throughput_mbps:,.0f}" for lv in levels]
        colors = _colors(max(len(cpus), 1) * 3)

        def bars(ax, series: list[tuple[str, list[float | None]]]):
            n = len(series)
            w = 0.8 / max(n, 1)
            for i, (label, vals) in enumerate(series):
                y = [np.nan if v is None else v for v in vals]
                ax.bar(x - 0.4 + w * (i + 0.5), y, w, label=label, color=colors[i % len(colors)])
            load_ticks(ax, xt, STYLE["xtick.labelsize"])
            ax.set_xlabel("offered load (pps) / forwarded (Mbps)")
            ax.legend(fontsize=7.5, frameon=False, ncol=min(n, 3), loc="upper center", bbox_to_anchor=(0.5, -0.28))

        def per(c, m):
            return [lv.per_cpu.get(c, {}).get(m) for lv in levels]

        sut = set(levels[0].sut_cpus) if levels else set()
        name = {c: f"CPU {c}" + (" (SUT)" if c in sut else "") for c in cpus}

        ax = axes[0][0]
        bars(ax, [(f"{what} {name[c]}", per(c, m)) for c in cpus
                  for what, m in (("IRQs", "irqs_per_s"), ("RX softirqs", "net_rx_softirqs_per_s"),
                                  ("TX softirqs", "net_tx_softirqs_per_s"))])
        ax.set_yscale("symlog", linthresh=10)
        ax.set_ylabel("per second")
        ax.set_title("(a) IRQs and softirqs", loc="left")
        ax = axes[0][1]
        bars(ax, [(f"{what} {name[c]}", per(c, m)) for c in cpus
                  for what, m in (("utilization", "utilization_pct"), ("CPU time", "cpu_time_pct"))])
        ax.set_ylabel("% of one CPU")
        ax.set_title("(b) utilization (/proc/stat ticks) vs CPU time", loc="left")
        ax = axes[1][0]
        has_cycles = all(per(c, "cycles_per_s")[0] is not None for c in cpus) if cpus and levels else False
        if has_cycles:
            bars(ax, [(name[c], per(c, "cycles_per_s")) for c in cpus])
            ax.yaxis.set_major_formatter(EngFormatter(sep=""))
            ax.set_ylabel("cycles per second")
            ax.set_title("(c) cycles", loc="left")
        else:
            bars(ax, [(name[c], per(c, "cpu_time_pct")) for c in cpus])
            ax.set_ylabel("CPU time, % of one CPU")
            ax.set_title("(c) CPU time (no cycle counter on this host)", loc="left")
        ax = axes[1][1]
        power = [lv.normalized.power_mw_per_mbps for lv in levels]
        if any(p is not None for p in power):
            bars(ax, [("mW per Mbps", power)])
            ax.set_ylabel("mW per Mbps")
            ax.set_title("(d) power", loc="left")
        else:
            why = (levels[0].missing.get("power") if levels else None) or "no power counters"
            ax.axis("off")
            ax.text(0.02, 0.5, "(d) power: not measured\n" + why, transform=ax.transAxes, va="center",
                    fontsize=9, wrap=True)
        fig.suptitle(wrap_title(_mpl_text(title), fig.get_figwidth() * 0.95, TITLE_PT), x=0.01, ha="left",
                     fontsize=TITLE_PT)
        return fig


def plot_kernel(levels: Sequence[KernelLevel], title: str, out_base: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    return save_figure(kernel_figure(levels, title), out_base, formats)


def stage_figure(levels: Sequence[StageLevel], title: str) -> Figure:
    """The WiFi-AP study's Fig. 10 for one configuration, per load
    (``stage_models.stage_levels``): (a) CPU per forwarded packet by stage,
    stacked, (b) the stages' share of one CPU, stacked. Hatched stages are
    approximate (their boundaries are the nearest tracepoints); stages with
    no time at any load are left out of the legend."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(10.0, 4.6), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, 2)
        x = np.arange(len(levels))
        xt = [eng_rate(lv.load_pps) for lv in levels]
        shown = [s for s in WIFI_STAGES if any(lv.stages_ns_per_packet[s] > 0 for lv in levels)]
        colors = _colors(max(len(shown), 1))
        for ax, by_stage, ylabel, panel in (
                (axes[0], [lv.stages_ns_per_packet for lv in levels], "ns of CPU per forwarded packet",
                 "(a) cost per packet by stage"),
                (axes[1], [lv.stages_pct_of_cpu for lv in levels], "% of one CPU", "(b) CPU share by stage")):
            bottom = np.zeros(len(levels))
            for i, s in enumerate(shown):
                y = np.array([st[s] for st in by_stage])
                ax.bar(x, y, 0.6, bottom=bottom, label=s, color=colors[i % len(colors)],
                       hatch="//" if WIFI_STAGES[s][0] == "approximate" else None, edgecolor="white", linewidth=0.3)
                bottom += y
            load_ticks(ax, xt, STYLE["xtick.labelsize"])
            ax.set_xlabel("offered load (pps)")
            ax.set_ylabel(ylabel)
            ax.set_title(panel, loc="left")
        axes[1].legend(fontsize=7.5, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                       title="stage (hatched: approximate)", title_fontsize=7.5)
        fig.suptitle(wrap_title(_mpl_text(title), fig.get_figwidth() * 0.95, TITLE_PT), x=0.01, ha="left",
                     fontsize=TITLE_PT)
        return fig


def plot_stages(levels: Sequence[StageLevel], title: str, out_base: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    return save_figure(stage_figure(levels, title), out_base, formats)
