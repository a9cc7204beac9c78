"""Data paths side by side (softnet.analysis.data_paths) on real inputs: the
published PASTRAMI sweeps and a trial captured on this machine."""
import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest

from softnet.analysis.campaigns import analyze_path, analyze_pastrami
from softnet.analysis.data_paths import compare, cost_fit, cpu_ns_per_packet, short_label
from softnet.analysis.trial_eval import evaluate
from softnet.cli.campaign_cmd import data_path_rows
from softnet.results.readers import StoredResult
from tests.conftest import softnet_cmd

DATA = Path(__file__).parent / "data"
PASTRAMI = Path("/work/shared/data/pastrami")
if not PASTRAMI.is_dir():
    PASTRAMI = Path(__file__).resolve().parents[2] / "shared" / "data" / "pastrami"


def _configs(*names):
    return analyze_pastrami([PASTRAMI / "vm" / n for n in names], 0.005, 0.1, 0.95)


def test_cpu_per_packet_of_a_sampled_trial():
    raw = json.loads((DATA / "raw_trials" / "ipv4fwd_100kpps_sampled.json").read_text())["raw"]
    r = evaluate(raw).to_dict()
    k = r["kernel"]
    cpus = k["normalized"]["cpus"]
    busy = sum(k["per_cpu"][c]["cpu_time_pct"] for c in cpus) / 100 * k["window_s"]
    ns = cpu_ns_per_packet(r)
    assert ns == pytest.approx(busy * 1e9 / r["received_pkts"])
    assert cpu_ns_per_packet(StoredResult.model_validate(r)) == ns  # the typed result reads the same
    # kernel IPv4 forwarding on a VM vCPU: hundreds of ns to tens of us per packet
    assert 100 < ns < 50_000
    assert cpu_ns_per_packet({**r, "kernel": None}) is None
    assert cpu_ns_per_packet({**r, "received_pkts": 0}) is None


def test_ranked_by_pdr_and_ties_named():
    files = sorted(p.name for p in (PASTRAMI / "vm").glob("clab_tb2_raw_50_k6.5_intel_vm_*.txt"))[:2]
    configs = _configs(*files)
    same = dataclasses.replace(configs[0], label=configs[0].label + " (again)")
    rows = compare([*configs, same], {})
    assert [r.rank for r in rows] == sorted(r.rank for r in rows)
    twins = [r for r in rows if r.label.startswith(configs[0].label)]
    # a sweep measured twice cannot be told apart from itself
    assert twins[0].rank == twins[1].rank and twins[0].label in twins[1].tied_with
    for r in rows:
        assert r.pdr_pps is None or r.pdr_next_pps is None or r.pdr_pps < r.pdr_next_pps
        assert r.capacity_ci is None or r.capacity_ci[0] <= r.capacity_pps <= r.capacity_ci[1]
        assert r.cpu_ns_per_pkt is None and r.cpu_ns_at_ref is None  # PASTRAMI files carry no kernel statistics
    pdrs = [r.pdr_pps or 0 for r in rows]
    assert pdrs == sorted(pdrs, reverse=True)


def test_separable_paths_get_their_own_ranks():
    """Sweeps whose PDR brackets do not overlap are ranked apart."""
    all_vm = analyze_pastrami(sorted((PASTRAMI / "vm").glob("*.txt")), 0.005, 0.1, 0.95)
    by_pdr = sorted((c for c in all_vm if c.analysis.report.pdr_load_pps), key=lambda c: c.analysis.report.pdr_load_pps)
    lo, hi = by_pdr[0], by_pdr[-1]
    assert hi.analysis.report.pdr_load_pps > lo.analysis.report.pdr_load_pps
    rows = compare([lo, hi], {})
    assert [r.label for r in rows] == [hi.label, lo.label]
    assert [r.rank for r in rows] == [1, 2] and not rows[0].tied_with


