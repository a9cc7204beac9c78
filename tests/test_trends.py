"""Trends with change points (softnet trend, analysis.trends) over real
stored campaigns of the synthetic SUT: a planted 5% capacity step is found
at the step, and repeats of one configuration give no change point."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from softnet.analysis.trends import CampaignFigures, FigureValue, trends
from softnet.campaign.runner import run_campaign
from softnet.campaign.spec import CampaignSpec
from softnet.report.web_trends import series_of
from tests.conftest import softnet_cmd

SAT, STEP = 500_000, 475_000  # the planted step: 5% less capacity
N, STEP_AT = 8, 4  # campaigns; the first one at the lower capacity


def sweep(o_sat: float, seed: int) -> CampaignSpec:
    """A short sweep spanning saturation, noise on (binomial loss per run)."""
    return CampaignSpec.model_validate({
        "name": "nightly", "testbed": {"sut": "synthetic"},
        "synthetic": {"o_sat_pps": o_sat, "noise": True, "seed": seed},
        "method": {"kind": "sweep", "loads": ["300kpps", "450kpps", "550kpps", "700kpps"], "runs": 3,
                   "duration_s": 1}})


def make_step_series(root: Path, n: int = N, step_at: int = STEP_AT) -> list[Path]:
    """n stored campaigns, each in its own results directory (one per CI
    run), capacity SAT before ``step_at`` and STEP from it on."""
    dirs = []
    for i in range(n):
        d = root / f"ci-{i:02d}"
        run_campaign(sweep(SAT if i < step_at else STEP, seed=100 + i), d)
        dirs.append(d)
    return dirs


def make_comparison(root: Path) -> Path:
    """A paired comparison of the two settings (as `softnet compare
    --variant` stores it)."""
    spec = CampaignSpec.model_validate({
        "name": "cmp", "testbed": {"sut": "synthetic"},
        "method": {"kind": "compare", "duration_s": 1},
        "compare": {"variants": [{"synthetic.o_sat_pps": SAT}, {"synthetic.o_sat_pps": STEP}],
                    "overload": "700kpps", "metrics": ["capacity"], "decide_on": ["capacity"], "budget_s": 30}})
    run_campaign(spec, root / "cmp")
    return root / "cmp"


@pytest.fixture(scope="module")
def step_dirs(tmp_path_factory) -> list[Path]:
    return make_step_series(tmp_path_factory.mktemp("step"))


@pytest.fixture(scope="module")
def repeats_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("repeats") / "r"
    for i in range(N):
        run_campaign(sweep(SAT, seed=200 + i), d)
    return d


@pytest.fixture(scope="module")
def comparison_dir(tmp_path_factory) -> Path:
    return make_comparison(tmp_path_factory.mktemp("cmp"))


def test_the_planted_step_is_found_at_the_step(step_dirs):
    series, skipped = series_of(step_dirs)
    assert not skipped and [s.key for s in series] == ["nightly / synthetic"]
    cap = next(f for f in series[0].figures if f.figure == "capacity")
    assert len(cap.points) == N and all(p.ci is not None for p in cap.points)
    assert [c.index for c in cap.change_points] == [STEP_AT]
    c = cap.change_points[0]
    assert c.direction == "regression" and c.change_pct == pytest.approx(-5.0, abs=0.3)
    assert c.campaign_id == cap.points[STEP_AT].campaign_id and c.comparison.verdict == "no comparison"
    assert [(s.start, s.end) for s in cap.segments] == [(0, STEP_AT), (STEP_AT, N)]
    assert cap.segments[0].mean == pytest.approx(SAT, rel=0.005)
    assert cap.segments[1].mean == pytest.approx(STEP, rel=0.005)


def test_a_stored_comparison_of_the_two_settings_labels_the_change(step_dirs, comparison_dir):
    series, _ = series_of([*step_dirs, comparison_dir], ["capacity"])
    (c,) = series[0].figures[0].change_points
    assert c.comparison.verdict == "slower" and c.comparison.metric.startswith("capacity")
    assert c.comparison.estimate == pytest.approx(-0.05, abs=0.005)


def test_repeats_of_one_configuration_give_no_change_point(repeats_dir):
    series, _ = series_of([repeats_dir])
    (s,) = series
    assert {f.figure for f in s.figures} >= {"capacity", "pdr", "ndr"}
    for f in s.figures:
        assert len(f.points) == N and f.change_points == [], (f.figure, [p.value for p in f.points])


def test_a_rise_of_a_lower_is_better_figure_is_a_regression():
    def camp(i: int, p50: float) -> CampaignFigures:
        runs = (p50 - 100, p50, p50 + 100)
        return CampaignFigures(0, "r", f"c{i}", "n", "l", {}, {}, float(i),
                               latency_p50=FigureValue(p50, None, runs))

    (s,) = trends([camp(i, 20_000 if i < 5 else 24_000) for i in range(10)], figures=["latency_p50"])
    (c,) = s.figures[0].change_points
    assert (c.index, c.direction) == (5, "regression") and c.change_pct == pytest.approx(20, abs=0.1)


def trend_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(softnet_cmd("trend", *map(str, args)), capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "80"})


@pytest.mark.slow
def test_cli_table_json_and_the_regression_gate(step_dirs, repeats_dir):
    r = trend_cli(*step_dirs)
    assert r.returncode == 0, r.stderr
    assert max(len(line) for line in r.stdout.splitlines()) <= 80, r.stdout
    assert "-5.0% worse" in r.stdout and "nightly / synthetic: 8 campaigns" in r.stdout
    r = trend_cli(*step_dirs, "--json", "--figure", "capacity", "--fail-on-regression")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [f["figure"] for f in doc["series"][0]["figures"]] == ["capacity"]
    (reg,) = doc["regressions"]
    assert reg["figure"] == "capacity" and reg["change_pct"] == pytest.approx(-5.0, abs=0.3)
    assert trend_cli(repeats_dir, "--fail-on-regression").returncode == 0


@pytest.mark.parametrize("args, field", [
    (["--figure", "speed"], "--figure"),
    (["/nonexistent/results"], "/nonexistent/results"),
])
def test_cli_bad_input_names_the_field(repeats_dir, args, field):
    r = trend_cli(*([repeats_dir] if args[0].startswith("--") else []), *args)
    assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_search_campaigns_trend_their_ndr_and_pdr(tmp_path):
    """Searches (the continuous NDR/PDR CSIT trends): the planted step shows
    in both goals at the step, each campaign's repeats one sample."""
    dirs = []
    for i in range(N):
        d = tmp_path / f"ci-{i:02d}"
        run_campaign(CampaignSpec.model_validate({
            "name": "nightly-search", "testbed": {"sut": "synthetic"},
            "synthetic": {"o_sat_pps": SAT if i < STEP_AT else STEP, "seed": 300 + i},
            "method": {"kind": "search", "runs": 2}}), d)
        dirs.append(d)
    series, skipped = series_of(dirs)
    assert not skipped and [s.key for s in series] == ["nightly-search / synthetic"]
    figures = {f.figure: f for f in series[0].figures}
    assert set(figures) == {"pdr", "ndr"}
    for f in figures.values():
        assert len(f.points) == N and all(p.runs == 2 and p.ci is not None for p in f.points)
        (c,) = f.change_points
        assert c.index == STEP_AT and c.direction == "regression"
        assert c.change_pct == pytest.approx(-5.0, abs=0.5), f.figure
