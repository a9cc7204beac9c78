"""One self-contained HTML report of a load-loss analysis.

``write_report(path)`` analyses a softnet results directory, a PASTRAMI file
or a folder of them (``softnet.analysis.campaigns.analyze_path``) and writes
one HTML file: CSS inline, figures embedded as base64 PNG, no external asset.
All text coming from data (labels, knobs, reasons, specs, file names) is
escaped with ``html.escape``.

``render_report(configs, ...)`` builds the same HTML string from
configurations already analysed.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
import tempfile
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Iterable, Sequence

from softnet import __version__
from softnet.analysis import kernel_stats
from softnet.analysis.cpu_audit import by_context, summarize_audit
from softnet.analysis.stage_models import cost_models, pdr_text, stage_levels
from softnet.analysis.stages import WIFI_STAGES
from softnet.analysis.campaigns import Configuration, analyze_path
from softnet.results.store import DB_NAME, Store

from . import plots

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
    "generator_overshoot": "the generator sent more packets than intended: the run did not apply its nominal load",
    "counters_inconsistent": "more packets received than sent beyond a counter artefact, or packets outside the "
                             "trial's sequence range: the counters cannot be trusted",
    "placement_not_as_requested": "generator, SUT or sink work did not run on the CPUs the spec asked for (for "
                                  "example the SUT's softirq processing ran on the generator's CPU), so the run "
                                  "measured a different setup",
    "interrupted": "the trial was interrupted (signal or time-out) before it finished",
}

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d2430;
     background:#f6f7f9;line-height:1.45}
main{max-width:1180px;margin:0 auto;padding:18px 28px 60px;background:#fff;box-shadow:0 0 12px #0001}
h1{font-size:1.6em;margin:.4em 0 .2em} h2{font-size:1.3em;margin-top:2em;border-bottom:2px solid #dde2ea;
  padding-bottom:.2em} h3{font-size:1.1em;margin:1.6em 0 .4em} h4{margin:1.1em 0 .3em;font-size:1em}
.sub{color:#5a6475;margin:0 0 1em} code,pre{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.88em}
pre{background:#f3f5f8;padding:10px;overflow:auto;max-height:420px;border:1px solid #e3e7ee}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}
th,td{border:1px solid #dfe3ea;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#eef1f6;text-align:center} td.l,th.l{text-align:left}
tr.pdrpoint td{background:#fff4e0} tr.pdr td{background:#eaf6ea} tr.empty td{color:#8a93a3;font-style:italic}
td.viol{color:#b3261e;font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:.85em;color:#fff}
.v-GOOD{background:#2e7d32}.v-BAD{background:#c62828}.v-INCONCLUSIVE{background:#8d6e00}
.v-NO-SATURATION{background:#455a9c}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:.6em 0}
.card{border:1px solid #dfe3ea;border-radius:6px;padding:6px 14px;min-width:120px}
.card b{display:block;font-size:1.35em}
.reason{background:#f7f8fb;border-left:4px solid #9aa5b8;padding:6px 10px;margin:.4em 0}
.flag{border-left:4px solid #e0a100;background:#fffaf0;padding:6px 10px;margin:.5em 0}
.flag .kind{font-weight:600;font-family:ui-monospace,monospace}
figure{margin:1em 0} figure img{max-width:100%;height:auto;border:1px solid #eef0f4}
.figs2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
@media (max-width:900px){.figs2{grid-template-columns:1fr}}
dl.kv{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:.4em 0}
dl.kv dt{color:#5a6475} dl.kv dd{margin:0}
.note{color:#5a6475;font-size:.9em}
section.config{border-top:1px solid #e6e9ef;margin-top:1.5em}
"""


def e(value) -> str:
    """Escape any value for HTML text or attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def badge(verdict: str) -> str:
    return f'<span class="badge v-{e(verdict)}">{e(verdict)}</span>'


# ---- number formatting -----------------------------------------------------

def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _pct(ratio, digits: int = 3) -> str:
    if not _finite(ratio):
        return "\u2014"
    return "0" if ratio == 0 else f"{ratio * 100:.{digits}g}"


def _pm(mean: str, half: str | None) -> str:
    return mean if half in (None, "\u2014") else f"{mean} \u00b1 {half}"


def _rate_pair(pps) -> str:
    """'450 kpps (450000 pps)' for the key numbers."""
    if not _finite(pps):
        return "\u2014"
    exact = f"{int(pps)} pps" if float(pps).is_integer() else f"{pps:.1f} pps"
    nice = plots.format_rate(pps)
    return nice if nice == exact else f"{nice} ({exact})"


def _ci_half(m) -> float | None:
    return (m.ci_upper - m.mean) if _finite(m.ci_upper) and _finite(m.mean) else None


# ---- provenance of softnet results ------------------------------------------

def softnet_provenance(results_dir: Path) -> dict:
    """Campaign rows and, per (campaign, cell), the provenance of each trial's result JSON."""
    out = {"campaigns": [], "trial_results": {}}
    with Store(results_dir, read_only=True) as store:
        out["campaigns"] = store.campaigns()
        try:
            rows = store.query("SELECT campaign_id, cell_id, raw_path, result_json FROM trials "
                               "ORDER BY campaign_id, cell_id, load_index, run_index")
        except Exception:  # older schema: fall back to the raw files
            rows = store.query("SELECT campaign_id, cell_id, raw_path FROM trials "
                               "ORDER BY campaign_id, cell_id, load_index, run_index")
    for r in rows:
        result = None
        if r.get("result_json"):
            try:
                result = json.loads(r["result_json"])
            except ValueError:
                result = None
        if result is None and r.get("raw_path") and Path(r["raw_path"]).is_file():
            try:
                result = json.loads(Path(r["raw_path"]).read_text()).get("result")
            except (OSError, ValueError):
                result = None
        if isinstance(result, dict):
            out["trial_results"].setdefault((r["campaign_id"], r["cell_id"]), []).append(result)
    return out


