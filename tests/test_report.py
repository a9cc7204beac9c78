"""Plots and the HTML report, on real PASTRAMI data and on a synthetic softnet store."""
from __future__ import annotations

import base64
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import duckdb
import numpy as np
import pytest
from markupsafe import escape

from softnet.analysis.pastrami_files import PASTRAMI_DATA_ENV, pastrami_data_dir
from softnet.analysis.synthetic import LoadLossModel
from softnet.analysis.campaigns import analyze_path
from softnet.errors import InputError
from softnet.provenance import spec_hash
from softnet.report import kernel_plots, plots
from softnet.report.html import render_report, write_report
from softnet.results import readers
from softnet.results.readers import StoredResult
from softnet.results.store import DB_NAME, Store

CLAB = pastrami_data_dir() / "bare-metal" / "confronto_clab"
needs_data = pytest.mark.skipif(not CLAB.is_dir(), reason=f"{CLAB} missing (set ${PASTRAMI_DATA_ENV})")
# A handful of real files: GOOD, BAD (with low_load_loss), BAD (loss_inversion), INCONCLUSIVE,
# and one with zero loss at low loads (for the floor of the log scale).
CLAB_FILES = [
    "clab_tb1_raw_50_exp_t_10_k6.8_intel_bare-metal_as-is.txt",
    "clab_tb1_raw_50_exp_t_10_k6.8_intel_bare-metal_nic_buf_4096.txt",
    "clab_tb1_raw_50_exp_t_10_k6.5_intel_bare-metal_as-is.txt",
    "clab_tb3_raw_50_exp_t_10_k5.6_intel_bare-metal_as-is.txt",
    "clab_tb3_raw_50_exp_t_10_k5.12_intel_bare-metal_as-is.txt",
]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def esc(text: str) -> str:
    """Text as the report's (autoescaped) templates write it."""
    return str(escape(text))


@pytest.fixture(scope="module")
def clab_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("clab")
    for name in CLAB_FILES:
        shutil.copy(CLAB / name, d / name)
    return d


@pytest.fixture(scope="module")
def clab_configs(clab_dir):
    return analyze_path(clab_dir)


def svg_text(path: Path) -> str:
    root = ET.parse(path).getroot()  # raises if not well-formed XML
    assert root.tag.endswith("svg")
    return " ".join(" ".join(el.itertext()) for el in root.iter())


# ---- plots -------------------------------------------------------------------

@needs_data
def test_plot_all_writes_png_and_svg_with_labels(clab_configs, tmp_path):
    assert {c.analysis.report.verdict.value for c in clab_configs} == {"GOOD", "BAD", "INCONCLUSIVE"}
    files = plots.plot_all(clab_configs, tmp_path / "figs")
    assert set(files) == {"loss", "delivery", "throughput"}
    expect = {"loss": "Packet loss ratio PLR (log scale; 0 drawn at 10\u207b\u2076)",
              "delivery": "Delivery ratio DR", "throughput": "Throughput T(O) (Mpps)"}
    for kind, paths in files.items():
        png, svg = paths
        assert png.suffix == ".png" and svg.suffix == ".svg"
        data = png.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 30_000
        text = svg_text(svg)
        assert "Offered load O (Mpps)" in text
        assert expect[kind] in text
        for c in clab_configs:  # verdict in every legend entry
            assert f"\u2014 {c.analysis.report.verdict.value}" in text
    loss = svg_text(files["loss"][1])
    assert "PDR threshold X = 0.5%" in loss
    assert "k6.8 as-is \u2014 GOOD" in loss  # short label of the GOOD file, tokens shared by all removed
    assert "PLR = 0 (or below) drawn here" in loss


@needs_data
def test_loss_figure_floor_threshold_and_pdr_marker(clab_configs):
    fig = plots.loss_figure(clab_configs, 0.005)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert ax.get_ylim()[0] < plots.FLOOR_PLR
    curves = [ln for ln in ax.lines if ln.get_marker() not in (None, "None", "")]
    assert len(curves) == len(clab_configs)
    ys = np.concatenate([np.asarray(ln.get_ydata(), float) for ln in curves])
    assert ys.min() == pytest.approx(plots.FLOOR_PLR)  # zero loss is drawn at the floor, never below
    zero = [c for c in clab_configs if any(s.plr_ratio.mean == 0 for s in c.analysis.stats.loads)]
    assert zero, "the chosen files must include a zero-loss load"
    horiz = {float(ln.get_ydata()[0]) for ln in ax.lines if len(set(ln.get_ydata())) == 1
             and ln.get_xdata()[0] == 0 and ln.get_xdata()[1] == 1}
    assert 0.005 in horiz and plots.FLOOR_PLR in horiz
    vert = {float(ln.get_xdata()[0]) for ln in ax.lines if ln.get_ydata()[0] == 0 and ln.get_ydata()[1] == 1
            and ln.get_xdata()[0] == ln.get_xdata()[1]}
    points = {c.analysis.report.pdr_point_load_pps / 1e6 for c in clab_configs}
    assert points <= vert
    bands = ax.collections
    assert len(bands) == len(clab_configs)
    for band in bands:  # CI bands are clipped to the floor too
        verts = np.concatenate([p.vertices for p in band.get_paths()])
        assert verts[:, 1].min() >= plots.FLOOR_PLR * (1 - 1e-9)


