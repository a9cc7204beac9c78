"""Soaks (method kind "soak"): the PLRsearch-like model on simulated SUTs
whose critical load is known, the step and resume on the simulated
testbed, the drift watch's readers on captured /proc and tool output, and
the two planted truths on real testbeds: an nftables set that leaks at a
known rate, and a SUT whose capacity steps down at a known time."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest

from softnet.analysis.plr_model import LossEvidence, PlrModel, witness
from softnet.analysis.soak import fit_series
from softnet.analysis.synthetic import LoadLossModel
from softnet.campaign.spec import CampaignSpec
from softnet.collect.drift import bpf_maps, nft_set_elements, parse_meminfo, parse_slabinfo, parse_sockstat
from softnet.results.soak import SoakSummary
from tests.conftest import needs_root, softnet_cmd
from tests.test_serve import Server
from tests.test_serve_browser import browser, not_blank, open_page  # noqa: F401 (browser: a fixture)

DATA = Path(__file__).parent / "data" / "drift"
REPO = Path(__file__).resolve().parents[1]


def simulate(sut: LoadLossModel, trials: int, seed: int) -> tuple[PlrModel, list, list]:
    """A soak's loop on a simulated SUT: (model, evidence, the estimate after each trial)."""
    model, ev, path, post = PlrModel(1e4, 2e6), [], [], None
    rng = np.random.default_rng(seed)
    received = None
    for i in range(trials):
        load = model.next_load(post, i, seed, received, ev)
        d = 1 + 0.2 * i
        tx, rx = sut(load, d, rng)
        received = rx / d
        ev.append(LossEvidence(load, d, tx - rx))
        post = model.posterior(ev)
        path.append(post.estimate)
    return model, ev, path


@pytest.mark.parametrize("sut, truth, within", [
    # the ideal knee (PASTRAMI Fig. 3): no loss up to O_sat, then 1 - O_sat / O: a shape the fits have
    (LoadLossModel(o_sat_pps=500e3), 500e3, 0.05),
    # a loss that creeps up as a power of the load, PLR(O) = 1e-3 (O / 1M)^8: neither fit's shape, so
    # the estimate is biased (bench/soak_model.py measures by how much); its interval must say so
    (LoadLossModel(o_sat_pps=1e6, plr_at_sat=1e-3, pre_sat_exponent=8), 1e6 * (1e-7 / 1e-3) ** (1 / 8), None),
])
def test_the_model_finds_a_simulated_critical_load_and_narrows(sut, truth, within):
    _, _, path = simulate(sut, 60, seed=3)
    last = path[-1]
    # within the interval (a knee's truth sits on its edge: 1% of slack)
    assert 0.99 * last.lower_pps <= truth <= 1.01 * last.upper_pps, (truth, last)
    if within is not None:
        assert abs(last.median_pps / truth - 1) < within, (truth, last)
    assert last.relative_width < path[15].relative_width  # the interval narrows as evidence comes


def test_a_surprise_is_a_step_only_where_earlier_trials_at_its_load_all_differ():
    e = LossEvidence(500e3, 1.0, 200_000)  # 40% lost
    clean = [LossEvidence(500e3, 1.0, 3), LossEvidence(480e3, 1.0, 1), LossEvidence(520e3, 1.0, 0),
             LossEvidence(200e3, 1.0, 0)]
    assert witness(clean, e, "more") == 2
    # a host whose trials at one load lose now nothing, now as much: not a changed SUT
    noisy = clean + [LossEvidence(490e3, 1.0, 150_000), LossEvidence(505e3, 1.0, 190_000)]
    assert witness(noisy, e, "more") is None
    # a trial just before the step that saw part of it does not hide the step
    assert witness(clean + [LossEvidence(510e3, 1.0, 60_000)], e, "more") == 2
    assert witness(clean[:2], e, "more") is None  # two earlier trials are not enough


def test_drift_readers_on_captured_files():
    mem = parse_meminfo((DATA / "meminfo").read_text())
    assert set(mem) == {"mem.slab_bytes", "mem.slab_unreclaimable_bytes", "mem.available_bytes", "mem.percpu_bytes"}
    assert mem["mem.slab_bytes"] == 1024 * int(next(line.split()[1] for line in (DATA / "meminfo").read_text()
                                                    .splitlines() if line.startswith("Slab:")))
    slab = parse_slabinfo((DATA / "slabinfo").read_text())
    assert "slab.skbuff_head_cache_bytes" in slab and all(v >= 0 for v in slab.values())
    assert parse_sockstat((DATA / "sockstat").read_text())["sock.tcp_mem_bytes"] == 52 * os.sysconf("SC_PAGE_SIZE")
    assert nft_set_elements(json.loads((DATA / "nft-ruleset.json").read_text())) == {
        "nft.inet.softnet_leak.flows_elements": 3.0}
    maps = bpf_maps(json.loads((DATA / "bpftool-maps.json").read_text()))
    assert maps["bpf.sn_cap_map_bytes"] > 0 and all(k.startswith("bpf.") and k.endswith("_bytes") for k in maps)


