"""Load-loss, load-delivery and load-throughput plots (PASTRAMI sec. IV-B, Fig. 5-6).

Every plot compares several configurations (``softnet.analysis.campaigns.
Configuration``) on one figure: the mean per offered load (markers), the
Student-t confidence interval of the mean (a band), and each configuration's
verdict in its legend entry. Figures are written as PNG (``DPI``) and SVG (text
kept as text, so labels are searchable) next to each other: ``out_base.png``
and ``out_base.svg``.

The loss plot follows the paper: PLR on a log scale whose bottom is 1e-6 (a
loss ratio "not even possible to be evaluated reliably"); a zero loss, and
anything below the floor, is drawn *at* the floor, which the axis label and
the legend say. The dashed horizontal line is the PDR threshold X, the dashed
vertical line of each configuration's colour its PDR point (the first load
whose mean PLR exceeds X).

Figures stay readable with up to ``MAX_PER_FIGURE`` configurations; callers
with more split them (see ``group_configurations``). The kernel-statistics
and stage panels are in ``kernel_plots``. ``png_data_uri`` embeds a written
PNG in HTML, re-encoded smaller (``compact_png``).
"""
from __future__ import annotations

import base64
import io
import math
import textwrap
from collections import OrderedDict
from pathlib import Path
from typing import Iterable, Sequence

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import EngFormatter, MaxNLocator

from softnet.analysis.campaigns import PastramiMeta
from softnet.analysis.data_paths import short_label
from softnet.results.readers import StoredResult

FLOOR_PLR = 1e-6  # paper sec. IV-B: bottom of the log scale
MAX_PER_FIGURE = 10  # tab10: one distinct colour each (a sweep over every SUT personality fits)
DPI = 200
_FLOOR_TEXT = "10\u207b\u2076"  # 10^-6 as plain text (no mathtext, searchable in SVG)

STYLE = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10.5,
    "legend.fontsize": 8.5,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.35,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "none",  # keep text as <text> in SVG
    "svg.hashsalt": "softnet",  # stable ids in SVG output
    "path.simplify": True,
}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h", "<", ">")


# ---- labels and units -------------------------------------------------------

def load_unit(max_load_pps: float) -> tuple[float, str]:
    """(divisor, unit) for an axis whose largest load is ``max_load_pps``."""
    if max_load_pps >= 1e6:
        return 1e6, "Mpps"
    if max_load_pps >= 1e4:
        return 1e3, "kpps"
    return 1.0, "pps"


def format_rate(pps: float | None) -> str:
    """A rate for people: '450 kpps', '1.35 Mpps', '900 pps'; '—' when None/NaN."""
    if pps is None or (isinstance(pps, float) and not math.isfinite(pps)):
        return "\u2014"
    div, unit = load_unit(abs(pps))
    return f"{pps / div:.4g} {unit}"


def config_tokens(config) -> list[str]:
    """Short words describing a configuration, for legend labels.

    PASTRAMI files: the metadata of the file name in the paper's words
    (testbed, runs, T, kernel, NIC ring, IRQ pinning); softnet cells: one
    ``knob=value`` per knob; otherwise the label itself.
    """
    k = config.knobs or {}
    if config.source == "pastrami" and isinstance(config.meta, PastramiMeta):
        n = config.meta.name
        irq = n.irq_pinning
        toks = [n.folder, n.site, n.testbed, "eBPF router" if n.ebpf_router else None,
                f"{n.runs} runs" if n.runs else None, f"T={n.duration_s}s" if n.duration_s else None,
                f"k{n.kernel}", n.nic, n.env]
        if n.nic_ring == "default" and not irq:
            toks.append("as-is")
        else:
            if n.nic_buf:
                toks.append(f"ring {n.nic_buf}")
            if irq:
                toks.append(f"{n.pinning}" + (f" ({irq.kind})" if irq.kind == "vf" else ""))
        if n.date:
            toks.append(f"{n.date} v{n.ver}")
        if (n.exec_ordinal or 1) > 1:
            toks.append(f"exec {n.exec_ordinal}" + (f" {n.exec_note}" if n.exec_note else ""))
        return [str(t) for t in toks if t]
    if config.source == "softnet":
        toks = []
        cid = config.campaign_id
        if cid is not None:
            toks.append(f"campaign {cid}")
        # a personality by its spec string alone, a file param by its name (analysis.data_paths.short_label)
        toks += [short_label(f"sut={v}") if name == "testbed.sut" else f"{str(name).split('.')[-1]}={v}"
                 for name, v in k.items()] or [config.label]
        return toks
    return [config.label]