@pytest.mark.usefixtures("host_unchanged")
@pytest.mark.netns
def test_campaign_over_personalities_ranks_them(tmp_path):
    """A sweep whose matrix knob is testbed.sut: `softnet run` ends with the
    data paths ranked, with SUT CPU per packet from the kernel sampler, and
    the HTML report has the same table."""
    spec = tmp_path / "paths.toml"
    spec.write_text("""
name = "paths"
[method]
loads = ["10kpps", "20kpps"]
runs = 2
duration_s = 0.6
warmup_s = 0.2
[traffic]
frame_bytes = 86
[collect]
sample_interval_s = 0.2
[matrix]
"testbed.sut" = ["ipv4-fwd", "ipv6-fwd"]
""")
    results = tmp_path / "results"
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(results)), capture_output=True, text=True,
                       timeout=300, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "data paths, ranked" in out
    assert "sut=ipv4-fwd" in out and "sut=ipv6-fwd" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    html = tmp_path / "r.html"
    r = subprocess.run(softnet_cmd("report", str(results), "--out", str(html)), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    text = html.read_text()
    assert "Data paths compared" in text
    rows = data_path_rows(results, analyze_path(results))
    assert {r.label for r in rows} == {"sut=ipv4-fwd", "sut=ipv6-fwd"}
    for row in rows:
        # the plain ratio at the lowest load, and the slope over the loads at
        # or below the PDR: a vCPU stall can overflow a veth ring even at 20 kpps
        assert 50 < row.cpu_ns_at_ref < 200_000
        top = row.pdr_pps if row.pdr_pps is not None else (
            20_000 if row.verdict == "NO-SATURATION" else None)
        if top is not None and top >= 20_000:
            assert row.cpu_fit_trials >= 3 and row.cpu_ns_per_pkt is not None
            assert row.cpu_fit_max_load_pps == top
        else:
            assert row.cpu_fit_trials == 0 and row.cpu_ns_per_pkt is None
        assert f"{row.cpu_ns_at_ref:,.0f}" in text


def test_cost_fit_is_the_slope_of_busy_cpu_against_rate():
    """Trials whose busy share is exactly 2% + 500 ns x rate give back 500 ns
    and 2%; loads above the PDR (saturated) are left out; one load is no fit."""
    def trial(load, busy, valid=True):
        return StoredResult(valid=valid, intended_rate_pps=load, received_pkts=int(load), duration_s=1.0,
                            kernel={"normalized": {"cpus": [1]}, "per_cpu": {"1": {"cpu_time_pct": 100 * busy}}})
    ts = [trial(x, 0.02 + 500e-9 * x) for x in (1e5, 2e5, 4e5) for _ in range(2)]
    ts += [trial(8e5, 1.0), trial(3e5, 0.9, valid=False)]
    f = cost_fit(ts, 4e5)
    assert f.ns == pytest.approx(500) and f.fixed_pct == pytest.approx(2)
    assert f.n == 6 and f.ci[0] <= 500 <= f.ci[1]
    assert cost_fit(ts, 1e5) is None and cost_fit(ts, None) is None


def test_short_labels():
    assert short_label("sut=custom:file=/work/x/examples/custom-sut/sut.toml") == "custom:file=sut.toml"
    assert short_label("sut=nft-fw:rules=100,conntrack=on") == "nft-fw:rules=100,conntrack=on"
    assert short_label("sut=bridge") == "bridge"


def _row(label, pdr, nxt, cap, ci):
    from softnet.analysis.data_paths import DataPathRow
    return DataPathRow(label, "GOOD", None, pdr, nxt, cap, ci, None, None, None, 0, None, None, None)


def test_ties_are_groups_and_disagreements_are_named():
    """A ties B, B ties C but A and C do not overlap: one group, one rank,
    rows together; a half-open bracket touching another does not tie; a
    lower-ranked row whose capacity interval lies above a higher one's is named."""
    from softnet.analysis.data_paths import capacity_disagrees, rank
    rows = rank([_row("C", 200e3, 350e3, 340e3, (300e3, 390e3)), _row("D", 500e3, 700e3, 600e3, (590e3, 610e3)),
                 _row("A", 200e3, 350e3, 500e3, (450e3, 550e3)), _row("B", 200e3, 350e3, 420e3, (380e3, 460e3)),
                 _row("E", 350e3, 500e3, 2e6, (1.9e6, 2.1e6))])
    assert [r.label for r in rows] == ["D", "E", "A", "B", "C"]
    assert [r.rank for r in rows] == [1, 2, 3, 3, 3]
    assert set(rows[2].tied_with) == {"B", "C"} and not rows[0].tied_with and not rows[1].tied_with
    assert capacity_disagrees(rows) == [("E", "D")]


def test_tied_data_paths_point_to_a_paired_comparison():
    from softnet.analysis.data_paths import DataPathRow
    from softnet.cli.campaign_cmd import show_data_paths
    from softnet.cli.output import console

    def row(label, ties):
        return DataPathRow(label, "BAD", 1e5, 5e5, 7e5, 1e6, (9e5, 1.1e6), 6000, (5000, 7000), 3.0, 10, 5e5, 5e4,
                           6500, 1, ties)

    with console.capture() as cap:
        show_data_paths([row("sut=ipv4-fwd", ("sut=tc-router",)), row("sut=tc-router", ("sut=ipv4-fwd",))])
    assert "softnet compare --sut ipv4-fwd --sut tc-router" in " ".join(cap.get().split())
    with console.capture() as cap:
        show_data_paths([row("sut=ipv4-fwd", ()), row("sut=tc-router", ())])
    assert "softnet compare" not in cap.get()
