"""One self-contained HTML report of a load-loss analysis.

``write_report(path)`` analyses a softnet results directory, a PASTRAMI file
or a folder of them (``softnet.analysis.campaigns.analyze_path``), reads what
else the results directory holds through ``softnet.results.readers``, and
writes one HTML file: CSS inline, figures embedded as PNG data URIs, no
external asset. ``render_report(configs, ...)`` builds the same HTML string
from configurations already analysed.

The page is Jinja2 templates (softnet/report/templates, autoescaped) over the
view data of ``softnet.report.view``; figures come from ``plots``,
``kernel_plots``, ``latency_plots`` and ``compare_plots``.
"""
from __future__ import annotations

import datetime as _dt
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from softnet import __version__
from softnet.analysis import kernel_stats
from softnet.analysis.campaigns import Configuration, analyze_path
from softnet.analysis.cpu_audit import summarize_audit
from softnet.analysis.kernel_functions import folded_per_packet
from softnet.analysis.synthetic import LoadLossModel, ModelCurve, model_curve
from softnet.analysis.victim_check import DISTURBED_REST_PCT, summarize_victims
from softnet.analysis.rfc_benchmarks import stored_rfc_benchmarks
from softnet.analysis.latency_campaigns import analyze_latency
from softnet.analysis.latency_campaigns import stability as latency_stability
from softnet.analysis.searches import summarize_searches
from softnet.analysis.soak import stored_soaks
from softnet.analysis.stage_models import cost_models, stage_levels
from softnet.results import readers
from softnet.results.readers import ResultsProvenance, StoredTrial

from . import charts, compare_plots, flamegraph, kernel_plots, latency_plots, plots, soak_plots, view
from .plots import format_rate
from .kernel_plots import KernelLevel, StageLevel

ENV = Environment(loader=PackageLoader("softnet.report", "templates"),
                  autoescape=select_autoescape(enabled_extensions=("html", "html.j2"), default=True),
                  trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined,
                  finalize=lambda v: "" if v is None else v)  # an absent value shows as nothing, not "None"


@dataclass(frozen=True)
class StageData:
    levels: list[StageLevel]  # analysis.stage_models.stage_levels
    models: view.CostModels  # analysis.stage_models.cost_models


@dataclass
class SoftnetData:
    """What a results directory holds beyond the load-loss analyses."""

    provenance: ResultsProvenance | None = None
    searches: list = field(default_factory=list)  # analysis.searches.SearchSummary
    search_trials: dict[tuple[str, int, int], list[StoredTrial]] = field(default_factory=dict)  # (campaign, cell, run)
    kernel: list[tuple[str, list[KernelLevel]]] = field(default_factory=list)  # (label, its loads)
    audits: list[tuple[str, list[view.AuditRow]]] = field(default_factory=list)  # (label, its audit rows)
    victims: list[tuple[str, list]] = field(default_factory=list)  # (label, victim_check.VictimSummary rows)
    models: list = field(default_factory=list)  # synthetic.ModelCurve of each synthetic SUT's cell
    stages: list[tuple[str, StageData]] = field(default_factory=list)  # (label, its stages)
    latency: list[tuple[str, object]] = field(default_factory=list)  # (campaign, latency_campaigns.LatencyAnalysis)
    cell_trials: dict[tuple[str, int], list[StoredTrial]] = field(default_factory=dict)  # sweep (campaign, cell)
    comparisons: list[tuple[str, object]] = field(default_factory=list)  # (campaign, comparison.ComparisonSummary)
    # (campaign, candidate, load pps) -> (the baseline's flame graph, the candidate's against it), SVG
    flames: dict[tuple[str, str, float], tuple[str, str]] = field(default_factory=dict)
    rfc: list[tuple[str, object]] = field(default_factory=list)  # (campaign, rfc_benchmarks.RfcBenchmarks)
    soaks: list = field(default_factory=list)  # analysis.soak.StoredSoak of each soak cell