@needs_data
def test_throughput_and_delivery_figures_use_the_axis_units(clab_configs):
    ax = plots.throughput_figure(clab_configs).axes[0]
    curves = [ln for ln in ax.lines if ln.get_marker() not in (None, "None", "")]
    for c, ln in zip(clab_configs, curves):
        loads = c.analysis.stats.loads
        np.testing.assert_allclose(ln.get_xdata(), [s.load_pps / 1e6 for s in loads])
        np.testing.assert_allclose(ln.get_ydata(), [s.throughput_pps.mean / 1e6 for s in loads])
        assert max(ln.get_ydata()) <= ax.get_ylim()[1]  # inside the visible area
    assert ax.get_xlabel() == "Offered load O (Mpps)" and ax.get_ylabel() == "Throughput T(O) (Mpps)"
    ax = plots.delivery_figure(clab_configs).axes[0]
    curves = [ln for ln in ax.lines if ln.get_marker() not in (None, "None", "")]
    for c, ln in zip(clab_configs, curves):
        np.testing.assert_allclose(ln.get_ydata(), [s.dr_ratio.mean * 100 for s in c.analysis.stats.loads])
        assert ax.get_ylim()[0] <= min(ln.get_ydata())


def test_units_and_formatting():
    assert plots.load_unit(1.5e6) == (1e6, "Mpps")
    assert plots.load_unit(450e3) == (1e3, "kpps")
    assert plots.load_unit(900) == (1.0, "pps")
    assert plots.format_rate(450_000) == "450 kpps"
    assert plots.format_rate(1_350_000) == "1.35 Mpps"
    assert plots.format_rate(None) == "\u2014"


@needs_data
def test_short_labels_and_groups(clab_configs):
    short, common = plots.short_labels(clab_configs[:3])
    assert "tb1" in common and "50 runs" in common
    assert sorted(short) == sorted(["k6.5 as-is", "k6.8 as-is", "k6.8 ring 4096"])
    groups = plots.group_configurations(clab_configs)
    assert [len(g) for g in groups] == [3, 2]  # tb1 and tb3 are plotted apart
    many = plots.group_configurations(clab_configs * 4, max_per_figure=8)
    assert all(len(g) <= 8 for g in many) and sum(map(len, many)) == 20


def test_save_figure_rejects_unknown_format(tmp_path):
    from matplotlib.figure import Figure

    with pytest.raises(ValueError, match="png, svg"):
        plots.save_figure(Figure(), tmp_path / "x", formats=("pdf",))


# ---- HTML on PASTRAMI data ----------------------------------------------------------

