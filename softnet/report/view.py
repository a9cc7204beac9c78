"""View data for the HTML report: every number formatted, every table a list
of rows of text, ready for the templates (softnet/report/templates), which
only lay it out. No markup here: the templates escape what they show.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from softnet.analysis.campaigns import Configuration, PastramiMeta, SoftnetMeta, host_stall_sentence
from softnet.analysis.cpu_audit import by_context
from softnet.analysis.data_paths import capacity_disagrees, compare, short_label
from softnet.analysis.latency_stats import knob_label
from softnet.analysis.stage_models import pdr_text
from softnet.analysis.stages import EBPF_STAGES, WIFI_STAGES
from softnet.results.readers import ResultsProvenance, StoredProvenance, StoredResult
from softnet.units import format_duration_ns

from .kernel_plots import KernelLevel, Number, StageLevel, ReadModel
from .plots import format_rate, load_unit

DASH = "\u2014"

# ---- plain-language explanations ------------------------------------------

VERDICT_MEANING = {
    "GOOD": "PDR@X% marks saturation: beyond the PDR point extra load turns into loss, not throughput "
            "(TIR < \u03b7 on every step checked). The single PDR number is a fair summary of this curve.",
    "BAD": "Throughput still grows beyond the PDR point (some step has TIR \u2265 \u03b7): loss crossed X before "
           "the SUT was saturated, so PDR@X% understates what it forwards. Read the whole curve, not the PDR.",
    "INCONCLUSIVE": "Mean PLR first exceeds X at the highest tested load, so no step above it can be checked: "
                    "extend the sweep to higher loads.",
    "NO-SATURATION": "Mean PLR never exceeds X: the PDR lies beyond the highest tested load. Extend the sweep.",
}

FLAG_MEANING = {
    "low_load_loss": "Packets were lost at the lowest offered load, where a healthy SUT loses nothing. This is "
                     "usually a warm-up or setup artefact (first runs after a start, neighbour resolution, cold "
                     "caches), not a capacity limit. If that loss exceeds X it alone sets the PDR point, and "
                     "PDR@X% then says nothing about capacity.",
    "loss_inversion": "A higher load lost significantly less than the load before it (its mean PLR is below the "
                      "lower confidence limit of the previous load). Loss should not fall when load rises: this "
                      "points to variability between runs, a change of conditions during the sweep, or too few "
                      "runs.",
    "excluded_runs": "Some runs were left out of the statistics because they did not measure the SUT at the "
                     "intended load (reasons below). The loads shown use the remaining runs; a load with no run "
                     "left is skipped and TIR spans the gap.",
    "rx_clamped": "Some runs report a few more packets received than sent: a counter artefact of the traffic "
                  "generator. They are kept with their loss set to 0, never negative.",
    "single_run": "Some loads have only one included run: no standard deviation or confidence interval can be "
                  "given there.",
}

EXCLUSION_MEANING = {
    "generator_limited": "the generator sent fewer packets than intended load \u00d7 duration: the run applied "
                         "a lower load than its nominal one, so its loss is not the SUT's at that load",
    "sink_limited": "the sink's veth ring overflowed (the SUT interface facing the sink dropped more than 10% of "
                    "the packets lost): part of the loss is the sink's, not the SUT's",
    "generator_overshoot": "the generator sent more packets than intended: the run did not apply its nominal load",
    "counters_inconsistent": "more packets received than sent beyond a counter artefact, or packets outside the "
                             "trial's sequence range: the counters cannot be trusted",
    "placement_not_as_requested": "generator, SUT or sink work did not run on the CPUs the spec asked for (for "
                                  "example the SUT's softirq processing ran on the generator's CPU), so the run "
                                  "measured a different setup",
    "interrupted": "the trial was interrupted (signal or time-out) before it finished",
}
UNKNOWN_REASON = "reason recorded by the trial"
SITES = {"clab": "the CloudLab testbed", "mazinga": "a local server"}


# ---- view models: what the templates lay out --------------------------------

@dataclass(frozen=True)
class SummaryRow:
    anchor: str
    label: str
    verdict: str
    pdr_point: str
    pdr: str
    ndr: str
    saturation: str
    flags: str


@dataclass(frozen=True)
class SummaryView:
    cards: list[tuple[str, int]]
    pdr_header: str
    rows: list[SummaryRow]
    verdicts: list[tuple[str, str]]


@dataclass(frozen=True)
class DataPathView:
    rank: str
    label: str
    verdict: str
    ndr: str
    pdr: str
    capacity: str
    capacity_ci: str
    cpu: str
    cpu_ci: str
    fixed: str
    at_ref: str
    ties: str


@dataclass(frozen=True)
class DataPathsView:
    rows: list[DataPathView]
    ref_load: str
    notes: list[str]


@dataclass(frozen=True)
class TirCell:
    title: str
    violation: bool
    text: str


@dataclass(frozen=True)
class LoadRow:
    """One offered load; an empty one (every run excluded) has no statistics."""

    load: str
    marks: str
    excluded: str
    cls: str
    empty: bool
    runs: int | None = None
    latency: str | None = None
    plr: str | None = None
    delta_ucl: str | None = None
    dr: str | None = None
    throughput: str | None = None
    tir: TirCell | None = None


@dataclass(frozen=True)
class LoadTable:
    conf: str
    unit: str
    rows: list[LoadRow]
    eta: str
    latency: bool


@dataclass(frozen=True)
class FlagView:
    kind: str
    count: int | None
    where: str
    meaning: str
    detail: str
    exclusions: list[tuple[str, int, str]]


@dataclass(frozen=True)
class ProvenanceView:
    """A configuration's provenance: a PASTRAMI file's name fields, or its softnet trials'."""

    kind: str  # "pastrami" | "softnet"
    fields: list[tuple]
    site: str | None = None
    rows: list[tuple[str, str]] = field(default_factory=list)
    changes: list[tuple[str, int]] = field(default_factory=list)
    n_results: int = 0
    spec: str | None = None


