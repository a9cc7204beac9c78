"""A stored latency campaign as the study's per-configuration statistics: its
runs' records read back, grouped by matrix cell, with the kernel baseline and
the send interval the outlier rules need."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from softnet.analysis.latency_clusters import (EXCLUDE_FLAGS, Clustering, Finding, KnobEffect, KnobRules,
                                               StudyKnobs, cluster_configurations, cluster_stability,
                                               explain_clusters, knob_effects, study_findings)
from softnet.analysis.latency_stats import ConfigStats, config_stats, knob_key, knob_label
from softnet.errors import InputError
from softnet.results.latency import StoredLatencyRun, read_records
from softnet.results.store import Store

MIN_CLUSTERED = 3
# The study's knob names as softnet's latency specs spell them.
CAMPAIGN_KNOBS = StudyKnobs(cstate="cstate_limit_us", coalescing="coalesce_rx_usecs")


def typed_runs(runs: Sequence[StoredLatencyRun | dict]) -> list[StoredLatencyRun]:
    """The rows of ``store.latency_runs`` as StoredLatencyRun (typed ones pass as they are)."""
    return [r if isinstance(r, StoredLatencyRun) else StoredLatencyRun.of(r) for r in runs]


def latency_configs(store: Store, campaign_id: str, runs: Sequence[StoredLatencyRun | dict],
                    n_resamples: int = 2000) -> list[ConfigStats]:
    """One ConfigStats per matrix cell with stored base runs (``runs``: the
    campaign's ``store.latency_runs``), labelled by its matrix knobs."""
    runs = [r for r in typed_runs(runs) if r.result.phase == "base"]
    matrix_knobs = {c["cell_id"]: c["knobs"] for c in store.cells(campaign_id)}  # the store's rows
    out = []
    for cell_id in sorted({r.cell_id for r in runs}):
        sel = [r for r in runs if r.cell_id == cell_id]
        records = []
        for r in sel:
            try:
                records.append(read_records(r.result.records_path))
            except (OSError, ValueError, TypeError) as exc:
                raise InputError(f"campaign {campaign_id} cell {cell_id} run {r.run_index}",
                                 f"records unreadable: {exc}") from None
        baselines = [r.result.baseline.median_ns for r in sel
                     if r.result.baseline and r.result.baseline.median_ns is not None]
        matrix = matrix_knobs.get(cell_id, {})
        label = knob_label({k.removeprefix("latency."): v for k, v in matrix.items()}) or "configuration"
        first = sel[0].result
        out.append(config_stats(first.config_knobs.to_dict(), records, label=label,
                                kernel_baseline=float(np.median(baselines)) if baselines else None,
                                send_interval_ns=first.interval_s * 1e9, n_resamples=n_resamples))
    return out


@dataclass
class LatencyAnalysis:
    """A latency campaign analysed as the study does: per-configuration
    statistics, then (with enough configurations) clusters, the knobs that
    explain them, per-knob effects and the study's findings on this host."""

    configs: list[ConfigStats]
    clustering: Clustering | None = None
    rules: KnobRules | None = None
    effects: list[KnobEffect] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    why_not_clustered: str | None = None
    note: str | None = None  # how the study's rules were applied here, when not as written
    reruns: list[dict] = field(default_factory=list)  # the second phase: configurations at higher rates

    def to_dict(self) -> dict:
        c = self.clustering
        return {"configurations": [x.to_dict() for x in self.configs],
                "clustering": None if c is None else c.to_dict(self.configs),
                "why_not_clustered": self.why_not_clustered, "note": self.note, "reruns": self.reruns,
                "rules": None if self.rules is None else list(self.rules.rules),
                "effects": [e.to_dict() for e in self.effects],
                "findings": [f.to_dict() for f in self.findings]}


def analyze_latency(store: Store, campaign_id: str, k: int | None = None, n_resamples: int = 2000,
                    seed: int = 0, runs: Sequence[StoredLatencyRun | dict] | None = None) -> LatencyAnalysis:
    """``runs``: the campaign's stored runs when the caller has read them already."""
    runs = typed_runs(store.latency_runs(campaign_id) if runs is None else runs)
    if k is None:  # the campaign's own [latency] clusters, else by silhouette
        k = next((c["spec"].get("latency", {}).get("clusters") for c in store.cells(campaign_id)), None)
    configs = latency_configs(store, campaign_id, runs, n_resamples)
    out = LatencyAnalysis(configs, reruns=reruns(runs, configs))
    if len(configs) < MIN_CLUSTERED:
        out.why_not_clustered = f"{len(configs)} configuration(s): clusters need at least {MIN_CLUSTERED}"
        return out
    exclude = EXCLUDE_FLAGS
    if sum(not set(c.flags) & set(EXCLUDE_FLAGS) for c in configs) < MIN_CLUSTERED:
        # The study leaves out configurations slower than the kernel baseline;
        # where that leaves too few (on a small VM every AF_XDP path can be),
        # all but the stalled ones are clustered, and the analysis says so.
        exclude = tuple(f for f in EXCLUDE_FLAGS if f != "worse_than_kernel")
        out.note = ("the study's rule (leave out configurations slower than the kernel ping baseline) leaves "
                    "fewer than 3 here: those configurations are clustered too, marked worse_than_kernel")
    try:
        out.clustering = cluster_configurations(configs, k, exclude=exclude, seed=seed)
    except ValueError as exc:
        out.why_not_clustered = str(exc)
        return out
    out.rules = explain_clusters(configs, out.clustering)
    out.effects = knob_effects(configs, seed=seed)
    out.findings = study_findings(configs, out.clustering, knobs=CAMPAIGN_KNOBS, seed=seed)
    return out


def stability(analyses: Sequence[tuple[str, LatencyAnalysis]]) -> list[dict]:
    """Cluster stability (adjusted Rand index) between every two clustered
    latency campaigns that share configurations: the same matrix run twice
    must give the same clusters, or the clusters are not a finding."""
    out = []
    clustered = [(name, a) for name, a in analyses if a.clustering is not None]
    for i, (na, a) in enumerate(clustered):
        for nb, b in clustered[i + 1:]:
            try:
                s = cluster_stability(a.clustering, a.configs, b.clustering, b.configs)
            except ValueError as exc:
                out.append({"a": na, "b": nb, "ari": None, "verdict": "not comparable", "why": str(exc)})
                continue
            out.append({"a": na, "b": nb, "ari": s.ari, "verdict": s.verdict, "common": s.n_common})
    return out


def reruns(runs: Sequence[StoredLatencyRun], configs: Sequence[ConfigStats]) -> list[dict]:
    """The re-runs at higher rates (phases fast and flood), each with its
    configuration's number and its round-trip statistics against the base runs'."""
    index = {knob_key(c.knobs): i for i, c in enumerate(configs)}
    out = []
    for r in (s.result for s in runs):
        if r.phase == "base":
            continue
        i = index.get(knob_key(r.config_knobs.to_dict()))
        out.append({"config": i, "label": configs[i].label if i is not None else "?", "phase": r.phase,
                    "interval_s": r.interval_s, "sent": r.sent, "received": r.received, "lost": r.lost,
                    "median_ns": r.rtt_stats.median_ns, "p99_ns": r.rtt_stats.p99_ns,
                    "base_median_ns": None if i is None else configs[i].median_ns, "flags": r.flags})
    return out
