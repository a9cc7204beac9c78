"""A paired comparison (``softnet.results.comparison.ComparisonSummary``) as
a forest plot: one row per candidate and metric, the estimate as a point,
its interval as a bar, zero as a vertical line, the equivalence margin
(+-margin) as a shaded band and the verdict written at the row's end.

Ratio metrics (rates, costs, latencies: a relative change) and loss
metrics (an absolute difference of loss ratios) do not share a scale, so
each has its own panel: % change, and percentage points.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Sequence

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator
from matplotlib.transforms import blended_transform_factory

from softnet.results.comparison import ComparisonSummary, PairedDifference

from .plots import DPI, FORMATS, STYLE, _mpl_text, save_figure, wrap_title

VERDICT_COLORS = {"slower": "#c62828", "faster": "#2e7d32", "equivalent": "#1d4ed8", "undecided": "#8d6e00"}
MARGIN_COLOR = "#d9e7d9"
NO_DATA_COLOR = "0.45"  # a metric no round measured on both sides (e.g. no latency on the simulated SUT)
LABEL_CHARS = 44  # tick labels wrap beyond this: a stored comparison's metric carries its cell's knobs
ROW_IN = 0.36  # one row of one text line
LINE_GROW = 0.55  # each further line of a wrapped label, in rows
PANEL_IN = 1.05  # a panel's title, x ticks and x label
PANELS = {"ratio": ("rates, costs, latencies", "change of B from A (%)", "%"),
          "difference": ("loss", "loss ratio B \u2212 A (percentage points)", " pp")}


def scaled(v: float | None) -> float | None:
    """Both scales are shown \u00d7100: a relative change in %, a loss difference in percentage points."""
    return None if v is None else 100.0 * v


def _label(d: PairedDifference) -> str:
    return "\n".join(textwrap.wrap(f"{d.metric} ({d.better} is better)", LABEL_CHARS, break_on_hyphens=False))


def _rows(summary: ComparisonSummary, scale: str) -> list[tuple[str, str, PairedDifference | None]]:
    """(kind, text, difference) top to bottom; a candidate heads its rows
    when there are several (one candidate is named in the title)."""
    out = []
    for cand in summary.candidates:
        diffs = [d for d in summary.differences.get(cand, []) if d.scale == scale]
        if diffs and len(summary.candidates) > 1:
            out.append(("head", "B = " + "\n".join(textwrap.wrap(cand, LABEL_CHARS - 4)), None))
        out += [("row", _label(d), d) for d in diffs]
    return out


def _row_text(d: PairedDifference, unit: str) -> str:
    if d.estimate is None:
        return f"{d.verdict} (no pairs)"
    est = scaled(d.estimate)
    return f"{d.verdict} ({'0' if est == 0 else format(est, '+.3g')}{unit})"


def _xlim(rows) -> tuple[float, float]:
    vals = [0.0]
    for _, _, d in rows:
        if d is None:
            continue
        vals += [scaled(d.margin), -scaled(d.margin)]
        vals += [scaled(v) for v in ((d.estimate,) + tuple(d.ci or ())) if v is not None]
    lo, hi = min(vals), max(vals)
    pad = 0.08 * (hi - lo or 1.0)
    return lo - pad, hi + pad


def _heights(rows) -> np.ndarray:
    """Each row's height in row units: a wrapped label needs more than one line."""
    return np.array([1.0 + LINE_GROW * text.count("\n") for _, text, _ in rows])