@dataclass(frozen=True)
class ConfigurationView:
    anchor: str
    label: str
    verdict: str
    reason: str
    meaning: str
    key: list[tuple[str, str]]
    table: LoadTable
    flags: list[FlagView]
    provenance: ProvenanceView


@dataclass(frozen=True)
class GlossaryView:
    flags: list[tuple[str, str]]
    reasons: list[tuple[str, str]]


@dataclass(frozen=True)
class CampaignView:
    name: str | None
    campaign_id: str
    fields: list[tuple[str, str | None]]
    spec: str


@dataclass(frozen=True)
class SearchVerdictRow:
    label: str
    goal: str
    searches: int
    verdict: str
    value: str
    cv: str


@dataclass(frozen=True)
class SearchRunRow:
    label: str
    goal: str
    run: int
    status: str
    lower: str  # RFC 9971's relevant lower bound (softnet's posterior confidence beside it)
    upper: str
    throughput: str  # RFC 9971's conditional throughput
    loss: str
    trials: str
    diagnosis: str


@dataclass(frozen=True)
class SearchLatencyRow:
    label: str
    goal: str
    fraction: str
    load: str
    of: str
    latency: list[str]  # p50, p90, p99, p99.9
    loss: str
    valid: str
    note: str


@dataclass(frozen=True)
class SearchesView:
    verdicts: list[SearchVerdictRow]
    runs: list[SearchRunRow]
    latency: list[SearchLatencyRow]
    definitions: list[str] = field(default_factory=list)  # the goals' RFC 9971 attributes, engine, loss counted
    figures: list[dict] = field(default_factory=list)  # html._Figures.searches


class AuditRow(ReadModel):
    """One (load, CPU) row of ``cpu_audit.summarize_audit``."""

    load_pps: Number
    cpu: int
    runs: int
    measured_busy_pct: Number | None
    reported_busy_pct: Number | None
    gap_min: Number | None
    gap_max: Number | None
    measured_softirq_pct: Number | None
    reported_softirq_pct: Number | None
    net_rx_pct_by_context: dict[str, Number] | None = None
    napi_work_per_poll: Number | None


class StageFit(ReadModel):
    ns_per_packet: Number
    intercept_pct: Number
    r2: Number


class CostModels(ReadModel):
    """``stage_models.cost_models``: empty when no trial was profiled."""

    stages: dict[str, StageFit] = {}
    sut_busy: StageFit | None = None
    measured_pdr: dict | None = None  # as stage_models.pdr_text reads it
    predicted_capacity_pps: Number | None = None
    predicted_over_pdr: Number | None = None
    loads_used_pps: list[Number] = []
    sut_cpus: list[int] = []
    max_forwarded_pps: Number | None = None


def audit_rows_read(rows) -> list[AuditRow]:
    return [AuditRow.model_validate(r) for r in rows]


# ---- number formatting -----------------------------------------------------

def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def pct(ratio, digits: int = 3) -> str:
    if not _finite(ratio):
        return DASH
    return "0" if ratio == 0 else f"{ratio * 100:.{digits}g}"


def plus_minus(mean: str, half: str | None) -> str:
    return mean if half in (None, DASH) else f"{mean} \u00b1 {half}"


def rate_pair(pps) -> str:
    """'450 kpps (450000 pps)' for the key numbers."""
    if not _finite(pps):
        return DASH
    exact = f"{int(pps)} pps" if float(pps).is_integer() else f"{pps:.1f} pps"
    nice = format_rate(pps)
    return nice if nice == exact else f"{nice} ({exact})"