# ---- sections -------------------------------------------------------------

def _summary(configs: Sequence[Configuration]) -> str:
    verdicts = Counter(c.analysis.report.verdict.value for c in configs)
    n_loads = sum(len(c.analysis.stats.loads) + len(c.analysis.stats.empty_loads_pps) for c in configs)
    n_incl = sum(s.n_runs for c in configs for s in c.analysis.stats.loads)
    n_excl = sum(len(c.analysis.stats.excluded) for c in configs)
    cards = [("configurations", len(configs)), ("loads tested", n_loads), ("runs", n_incl + n_excl),
             ("runs excluded", n_excl)]
    cards += [(f"verdict {v}", verdicts.get(v, 0)) for v in VERDICT_MEANING if verdicts.get(v)]
    out = ['<div class="cards">']
    out += [f'<div class="card"><b>{e(n)}</b>{e(k)}</div>' for k, n in cards]
    out.append("</div>")
    # Overview table
    x = sorted({c.analysis.report.pdr_loss_ratio for c in configs})
    xl = "/".join(f"{v * 100:g}%" for v in x)
    out.append('<table><tr><th class="l">configuration</th><th>verdict</th><th>PDR point</th>'
               f'<th>PDR@{e(xl)}</th><th>NDR</th><th>saturation load</th><th class="l">flags</th></tr>')
    for i, c in enumerate(configs):
        r = c.analysis.report
        flags = ", ".join(f.kind for f in r.flags)
        out.append(f'<tr><td class="l"><a href="#cfg-{i}">{e(c.label)}</a></td><td>{badge(r.verdict.value)}</td>'
                   f"<td>{e(plots.format_rate(r.pdr_point_load_pps))}</td>"
                   f"<td>{e(plots.format_rate(r.pdr_load_pps))}</td><td>{e(plots.format_rate(r.ndr_load_pps))}</td>"
                   f"<td>{e(plots.format_rate(r.saturation_load_pps))}</td><td class=\"l\">{e(flags)}</td></tr>")
    out.append("</table>")
    out.append('<p class="note">Verdicts: ' + " ".join(
        f"{badge(v)} {e(m)}" for v, m in VERDICT_MEANING.items()) + "</p>")
    return "\n".join(out)


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


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(compact_png(path)).decode("ascii")
    return f'<img alt="{e(alt)}" src="data:image/png;base64,{data}">'


def _figures(configs: Sequence[Configuration], workdir: Path, keep_dir: Path | None) -> str:
    out = []
    groups = plots.group_configurations(configs)
    for gi, group in enumerate(groups):
        short, common = plots.short_labels(group)
        head = common or (group[0].label if len(group) == 1 else f"group {gi + 1}")
        out.append(f"<h3>{e(head)}</h3>")
        names = [c.label for c in group]
        out.append('<p class="note">Configurations: ' + "; ".join(e(n) for n in names) + "</p>")
        target = keep_dir if keep_dir is not None else workdir
        files = plots.plot_all(group, target, prefix=f"group{gi + 1:02d}-",
                               formats=plots.FORMATS if keep_dir is not None else ("png",))
        png = {k: next(p for p in v if p.suffix == ".png") for k, v in files.items()}
        out.append(f'<figure>{_img(png["loss"], "load-loss curves " + head)}'
                   "<figcaption class=\"note\">Packet loss ratio per offered load (log scale; PLR = 0 is drawn "
                   "at the bottom of the scale, 10<sup>-6</sup>). Markers: mean of the runs; band: Student-t "
                   "confidence interval of the mean; dashed black line: the PDR threshold X; dashed coloured "
                   "line: the PDR point of that configuration.</figcaption></figure>")
        out.append('<div class="figs2">'
                   f'<figure>{_img(png["delivery"], "load-delivery curves " + head)}</figure>'
                   f'<figure>{_img(png["throughput"], "load-throughput curves " + head)}</figure></div>')
    return "\n".join(out)


def _excluded_by_load(config: Configuration) -> dict[float, Counter]:
    by: dict[float, Counter] = {}
    for x in config.analysis.stats.excluded:
        by.setdefault(x.load_pps, Counter())[x.reason] += 1
    return by