@pytest.fixture(scope="module")
def clab_report(clab_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "clab.html"
    return write_report(clab_dir, out)


@needs_data
def test_report_is_self_contained(clab_report):
    text = clab_report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert 'src="http' not in text and "src='http" not in text
    assert "<link" not in text and "<script" not in text and "url(" not in text
    srcs = re.findall(r'src="([^"]*)"', text)
    imgs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(srcs) == len(imgs) == 6  # loss, delivery, throughput for the tb1 group and the tb3 group
    for b64 in imgs:
        assert base64.b64decode(b64).startswith(PNG_MAGIC)


@needs_data
def test_report_lists_each_configuration(clab_report, clab_configs):
    text = clab_report.read_text(encoding="utf-8")
    for c in clab_configs:
        r = c.analysis.report
        assert esc(c.label) in text
        assert esc(r.reason) in text  # the reason is shown, escaped ('>=' -> '&gt;=')
        assert re.search(rf'<section class="config" id="cfg-\d+"><h3><span class="badge v-{r.verdict.value}">'
                         rf"{r.verdict.value}</span> {re.escape(esc(c.label))}</h3>", text)
        assert esc(c.meta.path) in text  # provenance: the data file
    assert "Summary" in text and "5</b>configurations" in text
    assert "low_load_loss" in text and "warm-up or setup artefact" in text
    assert "loss_inversion" in text and "significantly less" in text
    assert "PLR (%) mean \u00b1 CI95" in text and "\u0394UCL95" in text and "TIR to next load" in text


@needs_data
def test_report_escapes_labels(clab_configs, tmp_path):
    c = analyze_path(CLAB / CLAB_FILES[0])[0]
    c.label = '<script>alert("x")</script> $HOME & co'
    c.knobs = {}  # no metadata: the legend uses the label itself, '$' must not break matplotlib
    text = render_report([c, clab_configs[1]], title="<b>t</b>", source="<src>")
    assert "<script" not in text and "<b>t</b>" not in text and "<src>" not in text
    assert esc('<script>alert("x")</script> $HOME & co') in text
    assert "&lt;b&gt;t&lt;/b&gt;" in text


@needs_data
def test_default_out_file_is_cwd(clab_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = write_report(clab_dir / CLAB_FILES[0])
    assert out == tmp_path / "softnet-report.html" and out.stat().st_size > 10_000


# ---- synthetic softnet store ----------------------------------------------------

O_SAT = 550_000.0
LOADS = [i * 100_000.0 for i in range(1, 11)]  # 0.1 .. 1.0 Mpps
STARVED_LOAD = 1_100_000.0  # every run generator-limited: left out, shown as such
HOST_CHANGE = "sysctl net.ipv4.ip_forward=1 (was 0)"
ANALYSIS = {"pdr_loss_ratio": 0.005, "eta": 0.1, "confidence": 0.95}


def _result(load, duration, tx, rx, flags, prov):
    return {"intended_rate_pps": load, "achieved_rate_pps": tx / duration, "duration_s": duration,
            "sent_pkts": tx, "received_pkts": rx, "lost_pkts": tx - rx, "loss_ratio": (tx - rx) / tx,
            "flags": flags, "valid": not flags, "provenance": prov}


def make_store(root: Path, runs: int = 5, duration_s: float = 1.0, seed: int = 3) -> Path:
    """A results directory filled the way the campaign runner does, from the paper's model."""
    rng = np.random.default_rng(seed)
    spec = {"name": "synthetic-demo", "testbed": {"sut": "synthetic"}, "analysis": ANALYSIS,
            "method": {"kind": "sweep", "runs": runs, "duration_s": duration_s}}
    h = spec_hash(spec)
    cells = [({"synthetic.plr_at_sat": 0.0}, LoadLossModel(o_sat_pps=O_SAT)),
             # loss crosses 0.5% well before saturation: throughput still grows -> BAD
             ({"synthetic.plr_at_sat": 0.03, "note": "<b>early</b> & $x$"},
              LoadLossModel(o_sat_pps=O_SAT, plr_at_sat=0.03, pre_sat_exponent=4))]
    with Store(root) as store:
        store.register_campaign("c1", "synthetic-demo", h, spec, 1_700_000_000.0)
        for cell_id, (knobs, model) in enumerate(cells):
            cell_spec = {"analysis": ANALYSIS, "testbed": {"sut": "synthetic"}}
            store.register_cell("c1", cell_id, knobs, cell_spec)
            for li, load in enumerate(LOADS + [STARVED_LOAD]):
                for run in range(runs):
                    prov = {"kernel": "6.18.0-synthetic", "cpu_model": "Model CPU @ 2GHz",
                            "softnet_version": "0.1.0", "spec_hash": h, "hostname": "lab1",
                            "host_changes_applied": [HOST_CHANGE]}
                    tx, rx = model(load, duration_s, rng)
                    flags = []
                    if load == STARVED_LOAD or (li == 2 and run == 0):
                        tx = int(tx * 0.8)
                        rx = min(rx, tx)
                        flags = ["generator_limited"]
                    store.add_trial("c1", cell_id, li, run, knobs, _result(load, duration_s, tx, rx, flags, prov))
    return root


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory) -> Path:
    return make_store(tmp_path_factory.mktemp("results"))


def test_synthetic_store_analysis_recovers_o_sat(store_dir):
    good, bad = analyze_path(store_dir)
    r = good.analysis.report
    assert r.verdict.value == "GOOD", r.reason
    step = LOADS[1] - LOADS[0]
    assert O_SAT < r.pdr_point_load_pps <= O_SAT + step  # first load above O^sat
    assert r.pdr_load_pps == pytest.approx(500_000)
    assert good.analysis.stats.empty_loads_pps == [STARVED_LOAD]
    assert bad.analysis.report.verdict.value == "BAD", bad.analysis.report.reason


def test_synthetic_store_report(store_dir):
    out = write_report(store_dir)
    assert out == store_dir / "report.html"
    text = out.read_text(encoding="utf-8")
    good, bad = analyze_path(store_dir)
    r = good.analysis.report
    section = re.search(r'<section class="config" id="cfg-0">.*?</section>', text, re.S).group(0)
    assert '<span class="badge v-GOOD">GOOD</span> plr_at_sat=0.0' in section
    assert "PDR point (first load with mean PLR &gt; X)</dt><dd>600 kpps (600000 pps)" in section
    assert "PDR@0.5%</dt><dd>500 kpps (500000 pps)" in section
    assert esc(r.reason) in section
    # the fully excluded load and the excluded runs, with their reason in plain words
    assert "every run excluded" in section and "generator_limited \u00d76" in text
    assert "applied a lower load than its nominal one" in section
    # provenance: kernel, CPU, version, spec hash, host changes, the spec
    h = spec_hash({"name": "synthetic-demo", "testbed": {"sut": "synthetic"}, "analysis": ANALYSIS,
                   "method": {"kind": "sweep", "runs": 5, "duration_s": 1.0}})
    for s in ("6.18.0-synthetic", "Model CPU @ 2GHz", "0.1.0", h, "lab1", esc(HOST_CHANGE),
              "synthetic-demo", esc('"pdr_loss_ratio": 0.005')):
        assert s in text, s
    # the second cell: BAD, its knob with markup is escaped in text and did not break the plots
    assert '<span class="badge v-BAD">BAD</span>' in text
    assert "&lt;b&gt;early&lt;/b&gt; &amp; $x$" in text and "<b>early</b>" not in text
    assert len(re.findall(r'src="data:image/png;base64,', text)) == 3 + 1  # and the model (Figs. 3-5)
    assert 'src="http' not in text and "<link" not in text


def test_report_keeps_plots_when_asked(store_dir, tmp_path):
    out = write_report(store_dir, tmp_path / "r.html", plots_dir=tmp_path / "figs")
    names = sorted(p.name for p in (tmp_path / "figs").iterdir())
    # the three load curves, and the synthetic SUT's model (PASTRAMI Figs. 3-5)
    assert names == sorted([f"group01-{k}.{x}" for k in ("loss", "delivery", "throughput") for x in ("png", "svg")]
                           + ["model.png", "model.svg"])
    assert out.read_text(encoding="utf-8").count("data:image/png;base64,") == 3 + 1


def test_report_survives_empty_and_single_run_configurations():
    from dataclasses import replace

    from softnet.analysis.saturation import analyze_rows
    from softnet.analysis.synthetic import simulate_sweep
    from softnet.analysis.campaigns import Configuration

    model = LoadLossModel(o_sat_pps=500_000)
    starved = [replace(r, tx_pkts=r.tx_pkts // 2)  # generator-limited everywhere: no load left
               for r in simulate_sweep(model, [1e5, 2e5], 3, 1.0, np.random.default_rng(1))]
    empty = Configuration("all excluded", {}, analyze_rows(starved), "synthetic")
    single = Configuration("one run", {}, analyze_rows(simulate_sweep(model, [1e5, 6e5], 1, 1.0,
                                                                      np.random.default_rng(2))), "synthetic")
    assert empty.analysis.stats.loads == [] and single.analysis.stats.loads[0].n_runs == 1
    text = render_report([empty, single], title="edge cases")
    assert text.count("every run excluded") == 2
    assert "single_run" in text and "no standard deviation or confidence interval" in text
    assert text.count("data:image/png;base64,") == 3


# ---- a store with kernel statistics, profiles and stages -------------------------

KERNEL_LOADS = [50_000.0 * i for i in range(1, 13)]  # 12 loads: the panels must stay readable
KSTAT_CAPACITY = 450_000.0


def _kernel_result(load: float, run: int, rng) -> dict:
    """A trial result with the sampler's and the profiler's summaries, shaped as
    softnet.campaign.trial stores them (SUT on CPU 1, generator on CPU 0)."""
    from softnet.analysis.stages import WIFI_STAGES

    fwd = min(load, KSTAT_CAPACITY) * (1 - 1e-4 * rng.random())
    busy = min(100.0, 100.0 * fwd / KSTAT_CAPACITY * 0.93 + 2.0 + rng.random())
    mbps = fwd * 64 * 8 / 1e6
    per_cpu = {
        0: {"utilization_pct": 97.0 + rng.random(), "cpu_time_pct": 98.5, "irqs_per_s": 250.0,
            "net_rx_softirqs_per_s": 12.0, "net_tx_softirqs_per_s": 3.0, "pkts_per_rx_softirq": None,
            "softirq_tick_pct": 1.0},
        1: {"utilization_pct": busy * 0.8, "cpu_time_pct": busy, "irqs_per_s": 900.0 + load / 400,
            "net_rx_softirqs_per_s": fwd / 48, "net_tx_softirqs_per_s": 10.0 + rng.random(),
            "pkts_per_rx_softirq": 48.0 + rng.random(), "softirq_tick_pct": busy * 0.7}}
    kernel = {"per_cpu": per_cpu, "dev_weight": 64, "missing": {"power": "no RAPL energy counter (VM)"},
              "window_s": 2.0, "nic": {"sut_in": {"changed": {"rx_queue_0_drops": load / 100},
                                                  "losses": {"rx_queue_0_drops": load / 100}, "queues": {}}},
              "normalized": {"cpus": [1], "throughput_mbps": mbps, "utilization_per_mbps": busy * 0.8 / mbps,
                             "cpu_time_per_mbps": busy / mbps, "cycles_per_mbps": busy / mbps,
                             "power_mw_per_mbps": None, "cost_basis": "cpu_time"}}
    shares = {s: (i % 5 + 1) for i, s in enumerate(WIFI_STAGES)}
    total = sum(shares.values())
    rows = [{"stage": s, "pct_of_cpu": busy * 0.9 * w / total, "ns_per_packet": busy * 0.9 * w / total * 1e7 / fwd}
            for s, w in shares.items() if not s.startswith("IP to")]
    cpu1 = {"busy_pct": busy, "softirq_pct": busy * 0.85, "net_rx_pct_by_context": {"idle": busy * 0.4,
            "ksoftirqd": busy * 0.45, "napi_kthread": 0.0, "other": 0.01}, "napi_work_per_poll": 12.0}
    cpu0 = {"busy_pct": 99.0, "softirq_pct": 1.0, "net_rx_pct_by_context": {"idle": 0.0, "ksoftirqd": 0.0,
            "napi_kthread": 0.0, "other": 1.0}, "napi_work_per_poll": None}
    audit = {c: {"reported_busy_pct": m["busy_pct"] - gap, "reported_softirq_pct": m["softirq_pct"] * 0.6,
                 "misaccounted_pct": gap}
             for c, m, gap in ((0, cpu0, 0.5), (1, cpu1, 6.0 + rng.random()))}
    profile = {"per_cpu": {0: cpu0, 1: cpu1}, "audit": audit, "duty": 0.02,
               "stages": {1: {"wifi_ap": rows, "coverage": 0.9 + 0.05 * rng.random(), "packet_time_pct": busy,
                              "ebpf_profile": [{"stage": "IP processing", "ns_per_packet": 950.0 + load / 1e3},
                                               {"stage": "transmit path", "ns_per_packet": 400.0}]}}}
    tx = int(load)
    rx = int(fwd)
    return {"intended_rate_pps": load, "achieved_rate_pps": float(tx), "duration_s": 1.0, "sent_pkts": tx,
            "received_pkts": rx, "lost_pkts": tx - rx, "loss_ratio": (tx - rx) / tx, "flags": [], "valid": True,
            "kernel": kernel, "profile": profile, "placement": {"requested": {"sut_cpus": [1]}},
            "provenance": {"kernel": "6.18.0-synthetic", "cpu_model": "Model CPU @ 2GHz", "softnet_version": "0.1.0",
                           "hostname": "lab1", "host_changes_applied": [HOST_CHANGE]}}


def make_kernel_store(root: Path, runs: int = 2, seed: int = 5) -> Path:
    """A profiled sweep of 12 loads, stored the way the campaign runner does."""
    rng = np.random.default_rng(seed)
    spec = {"name": "profiled-demo", "testbed": {"sut": "ipv4-fwd"}, "analysis": ANALYSIS,
            "method": {"kind": "sweep", "runs": runs, "duration_s": 1.0}}
    with Store(root) as store:
        store.register_campaign("k1", "profiled-demo", spec_hash(spec), spec, 1_700_000_000.0)
        knobs = {"testbed.irq": "rps"}
        store.register_cell("k1", 0, knobs, {**spec, "analysis": ANALYSIS})
        for li, load in enumerate(KERNEL_LOADS):
            for run in range(runs):
                store.add_trial("k1", 0, li, run, knobs, _kernel_result(load, run, rng))
    return root


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory) -> Path:
    return make_kernel_store(tmp_path_factory.mktemp("kernel"))


@pytest.fixture(scope="module")
def kernel_trials(kernel_dir) -> list[dict]:
    with readers.open_results(kernel_dir) as store:
        return readers.trial_results(store, "k1", 0)


def test_kernel_store_report_has_every_section(kernel_dir, tmp_path):
    text = write_report(kernel_dir, tmp_path / "k.html").read_text(encoding="utf-8")
    for head in ("Kernel statistics", "CPU accounting audit (eBPF profile)", "Packet-path stages (eBPF stage clock)",
                 "Campaigns", "Provenance (softnet trials)"):
        assert f"<h2>{head}</h2>" in text or f"<h4>{head}</h4>" in text, head
    assert "level 12</th>" in text and "CPU time, % per Mbps (no cycle counter)" in text
    # the eBPF receive-path study's grouping of the same stage time (no local delivery here: IP to transport 0)
    assert "the same time in the eBPF receive-path study's stages" in text
    assert "<td>IP to transport</td><td>approximate</td><td>0</td>" in text  # forwarded: no local delivery
    assert "<td>IP processing</td><td>approximate</td><td>1,000</td>" in text  # 50 kpps: 950 + 50
    # ethtool -S loss counters per second: 500 drops over the 2 s window at 50 kpps
    assert "<td>ethtool sut_in.rx_queue_0_drops/s</td><td>250<br>" in text
    assert "Packets per RX softirq per CPU (dev_weight 64)" in text
    assert "Predicted capacity (SUT CPUs [1] busy 100%)" in text
    assert "idle " in text and "ksoftirqd " in text  # NET_RX time by context
    assert text.count("data:image/png;base64,") == 5  # loss, delivery, throughput, kernel panels, stages


# ---- tick labels must not overprint ---------------------------------------------

def assert_no_tick_overlap(fig) -> None:
    """After drawing, no two visible x tick labels of an axes meet, nor two y tick labels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    checked = 0
    for ax in fig.axes:
        if not ax.axison:
            continue
        for which, labels in (("x", ax.get_xticklabels()), ("y", ax.get_yticklabels())):
            boxes = [t.get_window_extent(renderer) for t in labels if t.get_visible() and t.get_text().strip()]
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    assert not a.overlaps(b), f"{ax.get_title() or ax.get_ylabel()!r}: {which} tick labels overlap"
            checked += len(boxes)
    assert checked, "no tick label to check"


def assert_titles_fit(fig) -> None:
    """The figure's title and every panel title lie inside the figure."""
    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    texts = [fig._suptitle] if fig._suptitle is not None else []
    texts += [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
    for t in texts:
        if t.get_text():
            b = t.get_window_extent(renderer)
            assert box.x0 - 1 <= b.x0 and b.x1 <= box.x1 + 1, f"title runs off the figure: {t.get_text()!r}"


LONG_LABEL = ("profiled-demo cell 3 (testbed.steering=threaded, traffic.frame_bytes=64, collect.profile_duty=0.02, "
              "testbed.sut=ipv4-fwd, $HOME)")


def test_load_loss_figures_ticks_do_not_overlap(store_dir):
    configs = analyze_path(store_dir)
    for fig in (plots.loss_figure(configs), plots.delivery_figure(configs), plots.throughput_figure(configs)):
        assert_no_tick_overlap(fig)
    assert_titles_fit(plots.loss_figure(configs, title=LONG_LABEL))


@needs_data
def test_pastrami_figures_ticks_do_not_overlap(clab_configs):
    for fig in (plots.loss_figure(clab_configs), plots.throughput_figure(clab_configs)):
        assert_no_tick_overlap(fig)


def test_search_trace_ticks_do_not_overlap():
    rng = np.random.default_rng(4)
    loads = np.clip(np.cumsum(rng.normal(0, 3e4, 60)) + 4e5, 5e4, 9e5)
    trials = [StoredResult(intended_rate_pps=float(x), duration_s=1.0, loss_ratio=float(x > 4.5e5) * 0.01,
                           valid=i != 7) for i, x in enumerate(loads)]
    fig = plots.search_figure(trials, [("ndr", 0.0, 4.4e5, 4.6e5), ("pdr0.5", 0.005, 4.5e5, None)],
                              f"search: {LONG_LABEL}, cell 3, run 0")
    assert_no_tick_overlap(fig)
    assert_titles_fit(fig)
    assert "$HOME" in fig.axes[0].get_title(loc="left").replace("\\", "").replace("\n", " ")


def test_kernel_panels_stay_readable_with_12_loads(kernel_trials):
    from softnet.analysis import kernel_stats
    from softnet.analysis.stage_models import stage_levels

    levels = kernel_plots.kernel_levels(kernel_stats.summarize_by_load(kernel_trials))
    assert len(levels) == 12
    fig = kernel_plots.kernel_figure(levels, "kernel statistics: profiled-demo cell 0 (testbed.irq=rps)")
    assert_no_tick_overlap(fig)
    shown = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert shown[0] == "50k\n26" and 4 <= len(shown) <= 12  # engineering form, thinned to fit
    assert_titles_fit(fig)
    assert_titles_fit(kernel_plots.kernel_figure(levels, f"kernel statistics: {LONG_LABEL}"))
    assert_titles_fit(kernel_plots.stage_figure(kernel_plots.stage_levels_read(stage_levels(kernel_trials)),
                                                f"stages: {LONG_LABEL}"))


@pytest.mark.parametrize("n_loads", [3, 12, 30])
def test_stage_bars_ticks_do_not_overlap(kernel_trials, n_loads):
    from softnet.analysis.stage_models import stage_levels

    levels = stage_levels(kernel_trials)
    levels = [dict(levels[i % len(levels)], load_pps=25_000.0 * (i + 1)) for i in range(n_loads)]
    fig = kernel_plots.stage_figure(kernel_plots.stage_levels_read(levels), "stages: profiled-demo cell 0 (testbed.irq=rps)")
    assert_no_tick_overlap(fig)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()][0] == "25k"


def test_compact_png_is_smaller_and_still_a_png(store_dir, tmp_path):
    files = plots.plot_loss(analyze_path(store_dir), tmp_path / "loss", formats=("png",))
    small = plots.compact_png(files[0])
    assert small.startswith(PNG_MAGIC) and len(small) <= files[0].stat().st_size
    assert plots.png_data_uri(files[0]).startswith("data:image/png;base64,")


# ---- readers -------------------------------------------------------------------------

def test_readers_give_provenance_cells_and_checked_results(kernel_dir):
    with readers.open_results(kernel_dir) as store:
        prov = readers.provenance(store)
        cells = readers.sweep_cells(store, ["k1"])
    assert [c.campaign_id for c in prov.campaigns] == ["k1"] and prov.campaigns[0].spec["name"] == "profiled-demo"
    assert len(prov.trial_provenance[("k1", 0)]) == 24
    assert prov.trial_provenance[("k1", 0)][0].hostname == "lab1"
    assert [(c.name, c.cell_id, c.knobs) for c in cells] == [("profiled-demo", 0, {"testbed.irq": "rps"})]
    assert [t.result.intended_rate_pps for t in cells[0].trials][:3] == [50_000.0, 50_000.0, 100_000.0]
    assert [(t.load_index, t.run_index) for t in cells[0].trials][:3] == [(0, 0), (0, 1), (1, 0)]


def test_readers_skip_searches_in_sweep_cells(tmp_path):
    with Store(tmp_path) as store:
        store.register_campaign("s1", "s", "h", {}, 1.0)
        store.register_cell("s1", 0, {}, {"method": {"kind": "search"}})
    with readers.open_results(tmp_path) as store:
        assert readers.sweep_cells(store, ["s1"]) == []
        assert readers.search_trials(store, "s1") == {}


def _store_with_version(root: Path, version) -> Path:
    with Store(root) as store:
        store.register_campaign("v", "v", "h", {}, 1.0)
        store.register_cell("v", 0, {}, {"analysis": ANALYSIS})
        result = {**_result(1e5, 1.0, 100_000, 100_000, [], {"hostname": "h"})}
        if version is not None:
            result["schema_version"] = version
        store.add_trial("v", 0, 0, 0, {}, result)
    return root


@pytest.mark.parametrize("version", [None, 1, 2])
def test_known_schema_versions_are_read(tmp_path, version):
    with readers.open_results(_store_with_version(tmp_path, version)) as store:
        assert readers.trial_results(store, "v", 0)[0]["received_pkts"] == 100_000
        (t,) = readers.stored_trials(store, "v")
    assert (t.campaign_id, t.cell_id, t.load_index, t.run_index) == ("v", 0, 0, 0)
    assert t.result.received_pkts == 100_000 and t.result.schema_version == (version or 1)
    assert t.result.provenance.hostname == "h" and t.result.latency_at is None


def test_unknown_schema_version_is_an_error_naming_it(tmp_path):
    root = _store_with_version(tmp_path, 99)
    with pytest.raises(InputError, match=r"schema version 99") as exc:
        write_report(root, tmp_path / "r.html")
    assert DB_NAME in str(exc.value) and not (tmp_path / "r.html").exists()


def test_corrupt_database_is_an_error_naming_the_file(tmp_path):
    (tmp_path / DB_NAME).write_bytes(b"garbage!" * 100)
    with pytest.raises(InputError, match="cannot be read as a DuckDB database") as exc:
        write_report(tmp_path)
    assert str(tmp_path / DB_NAME) in str(exc.value)


def test_foreign_duckdb_is_an_error_naming_the_file(tmp_path):
    db = duckdb.connect(str(tmp_path / DB_NAME))
    db.execute("CREATE TABLE campaigns (x INTEGER)")
    db.close()
    with pytest.raises(InputError, match=r"not a softnet results database: it lacks campaigns\.campaign_id") as exc:
        write_report(tmp_path)
    assert str(tmp_path / DB_NAME) in exc.value.field


def make_search_store(root: Path, repeats: int = 2) -> Path:
    """Stored searches as the search runner leaves them: trials at loads of the
    search's choosing (load_index = trial order) and one row per goal."""
    spec = {"name": "search-demo", "testbed": {"sut": "synthetic"}, "analysis": ANALYSIS,
            "method": {"kind": "search", "goals": ["ndr", "pdr0.5"]}}
    prov = {"kernel": "6.18.0-synthetic", "hostname": "lab1"}
    with Store(root) as store:
        store.register_campaign("s1", "search-demo", spec_hash(spec), spec, 1_700_000_000.0)
        store.register_cell("s1", 0, {}, spec)
        for run in range(repeats):
            loads = [100e3, 800e3, 450e3, 275e3, 362e3, 406e3, 428e3, 417e3]
            for i, load in enumerate(loads):
                lost = 0 if load < 410e3 else int(load * 0.01)
                store.add_trial("s1", 0, i, run, {}, _result(load, 1.0, int(load), int(load) - lost, [], prov))
            goals = [{"goal": {"name": name, "loss_ratio": x}, "status": "found", "value_pps": 406e3 + run * 1e3,
                      "lower_bound_pps": 406e3 + run * 1e3, "upper_bound_pps": 417e3,
                      "lower": {"confidence": 0.99, "loss_ratio": 0.0, "loss_ratio_ci95": [0.0, 9.1e-6]},
                      "upper": {"confidence": 0.98}, "diagnosis": "bounds within the width"}
                     for name, x in (("ndr", 0.0), ("pdr0.5", 0.005))]
            store.add_search("s1", 0, run, {"goals": goals, "trial_count": len(loads), "trial_seconds": 8.0})
    return root


def test_search_store_report(tmp_path):
    root = make_search_store(tmp_path)
    text = write_report(root, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<h2>NDR/PDR searches</h2>" in text and "search: synthetic, cell 0, run 1" in text
    assert "406 kpps (406000 pps) (0.990)" in text and "0.00e+00 [0.0e+00, 9.1e-06]" in text
    assert text.count("data:image/png;base64,") == 2  # one trace per search; a search has no load-loss curve
    with readers.open_results(root) as store:
        trials = readers.search_trials(store, "s1")
    assert list(trials) == [(0, 0), (0, 1)] and [t.result.intended_rate_pps for t in trials[(0, 1)]][:2] == [1e5, 8e5]


def test_load_table_shows_latency_percentiles_and_old_results_their_bound(tmp_path):
    """A store made before trial schema 3 (no latency_p50_ns/p99_ns columns)
    gains them on open; its old rows show the log2 p99 bound they had, new
    rows the median over runs of p50 / p99."""
    from softnet.report.view import load_table
    from softnet.results.store import SCHEMA

    old_ddl = SCHEMA.replace("    latency_p50_ns DOUBLE, latency_p99_ns DOUBLE,\n", "")
    old_ddl = "\n".join(line for line in old_ddl.splitlines() if not line.startswith(("ALTER", "--")))
    db = duckdb.connect(str(tmp_path / DB_NAME))
    db.execute(old_ddl)
    db.close()
    spec = {"analysis": ANALYSIS, "testbed": {"sut": "ipv4-fwd"}}
    with Store(tmp_path) as store:
        store.register_campaign("c1", "lat", "h", spec, 1.0)
        store.register_cell("c1", 0, {}, spec)
        for li, load in enumerate((1000.0, 2000.0)):
            for run in range(2):
                r = _result(load, 1.0, int(load), int(load), [], {})
                if li == 0:  # schema 2: the log2 upper edge only
                    r.update(schema_version=2, latency_p99_upper_ns=2 ** 15)
                else:
                    r.update(schema_version=3, latency_p50_ns=10_000 + run * 2000, latency_p99_ns=40_000.5)
                store.add_trial("c1", 0, li, run, {}, r)
    (config,) = analyze_path(tmp_path)
    table = load_table(config)
    assert table.latency and [row.latency for row in table.rows] == ["p99 \u2264 32.8", "11 / 40"]