def flame_graphs(store, cid: str, summary) -> dict[tuple[str, str, float], tuple[str, str]]:
    """For each candidate and load with kernel functions: the baseline's
    flame graph and the candidate's differential one against it."""
    out = {}
    variants = [summary.baseline, *summary.candidates]
    for cand, per_load in summary.functions.items():
        for fc in per_load:
            sides = []
            for v in (0, variants.index(cand)):
                trials = [(t.stacks, t.forwarded_pkts, t.threads) for t in readers.trial_stacks(store, cid, v)
                          if abs(t.intended_rate_pps - fc.load_pps) <= 0.001 * fc.load_pps]
                sides.append(folded_per_packet(trials))
            if all(sides):
                at = format_rate(fc.load_pps)
                out[(cid, cand, fc.load_pps)] = (
                    flamegraph.svg(sides[0], f"A = {summary.baseline} at {at}: kernel stacks, ns per packet"),
                    flamegraph.svg(sides[1], f"B = {cand} against A at {at}", against=sides[0]))
    return out


def read_softnet(store, campaign_ids: Sequence[str], pdr_loss_ratio: float = 0.005) -> SoftnetData:
    """Searches, kernel statistics, audit rows and stages of the campaigns."""
    data = SoftnetData(provenance=readers.provenance(store, list(campaign_ids)))
    for cid in campaign_ids:
        runs = store.latency_runs(cid)
        if runs:
            data.latency.append((cid, analyze_latency(store, cid, runs=runs)))
        data.searches += summarize_searches(store, cid)
        done = store.comparison(cid, finished_only=False)  # an unfinished one too: its complete rounds
        if done is not None and done.differences:
            data.comparisons.append((cid, done))
            data.flames.update(flame_graphs(store, cid, done))
        data.soaks += stored_soaks(store, cid)
        rfc = stored_rfc_benchmarks(store, cid)
        if rfc:
            data.rfc.append((cid, rfc))
        data.search_trials.update({(cid, cell, run): trials
                                   for (cell, run), trials in readers.search_trials(store, cid).items()})
    for cell in readers.sweep_cells(store, list(campaign_ids)):
        label = view.sweep_label(cell.name, cell.cell_id, cell.knobs)
        data.cell_trials[(cell.campaign_id, cell.cell_id)] = cell.trials
        docs = [t.document for t in cell.trials]  # these analyses read the result documents
        levels = kernel_plots.kernel_levels(kernel_stats.summarize_by_load(docs))
        if levels:
            data.kernel.append((label, levels))
        audit = view.audit_rows_read(summarize_audit(docs))
        if audit:
            data.audits.append((label, audit))
        victims = summarize_victims(cell.trials, {})
        if victims:
            data.victims.append((label, victims))
        if cell.synthetic is not None:
            data.models.append(synthetic_curve(label, cell))
        stage_lv = kernel_plots.stage_levels_read(stage_levels(docs))
        if stage_lv:
            data.stages.append((label, StageData(stage_lv, view.CostModels.model_validate(
                cost_models(docs, pdr_loss_ratio)))))
    return data


MAX_MODELS = 4


def synthetic_curve(label: str, cell) -> "ModelCurve":
    """The cell's model (its spec's [synthetic]) and its measured mean PLR per load."""
    m = cell.synthetic
    model = LoadLossModel(o_sat_pps=m.o_sat_pps, plr_at_sat=m.plr_at_sat, m_pps=m.m_pps,
                          o_trash_pps=m.o_trash_pps if m.o_trash_pps is not None else float("inf"),
                          pre_sat_exponent=m.pre_sat_exponent)
    by_load: dict[float, list[float]] = {}
    for t in cell.trials:
        if t.result.valid and t.result.loss_ratio is not None:
            by_load.setdefault(t.result.intended_rate_pps, []).append(t.result.loss_ratio)
    return model_curve(label, model, [(o, sum(v) / len(v)) for o, v in by_load.items()])