def short_labels(configs: Sequence) -> tuple[list[str], str]:
    """Labels with what all configurations share taken out, and that shared part.

    E.g. two PASTRAMI files of one testbed -> (['k5.15 as-is', 'k6.8 as-is'],
    'confronto_clab clab tb1 50 runs T=10s intel bare-metal'). Falls back to
    the full labels when the short ones would be empty or ambiguous.
    """
    configs = list(configs)
    full = [c.label for c in configs]
    if len(configs) < 2:
        return full, ""
    toks = [config_tokens(c) for c in configs]
    common = set(toks[0]).intersection(*map(set, toks[1:]))
    sep = " " if all(c.source == "pastrami" for c in configs) else ", "
    short = [sep.join(t for t in ts if t not in common) for ts in toks]
    if any(not s for s in short) or len(set(short)) < len(short):
        return full, ""
    return short, sep.join(t for t in toks[0] if t in common)


def legend_label(config, short: str) -> str:
    """'k6.8 as-is — GOOD · PDR@0.5% = 450 kpps' (no PDR part when there is none)."""
    r = config.analysis.report
    text = f"{short} \u2014 {r.verdict.value}"
    if r.pdr_load_pps is not None:
        text += f" \u00b7 PDR@{r.pdr_loss_ratio * 100:g}% = {format_rate(r.pdr_load_pps)}"
    return text


def _mpl_text(s: str) -> str:
    """Matplotlib reads '$...$' as math: escape dollars in user text."""
    return s.replace("$", r"\$")