def _panel(ax, rows, scale: str) -> None:
    what, xlabel, unit = PANELS[scale]
    h = _heights(rows)
    ys = np.cumsum(h) - h / 2
    ax.axvline(0.0, color="black", linewidth=0.9, zorder=1)
    at_row_end = blended_transform_factory(ax.transAxes, ax.transData)
    for y, hy, (_, _, d) in zip(ys, h, rows):
        if d is None:
            continue
        color = VERDICT_COLORS.get(d.verdict, "0.3") if d.estimate is not None else NO_DATA_COLOR
        m = scaled(d.margin)
        ax.fill_betweenx([y - hy / 2, y + hy / 2], -m, m, color=MARGIN_COLOR, linewidth=0, zorder=0)
        if d.estimate is not None:
            est = scaled(d.estimate)
            xerr = None if d.ci is None else [[est - scaled(d.ci[0])], [scaled(d.ci[1]) - est]]
            ax.errorbar([est], [y], xerr=xerr, fmt="o", color=color, markersize=6, elinewidth=2.2, capsize=4,
                        capthick=1.4, markeredgecolor="white", markeredgewidth=0.6, zorder=3)
        # past the axes' right edge: never on a bar or a point, and constrained layout makes room
        ax.text(1.02, y, _row_text(d, unit), transform=at_row_end, ha="left", va="center", color=color,
                fontsize=STYLE["ytick.labelsize"], fontweight="bold")
    ax.set_xlim(*_xlim(rows))
    ax.set_ylim(h.sum(), 0.0)
    ax.set_yticks(ys, [_mpl_text(text) for _, text, _ in rows])
    for tick, (kind, _, _) in zip(ax.get_yticklabels(), rows):
        if kind == "head":
            tick.set_fontweight("bold")
    ax.tick_params(axis="y", length=0)
    ax.grid(True, axis="x")
    ax.grid(False, axis="y")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=7))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "0" if v == 0 else f"{v:+g}"))
    ax.set_xlabel(xlabel)
    ax.set_title(what, loc="left")


def _legend(summary: ComparisonSummary) -> list:
    diffs = [d for _, d in summary.all_differences()]
    confs = sorted({d.confidence for d in diffs})
    how = "signed-rank" if summary.paired else "Welch's t"
    ci = f"{confs[0] * 100:.4g}% interval ({how})" if len(confs) == 1 else f"interval ({how}; confidence: table)"
    margins = []
    for scale, (what, _, unit) in PANELS.items():
        ms = sorted({scaled(d.margin) for d in diffs if d.scale == scale})
        if ms:
            margins.append(f"{what} \u00b1" + "/".join(f"{m:g}" for m in ms) + unit)
    return [Line2D([], [], color="0.3", marker="o", linestyle="none", markersize=6,
                   label="estimate" + (" (Hodges\u2013Lehmann)" if summary.paired else " (difference of means)")),
            Line2D([], [], color="0.3", linewidth=2.2, label=ci),
            Patch(facecolor=MARGIN_COLOR, label="equivalence margin: " + ", ".join(margins)),
            Line2D([], [], color="black", linewidth=0.9, label="no change"),
            Line2D([], [], linestyle="none", label="colour: verdict (slower / faster / equivalent / undecided)")]


def comparison_figure(summary: ComparisonSummary, title: str) -> Figure:
    """The forest plot of one comparison: a panel per scale that has rows."""
    panels = [(scale, _rows(summary, scale)) for scale in PANELS]
    panels = [(s, r) for s, r in panels if r]
    if not panels:
        raise ValueError("no difference to plot")
    heights = [PANEL_IN + ROW_IN * _heights(r).sum() for _, r in panels]
    head = f"{title}: " + ("each B" if len(summary.candidates) > 1 else f"B = {summary.candidates[0]}")
    head += f" against A = {summary.baseline}"
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(9.0, sum(heights) + 1.3), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(panels), 1, height_ratios=heights, squeeze=False)[:, 0]
        for ax, (scale, rows) in zip(axes, panels):
            _panel(ax, rows, scale)
        fig.suptitle(wrap_title(_mpl_text(head), fig.get_figwidth() * 0.9, STYLE["axes.titlesize"]),
                     x=0.01, ha="left", fontsize=STYLE["axes.titlesize"])
        fig.legend(handles=_legend(summary), loc="outside lower center", ncol=2, frameon=False, handlelength=2.4,
                   columnspacing=1.6)
        return fig


def plot_comparison(summary: ComparisonSummary, title: str, out_base: Path,
                    formats: Sequence[str] = FORMATS) -> list[Path]:
    return save_figure(comparison_figure(summary, title), out_base, formats)