def test_a_drift_fit_flags_growth_and_steps_not_churn():
    t = np.arange(0, 600, 10.0)
    rng = np.random.default_rng(1)
    ramp = fit_series("nft.x_elements", t, 1000 * t / 3600 * 360 + rng.normal(0, 50, t.size), 0.95)
    assert ramp.flag == "leak_suspected" and abs(ramp.slope_per_h / 360_000 - 1) < 0.05, ramp
    step = fit_series("conntrack.entries", t, np.where(t < 300, 1000.0, 5000.0) + rng.normal(0, 20, t.size), 0.95)
    assert step.flag in ("step", "leak_suspected") and step.change_at_s == 300, step
    churn = fit_series("mem.slab_bytes", t, 3e8 + rng.normal(0, 2e5, t.size), 0.95)
    assert churn.flag is None, churn


def test_a_soak_spec_refuses_loads_and_a_half_step():
    base = {"name": "s", "testbed": {"sut": "synthetic"}}
    with pytest.raises(ValueError, match="a soak chooses its own loads"):
        CampaignSpec.model_validate({**base, "method": {"kind": "soak", "loads": ["1Mpps"]}})
    with pytest.raises(ValueError, match="step_at_trial and o_sat_after_pps go together"):
        CampaignSpec.model_validate({**base, "method": {"kind": "soak"}, "synthetic": {"step_at_trial": 5}})


SIM = """name = "{name}"
[testbed]
sut = "synthetic"
[synthetic]
o_sat_pps = 1000000
plr_at_sat = 0.001
trial_wall_s = 0.05
{step}
[method]
kind = "soak"
min_load = "10kpps"
max_load = "2Mpps"
duration_s = 1
[soak]
wall_s = {wall}
"""


def soak_rows(results: Path) -> tuple[list[dict], SoakSummary]:
    with duckdb.connect(str(results / "softnet.duckdb"), read_only=True) as c:
        docs = [json.loads(r[0]) for r in c.execute("SELECT result_json FROM trials ORDER BY load_index").fetchall()]
        summary = SoakSummary.model_validate_json(c.execute("SELECT result_json FROM soaks").fetchone()[0])
    return docs, summary


def shown_by_serve(results: Path, summary: SoakSummary, browser) -> None:
    """serve's index gives the soak's critical load as its verdict, its report page draws the soak's
    figure in Chromium without a console error, /metrics has the estimate."""
    s = Server(str(results))
    try:
        status, text = s.get("/metrics")
        assert status == 200 and 'softnet_soak_critical_load_pps{bound="median"' in text, text[-2000:]
        page, errors = open_page(browser, f"http://127.0.0.1:{s.port}/")
        page.wait_for_selector("#campaigns")
        assert "soak critical load" in page.content() and not errors, errors
        cid = json.loads(s.get("/api/campaigns")[1])[0]["campaign_id"]
        page, errors = open_page(browser, f"http://127.0.0.1:{s.port}/report/0/{cid}")
        page.wait_for_selector("h2:has-text('Soaks')")
        img = page.locator("img[alt^='soak']")
        assert img.count() == 1 and img.evaluate("e => e.naturalWidth") > 1000
        assert not_blank(img.screenshot()) and not errors, errors
        text = page.content()
        assert f"{summary.estimate.median_pps:,.0f} pps" in text
        assert f"({cid})" in text[text.index("<h2>Campaigns</h2>"):] and "<title>softnet report" in text
    finally:
        s.stop()