def _load_table(config: Configuration) -> str:
    a = config.analysis
    r = a.report
    conf = f"{a.stats.confidence * 100:g}"
    div, unit = plots.load_unit(max((s.load_pps for s in a.stats.loads), default=1.0))
    steps = {s.from_load_pps: s for s in a.stats.tir_steps}
    checked = {s.from_load_pps for s in r.steps_checked}
    violations = {s.from_load_pps for s in r.violations}
    excluded = _excluded_by_load(config)
    rows = [(s.load_pps, s) for s in a.stats.loads] + [(x, None) for x in a.stats.empty_loads_pps]
    head = ("<table><tr><th>offered load</th><th>K</th><th>excluded</th>"
            f"<th>PLR (%) mean \u00b1 CI{e(conf)}</th><th>\u0394UCL{e(conf)}</th>"
            f"<th>DR (%) mean \u00b1 CI{e(conf)}</th><th>throughput T(O) ({e(unit)}) mean \u00b1 CI{e(conf)}</th>"
            "<th>TIR to next load</th><th class=\"l\">marks</th></tr>")
    out = [head]
    for load, s in sorted(rows, key=lambda t: t[0]):
        ex = excluded.get(load, Counter())
        ex_text = (f"{sum(ex.values())} (" + ", ".join(f"{k} \u00d7{n}" for k, n in sorted(ex.items())) + ")"
                   if ex else "0")
        marks = []
        if load == r.ndr_load_pps:
            marks.append("NDR")
        if load == r.pdr_load_pps:
            marks.append(f"PDR@{r.pdr_loss_ratio * 100:g}%")
        if load == r.pdr_point_load_pps:
            marks.append("PDR point")
        if load == r.saturation_load_pps:
            marks.append("saturation")
        cls = ("pdrpoint" if load == r.pdr_point_load_pps else "pdr" if load == r.pdr_load_pps else "")
        if s is None:
            out.append(f'<tr class="empty"><td>{e(plots.format_rate(load))}</td><td>0</td><td>{e(ex_text)}</td>'
                       '<td colspan="5" class="l">every run excluded: load left out of the statistics</td>'
                       f'<td class="l">{e(", ".join(marks))}</td></tr>')
            continue
        plr = s.plr_ratio
        plr_half = _ci_half(plr)
        dr_half = _ci_half(s.dr_ratio)
        t_half = _ci_half(s.throughput_pps)
        step = steps.get(load)
        if step is None:
            tir_cell = "<td>\u2014</td>"
        else:
            title = (f"{plots.format_rate(step.from_load_pps)} \u2192 {plots.format_rate(step.to_load_pps)}"
                     + ("; checked for the verdict" if load in checked else ""))
            viol = load in violations
            tir_cell = (f'<td class="{"viol" if viol else ""}" title="{e(title)}">{e(f"{step.tir + 0.0:.3f}" if abs(step.tir) >= 5e-4 else "0.000")}'
                        + (" \u2265 \u03b7" if viol else "") + "</td>")
        out.append(
            f'<tr class="{cls}"><td>{e(plots.format_rate(load))}</td><td>{s.n_runs}</td><td>{e(ex_text)}</td>'
            f"<td>{e(_pm(_pct(plr.mean), _pct(plr_half) if plr_half is not None else None))}</td>"
            f"<td>{e(_pct(s.plr_delta_ucl))}{'%' if _finite(s.plr_delta_ucl) else ''}</td>"
            f"<td>{e(_pm(_pct(s.dr_ratio.mean, 6), _pct(dr_half) if dr_half is not None else None))}</td>"
            f"<td>{e(_pm(f'{s.throughput_pps.mean / div:.4g}', f'{t_half / div:.2g}' if t_half is not None else None))}</td>"
            f"{tir_cell}<td class=\"l\">{e(', '.join(marks))}</td></tr>")
    out.append("</table>")
    out.append(f'<p class="note">K = included runs. CI{e(conf)}: two-sided Student-t interval of the mean '
               f"(t with K\u22121 degrees of freedom); \u0394UCL{e(conf)} = (UCL \u2212 mean) / mean of the PLR. "
               "TIR = (T(O2) \u2212 T(O1)) / (O2 \u2212 O1) to the next analysed load; red: a checked step with "
               f"TIR \u2265 \u03b7 = {e(f'{r.eta:g}')}. Orange row: the PDR point; green row: PDR@X%.</p>")
    return "\n".join(out)