class _Figures:
    """Writes figures to a folder (the kept plots_dir, or a temporary one)
    and gives each as {"alt", "src"} for the templates."""

    def __init__(self, folder: Path, keep: bool):
        self.folder = folder
        self.formats = plots.FORMATS if keep else ("png",)

    @staticmethod
    def embed(paths: list[Path], alt: str) -> dict:
        png = next(p for p in paths if p.suffix == ".png")
        return {"alt": alt, "src": plots.png_data_uri(png)}

    def groups(self, configs: Sequence[Configuration], interactive: bool = False) -> list[dict]:
        out = []
        for gi, group in enumerate(plots.group_configurations(configs)):
            _, common = plots.short_labels(group)
            head = common or (group[0].label if len(group) == 1 else f"group {gi + 1}")
            files = plots.plot_all(group, self.folder, prefix=f"group{gi + 1:02d}-", formats=self.formats)
            out.append({"head": head, "names": [c.label for c in group],
                        "charts": charts.group_charts(group) if interactive else None,
                        **{k: self.embed(files[k], f"{what} curves {head}")
                           for k, what in (("loss", "load-loss"), ("delivery", "load-delivery"),
                                           ("throughput", "load-throughput"))}})
        return out

    def searches(self, summaries: Sequence, trials: dict) -> list[dict]:
        out = []
        for i, ((cid, cell, run), (label, bounds)) in enumerate(view.search_plots(summaries).items()):
            title = f"search: {label}, cell {cell}, run {run}"
            files = plots.plot_search([t.result for t in trials.get((cid, cell, run), [])], bounds, title,
                                      self.folder / f"search{i + 1:02d}", formats=self.formats)
            out.append({**self.embed(files, title), "campaign_id": cid})
        return out

    def models(self, curves: list) -> dict | None:
        if not curves:
            return None
        shown = curves[:MAX_MODELS]  # a row each: the figure stays a page high
        fig = plots.model_figure(shown)
        more = f" (the first {MAX_MODELS} of {len(curves)} configurations)" if len(curves) > MAX_MODELS else ""
        return self.embed(plots.save_figure(fig, self.folder / "model", self.formats),
                          f"the synthetic SUT's load-loss model and the measured means{more}")

    def kernel(self, kernel: Sequence[tuple[str, list[KernelLevel]]]) -> list[dict]:
        out = []
        for i, (label, levels) in enumerate(kernel):
            title = f"kernel statistics: {label}"
            files = kernel_plots.plot_kernel(levels, title, self.folder / f"kernel{i + 1:02d}", formats=self.formats)
            out.append({**self.embed(files, title), **view.kernel_caption(levels)})
        return out

    def latency(self, name: str, analysis) -> list[dict]:
        folder = self.folder / f"latency-{name}"
        paths = latency_plots.plot_latency(analysis.configs, analysis.clustering, folder, formats=self.formats)
        return [self.embed([p], f"{name}: {p.stem.replace('_', ' ')}") for p in paths if p.suffix == ".png"]

    def comparisons(self, comparisons: Sequence[tuple[str, object]], names: dict,
                    flames: dict | None = None) -> list[dict]:
        out = []
        for i, (cid, summary) in enumerate(comparisons):
            name = f"{names.get(cid) or cid} ({cid})"
            files = compare_plots.plot_comparison(summary, f"paired comparison: {name}",
                                                  self.folder / f"compare{i + 1:02d}", formats=self.formats)
            cmp = view.comparison(name, summary)
            for t in cmp["functions"]:
                t["flames"] = (flames or {}).get((cid, t["candidate"], t["load_pps"]))
            out.append({**cmp, "fig": self.embed(files, f"paired comparison {name}")})
        return out

    def soaks(self, soaks: Sequence, names: dict) -> list[dict]:
        out = []
        for i, s in enumerate(soaks):
            given = names.get(s.campaign_id)
            name = (f"{given} ({s.campaign_id})" if given and given != s.campaign_id else s.campaign_id) \
                + f", cell {s.cell_id}"
            files = soak_plots.plot_soak(s.summary, s.marks, s.loads, f"soak: {name}",
                                         self.folder / f"soak{i + 1:02d}", formats=self.formats)
            out.append({**view.soak(name, s.summary), "fig": self.embed(files, f"soak {name}")})
        return out

    def stages(self, stages: Sequence[tuple[str, StageData]]) -> list[dict]:
        out = []
        for i, (label, st) in enumerate(stages):
            title = f"stages: {label}"
            files = kernel_plots.plot_stages(st.levels, title, self.folder / f"stages{i + 1:02d}",
                                             formats=self.formats)
            out.append({"label": label, "fig": self.embed(files, title),
                        **view.stages(label, st.levels, st.models)})
        return out