@pytest.mark.slow
def test_a_simulated_step_is_found_and_a_killed_soak_resumes_to_the_same_loads(tmp_path, browser):
    spec = tmp_path / "s.toml"
    spec.write_text(SIM.format(name="step", wall=30, step="step_at_trial = 20\no_sat_after_pps = 250000"))
    whole = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "a"), "--json"),
                           capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stderr[-2000:]
    shown = json.loads(whole.stdout)
    docs, summary = soak_rows(tmp_path / "a")
    assert [s.at_trial for s in summary.capacity_steps] == [20], summary.flags
    step = summary.capacity_steps[0]
    assert step.side == "more" and step.after.median_pps < step.before.median_pps
    assert list(shown) == [next(iter(shown))] and shown[next(iter(shown))]["0"]["capacity_steps"]
    # the same soak killed (SIGKILL) mid-way and run again: the loads of the trials both have are the same
    p = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(tmp_path / "b")), stderr=subprocess.PIPE,
                         text=True)
    for line in p.stderr:
        if "trial 12:" in line:
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=30)
    again = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "b")), capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    resumed, summary_b = soak_rows(tmp_path / "b")
    # the same loads up to the first trial either run cut short to the time it had left (a busy host
    # runs fewer trials in the same wall time): past the kill, so the resume drew what the whole run drew
    def uncut(docs: list[dict]) -> int:
        return next((i for i, d in enumerate(docs) if d["duration_s"] < 1 + 0.1 * (i - d["soak"]["model_from"])
                     - 1e-9), len(docs))
    n = min(uncut(docs), uncut(resumed))
    assert n > 13 and [d["intended_rate_pps"] for d in resumed[:n]] == [d["intended_rate_pps"] for d in docs[:n]]
    assert [s.at_trial for s in summary_b.capacity_steps] == [20]
    assert sum(1 for d in resumed if d["soak"]["segment_start"]) == 2  # the run, and its resume
    # two stored soaks compare by their critical loads (the same SUT twice: no verdict beyond the margin)
    cmp = subprocess.run(softnet_cmd("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"),
                         capture_output=True, text=True, timeout=120)
    rows = [d for ds in json.loads(cmp.stdout)["differences"].values() for d in ds]
    assert [d["metric"] for d in rows] == ["soak critical load at loss 1e-07"], cmp.stdout[-2000:]
    assert rows[0]["verdict"] in ("equivalent", "undecided") and rows[0]["ci"][0] < 0 < rows[0]["ci"][1], rows
    shown_by_serve(tmp_path / "a", summary, browser)


@pytest.mark.slow
def test_a_stationary_simulated_soak_has_no_step(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SIM.format(name="flat", wall=6, step=""))
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r")), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    _, summary = soak_rows(tmp_path / "r")
    assert summary.capacity_steps == [] and summary.finished
    assert "critical load at loss ratio 1e-07" in r.stdout


def example(name: str, tmp_path: Path, **soak) -> Path:
    """An examples/soak spec with its [soak] keys changed, beside the files it names."""
    text = (REPO / "examples" / "soak" / f"{name}.toml").read_text()
    for key, value in soak.items():
        text = "\n".join(f"{key} = {value}" if line.startswith(f"{key} =") else line for line in text.splitlines())
    path = REPO / "examples" / "soak" / f".test-{name}-{os.getpid()}.toml"
    path.write_text(text)
    return path


@pytest.mark.slow
@pytest.mark.netns
@needs_root
def test_a_planted_nft_leak_is_reported_at_the_rate_it_was_planted(tmp_path, host_unchanged):
    spec = example("leak", tmp_path, wall_s=40)
    try:
        r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r")), capture_output=True,
                           text=True, timeout=600)
    finally:
        spec.unlink()
    assert r.returncode == 0, r.stderr[-3000:]
    docs, summary = soak_rows(tmp_path / "r")
    marks = [d["soak"] for d in docs]
    # the truth delivered: 1000 elements per second of traffic (warm-up and window) between the first and last reads
    traffic = sum(d["warmup_s"] + d["duration_s"] for d in docs[1:])
    planted = 1000 * 3600 * traffic / (marks[-1]["elapsed_s"] - marks[0]["elapsed_s"])
    fit = next(f for f in summary.drift if f.series == "nft.inet.softnet_leak.flows_elements")
    assert fit.flag == "leak_suspected" and abs(fit.slope_per_h / planted - 1) < 0.10, (fit, planted)
    assert any("leak_suspected: nft.inet.softnet_leak.flows_elements" in f for f in summary.flags)
    assert "leak_suspected" in r.stdout


@pytest.mark.slow
@pytest.mark.netns
@needs_root
def test_a_capacity_step_is_found_when_it_happened(tmp_path, host_unchanged):
    spec = example("step", tmp_path, wall_s=60)
    spec.write_text(spec.read_text().replace("STEP_AT_S=30", "STEP_AT_S=25"))
    try:
        t0 = time.monotonic()
        r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r")), capture_output=True,
                           text=True, timeout=600)
    finally:
        spec.unlink()
    assert r.returncode == 0, r.stderr[-3000:]
    assert time.monotonic() - t0 < 180
    _, summary = soak_rows(tmp_path / "r")
    steps = [s for s in summary.capacity_steps if s.side == "more"]
    # the rules go in 25 s after the SUT's setup, which is about 1 s before the soak's clock starts
    assert steps and 18 <= steps[0].at_s <= 34, summary.flags
    assert not list(Path("/tmp").glob("softnet-step-*.pid"))
    assert subprocess.run(["pgrep", "-f", "heavy.sh"], capture_output=True).returncode == 1