def _flags_html(config: Configuration) -> str:
    r = config.analysis.report
    if not r.flags:
        return '<p class="note">No flags: nothing outside the paper\'s method looked suspicious.</p>'
    out = []
    excluded = Counter(x.reason for x in config.analysis.stats.excluded)
    for f in r.flags:
        where = ", ".join(plots.format_rate(x) for x in f.loads_pps)
        body = [f'<div class="flag"><span class="kind">{e(f.kind)}</span>'
                + (f" ({e(f.count)})" if f.count != 1 else "")
                + (f" at {e(where)}" if where else "")
                + f"<br>{e(FLAG_MEANING.get(f.kind, 'See softnet/analysis/README.md.'))}"
                f"<br><span class=\"note\">Detail: {e(f.message)}</span>"]
        if f.kind == "excluded_runs" and excluded:
            body.append("<ul>" + "".join(
                f"<li><code>{e(k)}</code> \u00d7{n}: {e(EXCLUSION_MEANING.get(k, 'reason recorded by the trial'))}</li>"
                for k, n in sorted(excluded.items())) + "</ul>")
        body.append("</div>")
        out.append("".join(body))
    return "\n".join(out)


def _kv(items: Iterable[tuple[str, object]]) -> str:
    return '<dl class="kv">' + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in items) + "</dl>"


def _fmt_knob(v) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return "\u2014" if v is None else str(v)


def _config_provenance(config: Configuration, prov: dict | None) -> str:
    if config.source == "pastrami":
        items = [("file", config.meta.get("path", config.label))]
        items += [(k, _fmt_knob(v)) for k, v in config.knobs.items()]
        site = {"clab": "the CloudLab testbed", "mazinga": "a local server"}.get(config.knobs.get("site"))
        return "<h4>Provenance (PASTRAMI data file)</h4>" + _kv(items) + (
            '<p class="note">Metadata parsed from the file name; the data are published PASTRAMI '
            "measurements (TRex traffic generator" + (f", {e(site)}" if site else "") + ").</p>")
    m = config.meta or {}
    items = [("campaign", m.get("campaign_id")), ("cell", m.get("cell_id")),
             ("probed max. generator rate", _rate_pair(m.get("probe_max_rate_pps")))]
    items += [(f"knob {k}", _fmt_knob(v)) for k, v in config.knobs.items()]
    out = ["<h4>Provenance (softnet trials)</h4>", _kv(items)]
    trials = config.trials or []
    cols = OrderedDict((k, Counter(t.get(k) for t in trials if t.get(k) is not None))
                       for k in ("kernel", "cpu_model", "softnet_version", "spec_hash", "sut"))
    results = (prov or {}).get("trial_results", {}).get((m.get("campaign_id"), m.get("cell_id")), [])
    p_list = [r.get("provenance") or {} for r in results]
    cols["hostname"] = Counter(p.get("hostname") for p in p_list if p.get("hostname"))
    rows = [(k, "; ".join(f"{v} ({n} trials)" if len(c) > 1 else str(v) for v, n in c.most_common()))
            for k, c in cols.items() if c]
    flags = Counter(f for t in trials for f in (t.get("flags") or []))
    n_invalid = sum(1 for t in trials if t.get("valid") is False)
    rows.append(("trials", f"{len(trials)} ({n_invalid} flagged invalid)"))
    if flags:
        rows.append(("trial flags", ", ".join(f"{k} \u00d7{n}" for k, n in flags.most_common())))
    out.append(_kv(rows))
    changes = Counter(ch for p in p_list for ch in dict.fromkeys(p.get("host_changes_applied") or []))
    if changes:
        out.append("<h4>Host changes applied during the trials</h4><ul>" + "".join(
            f"<li><code>{e(ch)}</code> <span class=\"note\">({n} of {len(p_list)} trials)</span></li>"
            for ch, n in changes.items()) + "</ul>")
    elif results:
        out.append('<p class="note">No host change recorded in the trials\' results.</p>')
    spec = m.get("spec")
    if spec:
        out.append("<details><summary>cell spec</summary><pre>"
                   + e(json.dumps(spec, indent=2, sort_keys=True, default=str)) + "</pre></details>")
    return "\n".join(out)


def _config_section(i: int, config: Configuration, prov: dict | None) -> str:
    r = config.analysis.report
    x = f"{r.pdr_loss_ratio * 100:g}%"
    key = [("verdict", r.verdict.value), ("PDR point (first load with mean PLR > X)", _rate_pair(r.pdr_point_load_pps)),
           (f"PDR@{x}", _rate_pair(r.pdr_load_pps)), ("NDR (sweep estimate)", _rate_pair(r.ndr_load_pps)),
           ("saturation load", _rate_pair(r.saturation_load_pps)),
           ("parameters", f"X = {x}, \u03b7 = {r.eta:g}, confidence = {config.analysis.stats.confidence:g}")]
    return "\n".join([
        f'<section class="config" id="cfg-{i}"><h3>{badge(r.verdict.value)} {e(config.label)}</h3>',
        f'<div class="reason"><b>Why {e(r.verdict.value)}:</b> {e(r.reason)}</div>',
        f'<p class="note">{e(VERDICT_MEANING.get(r.verdict.value, ""))}</p>',
        _kv(key), "<h4>Per-load statistics</h4>", _load_table(config), "<h4>Flags</h4>", _flags_html(config),
        _config_provenance(config, prov), "</section>"])