def rfc_rows(rfc: Sequence[tuple[str, object]], names: dict) -> list[dict]:
    """The back-to-back, recovery and reset campaigns as the report's tables show them."""
    def ms(v: float | None) -> str:
        return view.DASH if v is None or v != v else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"

    def interval(m, f) -> str:
        return view.DASH if m.ci_lower != m.ci_lower else f"[{f(max(0.0, m.ci_lower))}, {f(m.ci_upper)}]"

    out = []
    for cid, found in rfc:
        resets, b2b = found.reset, found.back_to_back
        out.append({
            "name": names.get(cid) or cid,
            "resets": [{"label": r.label, "load": f"{r.load_pps:,.0f} pps", "what": r.what,
                        "runs": f"{r.runs - r.failed}/{r.runs}", "mean": ms(r.interruption_ms.mean),
                        "ci": interval(r.interruption_ms, ms), "loss": ms(r.frame_loss_ms.mean),
                        "spoilt": r.host_interference} for r in resets],
            "b2b": [{"label": b.label, "rate": f"{b.burst_rate_pps:,.0f} pps", "bursts": b.bursts,
                     "mean": (">= " if b.whole else "") + ms(b.lossless_pkts.mean),
                     "ci": interval(b.lossless_pkts, lambda v: f"{v:.0f}"),
                     "range": f"{b.min_pkts}-{b.max_pkts}" if b.min_pkts is not None else view.DASH,
                     "std": ms(b.lossless_pkts.std), "whole": b.whole, "sent": b.burst_pkts,
                     "implied": ms(b.implied_buffer_s * 1e3 if b.implied_buffer_s is not None else None),
                     "corrected": ms(b.corrected_buffer_s * 1e3 if b.corrected_buffer_s is not None else None),
                     "spoilt": ", ".join(f"{n} {why}" for why, n in b.reasons.items()) or "0"} for b in b2b],
            "recovery": [{"label": r.label, "overload": f"{r.overload_pps:,.0f} pps for {r.overload_s:g} s",
                          "then": f"{r.recovery_pps:,.0f} pps", "runs": f"{r.recovery_ms.n}/{r.runs}",
                          "mean": ms(r.recovery_ms.mean), "ci": interval(r.recovery_ms, ms),
                          "drain": ms(r.drain_ms.mean), "stalls": r.stall_runs} for r in found.recovery]})
    return out


