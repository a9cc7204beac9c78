"""Figures of the AF_XDP delay study (shared/papers/af-xdp-delays.md) over
``latency_stats.ConfigStats`` and ``latency_clusters.Clustering``:

* ``kde_figure``: the study's Fig. 3, a KDE of each configuration's RTTs
  (scipy's gaussian_kde on log10 of the RTT, so the curve is a density per
  decade on the log axis) coloured by cluster; outliers left out of the
  clustering in grey, dotted.
* ``hop_figure``: per configuration, the mean round trip cut into its hops
  (``latency_stats.SEGMENTS``), (a) in µs, (b) as a share of the RTT; rows
  ordered by cluster then mean, tick labels coloured by cluster.
* ``cluster_figure``: per cluster its mean and std of the configurations'
  means (the study's Tables I-II) with the knobs always present, and the
  silhouette score of each k tried.

Configurations are named by ``short_labels``: the on/off knobs that are on,
abbreviated (``ABBREV``), then the values of the other knobs that vary.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from softnet.analysis.latency_clusters import Clustering, is_on
from softnet.analysis.latency_stats import SEGMENTS, ConfigStats

from .plots import DPI, FORMATS, STYLE, _mpl_text, save_figure, wrap_title

ABBREV = {"busy_poll": "BP", "need_wakeup": "NW", "poll_sender": "pS", "poll_forwarder": "pF",
          "poll_receiver": "pR", "bind_mode": "", "cstate_limit": "", "coalescing": "coal"}
OUTLIER_COLOR = "0.6"
TITLE_PT = 12.0
ROW_IN = 0.17          # height of one configuration's bar row (inches): 7.5 pt labels need ~0.14
LABEL_PT = 7.5
_SEGMENT_COLORS = matplotlib.colormaps["Set2"].colors


def _abbrev(knob: str) -> str:
    return ABBREV.get(knob, knob)


def short_labels(configs: Sequence[ConfigStats]) -> tuple[list[str], str]:
    """(label per configuration, legend of the abbreviations). Knobs that do
    not vary are left out; an on/off knob shows its abbreviation when on."""
    knobs = list(dict.fromkeys(k for c in configs for k in c.knobs))
    varying = [k for k in knobs if len({repr(c.knobs.get(k)) for c in configs}) > 1]
    onoff = [k for k in varying
             if {is_on(c.knobs.get(k)) for c in configs} == {True, False}
             and len({repr(c.knobs.get(k)) for c in configs}) == 2]
    labels = []
    for c in configs:
        toks = [_abbrev(k) for k in onoff if is_on(c.knobs.get(k))]
        for k in varying:
            if k not in onoff:
                v = c.knobs.get(k)
                toks.append(f"{_abbrev(k)}={v}" if _abbrev(k) else str(v))
        labels.append(" ".join(toks) or "(all off)")
    if len(set(labels)) < len(labels):  # abbreviations collide: fall back to the full labels
        return [c.label for c in configs], ""
    legend = ", ".join(f"{_abbrev(k)} = {k} on" for k in onoff)
    return labels, legend


def cluster_color(index: int):
    return OUTLIER_COLOR if index < 0 else matplotlib.colormaps["tab10"](index % 10)


def _prepare(configs, clustering: Clustering | None) -> tuple[list, np.ndarray]:
    """(configurations, cluster label of each: all 0 without a clustering)."""
    configs = list(configs)
    if not configs:
        raise ValueError("no configuration to plot")
    if clustering is None:
        return configs, np.zeros(len(configs), dtype=int)
    if len(clustering.labels) != len(configs):
        raise ValueError(f"{len(configs)} configurations but {len(clustering.labels)} cluster labels")
    return configs, np.asarray(clustering.labels)


def _suptitle(fig: Figure, title: str) -> None:
    fig.suptitle(wrap_title(_mpl_text(title), fig.get_figwidth() * 0.95, TITLE_PT), x=0.01, ha="left",
                 fontsize=TITLE_PT)


def _us(v: float, _pos=None) -> str:
    return f"{v:g}"


def _configs(n: int) -> str:
    return f"{n} config{'s' if n != 1 else ''}"


def _time_text(us: float) -> str:
    """3 significant digits in µs, ms or s: 999 µs, 1.02 ms, 1 s."""
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if us >= scale * 0.9995:
            return f"{us / scale:.3g} {unit}"
    return f"{us:.3g} µs"


def _log_ticks(ax, lo: float, hi: float) -> None:
    """Decades on a log axis, with 2 and 5 between them when it spans two decades or less."""
    subs = (1.0, 2.0, 5.0) if math.log10(hi / lo) <= 2.0 else (1.0,)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.xaxis.set_major_formatter(FuncFormatter(_us))
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs=np.arange(2, 10) * 1.0))
    ax.xaxis.set_minor_formatter(NullFormatter())


# ---- Fig. 3: KDE per configuration ------------------------------------------------

def kde_figure(configs: Sequence[ConfigStats], clustering: Clustering | None = None, *,
               title: str = "AF_XDP round-trip time per configuration (KDE)") -> Figure:
    configs, labels = _prepare(configs, clustering)
    rtts = [c.rtt_ns.astype(float) / 1e3 for c in configs]
    shown = [r[r > 0] for r in rtts]
    allv = np.concatenate([r for r in shown if r.size]) if any(r.size for r in shown) else np.array([1.0, 10.0])
    lo, hi = allv.min() / 1.5, allv.max() * 1.5
    grid = np.linspace(math.log10(lo), math.log10(hi), 512)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(8.5, 5.4), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        ax.set_xscale("log")
        order = np.argsort(-labels, kind="stable")  # outliers first, so clusters draw over them
        top = {True: 0.0, False: 0.0}  # highest density of clustered / outlier curves
        # Without clusters a few configurations get a colour each (and a legend), else one colour.
        own = clustering is None and 1 < len(configs) <= 10
        for i in order:
            x, lab = shown[i], labels[i]
            style = dict(color=cluster_color(i if own else lab), linewidth=1.0, alpha=0.85,
                         linestyle=":" if lab < 0 else "-")
            if x.size >= 2 and np.ptp(np.log10(x)) > 0:
                from scipy import stats  # here: its import is 0.6 s, paid only where it is used

                dens = stats.gaussian_kde(np.log10(x))(grid)
                ax.plot(10 ** grid, dens, **style)
                top[lab >= 0] = max(top[lab >= 0], float(dens.max()))
            elif x.size:  # one value (or all equal): no density, a mark at the value
                ax.plot(x[:1], [0], marker="|", markersize=14, clip_on=False, **style)
        ax.set_xlim(lo, hi)
        # a stalled outlier is a spike: scale to the clustered curves and let it run off the top
        ax.set_ylim(0, 1.08 * (top[True] or top[False] or 1.0))
        _log_ticks(ax, lo, hi)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.set_xlabel("round-trip time (µs, log scale)")
        ax.set_ylabel("density (per decade of RTT)")
        handles = _cluster_handles(configs, clustering, labels, clipped=top[False] > ax.get_ylim()[1])
        abbrev = ""
        if own:
            names, abbrev = short_labels(configs)
            handles = [Line2D([], [], color=cluster_color(i), linewidth=2, label=f"#{i} {name}")
                       for i, name in enumerate(names)]
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False, fontsize=8)
        n_pk = sum(r.size for r in shown)
        ax.set_title(f"{len(configs)} configurations, {n_pk} round trips" + (f"; {abbrev}" if abbrev else ""),
                     loc="left", fontsize=9)
        _suptitle(fig, title)
        return fig


def _cluster_handles(configs, clustering: Clustering | None, labels, clipped: bool = False) -> list:
    if clustering is None:
        return []
    handles = [Line2D([], [], color=cluster_color(c.index), linewidth=2,
                      label=f"cluster {c.index}: {_configs(len(c.members))}, mean {_time_text(c.mean_ns / 1e3)}")
               for c in clustering.clusters]
    n_out = int((labels < 0).sum())
    if n_out:
        handles.append(Line2D([], [], color=OUTLIER_COLOR, linestyle=":", linewidth=2,
                              label=f"left out (outlier): {_configs(n_out)}" + (", peaks cut" if clipped else "")))
    return handles


# ---- per-hop breakdown ------------------------------------------------------------

def _row_order(configs, labels) -> list[int]:
    """Cluster 0 first, outliers last; by mean RTT within a cluster."""
    key = [(lab if lab >= 0 else 10 ** 6, c.mean_ns if math.isfinite(c.mean_ns) else math.inf)
           for c, lab in zip(configs, labels)]
    return sorted(range(len(configs)), key=lambda i: key[i])


def hop_figure(configs: Sequence[ConfigStats], clustering: Clustering | None = None, *,
               title: str = "AF_XDP round trip by hop (mean per segment)") -> Figure:
    configs, labels = _prepare(configs, clustering)
    rows = _row_order(configs, labels)
    names_short, legend_text = short_labels(configs)
    base = [s[0] for s in SEGMENTS]
    seg_names = list(dict.fromkeys(base + [s.name for c in configs for s in c.breakdown.segments]))
    seg_names = [s for s in seg_names if any(s == g.name for c in configs for g in c.breakdown.segments)]
    seg_names.sort(key=lambda s: base.index(s.split("+")[0]))  # path order, merged ones where they start
    colors = {s: _SEGMENT_COLORS[i % len(_SEGMENT_COLORS)] for i, s in enumerate(seg_names)}
    n = len(configs)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(10.0, 2.3 + ROW_IN * n), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax_abs, ax_share = fig.subplots(1, 2, sharey=True, width_ratios=(3, 2))
        y = np.arange(n)
        totals = np.array([configs[i].breakdown.rtt_mean_ns / 1e3 for i in rows])
        inliers = [t for t, i in zip(totals, rows) if labels[i] >= 0 and math.isfinite(t)]
        xmax = (max(inliers) if inliers else np.nanmax(totals) if np.isfinite(totals).any() else 1.0) * 1.12
        unstamped = False
        for row, i in enumerate(rows):
            bd = configs[i].breakdown
            left = 0.0
            if not bd.segments:
                unstamped = unstamped or math.isfinite(configs[i].mean_ns)
                v = configs[i].mean_ns / 1e3 if math.isfinite(configs[i].mean_ns) else 0.0
                ax_abs.barh(row, v, color="0.85", edgecolor="0.5", linewidth=0.3, height=0.75)
                continue
            for s in bd.segments:
                ax_abs.barh(row, s.mean_ns / 1e3, left=left, color=colors[s.name], height=0.75, linewidth=0)
                ax_share.barh(row, 100 * s.mean_ns / bd.rtt_mean_ns,
                              left=100 * left * 1e3 / bd.rtt_mean_ns, color=colors[s.name], height=0.75,
                              linewidth=0)
                left += s.mean_ns / 1e3
            if left > xmax:  # beyond the axis (an outlier): say how far
                ax_abs.text(xmax * 0.99, row, f"{_time_text(left)} ▸", ha="right", va="center", fontsize=LABEL_PT - 1,
                            color="black", bbox=dict(facecolor="white", edgecolor="none", pad=0.5))
        ax_abs.set_xlim(0, xmax)
        ax_share.set_xlim(0, 100)
        ax_abs.set_ylim(n - 0.5, -0.5)
        ax_abs.set_yticks(y, [_mpl_text(names_short[i]) for i in rows], fontsize=LABEL_PT)
        for tick, i in zip(ax_abs.get_yticklabels(), rows):
            tick.set_color(cluster_color(labels[i]) if clustering is not None else "black")
        for ax in (ax_abs, ax_share):
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
            ax.grid(True, axis="x")
            ax.grid(False, axis="y")
        ax_abs.set_xlabel("mean time in segment (µs)")
        ax_share.set_xlabel("share of the round trip (%)")
        ax_abs.set_title("(a) per segment, stacked", loc="left")
        ax_share.set_title("(b) share of the RTT", loc="left")
        handles = [Patch(color=colors[s], label=s.replace("+", " + ")) for s in seg_names]
        if unstamped:
            handles.append(Patch(facecolor="0.85", edgecolor="0.5", label="no hop stamps (whole RTT)"))
        if clustering is not None:
            handles += [Line2D([], [], linestyle="none", marker="s", color=cluster_color(c.index),
                               label=f"label colour: cluster {c.index}") for c in clustering.clusters]
            if (labels < 0).any():
                handles.append(Line2D([], [], linestyle="none", marker="s", color=OUTLIER_COLOR,
                                      label="label colour: outlier"))
        # the abbreviations as the legend's title: constrained layout makes room for both
        fig.legend(handles=handles, loc="outside lower center", ncol=3, frameon=False, fontsize=8,
                   title=wrap_title(_mpl_text("labels: " + legend_text), fig.get_figwidth() * 0.9, 8)
                   if legend_text else None, title_fontsize=8)
        _suptitle(fig, title)
        return fig


# ---- clusters: Tables I-II and the choice of k ---------------------------------------

def _knob_text(always: dict) -> str:
    parts = [f"{k} {'on' if is_on(v) else 'off'}" if isinstance(v, bool) else f"{k}={v}"
             for k, v in always.items()]
    return ", ".join(parts) or "no knob common to all members"


def cluster_figure(configs: Sequence[ConfigStats], clustering: Clustering, *,
                   title: str = "AF_XDP configuration clusters (k-means on mean, median, std, Q1, Q3)") -> Figure:
    configs, labels = _prepare(configs, clustering)
    k = len(clustering.clusters)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(10.0, 3.2 + 0.55 * k), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax, ax_k = fig.subplots(1, 2, width_ratios=(3, 1))
        rng = np.random.default_rng(0)  # jitter of the member dots only
        means = [c.mean_ns / 1e3 for c in clustering.clusters]
        member_means = [[configs[i].mean_ns / 1e3 for i in c.members] for c in clustering.clusters]
        allm = [v for m in member_means for v in m] or [1.0]
        log = max(allm) / max(min(allm), 1e-9) > 20
        for c, m, pts in zip(clustering.clusters, means, member_means):
            ax.barh(c.index, m, height=0.6, color=cluster_color(c.index), alpha=0.35)
            if math.isfinite(c.std_ns):  # one member: no spread to draw
                ax.errorbar(m, c.index, xerr=c.std_ns / 1e3, color="black", capsize=3, linewidth=1)
            ax.plot(pts, c.index + rng.uniform(-0.2, 0.2, len(pts)), "o", markersize=3,
                    color=cluster_color(c.index))
        if log:
            ax.set_xscale("log")
            lo, hi = min(allm) / 1.5, max(allm) * 1.5
            ax.set_xlim(lo, hi)
            _log_ticks(ax, lo, hi)
        else:
            ax.set_xlim(0, max(allm) * 1.15)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.set_ylim(k - 0.5, -0.5)
        ax.set_yticks(range(k), [f"cluster {c.index}\n{_configs(len(c.members))}" for c in clustering.clusters],
                      fontsize=8)
        for c in clustering.clusters:
            text = wrap_title(_mpl_text(_knob_text(c.always_present)), 3.2, 7.5)
            spread = f" ± {_time_text(c.std_ns / 1e3)}" if math.isfinite(c.std_ns) else " (one configuration)"
            ax.annotate(f"{_time_text(c.mean_ns / 1e3)}{spread}\n" + text, xy=(1.0, c.index), xycoords=("axes fraction", "data"), xytext=(6, 0),
                        textcoords="offset points", va="center", ha="left", fontsize=7.5, annotation_clip=False)
        ax.set_xlabel("mean RTT of each configuration (µs)" + (", log scale" if log else ""))
        ax.set_title("(a) clusters: mean ± std of the configurations' means; always-present knobs", loc="left",
                     fontsize=9.5)
        ax.grid(False, axis="y")
        ks = sorted(clustering.silhouette)
        ax_k.plot(ks, [clustering.silhouette[x] for x in ks], "o-", color="0.3")
        ax_k.axvline(clustering.k, color="tab:red", linestyle="--", linewidth=1)
        ax_k.set_xlabel("k")
        ax_k.set_ylabel("silhouette")
        ax_k.set_xticks(ks)  # whole k only, also when a single k was tried
        ax_k.set_xlim(min(ks) - 0.5, max(ks) + 0.5)
        ax_k.set_title(f"(b) k = {clustering.k} ({clustering.chosen_by})", loc="left", fontsize=9.5)
        n_out = int((labels < 0).sum())
        if n_out:
            fig.supxlabel(f"{n_out} outlier configurations left out of the clustering "
                          f"({', '.join(sorted({f for v in clustering.excluded.values() for f in v}))})",
                          fontsize=8, x=0.01, ha="left")
        _suptitle(fig, title)
        return fig


def plot_latency(configs: Sequence[ConfigStats], clustering: Clustering | None, out_dir: Path, *,
                 title: str = "", formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write latency_kde, latency_hops and (with a clustering) latency_clusters
    .png/.svg into ``out_dir``; returns the paths."""
    out_dir = Path(out_dir)
    prefix = f"{title}: " if title else ""
    paths = save_figure(kde_figure(configs, clustering, title=prefix + "round-trip time per configuration (KDE)"),
                        out_dir / "latency_kde", formats)
    paths += save_figure(hop_figure(configs, clustering, title=prefix + "round trip by hop (mean per segment)"),
                         out_dir / "latency_hops", formats)
    if clustering is not None:
        paths += save_figure(cluster_figure(configs, clustering, title=prefix + "configuration clusters"),
                             out_dir / "latency_clusters", formats)
    return paths
