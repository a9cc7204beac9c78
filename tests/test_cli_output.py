"""What a person sees: numbers in engineering form, every table within 80
columns with no number cut, all columns with --wide, progress on stderr."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from softnet.analysis.stages import WIFI_STAGES
from softnet.campaign.runner import run_campaign
from softnet.campaign.spec import CampaignSpec
from softnet.cli import campaign_cmd, output, profile_cmd, trial_cmd
from softnet.cli.output import eng, sci
from softnet.results.trial import TrialResult
from tests.conftest import softnet_cmd

DATA = Path(__file__).parent / "data"


def stored_trial() -> TrialResult:
    """A profiled trial as `softnet trial --json` printed it (the rate as asked added, its provenance left out)."""
    d = json.loads((DATA / "cli" / "trial_profile_result.json").read_text())
    del d["rate_text"], d["rate_layer"]
    d["provenance"] = {"softnet_version": "0.1.0", "kernel": "6.1.0", "hostname": "vm", "recorded_unix_s": 0,
                       "spec": {}, "spec_hash": "0", "host_changes_applied": []}
    return TrialResult.model_validate(d)


TRIAL = stored_trial()
SWEEP = {"name": "out", "testbed": {"sut": "synthetic"}, "synthetic": {"o_sat_pps": 1_669_000, "plr_at_sat": 0.002},
         "method": {"loads": [f"{x}kpps" for x in (85, 170, 420, 850, 1300, 1500, 1650, 1700, 2100, 4200)],
                    "runs": 3, "duration_s": 1.0}}


@pytest.mark.parametrize("value, unit, text", [
    (1_669_000, "pps", "1.67 Mpps"), (850_000, "pps", "850 kpps"), (999_960, "pps", "1.00 Mpps"),
    (12, "pps", "12 pps"), (0, "pps", "0 pps"), (7, "", "7"), (465_659, "", "466 k"), (0.0123, "s", "12.3 ms"),
    (2.4e-6, "s", "2.40 µs"), (0.95, "", "0.95"), (None, "pps", "-"), (float("nan"), "", "-"),
    (-1_669_000, "pps", "-1.67 Mpps"), (913_000.4, "pps", "913 kpps"),
])
def test_eng_form(value, unit, text):
    assert eng(value, unit) == text


@pytest.mark.parametrize("value, text", [(0.021, "2.1e-2"), (2.108e-3, "2.1e-3"), (0, "0"), (0.5, "5.0e-1"),
                                         (None, "-")])
def test_ratios_in_short_scientific_form(value, text):
    assert sci(value) == text


@pytest.fixture
def screen(monkeypatch):
    """The shared console as an 80-column terminal; returns what was printed."""
    monkeypatch.setattr(output.console, "_width", 80)

    class Screen:
        def __call__(self, show, *args) -> str:
            with output.console.capture() as cap:
                show(*args)
            text = cap.get()
            lines = text.splitlines()
            assert lines and max(len(line) for line in lines) <= 80, text
            return text
    return Screen()


def assert_nothing_cut(text: str) -> None:
    assert "…" not in text, text


def test_trial_tables_fit_80_columns(screen):
    text = screen(trial_cmd.show, TRIAL)
    assert_nothing_cut(text)
    assert "300 kpps" in text and "600,000" in text and "5.1e-1" in text
    assert "NET_TX/s" not in text  # a --wide column


def test_unseen_context_switches_are_said_beside_the_coverage(screen):
    assert "unseen" not in screen(trial_cmd.show, TRIAL)  # a result from before they were counted
    t = TRIAL.model_copy(deep=True)
    t.profile.per_cpu[1].unseen_switches = 4
    text = " ".join(screen(trial_cmd.show, t).split())
    assert "stage coverage" in text and "4 context switches unseen (their spans not counted)" in text


def test_trial_wide_shows_every_column(screen, monkeypatch):
    monkeypatch.setattr(output.console, "_width", 200)
    with output.console.capture() as cap:
        trial_cmd.show(TRIAL, True)
    text = cap.get()
    assert_nothing_cut(text)
    for header in ("NET_TX/s", "napi_thread", "timing"):
        assert header in text


@pytest.fixture(scope="module")
def sweep_results(tmp_path_factory):
    results = tmp_path_factory.mktemp("sweep")
    cid = run_campaign(CampaignSpec.model_validate(SWEEP), results)
    return results, cid


def test_analysis_tables_fit_80_columns(screen, sweep_results):
    results, cid = sweep_results
    text = screen(campaign_cmd.analyze, results, cid, 0.005, 0.1, False, True)
    assert_nothing_cut(text)
    assert "1.67 Mpps" in text and "4.20 Mpps" in text and "85.0 kpps" in text
    assert "DR mean" not in text


def test_analysis_wide_adds_columns(screen, sweep_results, monkeypatch):
    results, cid = sweep_results
    monkeypatch.setattr(output.console, "_width", 200)
    with output.console.capture() as cap:
        campaign_cmd.analyze(results, cid, 0.005, 0.1, False, True, True)
    assert "DR mean" in cap.get() and "dUCL95" in cap.get()


def test_search_tables_fit_80_columns(screen, tmp_path):
    spec = CampaignSpec.model_validate({"name": "s", "testbed": {"sut": "synthetic"},
                                        "method": {"kind": "search", "runs": 3}})
    cid = run_campaign(spec, tmp_path)
    text = screen(campaign_cmd.show_searches, campaign_cmd.search_summaries(tmp_path, cid))
    assert_nothing_cut(text)
    assert "kpps" in text and "loss at lower" not in text


def test_pastrami_analysis_fits_80_columns():
    data = Path("/work/shared/data/pastrami/bare-metal")
    r = subprocess.run(softnet_cmd("analyze", str(data)), capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, COLUMNS="80"))
    assert r.returncode == 0, r.stderr
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    assert_nothing_cut(r.stdout)


def test_a_loss_ratios_interval_is_clipped_at_zero_unless_the_paper_is_asked_for():
    """At 300 kpps this file's PLR mean is 5.3e-7 and its t-interval reaches
    -5.3e-7: shown as [0, ...] with the footnote, and as PASTRAMI computes
    it with --paper-ci."""
    data = Path("/work/shared/data/pastrami/bare-metal",
                "clab_tb1_raw_50_k6.8_intel_bare-metal_as-is_4th_exec_after-reboot.txt")
    env = dict(os.environ, COLUMNS="80")
    r = subprocess.run(softnet_cmd("analyze", str(data)), capture_output=True, text=True, timeout=300, env=env)
    row = next(line for line in r.stdout.splitlines() if line.startswith("│  300 kpps"))
    assert "[0, 1.6e-6]" in row and "lower end clipped at 0" in r.stdout
    r = subprocess.run(softnet_cmd("analyze", str(data), "--paper-ci"), capture_output=True, text=True, timeout=300,
                       env=env)
    row = next(line for line in r.stdout.splitlines() if line.startswith("│  300 kpps"))
    assert "[-5.3e-7, 1.6e-6]" in row and "as PASTRAMI computes it" in r.stdout


def profile_cell(n_loads: int) -> profile_cmd.ProfileCell:
    loads = [50_000 * 1.4 ** i for i in range(n_loads)]
    levels = [{"load_pps": x, "runs": 3, "forwarded_pps": 0.98 * x,
               "loss_ratio": 0.0213, "stages_ns_per_packet": {s: 1234.5 / (i + 1) for i, s in enumerate(WIFI_STAGES)},
               "stages_pct_of_cpu": {s: 12.3 / (i + 1) for i, s in enumerate(WIFI_STAGES)},
               "coverage_min": 0.987, "sut_busy_pct": min(100.0, x / 1e4), "sut_nohz_cpu_time_pct": 55.5,
               "duty": 0.02} for x in loads]
    audit = [{"load_pps": x, "cpu": 1, "runs": 3, "measured_busy_pct": 55.5, "reported_busy_pct": 40.1,
              "measured_softirq_pct": 30.3, "reported_softirq_pct": 5.5, "gap_min": -20.2, "gap_max": 3.3,
              "napi_work_per_poll": 12.5, "net_rx_pct_by_context": {"napi_thread": 25.2, "idle": 3.1}} for x in loads]
    fit = {"ns_per_packet": 123.4, "intercept_pct": 0.12, "r2": 0.987, "points": 12}
    models = {"loads_used_pps": loads[:4], "stages": {s: fit for s in WIFI_STAGES}, "sut_cpus": [1],
              "sut_busy": {"ns_per_packet": 1049.0, "intercept_pct": 1.5, "r2": 0.99, "points": 12},
              "predicted_capacity_pps": 953_000,
              "measured_pdr": {"loss_ratio": 0.005, "lower_pps": 850_000, "upper_pps": 913_000},
              "max_forwarded_pps": 913_000, "predicted_over_pdr": 953 / 850}
    return profile_cmd.ProfileCell(cell_id=0, knobs={}, levels=levels, models=models, audit=audit)


def test_profile_tables_fit_80_columns_with_10_loads(screen):
    text = screen(profile_cmd.show, profile_cell(10))
    assert_nothing_cut(text)
    assert text.count("CPU per forwarded packet by stage") == 3  # 4 + 4 + 2 loads
    assert "1.03 Mpps" in text and "2.1e-2" in text


def test_progress_off_a_terminal_is_a_line_per_trial(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "p"\n[testbed]\nsut = "synthetic"\n[method]\nloads = ["100kpps", "1Mpps"]\nruns = 2\n')
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r")), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("[0/4] p-") and "4 trials" in lines[0]
    assert [line.split("]")[0] for line in lines[1:]] == ["[1/4", "[2/4", "[3/4", "[4/4"]
    assert "left)" in lines[1] and "\x1b[" not in r.stderr
    quiet = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "q"), "--json"),
                           capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == ""