def render_report(configs: Sequence[Configuration], *, title: str, source: str = "",
                  data: SoftnetData | None = None, plots_dir: Path | None = None,
                  plotly_js: str | None = None) -> str:
    """The complete HTML document (a string) for analysed configurations.

    ``data``: ``read_softnet(store, ids)`` for a softnet results directory.
    ``plots_dir``: also keep the PNG/SVG figures there (otherwise a temporary
    folder is used and removed). ``plotly_js``: the load curves also as
    interactive charts, with plotly.js from that URL, or ``INLINE`` (the
    library in the page: still one self-contained file).
    """
    configs = list(configs)
    data = data or SoftnetData()
    kernel = [(label, levels) for label, levels in data.kernel if levels]
    audits = [(label, rows) for label, rows in data.audits if rows]
    if (not configs and not data.searches and not kernel and not audits and not data.stages and not data.latency
            and not data.comparisons and not data.rfc and not data.soaks):
        raise ValueError("no configuration to report")
    softnet_only = data.searches or data.comparisons or data.rfc or data.soaks
    sources = sorted({c.source for c in configs} | ({"softnet"} if softnet_only else set()))
    names = {c.campaign_id: c.name for c in data.provenance.campaigns} if data.provenance else {}
    with tempfile.TemporaryDirectory(prefix="softnet-report-") as tmp:
        figs = _Figures(Path(plots_dir) if plots_dir is not None else Path(tmp), plots_dir is not None)
        methods = (["PASTRAMI load-loss analysis (PLR/DR/T(O) with Student-t CI, TIR saturation check, PDR@X% and "
                    "NDR)"] if configs else []) + (["NDR/PDR searches (RFC 9971)"] if data.searches else []) + \
            (["paired comparison (rounds of pairs, ABBA or interleaved; Hodges-Lehmann estimate, signed-rank interval, "
              "sequential looks)"] if data.comparisons else []) + (["RFC 2544/6201 benchmarks"] if data.rfc else []) + \
            (["soak (PLRsearch-like critical load: two integrated-sigmoid fits, negative binomial loss counts, a "
              "spoilt-trial prior; capacity steps by a repeated surprise; drift by Theil-Sen and jumpavg)"]
             if data.soaks else [])
        page = {
            "method": "; ".join(methods) or "kernel and profiler statistics",
            "title": title, "source": source, "sources": ", ".join(sources), "version": __version__,
            "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "summary": view.summary(configs) if configs else None,
            "data_paths": view.data_paths(configs, data.cell_trials),
            "figures": figs.groups(configs, interactive=plotly_js is not None) if configs else [],
            "plotly_src": plotly_js if plotly_js not in (None, INLINE) else None,
            "plotly_inline": plotly_bundle().read_text() if plotly_js == INLINE else None,
            "configs": [view.configuration(i, c, data.provenance) for i, c in enumerate(configs)],
            "searches": replace(view.searches(data.searches), figures=figs.searches(data.searches, data.search_trials))
            if data.searches else None,
            "comparisons": figs.comparisons(data.comparisons, names, data.flames),
            "rfc": rfc_rows(data.rfc, names),
            "soaks": figs.soaks(data.soaks, names),
            "kernel": {"table": view.kernel_table(kernel), "figures": figs.kernel(kernel)} if kernel else None,
            "model": figs.models(data.models),
            "audit": view.audit_rows(audits),
            "victims": view.victim_rows(data.victims), "victim_disturbed_pct": f"{DISTURBED_REST_PCT:.0f}",
            "stages": {"timings": view.stage_timings(), "configs": figs.stages(data.stages)} if data.stages else None,
            "latency": [{**view.latency(name, a), "figures": figs.latency(name, a)} for name, a in data.latency],
            "latency_stability": view.latency_stability(latency_stability(data.latency)),
            "glossary": view.glossary(configs),
            "campaigns": view.campaigns(data.provenance),
        }
        return ENV.get_template("report.html.j2").render(page)


def report_html(path_or_results_dir: str | Path, *, title: str | None = None, plots_dir: Path | None = None,
                campaign_id: str | None = None, pdr_loss_ratio: float = 0.005, eta: float = 0.1,
                confidence: float = 0.95, plotly_js: str | None = None) -> str:
    """Analyse ``path_or_results_dir`` and give the report as one self-contained HTML document.

    ``campaign_id``, ``pdr_loss_ratio``, ``eta``, ``confidence`` go to ``analyze_path``.
    """
    src = Path(path_or_results_dir)
    is_results = readers.is_results_dir(src)
    data = None
    if is_results:  # read (and check) the store first: a corrupt one is an error naming the file
        with readers.open_results(src) as store:
            ids = [campaign_id] if campaign_id else [c.campaign_id for c in readers.campaigns(store)]
            data = read_softnet(store, ids, pdr_loss_ratio)
    configs = analyze_path(src, campaign_id, pdr_loss_ratio=pdr_loss_ratio, eta=eta, confidence=confidence)
    if data is not None:  # only the campaigns reported on
        shown = ({cfg.campaign_id for cfg in configs} | {s.campaign_id for s in data.searches}
                 | {cid for cid, _ in data.latency} | {cid for cid, _ in data.comparisons}
                 | {cid for cid, _ in data.rfc} | {s.campaign_id for s in data.soaks})
        data.provenance.campaigns = [c for c in data.provenance.campaigns if c.campaign_id in shown]
    if title is None:
        if is_results:
            names = [c.name or c.campaign_id for c in data.provenance.campaigns]
            kind = "load-loss report" if configs else "report"  # a comparison or a soak has no load-loss curve
            title = f"softnet {kind} \u2014 " + ", ".join(map(str, names))
        else:
            title = f"PASTRAMI load-loss report \u2014 {src.name}"
    return render_report(configs, title=title, source=str(src), data=data, plots_dir=plots_dir, plotly_js=plotly_js)


