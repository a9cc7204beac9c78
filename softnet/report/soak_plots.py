"""A soak as a figure: the critical load's estimate over soak time with its
interval as a band, every trial's load as a point (filled: it lost more
than the target ratio; hollow: less), each capacity step as a vertical
line; below, the drift watch's flagged series (or, with none flagged, the
largest movers), each as its change from its first sample."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from softnet.results.soak import SoakMark, SoakSummary

from .plots import DPI, FORMATS, STYLE, _mpl_text, save_figure, wrap_title

EST_COLOR = "#1d4ed8"
LOSSY_COLOR = "#c62828"
CLEAN_COLOR = "#2e7d32"
STEP_COLOR = "#8d6e00"
MAX_SERIES = 4


def _series(summary: SoakSummary, marks: Sequence[SoakMark]) -> list[tuple[str, list[float], list[float]]]:
    """(name, soak times, values) of the flagged levels, else the levels that moved most."""
    fits = [f for f in summary.drift if f.flag and not f.series.endswith("_per_pkt")]
    if not fits:
        fits = sorted((f for f in summary.drift if not f.series.endswith("_per_pkt") and f.first),
                      key=lambda f: -abs(f.last - f.first) / abs(f.first))[:2]
    out = []
    for f in fits[:MAX_SERIES]:
        pts = [(m.elapsed_s, m.drift.levels[f.series]) for m in marks if m.drift and f.series in m.drift.levels]
        if pts:
            out.append((f.series, [p[0] for p in pts], [p[1] - pts[0][1] for p in pts]))
    return out


def soak_figure(summary: SoakSummary, marks: Sequence[SoakMark], loads: Sequence[tuple[float, bool]],
                title: str) -> Figure:
    """``loads``: each trial's (offered load, lost more than the target ratio), in order."""
    series = _series(summary, marks)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(9.0, 6.4 if series else 4.4), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(2 if series else 1, 1, sharex=True, height_ratios=[3, 2] if series else [1],
                            squeeze=False)[:, 0]
        ax = axes[0]
        t = [p[0] for p in summary.path]
        ax.fill_between(t, [p[2] for p in summary.path], [p[3] for p in summary.path], color=EST_COLOR, alpha=0.18,
                        linewidth=0, step="post", label="interval")
        ax.step(t, [p[1] for p in summary.path], where="post", color=EST_COLOR, linewidth=1.8,
                label="critical load (estimate)")
        for lossy, color, face, what in ((True, LOSSY_COLOR, LOSSY_COLOR, "trial: lost more than the target"),
                                         (False, CLEAN_COLOR, "none", "trial: lost less")):
            pts = [(m.elapsed_s, load) for m, (load, bad) in zip(marks, loads) if bad == lossy]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, facecolors=face, edgecolors=color,
                           linewidths=0.9, zorder=3, label=what)
        for s in summary.capacity_steps:
            ax.axvline(s.at_s, color=STEP_COLOR, linestyle="--", linewidth=1.4)
            ax.annotate("capacity step", (s.at_s, 1.0), xycoords=("data", "axes fraction"), xytext=(3, -3),
                        textcoords="offset points", ha="left", va="top", color=STEP_COLOR, fontsize=9)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(EngFormatter(unit="pps"))
        ax.set_ylabel("offered load")
        target = summary.estimate.target_loss_ratio if summary.estimate else None
        ax.set_title(f"critical load at loss ratio {target:g}" if target else "critical load", loc="left")
        ax.legend(loc="lower right", fontsize=8.5, ncol=2, framealpha=0.85)
        for ax in axes[1:]:
            for name, ts, vs in series:
                flag = next((f.flag for f in summary.drift if f.series == name), None)
                ax.plot(ts, vs, marker=".", markersize=4, linewidth=1.2,
                        label=_mpl_text(name) + (f" ({flag})" if flag else ""))
            ax.yaxis.set_major_formatter(EngFormatter())
            ax.set_ylabel("change since the first read")
            ax.set_title("drift watch: SUT host resources", loc="left")
            ax.legend(loc="upper left", fontsize=8.5, framealpha=0.85)
        axes[-1].set_xlabel("soak time (s)")
        fig.suptitle(wrap_title(_mpl_text(title), fig.get_figwidth() * 0.9, STYLE["axes.titlesize"]), x=0.01,
                     ha="left", fontsize=STYLE["axes.titlesize"])
        return fig


def plot_soak(summary: SoakSummary, marks: Sequence[SoakMark], loads: Sequence[tuple[float, bool]], title: str,
              out_base: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    return save_figure(soak_figure(summary, marks, loads, title), out_base, formats)
