"""Trends: one configuration measured over many stored campaigns (one per CI
run, say), per figure, with the change points FD.io CSIT's jumpavg finds.

jumpavg splits a series into groups by the minimum description length: a
new group (a change point) is kept only when coding its values apart, each
group a normal distribution, takes fewer bits than coding them together. It
needs no penalty to be tuned, and it takes each campaign's runs as one
indivisible sample (their mean and spread), which suits a few noisy runs per
CI job. A change point's direction is read against what is better for the
figure: less throughput, or more latency or CPU per packet, is a regression.

Pure: campaigns come in already read (``CampaignFigures``, built from the
analyses of softnet.analysis.campaigns and .data_paths); comparisons stored by
`softnet compare` come in as ``StoredComparison``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal, Sequence

import jumpavg

from softnet.analysis.campaigns import Configuration, FlagPolicy, SoftnetMeta, _runs
from softnet.analysis.data_paths import DataPathRow
from softnet.analysis.loss_stats import MeanCI
from softnet.results.comparison import ComparisonSummary, PairedDifference

Direction = Literal["regression", "progression"]
NO_COMPARISON = "no comparison"


@dataclass(frozen=True)
class FigureDef:
    name: str
    title: str
    unit: str
    better: Literal["higher", "lower"]
    compared_as: str  # the kind of a comparison's metric that judges the same thing
    compared_word: str = ""  # and a word its metric name holds (a search goal, a percentile)


FIGURES = (
    FigureDef("capacity", "capacity (largest mean forwarded rate)", "pps", "higher", "capacity"),
    FigureDef("pdr", "PDR load", "pps", "higher", "search", "pdr"),
    FigureDef("ndr", "NDR load", "pps", "higher", "search", "ndr"),
    FigureDef("latency_p50", "latency p50 at the lowest load", "ns", "lower", "latency", "p50"),
    FigureDef("cpu_ns", "SUT CPU ns per packet", "ns", "lower", "cpu"),
)
FIGURE_NAMES = tuple(f.name for f in FIGURES)


@dataclass(frozen=True)
class FigureValue:
    value: float
    ci: tuple[float, float] | None  # the t-interval over runs, where there is one
    runs: tuple[float, ...]  # the values jumpavg reads as one sample (the runs', or the value alone)


@dataclass(frozen=True)
class CampaignFigures:
    """One configuration of one stored campaign, as a trend reads it."""

    store: int
    results_dir: str
    campaign_id: str
    name: str  # the campaign's name
    label: str  # the configuration's (analysis.campaigns.cell_label)
    knobs: dict
    spec: dict  # the cell's spec as stored: a comparison's variant is matched against it
    created_unix_s: float
    capacity: FigureValue | None = None
    pdr: FigureValue | None = None
    ndr: FigureValue | None = None
    latency_p50: FigureValue | None = None
    cpu_ns: FigureValue | None = None
    testbed: str = "local"  # the testbed that measured it (a lab's series are per testbed)

    def figure(self, name: str) -> FigureValue | None:
        return getattr(self, name)


@dataclass(frozen=True)
class ComparisonSide:
    name: str  # the variant's, or "path (campaign id)" for stored results compared
    knobs: dict  # what the variant sets (dotted paths): matched against a campaign's spec


@dataclass(frozen=True)
class StoredComparison:
    """A comparison a store holds (`softnet compare`), with its sides' knobs."""

    store: int
    campaign_id: str
    baseline: ComparisonSide
    candidates: tuple[ComparisonSide, ...]
    summary: ComparisonSummary


@dataclass(frozen=True)
class ComparisonLabel:
    """A stored comparison's verdict on a change, read from before to after."""

    verdict: str  # slower | faster | equivalent | undecided, or NO_COMPARISON
    metric: str | None = None
    estimate: float | None = None  # as the comparison's scale: relative for ratio metrics
    ci: tuple[float, float] | None = None
    source: str | None = None  # "store S campaign C"


@dataclass(frozen=True)
class TrendPoint:
    store: int
    campaign_id: str
    created_unix_s: float
    value: float
    ci: tuple[float, float] | None
    runs: int


@dataclass(frozen=True)
class Segment:
    start: int  # index of its first point
    end: int  # one past its last
    mean: float  # over every run of its campaigns
    stdev: float  # population spread of those runs


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first point of the new segment
    campaign_id: str
    store: int
    created_unix_s: float
    before_mean: float
    after_mean: float
    change_pct: float  # (after - before) / before, in %
    direction: Direction
    comparison: ComparisonLabel


@dataclass(frozen=True)
class FigureTrend:
    figure: str
    title: str
    unit: str
    better: str
    points: list[TrendPoint]
    segments: list[Segment]
    change_points: list[ChangePoint]