def write_report(path_or_results_dir: str | Path, out_file: Path | None = None, *, title: str | None = None,
                 plots_dir: Path | None = None, campaign_id: str | None = None, pdr_loss_ratio: float = 0.005,
                 eta: float = 0.1, confidence: float = 0.95, interactive: bool = False) -> Path:
    """``report_html`` written to one file. Default ``out_file``:
    ``<results_dir>/report.html`` for a softnet results directory,
    ``./softnet-report.html`` otherwise. ``interactive``: the load curves
    also as charts, plotly.js inlined (about 4.8 MB more)."""
    src = Path(path_or_results_dir)
    text = report_html(src, title=title, plots_dir=plots_dir, campaign_id=campaign_id,
                       pdr_loss_ratio=pdr_loss_ratio, eta=eta, confidence=confidence,
                       plotly_js=INLINE if interactive else None)
    if out_file is None:
        out_file = src / "report.html" if readers.is_results_dir(src) else Path.cwd() / "softnet-report.html"
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(out_file.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out_file)
    return out_file


INLINE = "inline"


def plotly_bundle() -> Path:
    """plotly.js as the installed plotly package ships it: pages need no internet."""
    import importlib.resources

    return Path(str(importlib.resources.files("plotly") / "package_data" / "plotly.min.js"))


@dataclass(frozen=True)
class VerdictRow:
    """One verdict of a campaign, as the report gives it."""

    configuration: str
    figure: str
    value: str
    verdict: str


def campaign_verdicts(results_dir: Path, campaign_id: str) -> list[VerdictRow]:
    """A campaign's verdicts at a glance: each sweep configuration's
    (PASTRAMI), each search goal's over its repeats, each compared metric's."""
    with readers.open_results(results_dir) as store:
        searches = summarize_searches(store, campaign_id)
        compared = store.comparison(campaign_id, finished_only=False)
        soaks = store.soaks(campaign_id)
    rows = [VerdictRow(r.label, "load-loss", f"PDR {r.pdr}, NDR {r.ndr}", r.verdict)
            for r in view.summary(configs).rows] if (configs := analyze_path(results_dir, campaign_id)) else []
    rows += [VerdictRow(v.label, f"search {v.goal}", v.value, v.verdict) for v in view.searches(searches).verdicts]
    if compared is not None and compared.differences:
        many = len(compared.candidates) > 1
        names = {f"B{i + 1}" if many else "B": c for i, c in enumerate(compared.candidates)}
        rows += [VerdictRow(f"{names[r['candidate']]} vs {compared.baseline}", r["metric"],
                            r["change"] if r["change"] == view.DASH else f"{r['change']} {r['interval']}", r["verdict"])
                 for r in view.comparison(campaign_id, compared)["rows"]]
    for cell, s in soaks.items():
        e = s.estimate
        value = view.DASH if e is None else (f"{e.median_pps:,.0f} pps [{e.lower_pps:,.0f}, {e.upper_pps:,.0f}] "
                                             f"at loss ratio {e.target_loss_ratio:g}")
        flagged = sorted({f.split(":", 1)[0] for f in s.flags})
        rows.append(VerdictRow(f"cell {cell}", "soak critical load", value,
                               ", ".join(flagged) or ("steady" if s.finished else "stopped early")))
    return rows
