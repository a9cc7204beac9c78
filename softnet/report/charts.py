"""The report's load curves as interactive charts (plotly): the same series,
bands and reference lines as the static figures (softnet.report.plots), with
zoom, hover values and configurations toggled in the legend. A chart is a
plotly figure as JSON; the page draws it with plotly.js, served by
`softnet serve` or inlined in a self-contained report.
"""
from __future__ import annotations

import json
from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

from .plots import FLOOR_PLR, legend_label, load_unit, metric_series, short_labels, thresholds

WHAT = {"loss": ("plr_ratio", "Load-loss curves", "Packet loss ratio PLR (log scale; 0 drawn at 1e-6)"),
        "delivery": ("dr_ratio", "Load-delivery curves", "Delivery ratio DR = 1 - PLR (%)"),
        "throughput": ("throughput_pps", "Load-throughput curves", "Throughput T(O)")}


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)}, {alpha})"


def load_chart(configs: Sequence, kind: str, pdr_loss_ratio: float | None = None) -> go.Figure:
    """One of the three load curves of a group of configurations: per
    configuration the mean of its runs (markers, hover: the interval and
    runs) and its confidence band; the PDR threshold and each PDR point."""
    metric, head, ylabel = WHAT[kind]
    configs = list(configs)
    short, common = short_labels(configs)
    div, unit = load_unit(max((s.load_pps for c in configs for s in c.analysis.stats.loads), default=1.0))
    colors = qualitative.D3
    fig = go.Figure()
    scale = {"delivery": 100.0, "throughput": 1.0 / div}.get(kind, 1.0)
    for i, (c, label) in enumerate(zip(configs, short)):
        color = colors[i % len(colors)]
        x, mean, lo, hi = metric_series(c, metric)
        raw = mean * scale
        if kind == "loss":
            mean, lo, hi = (np.maximum(np.nan_to_num(v, nan=FLOOR_PLR), FLOOR_PLR) for v in (mean, lo, hi))
        mean, lo, hi, x = mean * scale, lo * scale, hi * scale, x / div
        runs = [s.plr_ratio.n for s in c.analysis.stats.loads]
        name = legend_label(c, label)
        # plain lists: the page reads the points back (plotly would write typed arrays as base64)
        fig.add_trace(go.Scatter(x=np.concatenate([x, x[::-1]]).tolist(), y=np.concatenate([hi, lo[::-1]]).tolist(),
                                 fill="toself", mode="lines",
                                 fillcolor=_rgba(color, 0.18 if len(configs) <= 4 else 0.07), line={"width": 0},
                                 hoverinfo="skip", legendgroup=str(i), showlegend=False))
        fig.add_trace(go.Scatter(
            x=x.tolist(), y=mean.tolist(), name=name, legendgroup=str(i), mode="lines+markers",
            line={"color": color, "width": 1.6}, customdata=np.stack([raw, lo, hi, runs], axis=-1).tolist(),
            hovertemplate=f"%{{x:.4g}} {unit}: %{{customdata[0]:.4g}} [%{{customdata[1]:.3g}}, "
                          f"%{{customdata[2]:.3g}}], %{{customdata[3]}} runs<extra>{label}</extra>"))
        point = c.analysis.report.pdr_point_load_pps
        if point is not None:
            fig.add_vline(x=point / div, line={"color": color, "dash": "dash", "width": 1})
    if kind == "loss":
        for t in thresholds(configs, pdr_loss_ratio):
            fig.add_hline(y=t, line={"color": "black", "dash": "dash", "width": 1},
                          annotation_text=f"X = {t * 100:g}%", annotation_position="top left")
        fig.update_yaxes(type="log", range=[-6.25, 0.2], dtick=1, exponentformat="power")
    elif kind == "delivery":
        for t in thresholds(configs, pdr_loss_ratio):
            fig.add_hline(y=(1 - t) * 100, line={"color": "black", "dash": "dash", "width": 1})
    else:
        top = max((s.load_pps for c in configs for s in c.analysis.stats.loads), default=div) / div * 1.03
        fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="ideal T(O) = O",
                                 line={"color": "#595959", "dash": "dashdot", "width": 1}, hoverinfo="skip"))
    title = f"{head} \u2014 {common}" if common else head
    fig.update_layout(title={"text": title, "x": 0.01}, template="plotly_white", height=480,
                      margin={"t": 50, "l": 70, "r": 20, "b": 40},
                      legend={"orientation": "h", "y": -0.18, "yanchor": "top"},
                      xaxis_title=f"Offered load O ({unit})",
                      yaxis_title=ylabel + (f" ({unit})" if kind == "throughput" else ""))
    return fig


def chart_json(fig: go.Figure) -> str:
    """The figure as JSON safe inside a <script> element."""
    return json.dumps(json.loads(fig.to_json())).replace("</", "<\\/")


def group_charts(configs: Sequence, pdr_loss_ratio: float | None = None) -> dict[str, str]:
    return {kind: chart_json(load_chart(configs, kind, pdr_loss_ratio)) for kind in WHAT}