def _campaign_provenance(prov: dict | None) -> str:
    if not prov or not prov.get("campaigns"):
        return ""
    out = ["<h2>Campaigns</h2>"]
    for c in prov["campaigns"]:
        created = c.get("created_unix_s")
        when = (_dt.datetime.fromtimestamp(created, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
                if _finite(created) else "\u2014")
        out.append(f"<h3>{e(c.get('name'))} <span class=\"note\">({e(c.get('campaign_id'))})</span></h3>")
        out.append(_kv([("created", when), ("spec hash", c.get("spec_hash"))]))
        try:
            spec = json.dumps(json.loads(c.get("spec_json") or "null"), indent=2, sort_keys=True)
        except ValueError:
            spec = c.get("spec_json") or ""
        out.append("<details open><summary>campaign spec</summary><pre>" + e(spec) + "</pre></details>")
    return "\n".join(out)


def _flag_glossary(configs: Sequence[Configuration]) -> str:
    kinds = sorted({f.kind for c in configs for f in c.analysis.report.flags})
    reasons = sorted({x.reason for c in configs for x in c.analysis.stats.excluded})
    if not kinds:
        return ""
    out = ["<h2>What the flags mean</h2>", "<p>The PASTRAMI method looks only at mean PLR and TIR. "
           "softnet also reports what that method does not see:</p><ul>"]
    out += [f"<li><code>{e(k)}</code>: {e(FLAG_MEANING.get(k, ''))}</li>" for k in kinds]
    out.append("</ul>")
    if reasons:
        out.append("<p>Reasons for excluding runs:</p><ul>" + "".join(
            f"<li><code>{e(k)}</code>: {e(EXCLUSION_MEANING.get(k, 'reason recorded by the trial'))}</li>"
            for k in reasons) + "</ul>")
    return "\n".join(out)


def _searches_section(summaries: Sequence, workdir: Path, keep_dir: Path | None) -> str:
    """Per search: a table row per goal (bounds, confidence, loss CI, diagnosis)
    and the trajectory plot; over repeats, the verdict and CV."""
    if not summaries:
        return ""
    out = ["<h2>NDR/PDR searches</h2>",
           '<p class="note">softnet.search: loads classified from repeated trials (posterior confidence that '
           "the share of trials exceeding the goal's loss ratio is on one side of the exceed ratio); bounds "
           "are the highest load meeting the goal below the lowest load failing it. Loss CI: 95% Clopper-Pearson "
           "over the packets of the trials at the lower bound.</p>",
           "<table><tr><th>configuration</th><th>goal</th><th>searches</th><th>verdict</th>"
           "<th>value pps (mean)</th><th>CV</th></tr>"]
    for s in summaries:
        out.append(f"<tr><td>{e(s.label)}</td><td>{e(s.goal)}</td><td>{len(s.repeats)}</td>"
                   f"<td>{e(s.verdict)}</td><td>{e(_rate_pair(s.value_pps))}</td>"
                   f"<td>{'-' if s.cv is None else f'{s.cv:.2%}'}</td></tr>")
    out.append("</table><table><tr><th>configuration</th><th>goal</th><th>run</th><th>status</th>"
               "<th>lower pps (conf.)</th><th>upper pps (conf.)</th><th>loss at lower [CI95]</th><th>trials</th>"
               "<th>diagnosis</th></tr>")
    for s in summaries:
        for r in s.repeats:
            ci = "-" if r["lower_loss_ratio"] is None else (
                f"{r['lower_loss_ratio']:.2e} [{r['lower_loss_ci95_low']:.1e}, {r['lower_loss_ci95_high']:.1e}]")
            conf = [("" if c is None else f" ({c:.3f})") for c in (r["lower_confidence"], r["upper_confidence"])]
            out.append(f"<tr><td>{e(s.label)}</td><td>{e(s.goal)}</td><td>{r['run_index']}</td>"
                       f"<td>{e(r['status'])}</td><td>{e(_rate_pair(r['lower_bound_pps']))}{e(conf[0])}</td>"
                       f"<td>{e(_rate_pair(r['upper_bound_pps']))}{e(conf[1])}</td><td>{e(ci)}</td>"
                       f"<td>{r['trial_count']} ({r['trial_seconds']:.1f} s)</td><td>{e(r['diagnosis'])}</td></tr>")
    out.append("</table>")
    target = keep_dir if keep_dir is not None else workdir
    by_search: dict = {}
    for s in summaries:
        for r, trials in zip(s.repeats, s.trials):
            key = (s.campaign_id, s.cell_id, r["run_index"])
            by_search.setdefault(key, (s.label, trials, []))[2].append(
                (s.goal, s.loss_ratio, r["lower_bound_pps"], r["upper_bound_pps"]))
    for i, ((cid, cell, run), (label, trials, bounds)) in enumerate(by_search.items()):
        title = f"search: {label}, cell {cell}, run {run}"
        files = plots.plot_search(trials, bounds, title, target / f"search{i + 1:02d}",
                                  formats=plots.FORMATS if keep_dir is not None else ("png",))
        png = next(p for p in files if p.suffix == ".png")
        out.append(f"<figure>{_img(png, title)}<figcaption class=\"note\">{e(title)} ({e(cid)}): the load of "
                   "each trial in order, coloured by the tightest goal it failed; lines: final bounds."
                   "</figcaption></figure>")
    return "\n".join(out)


def _kernel_section(kernel: Sequence[tuple[str, list[dict]]], workdir: Path, keep_dir: Path | None) -> str:
    """Per configuration: the WiFi-AP study's four panels per load level and
    its Table I (normalized utilization and cycles, or CPU time, per Mbps)."""
    kernel = [(label, levels) for label, levels in kernel if levels]
    if not kernel:
        return ""
    out = ["<h2>Kernel statistics</h2>",
           '<p class="note">Sampled during every trial (softnet.collect.sampler), rates over the measurement '
           "window, mean over the valid runs of each load. Utilization: non-idle share of /proc/stat ticks "
           "(what mpstat reports; tick-sampled, so short softirqs in the idle context are missed). CPU time: "
           "100 × (1 − idle / wall), with the kernel's nohz idle time, which interrupt and softirq "
           "work interrupts. Normalized per Mbps of frames (incl. FCS) forwarded, summed over the SUT's "
           "CPUs: the WiFi-AP study's Table I.</p>",
           "<table><tr><th>configuration</th><th>metric (% per Mbps)</th>"]
    levels_max = max(len(levels) for _, levels in kernel)
    out.append("".join(f"<th>level {i + 1}</th>" for i in range(levels_max)) + "</tr>")
    for label, levels in kernel:
        basis = levels[0].get("cost_basis") or "cycles"
        for name, key in (("utilization", "utilization_per_mbps"),
                          ("cycles" if basis == "cycles" else "CPU time (no cycle counter)", "cycles_per_mbps")):
            cells = "".join(
                f"<td>{'-' if lv['normalized'].get(key) is None else format(lv['normalized'][key], '.4f')}"
                f"<br><span class=\"note\">{lv['throughput_mbps']:,.0f} Mbps</span></td>" for lv in levels)
            out.append(f"<tr><td>{e(label)}</td><td>{e(name)}</td>{cells}</tr>")
    out.append("</table>")
    target = keep_dir if keep_dir is not None else workdir
    for i, (label, levels) in enumerate(kernel):
        title = f"kernel statistics: {label}"
        files = plots.plot_kernel(levels, title, target / f"kernel{i + 1:02d}",
                                  formats=plots.FORMATS if keep_dir is not None else ("png",))
        png = next(p for p in files if p.suffix == ".png")
        sut = levels[0].get("sut_cpus")
        ppsirq = ", ".join(
            f"{lv['throughput_mbps']:,.0f} Mbps: " + "/".join(
                "-" if c.get("pkts_per_rx_softirq") is None else f"{c['pkts_per_rx_softirq']:.1f}"
                for _, c in sorted(lv["per_cpu"].items())) for lv in levels)
        out.append(f"<figure>{_img(png, title)}<figcaption class=\"note\">{e(title)}; SUT CPUs {e(sut)}. "
                   f"Packets per RX softirq per CPU (dev_weight {e(levels[0].get('dev_weight'))}): "
                   f"{e(ppsirq)}.</figcaption></figure>")
    return "\n".join(out)


def _stages_section(stages: Sequence[tuple[str, dict]], workdir: Path, keep_dir: Path | None) -> str:
    """Per configuration: stacked stage bars per load (the WiFi-AP study's
    Fig. 10), the coverage cross-check, and the cost-vs-load fits with the
    capacity they predict against the measured PDR."""
    if not stages:
        return ""
    out = ["<h2>Packet-path stages (eBPF stage clock)</h2>",
           '<p class="note">softnet-profile times the interval between consecutive packet-path tracepoints '
           "inside NET softirqs and NAPI kthreads, names each pair as a stage (WiFi-AP study, Table V) and sums "
           "per CPU; the per-packet events are attached a share of the time (duty) and scaled to the window. "
           "Coverage checks the clock: named stage time over the softirq and NAPI-thread time that the "
           "softirq entry/exit and sched_switch counters measure independently. Stage timing labels:</p>",
           "<table><tr><th>stage</th><th>timing</th><th>boundaries and why</th></tr>"]
    out += [f"<tr><td>{e(s)}</td><td>{e(ex)}</td><td class=\"note\">{e(why)}</td></tr>"
            for s, (ex, why) in WIFI_STAGES.items()]
    out.append("</table>")
    target = keep_dir if keep_dir is not None else workdir
    for i, (label, st) in enumerate(stages):
        levels, models = st["levels"], st["models"]
        title = f"stages: {label}"
        files = plots.plot_stages(levels, title, target / f"stages{i + 1:02d}",
                                  formats=plots.FORMATS if keep_dir is not None else ("png",))
        png = next(p for p in files if p.suffix == ".png")
        cov = ", ".join(f"{plots.format_rate(lv['load_pps'])}: "
                        f"{'-' if lv['coverage_min'] is None else format(100 * lv['coverage_min'], '.1f') + '%'}"
                        for lv in levels)
        busy = ", ".join(f"{plots.format_rate(lv['load_pps'])}: {lv['sut_busy_pct']:.1f}% / "
                         + ("-" if lv["sut_nohz_cpu_time_pct"] is None else f"{lv['sut_nohz_cpu_time_pct']:.1f}%")
                         for lv in levels)
        out.append(f"<figure>{_img(png, title)}<figcaption class=\"note\">{e(title)}. Coverage (lowest over runs "
                   f"and CPUs with packet work): {e(cov)}. Cross-check, SUT CPUs busy by eBPF / by nohz CPU time "
                   f"(/proc/stat, wall minus idle): {e(busy)}. Stage events attached "
                   f"{100 * (levels[0].get('duty') or 1):.0f}% of the time.</figcaption></figure>")
        if not models.get("stages"):
            out.append('<p class="note">Fewer than 3 loads below saturation (SUT CPUs under 90% busy): no '
                       "cost-vs-load fit.</p>")
            continue
        used = ", ".join(plots.format_rate(x) for x in models["loads_used_pps"])
        out.append(f"<table><tr><th colspan=\"4\">{e(label)}: CPU time vs forwarded load, linear fit over the runs "
                   f"below saturation ({e(used)})</th></tr><tr><th>stage</th><th>ns per packet (slope)</th>"
                   "<th>% of one CPU at no load</th><th>R²</th></tr>")
        rows = list(models["stages"].items()) + ([("SUT CPUs busy (eBPF)", models["sut_busy"])]
                                                 if models["sut_busy"] else [])
        out += [f"<tr><td>{e(s)}</td><td>{m['ns_per_packet']:,.0f}</td><td>{m['intercept_pct']:.2f}</td>"
                f"<td>{m['r2']:.3f}</td></tr>" for s, m in rows]
        pdr, pred = models["measured_pdr"], models["predicted_capacity_pps"]
        ratio = models.get("predicted_over_pdr")
        out.append(f"<tr><td colspan=\"4\">Predicted capacity (SUT CPUs {e(models['sut_cpus'])} busy 100%): "
                   f"<b>{'-' if pred is None else e(plots.format_rate(pred))}</b>; measured "
                   f"PDR{100 * pdr['loss_ratio']:g}% on the sweep's grid: <b>{e(pdr_text(pdr, plots.format_rate))}</b>"
                   + (f" (predicted / PDR lower bound: {ratio:.2f})" if ratio else "")
                   + f"; highest forwarded rate {e(plots.format_rate(models['max_forwarded_pps']))}</td></tr></table>")
    return "\n".join(out)


def _audit_section(audits: Sequence[tuple[str, list[dict]]]) -> str:
    """Per configuration, load and CPU: eBPF-measured against /proc/stat busy
    and softirq shares, with the gap's range over runs."""
    audits = [(label, rows) for label, rows in audits if rows]
    if not audits:
        return ""
    out = ["<h2>CPU accounting audit (eBPF profile)</h2>",
           '<p class="note">softnet-profile (BTF tracepoints) against /proc/stat over each trial\'s window. '
           "Measured busy: a task other than idle on the CPU, plus irq and softirq time inside the idle task. "
           "Gap = measured - reported, in points of one CPU; its range over runs shows how steady the "
           "tick's error is.</p>",
           "<table><tr><th>configuration</th><th>load</th><th>CPU</th><th>runs</th><th>busy % eBPF</th>"
           "<th>busy % ticks</th><th>gap range</th><th>softirq % eBPF</th><th>softirq % ticks</th>"
           "<th>NET_RX % by context</th><th>pkts / NAPI poll</th></tr>"]

    def f(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)

    for label, rows in audits:
        for r in rows:
            out.append(f"<tr><td>{e(label)}</td><td>{e(_rate_pair(r['load_pps']))}</td><td>{r['cpu']}</td>"
                       f"<td>{r['runs']}</td><td>{f(r['measured_busy_pct'])}</td><td>{f(r['reported_busy_pct'])}</td>"
                       f"<td>{f(r['gap_min'], '{:+.1f}')} .. {f(r['gap_max'], '{:+.1f}')}</td>"
                       f"<td>{f(r['measured_softirq_pct'])}</td><td>{f(r['reported_softirq_pct'])}</td>"
                       f"<td>{e(by_context(r.get('net_rx_pct_by_context') or {}))}</td>"
                       f"<td>{f(r['napi_work_per_poll'])}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def render_report(configs: Sequence[Configuration], *, title: str, source: str = "",
                  provenance: dict | None = None, plots_dir: Path | None = None, searches: Sequence = (),
                  kernel: Sequence[tuple[str, list[dict]]] = (), audits: Sequence[tuple[str, list[dict]]] = (),
                  stages: Sequence[tuple[str, dict]] = ()) -> str:
    """The complete HTML document (a string) for analysed configurations.

    ``provenance``: ``softnet_provenance(results_dir)`` for softnet results.
    ``plots_dir``: also keep the PNG/SVG figures there (otherwise a temporary
    folder is used and removed).
    """
    configs = list(configs)
    if not configs and not searches and not kernel and not audits and not stages:
        raise ValueError("no configuration to report")
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    sources = sorted({c.source for c in configs} | ({"softnet"} if searches else set()))
    keep = Path(plots_dir) if plots_dir is not None else None
    with tempfile.TemporaryDirectory(prefix="softnet-report-") as tmp:
        figures = _figures(configs, Path(tmp), keep) if configs else ""
        search_html = _searches_section(searches, Path(tmp), keep)
        kernel_html = _kernel_section(kernel, Path(tmp), keep)
        stages_html = _stages_section(stages, Path(tmp), keep)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{CSS}</style></head><body><main>",
        f"<h1>{e(title)}</h1>",
        f'<p class="sub">Source: <code>{e(source)}</code> ({e(", ".join(sources))}) \u00b7 generated {e(now)} '
        f"by softnet {e(__version__)} \u00b7 method: PASTRAMI load-loss analysis (PLR/DR/T(O) with Student-t "
        "CI, TIR saturation check, PDR@X% and NDR)</p>",
        *(("<h2>Summary</h2>", _summary(configs), "<h2>Plots</h2>", figures, "<h2>Configurations</h2>")
          if configs else ()),
        *(_config_section(i, c, provenance) for i, c in enumerate(configs)),
        search_html,
        kernel_html,
        _audit_section(audits),
        stages_html,
        _flag_glossary(configs),
        _campaign_provenance(provenance),
        "</main></body></html>",
    ]
    return "\n".join(p for p in parts if p)