@dataclass(frozen=True)
class Series:
    name: str  # the campaigns' name
    label: str  # the configuration's
    knobs: dict
    figures: list[FigureTrend] = field(default_factory=list)
    testbed: str = "local"  # the testbed that measured its campaigns

    @property
    def key(self) -> str:
        return f"{self.name} / {self.label}" + ("" if self.testbed == "local" else f" @ {self.testbed}")

    def to_dict(self) -> dict:
        return {"key": self.key, **asdict(self)}


def _runs_ci(values: list[float]) -> tuple[float, tuple[float, float] | None]:
    m = MeanCI.of(values)
    return m.mean, (None if m.n < 2 else (m.ci_lower, m.ci_upper))


def campaign_figures(store: int, results_dir: str, name: str, created_unix_s: float, config: Configuration,
                     row: DataPathRow, testbed: str = "local") -> CampaignFigures:
    """The figures of one configuration of a campaign: capacity, PDR and NDR
    and CPU per packet from its data-path row (analysis.data_paths.compare),
    with the capacity's runs and the latency p50 from its trials."""
    loads = config.analysis.stats.loads
    best = max(loads, key=lambda s: s.throughput_pps.mean, default=None)
    capacity = None
    if row.capacity_pps is not None and best is not None:
        # the runs the analysis' throughput is the mean of: kept by its policy, rx counted as it counts them
        mode = config.meta.host_stall_loss if isinstance(config.meta, SoftnetMeta) else "set_apart"
        runs = [min(r.rx_pkts, r.tx_pkts) / r.duration_s for r in _runs(config.trials, mode)
                if r.offered_load_pps == best.load_pps and FlagPolicy().exclusion_reason(r) is None]
        capacity = FigureValue(row.capacity_pps, row.capacity_ci, tuple(runs) or (row.capacity_pps,))
    latency = None
    if loads:
        low = min(s.load_pps for s in loads)
        p50 = [t.result.latency_p50_ns for t in config.trials if t.result.valid
               and t.result.intended_rate_pps == low and t.result.latency_p50_ns is not None]
        if p50:
            mean, ci = _runs_ci(p50)
            latency = FigureValue(mean, ci, tuple(p50))

    def single(v: float | None, ci: tuple[float, float] | None = None) -> FigureValue | None:
        return None if v is None else FigureValue(v, ci, (v,))

    spec = config.meta.spec if isinstance(config.meta, SoftnetMeta) else {}
    return CampaignFigures(store, results_dir, config.campaign_id or "", name, config.label, dict(config.knobs),
                           spec, created_unix_s, capacity, single(row.pdr_pps), single(row.ndr_pps), latency,
                           single(row.cpu_ns_per_pkt, row.cpu_ns_ci), testbed)


def search_figures(store: int, results_dir: str, name: str, created_unix_s: float, summaries: Sequence,
                   knobs: dict, spec: dict, testbed: str = "local") -> CampaignFigures | None:
    """The figures of one configuration of a search campaign: its NDR and
    (first) PDR goal, each the mean of its repeats' values with their
    t-interval, the repeats one sample. A goal a repeat did not find ("found"
    is the summary's verdict) gives no figure."""
    found = {}
    for s in summaries:  # analysis.searches.SearchSummary, one per goal of the configuration
        values = [r.value_pps for r in s.repeats if r.value_pps is not None]
        key = "ndr" if s.goal.upper() == "NDR" else "pdr"
        if s.verdict != "found" or not values or key in found:
            continue
        mean, ci = _runs_ci(values)
        found[key] = FigureValue(mean, ci, tuple(values))
    if not found:
        return None
    return CampaignFigures(store, results_dir, summaries[0].campaign_id, name, summaries[0].label, dict(knobs),
                           spec, created_unix_s, pdr=found.get("pdr"), ndr=found.get("ndr"), testbed=testbed)


def _spec_value(spec: dict, dotted: str):
    node = spec
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


_MISSING = object()


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9)
    return str(a) == str(b)


def side_matches(side: ComparisonSide, c: CampaignFigures) -> bool:
    """A comparison's side is this campaign when its name names the campaign
    (stored results compared: "path (id)"), or when it sets knobs and the
    campaign's spec has every one of them."""
    if f"({c.campaign_id})" in side.name or side.name == c.campaign_id:
        return True
    return bool(side.knobs) and all(_same(_spec_value(c.spec, k), v) for k, v in side.knobs.items())


def _flip(d: PairedDifference) -> tuple[str, float | None, tuple[float, float] | None]:
    """The verdict and estimate of B against A read as A against B."""
    verdict = {"slower": "faster", "faster": "slower"}.get(d.verdict, d.verdict)

    def inv(x: float) -> float:
        return 1 / (1 + x) - 1 if d.scale == "ratio" else -x

    ci = None if d.ci is None else (inv(d.ci[1]), inv(d.ci[0]))
    return verdict, None if d.estimate is None else inv(d.estimate), ci