def opt(v, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def utc(unix_s) -> str:
    if not _finite(unix_s):
        return DASH
    return _dt.datetime.fromtimestamp(unix_s, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_knob(v) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return DASH if v is None else str(v)


def _ci_half(m) -> float | None:
    return (m.ci_upper - m.mean) if _finite(m.ci_upper) and _finite(m.mean) else None


def sweep_label(name: str, cell_id: int, knobs: dict) -> str:
    """'profiled-demo cell 0 (irq=rps)': a sweep cell in the kernel sections."""
    text = ", ".join(f"{k}={fmt_knob(v)}" for k, v in knobs.items())
    return f"{name} cell {cell_id}" + (f" ({text})" if text else "")


# ---- summary and configurations -------------------------------------------------

def summary(configs: Sequence[Configuration]) -> SummaryView:
    verdicts = Counter(c.analysis.report.verdict.value for c in configs)
    n_loads = sum(len(c.analysis.stats.loads) + len(c.analysis.stats.empty_loads_pps) for c in configs)
    n_incl = sum(s.n_runs for c in configs for s in c.analysis.stats.loads)
    n_excl = sum(len(c.analysis.stats.excluded) for c in configs)
    cards = [("configurations", len(configs)), ("loads tested", n_loads), ("runs", n_incl + n_excl),
             ("runs excluded", n_excl)]
    cards += [(f"verdict {v}", verdicts.get(v, 0)) for v in VERDICT_MEANING if verdicts.get(v)]
    xs = sorted({c.analysis.report.pdr_loss_ratio for c in configs})
    rows = [SummaryRow(f"cfg-{i}", c.label, c.analysis.report.verdict.value,
                       format_rate(c.analysis.report.pdr_point_load_pps), format_rate(c.analysis.report.pdr_load_pps),
                       format_rate(c.analysis.report.ndr_load_pps), format_rate(c.analysis.report.saturation_load_pps),
                       ", ".join(f.kind for f in c.analysis.report.flags)) for i, c in enumerate(configs)]
    return SummaryView(cards, "/".join(f"{v * 100:g}%" for v in xs), rows, list(VERDICT_MEANING.items()))


def data_paths(configs: Sequence[Configuration], cell_trials: dict) -> DataPathsView | None:
    """The data paths of a sweep over the SUT personality, ranked
    (analysis.data_paths), as table rows; None when no such sweep."""
    sweeps = [c for c in configs if c.source == "softnet" and "testbed.sut" in c.knobs]
    if len(sweeps) < 2:
        return None
    full = {c.label: cell_trials.get((c.campaign_id, c.cell_id), []) for c in sweeps}
    rows = compare(sweeps, full)

    def ns(v):
        return DASH if v is None else f"{v:,.0f}"

    out = [DataPathView(
        rank=f"{r.rank}" + ("=" if r.tied_with else ""), label=short_label(r.label), verdict=r.verdict,
        ndr=format_rate(r.ndr_pps),
        pdr=DASH if r.pdr_pps is None else
        f"[{format_rate(r.pdr_pps)}, {'max' if r.pdr_next_pps is None else format_rate(r.pdr_next_pps)})",
        capacity=format_rate(r.capacity_pps),
        capacity_ci=DASH if r.capacity_ci is None else
        f"{format_rate(r.capacity_ci[0])} \u2013 {format_rate(r.capacity_ci[1])}",
        cpu=ns(r.cpu_ns_per_pkt),
        cpu_ci=DASH if r.cpu_ns_ci is None else f"{ns(r.cpu_ns_ci[0])} \u2013 {ns(r.cpu_ns_ci[1])}",
        fixed=DASH if r.cpu_fixed_pct is None else f"{r.cpu_fixed_pct:.1f}",
        at_ref=ns(r.cpu_ns_at_ref), ties=", ".join(short_label(t) for t in r.tied_with)) for r in rows]
    ref = next((r.ref_load_pps for r in rows if r.ref_load_pps), None)
    notes = [f"{short_label(lo)} carries more than {short_label(hi)} at overload (capacity CI95 apart) though its "
             "PDR ranks lower." for lo, hi in capacity_disagrees(rows)]
    return DataPathsView(out, format_rate(ref), notes)


def _marks(load: float, r) -> list[str]:
    marks = []
    if load == r.ndr_load_pps:
        marks.append("NDR")
    if load == r.pdr_load_pps:
        marks.append(f"PDR@{r.pdr_loss_ratio * 100:g}%")
    if load == r.pdr_point_load_pps:
        marks.append("PDR point")
    if load == r.saturation_load_pps:
        marks.append("saturation")
    return marks


def _tir_cell(step, load: float, checked: set, violations: set) -> TirCell | None:
    if step is None:
        return None
    title = (f"{format_rate(step.from_load_pps)} \u2192 {format_rate(step.to_load_pps)}"
             + ("; checked for the verdict" if load in checked else ""))
    viol = load in violations
    value = f"{step.tir + 0.0:.3f}" if abs(step.tir) >= 5e-4 else "0.000"
    return TirCell(title, viol, value + (" \u2265 \u03b7" if viol else ""))


def us(ns) -> str:
    return DASH if not _finite(ns) else f"{ns / 1e3:.3g}"


def latency_cell(trials: Sequence[StoredResult]) -> str:
    """Median over a load's valid runs of their one-way latency p50 / p99 (\u00b5s):
    schema 3 trials (HDR histogram, within 0.4%); older ones only had the log2
    upper bound of the p99, shown as such."""
    runs = [t for t in trials if t.valid]
    new = [t for t in runs if _finite(t.latency_p99_ns)]
    if new:
        return (us(statistics.median(t.latency_p50_ns for t in new)) + " / "
                + us(statistics.median(t.latency_p99_ns for t in new)))
    old = [t.latency_p99_upper_ns for t in runs if _finite(t.latency_p99_upper_ns)]
    return f"p99 \u2264 {us(statistics.median(old))}" if old else DASH


def load_table(config: Configuration) -> LoadTable:
    """The per-load table of one configuration (PASTRAMI statistics, TIR, marks)."""
    a = config.analysis
    r = a.report
    div, unit = load_unit(max((s.load_pps for s in a.stats.loads), default=1.0))
    steps = {s.from_load_pps: s for s in a.stats.tir_steps}
    checked = {s.from_load_pps for s in r.steps_checked}
    violations = {s.from_load_pps for s in r.violations}
    excluded: dict[float, Counter] = {}
    for x in a.stats.excluded:
        excluded.setdefault(x.load_pps, Counter())[x.reason] += 1
    rows = []
    loads = [(s.load_pps, s) for s in a.stats.loads] + [(x, None) for x in a.stats.empty_loads_pps]
    for load, s in sorted(loads, key=lambda t: t[0]):
        ex = excluded.get(load, Counter())
        row = dict(load=format_rate(load), marks=", ".join(_marks(load, r)),
                   excluded=(f"{sum(ex.values())} (" + ", ".join(f"{k} \u00d7{n}" for k, n in sorted(ex.items()))
                             + ")" if ex else "0"),
                   cls="pdrpoint" if load == r.pdr_point_load_pps else "pdr" if load == r.pdr_load_pps else "")
        if s is None:
            rows.append(LoadRow(**row, empty=True))
            continue
        plr_half, dr_half, t_half = _ci_half(s.plr_ratio), _ci_half(s.dr_ratio), _ci_half(s.throughput_pps)
        rows.append(LoadRow(**row, empty=False, runs=s.n_runs,
                            latency=latency_cell([t.result for t in config.trials
                                                  if t.result.intended_rate_pps == load]),
                            plr=plus_minus(pct(s.plr_ratio.mean), pct(plr_half) if plr_half is not None else None),
                            delta_ucl=pct(s.plr_delta_ucl) + ("%" if _finite(s.plr_delta_ucl) else ""),
                            dr=plus_minus(pct(s.dr_ratio.mean, 6), pct(dr_half) if dr_half is not None else None),
                            throughput=plus_minus(f"{s.throughput_pps.mean / div:.4g}",
                                                  f"{t_half / div:.2g}" if t_half is not None else None),
                            tir=_tir_cell(steps.get(load), load, checked, violations)))
    return LoadTable(f"{a.stats.confidence * 100:g}", unit, rows, f"{r.eta:g}", config.source == "softnet")


def flags(config: Configuration) -> list[FlagView]:
    excluded = Counter(x.reason for x in config.analysis.stats.excluded)
    out = []
    for f in config.analysis.report.flags:
        out.append(FlagView(f.kind, f.count if f.count != 1 else None, ", ".join(format_rate(x) for x in f.loads_pps),
                            FLAG_MEANING.get(f.kind, "See softnet/analysis/README.md."), f.message,
                            [(k, n, EXCLUSION_MEANING.get(k, UNKNOWN_REASON)) for k, n in sorted(excluded.items())]
                            if f.kind == "excluded_runs" else []))
    return out


def _counted(c: Counter) -> str:
    return "; ".join(f"{v} ({n} trials)" if len(c) > 1 else str(v) for v, n in c.most_common())


def _present(values) -> Counter:
    return Counter(v for v in values if v is not None)


def config_provenance(config: Configuration, prov: ResultsProvenance | None) -> ProvenanceView:
    if config.source == "pastrami":
        items = [("file", config.meta.path if isinstance(config.meta, PastramiMeta) else config.label)]
        items += [(k, fmt_knob(v)) for k, v in config.knobs.items()]
        site = config.meta.name.site if isinstance(config.meta, PastramiMeta) else None
        return ProvenanceView("pastrami", items, site=SITES.get(site))
    m = config.meta if isinstance(config.meta, SoftnetMeta) else None
    items = [("campaign", config.campaign_id), ("cell", config.cell_id),
             ("probed max. generator rate", rate_pair(m.probe_max_rate_pps if m else None))]
    items += [(f"knob {k}", fmt_knob(v)) for k, v in config.knobs.items()]
    results = [t.result for t in config.trials]
    provs = [r.provenance or StoredProvenance() for r in results]
    p_list = prov.trial_provenance.get((config.campaign_id, config.cell_id), []) if prov else []
    cols = [("kernel", _present(p.kernel for p in provs)), ("cpu_model", _present(p.cpu_model for p in provs)),
            ("softnet_version", _present(p.softnet_version for p in provs)),
            ("spec_hash", _present(p.spec_hash for p in provs)), ("sut", _present(r.sut for r in results)),
            ("hostname", Counter(p.hostname for p in p_list if p.hostname))]
    rows = [(k, _counted(c)) for k, c in cols if c]
    trial_flags = Counter(f for r in results for f in r.flags)
    n_invalid = sum(1 for r in results if not r.valid)
    rows.append(("trials", f"{len(results)} ({n_invalid} flagged invalid)"))
    if trial_flags:
        rows.append(("trial flags", ", ".join(f"{k} \u00d7{n}" for k, n in trial_flags.most_common())))
    changes = Counter(ch for p in p_list for ch in dict.fromkeys(p.host_changes_applied))
    spec = m.spec if m else None
    return ProvenanceView("softnet", items, rows=rows, changes=list(changes.items()), n_results=len(p_list),
                          spec=json.dumps(spec, indent=2, sort_keys=True, default=str) if spec else None)


def configuration(i: int, config: Configuration, prov: ResultsProvenance | None) -> ConfigurationView:
    r = config.analysis.report
    x = f"{r.pdr_loss_ratio * 100:g}%"
    key = [("verdict", r.verdict.value), ("PDR point (first load with mean PLR > X)", rate_pair(r.pdr_point_load_pps)),
           (f"PDR@{x}", rate_pair(r.pdr_load_pps)), ("NDR (sweep estimate)", rate_pair(r.ndr_load_pps)),
           ("saturation load", rate_pair(r.saturation_load_pps)),
           ("parameters", f"X = {x}, \u03b7 = {r.eta:g}, confidence = {config.analysis.stats.confidence:g}")]
    stalls = host_stall_sentence(config.meta, format_rate)
    if stalls:
        key.append(("host stalls (" + config.meta.host_stall_loss.replace("_", " ") + ")", stalls))
    return ConfigurationView(f"cfg-{i}", config.label, r.verdict.value, r.reason,
                             VERDICT_MEANING.get(r.verdict.value, ""), key, load_table(config), flags(config),
                             config_provenance(config, prov))


def glossary(configs: Sequence[Configuration]) -> GlossaryView | None:
    kinds = sorted({f.kind for c in configs for f in c.analysis.report.flags})
    if not kinds:
        return None
    reasons = sorted({x.reason for c in configs for x in c.analysis.stats.excluded})
    return GlossaryView([(k, FLAG_MEANING.get(k, "")) for k in kinds],
                        [(k, EXCLUSION_MEANING.get(k, UNKNOWN_REASON)) for k in reasons])


def campaigns(prov: ResultsProvenance | None) -> list[CampaignView]:
    if not prov:
        return []
    return [CampaignView(c.name, c.campaign_id, [("created", utc(c.created_unix_s)), ("spec hash", c.spec_hash)],
                         json.dumps(c.spec, indent=2, sort_keys=True) if c.spec is not None or not c.spec_text
                         else c.spec_text) for c in prov.campaigns]


# ---- searches, kernel statistics, audit, stages ------------------------------------

def searches(summaries: Sequence) -> SearchesView:
    """The verdict per goal over repeats, and one row per search and goal."""
    verdicts = [SearchVerdictRow(s.label, s.goal, len(s.repeats), s.verdict, rate_pair(s.value_pps),
                                 "-" if s.cv is None else f"{s.cv:.2%}") for s in summaries]
    runs = []
    for s in summaries:
        for r in s.repeats:
            ci = "-" if r.lower_loss_ratio is None else (
                f"{r.lower_loss_ratio:.2e} [{r.lower_loss_ci95_low:.1e}, {r.lower_loss_ci95_high:.1e}]")
            conf = [("" if c is None else f" ({c:.3f})") for c in (r.lower_confidence, r.upper_confidence)]
            lo, up = (r.relevant_lower_bound_pps, r.relevant_upper_bound_pps) if r.engine else (
                r.lower_bound_pps, r.upper_bound_pps)
            runs.append(SearchRunRow(s.label, s.goal, r.run_index, r.status, rate_pair(lo) + conf[0],
                                     rate_pair(up) + conf[1], rate_pair(r.conditional_throughput_pps), ci,
                                     f"{r.trial_count} ({r.trial_seconds:.1f} s)", r.diagnosis))
    definitions = []
    for s in summaries:
        d = s.definition()
        if d:
            definitions.append(f"{s.label} {s.goal}: engine {d['engine']}, goal loss ratio {d['goal_loss_ratio']:g}, "
                               f"exceed ratio {d['goal_exceed_ratio']:g}, final trial duration "
                               f"{d['goal_final_trial_duration_s']:g} s, duration sum {d['goal_duration_sum_s']:g} s, "
                               f"loss counted: {d['loss_counted']}"
                               + (f"; counting all loss, the same trials give {rate_pair(s.all_loss_throughput_pps)}"
                                  if s.all_loss_throughput_pps else ""))
    return SearchesView(verdicts, runs, search_latency(summaries), definitions=definitions)


def search_latency(summaries: Sequence) -> list[SearchLatencyRow]:
    """Latency under load at fractions of a goal's lower bound: per percentile
    the median over valid repeats and its min-max (\u00b5s); none is shown as such."""
    rows = []
    for x in (x for s in summaries for x in s.latency):
        cells = []
        for k in ("latency_p50_ns", "latency_p90_ns", "latency_p99_ns", "latency_p99_9_ns"):
            st = x.latency[k]
            spread = "" if st is None or st.min == st.max else f" ({us(st.min)}\u2013{us(st.max)})"
            cells.append(DASH if st is None else us(st.median) + spread)
        loss = DASH if x.loss_ratio_median is None else f"{x.loss_ratio_median:.2e} (max {x.loss_ratio_max:.2e})"
        flags = ", ".join(f"{f} \u00d7{n}" for f, n in x.flags.items())
        rows.append(SearchLatencyRow(x.label, x.goal, f"{x.fraction:.0%}", rate_pair(x.load_pps), rate_pair(x.of_pps),
                                     cells, loss, f"{x.valid}/{x.repeats}", "; ".join(t for t in (x.note, flags) if t)))
    return rows


def search_plots(summaries: Sequence) -> dict[tuple, tuple[str, list]]:
    """(campaign, cell, run) -> (label, [(goal, loss ratio, lower pps, upper pps)]): one trace per search."""
    out: dict = {}
    for s in summaries:
        for r in s.repeats:
            out.setdefault((s.campaign_id, s.cell_id, r.run_index), (s.label, []))[1].append(
                (s.goal, s.loss_ratio, r.lower_bound_pps, r.upper_bound_pps))
    return out


def kernel_table(kernel: Sequence[tuple[str, list[KernelLevel]]]) -> dict:
    """The WiFi-AP study's Tables I-IV per configuration and load level:
    normalized utilization and cycles (or CPU time), power (mW) and cache
    misses per Mbps where the host counts them, context switches; then each
    configuration's change against the first, level by level (Table III's
    dual vs single core, one direction vs the other)."""
    rows = []

    def row(label: str, metric: str, values: list, levels: list[KernelLevel], fmt: str = ".4f") -> None:
        if any(v is not None for v in values):
            rows.append({"label": label, "metric": metric, "cells": [
                ("-" if v is None else format(v, fmt), f"{lv.throughput_mbps or 0:,.0f} Mbps")
                for v, lv in zip(values, levels)]})

    def cost(levels: list[KernelLevel]) -> tuple[str, list]:
        basis = levels[0].cost_basis or "cycles"
        return ("cycles, % per Mbps" if basis == "cycles" else "CPU time, % per Mbps (no cycle counter)",
                [lv.normalized.cycles_per_mbps for lv in levels])

    for label, levels in kernel:
        row(label, "utilization, % per Mbps", [lv.normalized.utilization_per_mbps for lv in levels], levels)
        row(label, *cost(levels), levels)
        row(label, "power, mW per Mbps", [lv.normalized.power_mw_per_mbps for lv in levels], levels, ".3f")
        row(label, "power above idle, mW per Mbps", [lv.normalized.traffic_power_mw_per_mbps for lv in levels],
            levels, ".3f")
        row(label, "cache misses per Mbps", [lv.normalized.cache_misses_per_mbps for lv in levels], levels, ",.1f")
        row(label, "context switches/s, SUT CPUs", [context_switches(lv) for lv in levels], levels, ",.0f")
        for key in sorted({k for lv in levels for k in lv.nic_losses_per_s}):
            row(label, f"ethtool {key}/s", [lv.nic_losses_per_s.get(key, 0.0) for lv in levels], levels, ",.0f")
    if len(kernel) > 1:
        base_label, base = kernel[0]
        for label, levels in kernel[1:]:
            for metric, of in ((cost(levels)[0].split(",")[0], lambda lv: lv.normalized.cycles_per_mbps),
                               ("power", lambda lv: lv.normalized.power_mw_per_mbps)):
                row(label, f"% {metric} vs {base_label}",
                    [change_pct(of(lv), of(b)) for lv, b in zip(levels, base)], levels, "+.2f")
    return {"levels": max(len(levels) for _, levels in kernel), "rows": rows}


def context_switches(level: KernelLevel) -> float | None:
    got = [level.per_cpu.get(c, level.per_cpu.get(str(c), {})).get("context_switches_per_s")
           for c in level.sut_cpus]
    return sum(got) if got and all(v is not None for v in got) else None


def change_pct(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else 100 * (value - base) / base


def kernel_caption(levels: list[KernelLevel]) -> dict:
    # per_cpu: the rates averaged by name (kernel_stats); the RX softirq's packets among them
    ppsirq = ", ".join(
        f"{lv.throughput_mbps:,.0f} Mbps: " + "/".join(
            "-" if (n := c.get("pkts_per_rx_softirq")) is None else f"{n:.1f}"
            for _, c in sorted(lv.per_cpu.items())) for lv in levels)
    return {"sut": levels[0].sut_cpus, "dev_weight": levels[0].dev_weight, "pkts_per_softirq": ppsirq}


def audit_rows(audits: Sequence[tuple[str, list[AuditRow]]]) -> list[dict]:
    return [{"label": label, "load": rate_pair(r.load_pps), "cpu": r.cpu, "runs": r.runs,
             "busy_ebpf": opt(r.measured_busy_pct), "busy_ticks": opt(r.reported_busy_pct),
             "gap": f"{opt(r.gap_min, '{:+.1f}')} .. {opt(r.gap_max, '{:+.1f}')}",
             "softirq_ebpf": opt(r.measured_softirq_pct), "softirq_ticks": opt(r.reported_softirq_pct),
             "by_context": by_context(r.net_rx_pct_by_context or {}), "per_poll": opt(r.napi_work_per_poll)}
            for label, rows in audits for r in rows]


def victim_rows(victims: Sequence[tuple[str, list]]) -> list[dict]:
    """The eBPF profile study's cross-check per configuration and load."""
    def mean(m, fmt: str = ".1f") -> str:
        return "-" if m.mean != m.mean else format(m.mean, fmt)

    return [{"label": label, "load": rate_pair(v.load_pps), "victim": f"{v.kind} on CPU {v.cpu}",
             "runs": f"{v.runs} ({v.spoilt_runs} left out)" if v.spoilt_runs else str(v.runs),
             "lost": mean(v.stolen_victim_pct), "ebpf": mean(v.stolen_ebpf_pct), "gap": mean(v.gap_pct, "+.1f"),
             "ci": "-" if v.gap_pct.ci_lower != v.gap_pct.ci_lower
             else f"[{v.gap_pct.ci_lower:+.1f}, {v.gap_pct.ci_upper:+.1f}]",
             "per_irq": mean(v.gap_us_per_interrupt)} for label, rows in victims for v in rows]


def stage_timings() -> list[tuple[str, str, str]]:
    return [(s, ex, why) for s, (ex, why) in WIFI_STAGES.items()]


def stages(label: str, levels: list[StageLevel], models: CostModels) -> dict:
    """Caption figures and the cost-vs-load fit table of one configuration."""
    cov = ", ".join(f"{format_rate(lv.load_pps)}: "
                    f"{'-' if lv.coverage_min is None else format(100 * lv.coverage_min, '.1f') + '%'}"
                    for lv in levels)
    busy = ", ".join(f"{format_rate(lv.load_pps)}: {lv.sut_busy_pct:.1f}% / "
                     + ("-" if lv.sut_nohz_cpu_time_pct is None else f"{lv.sut_nohz_cpu_time_pct:.1f}%")
                     for lv in levels)
    ebpf = None
    if any(lv.ebpf_ns_per_packet for lv in levels):
        ebpf = {"loads": [format_rate(lv.load_pps) for lv in levels],
                "rows": [(st, ex, ["n/a" if ex == "unavailable" else f"{lv.ebpf_ns_per_packet.get(st) or 0:,.0f}"
                                   for lv in levels]) for st, (ex, _) in EBPF_STAGES.items()],
                "unavailable": "; ".join(f"{st}: {why}" for st, (ex, why) in EBPF_STAGES.items()
                                         if ex == "unavailable"),
                "transport": EBPF_STAGES["IP to transport"][1]}
    if not models.stages:
        return {"coverage": cov, "busy": busy, "duty": f"{100 * (levels[0].duty or 1):.0f}", "fit": None,
                "ebpf": ebpf}
    rows = list(models.stages.items()) + ([("SUT CPUs busy (eBPF)", models.sut_busy)] if models.sut_busy else [])
    pdr, pred, ratio = models.measured_pdr, models.predicted_capacity_pps, models.predicted_over_pdr
    fit = {
        "loads": ", ".join(format_rate(x) for x in models.loads_used_pps),
        "rows": [(s, f"{m.ns_per_packet:,.0f}", f"{m.intercept_pct:.2f}", f"{m.r2:.3f}") for s, m in rows],
        "sut_cpus": models.sut_cpus, "predicted": "-" if pred is None else format_rate(pred),
        "pdr_name": f"PDR{100 * pdr['loss_ratio']:g}%", "pdr": pdr_text(pdr, format_rate),
        "ratio": f" (predicted / PDR lower bound: {ratio:.2f})" if ratio else "",
        "max_forwarded": format_rate(models.max_forwarded_pps)}
    return {"coverage": cov, "busy": busy, "duty": f"{100 * (levels[0].duty or 1):.0f}", "fit": fit, "ebpf": ebpf}


def latency(name: str, analysis) -> dict:
    """One latency campaign (analysis.latency_campaigns.LatencyAnalysis) as rows."""
    cl = analysis.clustering
    us = format_duration_ns
    rows = []
    for i, c in enumerate(analysis.configs):
        a, p99 = c.averaged, c.percentiles["p99"]
        ci = "" if p99.ci_low_ns != p99.ci_low_ns else f" [{us(p99.ci_low_ns)}, {us(p99.ci_high_ns)}]"
        rows.append({"index": i, "label": c.label,
                     "cluster": "-" if cl is None or cl.labels[i] < 0 else int(cl.labels[i]),
                     "stats": [us(a[k]) if a[k] == a[k] else "-" for k in
                               ("mean_ns", "median_ns", "std_ns", "q1_ns", "q3_ns", "min_ns", "max_ns")],
                     "p99": us(p99.value_ns) + ci if p99.value_ns == p99.value_ns else "-",
                     "accounting": "{sent} sent, {received} back, {lost} lost, {impossible} impossible".format(
                         **c.accounting),
                     "flags": [f"{f}: {why}" for f, why in c.reasons.items()]})
    clusters = [] if cl is None else [
        {"index": k.index, "n": len(k.members), "mean": us(k.mean_ns),
         "std": "-" if k.std_ns != k.std_ns else us(k.std_ns),
         "always": ", ".join(knob_label({n: v}) for n, v in k.always_present.items()) or "-"} for k in cl.clusters]
    return {"name": name, "rows": rows, "clusters": clusters,
            "k": None if cl is None else f"k = {cl.k} ({cl.chosen_by})",
            "why_not_clustered": analysis.why_not_clustered, "note": analysis.note,
            "rules": list(analysis.rules.rules) if analysis.rules else [],
            "findings": [{"verdict": f.verdict, "claim": f.claim, "detail": f.detail} for f in analysis.findings],
            "reruns": [{"config": r["config"], "phase": r["phase"], "every": us(r["interval_s"] * 1e9),
                        "back": f"{r['received']}/{r['sent']}",
                        "median": "-" if r["median_ns"] is None else us(r["median_ns"]),
                        "base": "-" if r["base_median_ns"] is None else us(r["base_median_ns"]),
                        "p99": "-" if r["p99_ns"] is None else us(r["p99_ns"]), "flags": ", ".join(r["flags"]) or "-"}
                       for r in analysis.reruns]}


def latency_stability(pairs: Sequence[dict]) -> list[str]:
    """One sentence per pair of latency campaigns compared."""
    out = []
    for p in pairs:
        if p["ari"] is None:
            out.append(f"{p['a']} and {p['b']}: {p['verdict']} ({p['why']})")
        else:
            out.append(f"{p['a']} and {p['b']}: adjusted Rand index {p['ari']:.2f} over {p['common']} "
                       f"configurations: {p['verdict']}" + ("" if p["verdict"] == "stable" else
                                                             " (below 0.8: these clusters are not a finding)"))
    return out


# ---- paired comparisons ----------------------------------------------------------

COMPARE_ENDED = {"decided": "stopped when every metric it decides on had a verdict",
                 "budget_spent": "stopped when its budget was spent, before every metric it decides on had a verdict",
                 "unfinished": "unfinished (interrupted; softnet run SPEC resumes it): what its complete rounds say "
                               "so far"}


def _compare_value(v, d) -> str:
    """A side's mean in the metric's own unit."""
    if not _finite(v):
        return DASH
    if d.scale == "difference":
        return f"{pct(v)}%"
    if d.unit == "pps":
        return format_rate(v)
    if d.unit == "ns":
        return format_duration_ns(v)
    return f"{v:,.4g} {d.unit}"


def _compare_change(v, d) -> str:
    """A relative change in %, a loss difference in percentage points (the figure's scales)."""
    if not _finite(v):
        return DASH
    x = 100 * v
    return ("0" if x == 0 else f"{x:+.3g}") + ("%" if d.scale == "ratio" else " pp")


FUNCTION_ROWS = 12


def function_tables(summary, short: dict[str, str]) -> list[dict]:
    """Per candidate and load, the kernel functions whose inclusive time per
    packet changed most (results.comparison.FunctionChanges)."""
    out = []
    for cand, per_load in summary.functions.items():
        for fc in per_load:
            b = fc.busy
            each = 1 - (1 - fc.family_confidence) / max(1, 2 * fc.tested)

            def interval(d) -> str:
                return DASH if d.ci is None else f"[{d.ci[0]:+.1f}, {d.ci[1]:+.1f}]"

            rows = [{"function": c.function, "a": f"{c.self.baseline_mean:.1f}", "b": f"{c.self.candidate_mean:.1f}",
                     "change": f"{c.self.estimate:+.1f}", "interval": interval(c.self),
                     "incl_a": f"{c.incl.baseline_mean:.1f}", "incl_b": f"{c.incl.candidate_mean:.1f}",
                     "incl_change": f"{c.incl.estimate:+.1f}", "incl_interval": interval(c.incl),
                     "share": DASH if (s := fc.share_of_busy(c.incl)) is None else f"{100 * s:.0f}%",
                     "significant": c.significant}
                    for c in fc.functions[:FUNCTION_ROWS] if c.self.estimate is not None]
            out.append({"title": f"{short[cand]} = {cand} at {format_rate(fc.load_pps)}",
                        "busy": f"{b.baseline_mean:.0f} \u2192 {b.candidate_mean:.0f} ns per packet, change "
                                f"{b.estimate:+.0f} ns" + ("" if b.ci is None else
                                                          f" [{b.ci[0]:+.0f}, {b.ci[1]:+.0f}]"),
                        "tested": fc.tested, "min_share": f"{100 * fc.min_share:g}%", "each": f"{100 * each:.4g}%",
                        "family": f"{100 * fc.family_confidence:g}%", "rows": rows,
                        "candidate": cand, "load_pps": fc.load_pps})
    return out


def comparison(name: str, summary) -> dict:
    """A paired comparison (results.comparison.ComparisonSummary) as rows;
    candidates are B1, B2, ... in the table when there are several."""
    many = len(summary.candidates) > 1
    short = {c: f"B{i + 1}" if many else "B" for i, c in enumerate(summary.candidates)}
    diffs = summary.all_differences()
    confs = {d.confidence for _, d in diffs}
    rows = [{"candidate": short[c], "metric": d.metric, "better": d.better, "a": _compare_value(d.baseline_mean, d),
             "b": _compare_value(d.candidate_mean, d), "change": _compare_change(d.estimate, d),
             "interval": DASH if d.ci is None else
             f"[{_compare_change(d.ci[0], d)}, {_compare_change(d.ci[1], d)}]",
             "confidence": f"{d.confidence * 100:.4g}%", "margin": "\u00b1" + _compare_change(d.margin, d).lstrip("+"),
             "verdict": d.verdict, "n": f"{d.n_pairs} of {d.n_pairs + d.dropped_pairs}" if d.dropped_pairs
             else f"{d.n_pairs}", "p": DASH if d.p_value is None else f"{d.p_value:.2g}"} for c, d in diffs]
    how = (f"paired over {summary.rounds} rounds ({summary.pairing_words()}): Hodges\u2013Lehmann estimate and "
           "signed-rank interval" if summary.paired else
           "unpaired (measured apart, so the host's drift between the runs is in the difference): Welch's t")
    variants = [("A (baseline)", summary.baseline)] + [(short[c], c) for c in summary.candidates]
    if summary.overlapped:  # kept in the pairs, but the sides were no longer apart in time
        how += "; " + ", ".join(f"{n}: {k} trial(s) sent bursts into their partners' slots" for n, k in
                                summary.overlapped.items()) + \
            " (the generator fell behind: a lower overload keeps each to its own)"
    return {"name": name, "how": how, "ended": COMPARE_ENDED.get(summary.stop_reason, ""), "rows": rows,
            "functions": function_tables(summary, short), "many": many, "confidence": f"{confs.pop() * 100:.4g}%" if len(confs) == 1 else None,
            "variants": [(k, v + (f" (sets {summary.labels[v]})" if summary.labels.get(v) not in (None, "", v) else ""))
                         for k, v in variants]}


def soak(name: str, summary) -> dict:
    """A soak's figures as the report's table shows them (results.soak.SoakSummary)."""
    e = summary.estimate

    def pps(v: float | None) -> str:
        return DASH if v is None else f"{v:,.0f} pps"

    def figure(v: float | None) -> str:
        return DASH if v is None else f"{v:,.4g}"
    return {
        "name": name, "finished": summary.finished, "trials": summary.trials,
        "elapsed": f"{summary.elapsed_s:,.0f} s", "trial_seconds": f"{summary.trial_seconds:,.0f} s",
        "target": f"{e.target_loss_ratio:g}" if e else DASH, "estimate": pps(e.median_pps if e else None),
        "interval": f"[{pps(e.lower_pps)}, {pps(e.upper_pps)}]" if e else DASH,
        "confidence": f"{e.confidence:.0%}" if e else DASH,
        "csit": f"{pps(e.mean_pps)} \u00b1 {pps(e.stdev_pps)}" if e else DASH,
        "flags": summary.flags,
        "drift": [{"series": f.series, "samples": f.samples, "first": figure(f.first), "last": figure(f.last),
                   "slope": figure(f.slope_per_h),
                   "ci": f"[{figure(f.slope_ci_per_h[0])}, {figure(f.slope_ci_per_h[1])}]" if f.slope_ci_per_h
                   else DASH,
                   "change": DASH if f.change_at_s is None else f"{figure(f.change_by)} at {f.change_at_s:.0f} s",
                   "flag": f.flag or "", "reason": f.reason} for f in summary.drift]}