def kernel_levels(store: Store, campaign_ids: Sequence[str], pdr_loss_ratio: float = 0.005) -> tuple[list, list, list]:
    """(configuration label, per-load kernel summaries), (label, per-load
    audit rows) and (label, {"levels": stage levels, "models": cost models})
    of every sweep cell whose trials carry them."""
    levels_out, audits_out, stages_out = [], [], []
    for cid in campaign_ids:
        for cell in store.cells(cid):
            if cell["spec"].get("method", {}).get("kind", "sweep") != "sweep":
                continue  # a search's trials sit at loads of its own choosing: no levels
            trials = store.trial_results(cid, cell["cell_id"])
            knobs = ", ".join(f"{k}={_fmt_knob(v)}" for k, v in cell["knobs"].items())
            label = f"{cell['spec'].get('name', cid)} cell {cell['cell_id']}" + (f" ({knobs})" if knobs else "")
            levels = kernel_stats.summarize_by_load(trials)
            if levels:
                levels_out.append((label, levels))
            audit = summarize_audit(trials)
            if audit:
                audits_out.append((label, audit))
            stage_lv = stage_levels(trials)
            if stage_lv:
                stages_out.append((label, {"levels": stage_lv, "models": cost_models(trials, pdr_loss_ratio)}))
    return levels_out, audits_out, stages_out