def wrap_title(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize``
    points (a long configuration label would run off the figure)."""
    chars = max(20, int(width_in * 72 / (fontsize * 0.62)))
    return "\n".join(textwrap.wrap(text, chars, break_on_hyphens=False)) or text


def group_configurations(configs: Sequence, max_per_figure: int = MAX_PER_FIGURE) -> list[list]:
    """Split configurations into figure-sized groups of related ones.

    Related = same campaign (softnet) or same folder/site/testbed/env/T
    (PASTRAMI). A group larger than ``max_per_figure`` is cut into balanced
    consecutive parts (9 -> 5 + 4).
    """
    groups: "OrderedDict[tuple, list]" = OrderedDict()
    for c in configs:
        if c.source == "pastrami" and isinstance(c.meta, PastramiMeta):
            n = c.meta.name
            key = ("pastrami", n.folder, n.site, n.testbed, n.ebpf_router, n.env, n.duration_s)
        else:
            key = (c.source, c.campaign_id)
        groups.setdefault(key, []).append(c)
    out = []
    for members in groups.values():
        parts = math.ceil(len(members) / max_per_figure)
        for chunk in np.array_split(np.arange(len(members)), parts):
            out.append([members[i] for i in chunk])
    return out


# ---- figure building --------------------------------------------------------

def _colors(n: int) -> list:
    cmap = matplotlib.colormaps["tab10" if n <= 10 else "viridis"]
    return [cmap(i) for i in range(n)] if n <= 10 else [cmap(x) for x in np.linspace(0, 0.95, n)]


def metric_series(config, metric: str):
    """Loads and mean / CI bounds of ``metric`` (plr_ratio, dr_ratio, throughput_pps)."""
    loads = config.analysis.stats.loads
    x = np.array([s.load_pps for s in loads], dtype=float)
    m = [getattr(s, metric) for s in loads]
    mean = np.array([v.mean for v in m], dtype=float)
    lo = np.array([v.ci_lower for v in m], dtype=float)
    hi = np.array([v.ci_upper for v in m], dtype=float)
    lo = np.where(np.isfinite(lo), lo, mean)  # K = 1: no interval, band collapses to the mean
    hi = np.where(np.isfinite(hi), hi, mean)
    return x, mean, lo, hi


def _new_figure(n_legend_rows: int) -> tuple[Figure, object]:
    fig = Figure(figsize=(8.0, 4.6 + 0.22 * n_legend_rows), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    return fig, ax


def _legend_rows(labels: list[str], n_extra: int) -> tuple[int, int]:
    """One column when labels are long; otherwise configurations left, reference lines right."""
    if max((len(s) for s in labels), default=0) > 46:
        return 1, len(labels) + n_extra
    return 2, max(len(labels), n_extra)


def _finish(fig: Figure, ax, handles: list, ncol: int, title: str, n_configs: int) -> Figure:
    ax.set_title(wrap_title(_mpl_text(title), fig.get_figwidth() * 0.85, STYLE["axes.titlesize"]), loc="left")
    ax.grid(True, which="major")
    if ncol == 2:  # legends fill column by column: pad so each kind keeps its own column
        conf, refs = handles[:n_configs], handles[n_configs:]
        rows = max(len(conf), len(refs))
        blank = [Line2D([], [], linestyle="none", label=" ")]
        handles = conf + blank * (rows - len(conf)) + refs + blank * (rows - len(refs))
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False,
               handlelength=2.4, columnspacing=1.6)
    return fig


def _prepare(configs: Sequence, labels: Sequence[str] | None, title: str | None, what: str):
    configs = list(configs)
    if not configs:
        raise ValueError("no configuration to plot")
    short, common = short_labels(configs) if labels is None else (list(labels), "")
    legend = [_mpl_text(legend_label(c, s)) for c, s in zip(configs, short)]
    all_loads = [s.load_pps for c in configs for s in c.analysis.stats.loads]
    div, unit = load_unit(max(all_loads, default=1.0))
    suffix = title if title is not None else common
    head = f"{what} \u2014 {suffix}" if suffix else what
    return configs, legend, div, unit, head


def _plot_metric(ax, configs, legend, div, metric, *, scale=1.0, floor=None):
    handles = []
    for i, (c, color, lab) in enumerate(zip(configs, _colors(len(configs)), legend)):
        x, mean, lo, hi = metric_series(c, metric)
        x = x / div
        if floor is not None:
            mean, lo, hi = (np.maximum(np.nan_to_num(v, nan=floor), floor) for v in (mean, lo, hi))
        mean, lo, hi = mean * scale, lo * scale, hi * scale
        marker = MARKERS[i % len(MARKERS)]
        # many bands on one figure hide each other: fainter the more there are
        ax.fill_between(x, lo, hi, color=color, alpha=0.18 if len(configs) <= 4 else 0.07, linewidth=0, zorder=2)
        ax.plot(x, mean, color=color, marker=marker, markersize=5, linewidth=1.4,
                markeredgecolor="white", markeredgewidth=0.5, zorder=3)
        point = c.analysis.report.pdr_point_load_pps
        if point is not None:
            ax.axvline(point / div, color=color, linestyle=(0, (4, 3)), linewidth=1.0, alpha=0.8, zorder=1)
        handles.append(Line2D([], [], color=color, marker=marker, markersize=5, linewidth=1.4,
                              markeredgecolor="white", markeredgewidth=0.5, label=lab))
    return handles


def _band_handle(confidence: float) -> Patch:
    return Patch(facecolor="0.5", alpha=0.25, label=f"{confidence * 100:g}% Student-t CI of the mean")


def _pdr_handle() -> Line2D:
    return Line2D([], [], color="0.3", linestyle=(0, (4, 3)), linewidth=1.0,
                  label="PDR point: first load with mean PLR > X")


def thresholds(configs, pdr_loss_ratio: float | None) -> list[float]:
    if pdr_loss_ratio is not None:
        return [float(pdr_loss_ratio)]
    return sorted({c.analysis.report.pdr_loss_ratio for c in configs})


def _confidence(configs) -> float:
    return configs[0].analysis.stats.confidence


def _hline(ax, y: float, label: str, color: str = "black", linestyle: str = "--") -> Line2D:
    """A horizontal reference line and its legend handle."""
    ax.axhline(y, color=color, linestyle=linestyle, linewidth=1.0, zorder=1)
    return Line2D([], [], color=color, linestyle=linestyle, linewidth=1.0, label=label)


def loss_figure(configs: Sequence, pdr_loss_ratio: float | None = None, *,
                labels: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Offered load vs PLR (log, floor 1e-6) with CI bands, X line and PDR points."""
    configs, legend, div, unit, head = _prepare(configs, labels, title, "Load-loss curves")
    xs = thresholds(configs, pdr_loss_ratio)
    ncol, rows = _legend_rows(legend, 3 + len(xs))
    with matplotlib.rc_context(STYLE):
        fig, ax = _new_figure(rows)
        ax.set_yscale("log")
        handles = _plot_metric(ax, configs, legend, div, "plr_ratio", floor=FLOOR_PLR)
        handles += [_hline(ax, x, f"PDR threshold X = {x * 100:g}%") for x in xs]
        handles.append(_hline(ax, FLOOR_PLR, f"bottom of scale {_FLOOR_TEXT}: PLR = 0 (or below) drawn here",
                              color="0.45", linestyle=":"))
        handles += [_band_handle(_confidence(configs)), _pdr_handle()]
        ax.set_ylim(10 ** -6.25, 1.6)
        ax.set_xlabel(f"Offered load O ({unit})")
        ax.set_ylabel(f"Packet loss ratio PLR (log scale; 0 drawn at {_FLOOR_TEXT})")
        return _finish(fig, ax, handles, ncol, head, len(configs))


def delivery_figure(configs: Sequence, pdr_loss_ratio: float | None = None, *,
                    labels: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Offered load vs delivery ratio DR = 1 - PLR (%), with CI bands."""
    configs, legend, div, unit, head = _prepare(configs, labels, title, "Load-delivery curves")
    xs = thresholds(configs, pdr_loss_ratio)
    ncol, rows = _legend_rows(legend, 2 + len(xs))
    with matplotlib.rc_context(STYLE):
        fig, ax = _new_figure(rows)
        handles = _plot_metric(ax, configs, legend, div, "dr_ratio", scale=100.0)
        handles += [_hline(ax, (1 - x) * 100, f"DR = {(1 - x) * 100:g}% (PDR threshold X = {x * 100:g}%)")
                    for x in xs]
        handles += [_band_handle(_confidence(configs)), _pdr_handle()]
        lo = min((s.dr_ratio.mean for c in configs for s in c.analysis.stats.loads), default=0.0)
        ax.set_ylim(max(0.0, min(lo * 100, 99.0) - 3.0), 101.0)
        ax.set_xlabel(f"Offered load O ({unit})")
        ax.set_ylabel("Delivery ratio DR = 1 \u2212 PLR (%)")
        return _finish(fig, ax, handles, ncol, head, len(configs))


def throughput_figure(configs: Sequence, *, labels: Sequence[str] | None = None,
                      title: str | None = None) -> Figure:
    """Offered load vs throughput T(O) (same unit on both axes), CI bands, ideal T = O."""
    configs, legend, div, unit, head = _prepare(configs, labels, title, "Load-throughput curves")
    ncol, rows = _legend_rows(legend, 3)
    with matplotlib.rc_context(STYLE):
        fig, ax = _new_figure(rows)
        handles = _plot_metric(ax, configs, legend, div, "throughput_pps", scale=1.0 / div)
        top = max((s.load_pps for c in configs for s in c.analysis.stats.loads), default=div) / div
        ax.plot([0, top * 1.03], [0, top * 1.03], color="0.35", linestyle="-.", linewidth=1.0, zorder=1)
        handles += [Line2D([], [], color="0.35", linestyle="-.", linewidth=1.0,
                           label="ideal T(O) = O (no loss)"),
                    _band_handle(_confidence(configs)), _pdr_handle()]
        ax.set_xlim(0, top * 1.05)
        ax.set_ylim(0, top * 1.05)
        ax.set_xlabel(f"Offered load O ({unit})")
        ax.set_ylabel(f"Throughput T(O) ({unit})")
        return _finish(fig, ax, handles, ncol, head, len(configs))


# ---- writing ---------------------------------------------------------------

FORMATS = ("png", "svg")
_META = {"png": {"Software": "softnet"}, "svg": {"Date": None, "Creator": "softnet"}}


def save_figure(fig: Figure, out_base: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``out_base``.png and .svg (``formats``); returns the paths in that order."""
    out_base = Path(out_base)
    out_base.parent.mkdir(parents=True, exist_ok=True)
    bad = [f for f in formats if f not in _META]
    if bad or not formats:
        raise ValueError(f"formats {list(formats)}: accepted png, svg")
    paths = []
    with matplotlib.rc_context(STYLE):
        for ext in formats:
            meta = _META[ext]
            path = out_base.with_name(out_base.name + "." + ext)
            fig.savefig(path, format=ext, dpi=DPI, metadata=meta)
            paths.append(path)
    return paths


def plot_loss(configs: Sequence, out_base: Path, pdr_loss_ratio: float | None = None, *,
              labels: Sequence[str] | None = None, title: str | None = None,
              formats: Sequence[str] = FORMATS) -> list[Path]:
    """Load-loss figure -> [out_base.png, out_base.svg]. ``pdr_loss_ratio`` None:
    each configuration's own X (from its analysis)."""
    return save_figure(loss_figure(configs, pdr_loss_ratio, labels=labels, title=title), out_base, formats)


def plot_delivery(configs: Sequence, out_base: Path, pdr_loss_ratio: float | None = None, *,
                  labels: Sequence[str] | None = None, title: str | None = None,
                  formats: Sequence[str] = FORMATS) -> list[Path]:
    """Load-delivery figure -> [out_base.png, out_base.svg]."""
    return save_figure(delivery_figure(configs, pdr_loss_ratio, labels=labels, title=title), out_base, formats)


def plot_throughput(configs: Sequence, out_base: Path, *, labels: Sequence[str] | None = None,
                    title: str | None = None, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Load-throughput figure -> [out_base.png, out_base.svg]."""
    return save_figure(throughput_figure(configs, labels=labels, title=title), out_base, formats)


def plot_all(configs: Iterable, out_dir: Path, pdr_loss_ratio: float | None = None, *,
             prefix: str = "", labels: Sequence[str] | None = None, title: str | None = None,
             formats: Sequence[str] = FORMATS) -> dict[str, list[Path]]:
    """The three figures in ``out_dir``: {'loss': [...], 'delivery': [...], 'throughput': [...]}."""
    configs = list(configs)
    out_dir = Path(out_dir)
    kw = dict(labels=labels, title=title, formats=formats)
    return {
        "loss": plot_loss(configs, out_dir / f"{prefix}loss", pdr_loss_ratio, **kw),
        "delivery": plot_delivery(configs, out_dir / f"{prefix}delivery", pdr_loss_ratio, **kw),
        "throughput": plot_throughput(configs, out_dir / f"{prefix}throughput", **kw),
    }


def search_figure(trials: Sequence[StoredResult], bounds: Sequence[tuple[str, float, float | None, float | None]],
                  title: str) -> Figure:
    """One search: the load of each trial in order (log scale), coloured by the
    worst goal it failed, and each goal's final lower/upper bounds as lines.
    ``bounds``: (goal name, goal loss ratio, lower pps, upper pps)."""
    with matplotlib.rc_context(STYLE):
        fig, ax = _new_figure(1)
        goals = sorted(bounds, key=lambda b: b[1])
        colors = ["#2a9d4b", "#f08c00", "#d62828", "#7b2cbf", "#1d4ed8", "#6b7280"]
        x = np.arange(1, len(trials) + 1)
        loads = np.array([t.intended_rate_pps for t in trials], dtype=float)
        worst = []
        for t in trials:
            loss = t.loss_ratio or 0.0
            failed = [i for i, g in enumerate(goals) if loss > g[1]]
            worst.append(len(goals) if t.valid is False else (max(failed) + 1 if failed else 0))
        handles = []
        names = ["meets every goal"] + [f"fails {g[0]}" for g in goals]
        for k, name in enumerate(names):
            sel = np.array(worst) == k
            if sel.any():
                handles.append(ax.scatter(x[sel], loads[sel], s=22, color=colors[k % len(colors)],
                                          marker=MARKERS[k % len(MARKERS)], label=name, zorder=3))
        invalid = np.array([t.valid is False for t in trials])
        if invalid.any():
            handles.append(ax.scatter(x[invalid], loads[invalid], s=40, facecolors="none", edgecolors="black",
                                      label="invalid trial (not evidence)", zorder=4))
        ax.plot(x, loads, color="#9aa3b2", linewidth=0.7, zorder=2)
        n_points = len(handles)
        for i, (name, _, lo, up) in enumerate(goals):
            for y, style, what in ((lo, "-", "lower"), (up, ":", "upper")):
                if y is not None:
                    handles.append(_hline(ax, y, f"{name} {what} bound", colors[(i + 1) % len(colors)], style))
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))  # 10k, 100k, 1M: shorter than 10^4 and plain text
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trials are counted, never 2.5
        ax.set_xlabel("trial (in search order)")
        ax.set_ylabel("intended load [pps]")
        return _finish(fig, ax, handles, 2, title, n_points)


def plot_search(trials, bounds, title: str, out_base: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    return save_figure(search_figure(trials, bounds, title), out_base, formats)


# ---- embedding ----------------------------------------------------------------

def compact_png(path: Path) -> bytes:
    """The PNG re-encoded with a 256-colour palette (about a third of the size,
    visually the same for line plots); the original bytes if Pillow fails."""
    raw = Path(path).read_bytes()
    try:
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as im:
            q = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
            buf = io.BytesIO()
            q.save(buf, "PNG", optimize=True)
        small = buf.getvalue()
        return small if len(small) < len(raw) else raw
    except Exception:  # Pillow missing or an unexpected image: embed as is
        return raw


def png_data_uri(path: Path) -> str:
    """A written PNG as a data: URI (compacted), for a self-contained page."""
    return "data:image/png;base64," + base64.b64encode(compact_png(path)).decode("ascii")


def model_figure(curves: Sequence, floor: float = 1e-6) -> Figure:
    """The synthetic SUT's load-loss model as the paper draws it, one row per
    configuration: (a) PLR and delivery ratio against the offered load,
    linear (Figs. 3 and 4), (b) PLR on a log scale from ``floor`` (Fig. 5);
    the campaign's measured mean PLR at each load on both."""
    fig = Figure(figsize=(8.0, 3.2 * len(curves) + 0.6), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(curves), 2, squeeze=False)
    div, unit = load_unit(max(max(c.loads_pps) for c in curves))
    for (lin, log), c in zip(axes, curves):
        x = np.asarray(c.loads_pps) / div
        mx = np.array([o for o, _ in c.measured]) / div
        my = np.array([p for _, p in c.measured])
        lin.plot(x, c.ideal_plr, color="tab:blue", linewidth=1.2, linestyle=(0, (4, 3)), label="ideal PLR (Fig. 3)")
        lin.plot(x, c.plr, color="tab:green", linewidth=1.6, label="model PLR")
        lin.plot(x, c.delivery, color="tab:red", linewidth=1.6, label="model delivery ratio")
        lin.plot(mx, my, linestyle="none", marker="o", markersize=4, color="black", label="measured mean PLR")
        lin.set_ylim(-0.02, 1.02)
        lin.set_title(wrap_title(_mpl_text(f"(a) {c.label}"), 3.6, STYLE["axes.titlesize"]), loc="left")
        log.plot(x, np.maximum(c.ideal_plr, floor), color="tab:blue", linewidth=1.2, linestyle=(0, (4, 3)))
        log.plot(x, np.maximum(c.plr, floor), color="tab:green", linewidth=1.6)
        log.plot(mx, np.maximum(my, floor), linestyle="none", marker="o", markersize=4, color="black")
        log.set_yscale("log")
        log.set_ylim(floor * 0.7, 1.5)
        log.set_title("(b) PLR, log scale (Fig. 5)", loc="left")
        for ax in (lin, log):
            ax.set_xlabel(f"offered load ({unit})")
            ax.grid(True, which="major")
        lin.set_ylabel("ratio")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False)
    return fig