def comparison_label(fig: FigureDef, before: Sequence[CampaignFigures], after: Sequence[CampaignFigures],
                     comparisons: Sequence[StoredComparison]) -> ComparisonLabel:
    """The verdict of the newest stored comparison that relates a campaign
    before the change with one after it (one side matches only before, the
    other only after), on the metric that judges this figure."""
    def only(side: ComparisonSide, these, those) -> bool:
        return any(side_matches(side, c) for c in these) and not any(side_matches(side, c) for c in those)

    for comp in reversed(comparisons):
        for cand in comp.candidates:
            forward = only(comp.baseline, before, after) and only(cand, after, before)
            backward = only(comp.baseline, after, before) and only(cand, before, after)
            if not (forward or backward):
                continue
            diffs = [d for d in comp.summary.differences.get(cand.name, []) if d.kind == fig.compared_as
                     and fig.compared_word in d.metric.lower() and d.n_pairs]
            if not diffs:
                continue
            d = diffs[0]
            verdict, est, ci = (d.verdict, d.estimate, d.ci) if forward else _flip(d)
            return ComparisonLabel(verdict, d.metric, est, ci, f"store {comp.store} campaign {comp.campaign_id}")
    return ComparisonLabel(NO_COMPARISON)


def figure_trend(fig: FigureDef, campaigns: Sequence[CampaignFigures],
                 comparisons: Sequence[StoredComparison] = ()) -> FigureTrend | None:
    """The figure over the campaigns (oldest first) that have it, grouped by
    jumpavg; None when none has it."""
    have = [(c, v) for c in campaigns if (v := c.figure(fig.name)) is not None]
    if not have:
        return None
    points = [TrendPoint(c.store, c.campaign_id, c.created_unix_s, v.value, v.ci, len(v.runs)) for c, v in have]
    groups = jumpavg.classify([list(v.runs) for _, v in have])
    segments, start = [], 0
    for g in groups:
        segments.append(Segment(start, start + len(g), g.stats.avg, g.stats.stdev))
        start += len(g)
    changes = []
    for prev, seg in zip(segments, segments[1:]):
        c = have[seg.start][0]
        pct = 100 * (seg.mean - prev.mean) / prev.mean if prev.mean else math.inf
        worse = seg.mean < prev.mean if fig.better == "higher" else seg.mean > prev.mean
        label = comparison_label(fig, [x for x, _ in have[prev.start:prev.end]],
                                 [x for x, _ in have[seg.start:seg.end]], comparisons)
        changes.append(ChangePoint(seg.start, c.campaign_id, c.store, c.created_unix_s, prev.mean, seg.mean, pct,
                                   "regression" if worse else "progression", label))
    return FigureTrend(fig.name, fig.title, fig.unit, fig.better, points, segments, changes)


def figure_def(name: str) -> FigureDef:
    from softnet.errors import InputError

    for f in FIGURES:
        if f.name == name:
            return f
    raise InputError("--figure", f"unknown figure '{name}': one of {', '.join(FIGURE_NAMES)}")


def trends(campaigns: Sequence[CampaignFigures], comparisons: Sequence[StoredComparison] = (),
           figures: Sequence[str] = FIGURE_NAMES) -> list[Series]:
    """One series per configuration (campaign name and configuration label)
    and testbed (a lab's testbeds are not one machine), its campaigns ordered
    by creation time, each figure's trend."""
    defs = [figure_def(n) for n in figures]
    by_key: dict[tuple[str, str, str], list[CampaignFigures]] = {}
    for c in sorted(campaigns, key=lambda c: (c.created_unix_s, c.store, c.campaign_id)):
        by_key.setdefault((c.name, c.label, c.testbed), []).append(c)
    out = []
    for (name, label, testbed), cs in by_key.items():
        figs = [t for f in defs if (t := figure_trend(f, cs, comparisons)) is not None]
        out.append(Series(name, label, dict(cs[0].knobs), figs, testbed))
    return out


@dataclass(frozen=True)
class Regression:
    series: str
    figure: str
    change: ChangePoint


def regressions_at_newest(series: Sequence[Series]) -> list[Regression]:
    """For a CI gate: series whose latest change point is a regression and
    whose newest point is the newest campaign of all (a series no longer
    measured is not gated)."""
    newest = max((p.created_unix_s for s in series for f in s.figures for p in f.points), default=None)
    out = []
    for s in series:
        for f in s.figures:
            if f.change_points and f.points[-1].created_unix_s == newest \
                    and f.change_points[-1].direction == "regression":
                out.append(Regression(s.key, f.figure, f.change_points[-1]))
    return out