def write_report(path_or_results_dir: str | Path, out_file: Path | None = None, *, title: str | None = None,
                 plots_dir: Path | None = None, **analysis_kw) -> Path:
    """Analyse ``path_or_results_dir`` and write one self-contained HTML file.

    ``analysis_kw`` go to ``analyze_path`` (campaign_id, pdr_loss_ratio, eta,
    confidence). Default ``out_file``: ``<results_dir>/report.html`` for a
    softnet results directory, ``./softnet-report.html`` otherwise.
    """
    from softnet.analysis.searches import summarize_searches

    src = Path(path_or_results_dir)
    configs = analyze_path(src, **analysis_kw)
    is_results = (src / DB_NAME).exists()
    searches, kernel, audits, stages = [], [], [], []
    if is_results:
        with Store(src, read_only=True) as store:
            ids = [analysis_kw["campaign_id"]] if analysis_kw.get("campaign_id") else \
                [c["campaign_id"] for c in store.campaigns()]
            searches = [s for cid in ids for s in summarize_searches(store, cid, with_trials=True)]
            kernel, audits, stages = kernel_levels(store, ids, analysis_kw.get("pdr_loss_ratio", 0.005))
    prov = softnet_provenance(src) if is_results else None
    if prov is not None:  # only the campaigns reported on
        ids = {cfg.meta.get("campaign_id") for cfg in configs} | {s.campaign_id for s in searches}
        prov["campaigns"] = [c for c in prov["campaigns"] if c.get("campaign_id") in ids]
    if title is None:
        if is_results:
            names = [c.get("name") or c.get("campaign_id") for c in prov["campaigns"]]
            title = "softnet load-loss report \u2014 " + ", ".join(map(str, names))
        else:
            title = f"PASTRAMI load-loss report \u2014 {src.name}"
    if out_file is None:
        out_file = src / "report.html" if is_results else Path.cwd() / "softnet-report.html"
    out_file = Path(out_file)
    text = render_report(configs, title=title, source=str(src), provenance=prov, plots_dir=plots_dir,
                         searches=searches, kernel=kernel, audits=audits, stages=stages)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(out_file.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out_file)
    return out_file
