"""Every command's default tables fit an 80-column terminal with no cell
cut, on real inputs: each captured raw trial (every kind of trial softnet
measures), a search that runs out of budget, stored comparisons and trends;
and the CLI reference is the help texts as they are."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from softnet.campaign.runner import run_campaign
from softnet.campaign.spec import CampaignSpec
from softnet.cli import output, trial_cmd
from softnet.cli.reference import cli_reference
from tests.conftest import softnet_cmd

RAW_TRIALS = sorted((Path(__file__).parent / "data/raw_trials").glob("*.json"))
ROOT = Path(__file__).resolve().parent.parent


def assert_fits(text: str) -> None:
    lines = text.splitlines()
    assert lines, "nothing printed"
    wide = [x for x in lines if len(x) > 80]
    assert not wide, "\n".join(wide)
    assert "…" not in text, text


def at_80(*args: str) -> str:
    r = subprocess.run(softnet_cmd(*args), capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "80"})
    assert r.returncode in (0, 1), r.stderr
    return r.stdout


@pytest.mark.parametrize("path", RAW_TRIALS, ids=[p.stem for p in RAW_TRIALS])
def test_a_trial_of_every_kind_fits(path, monkeypatch):
    monkeypatch.setattr(output.console, "_width", 80)
    with output.console.capture() as cap:
        trial_cmd.evaluate_file(path, False)
    assert_fits(cap.get())


def test_a_search_out_of_budget_fits(tmp_path):
    """The search that cut its cells (status, bounds, trials) at 80 columns."""
    text = at_80("search", "--sut", "synthetic", "--goals", "ndr,pdr0.5", "--width", "0.0005", "--max-trials", "8",
                 "--results", str(tmp_path))
    assert_fits(text)
    assert "budget" in text and "exhausted" in text


SWEEP = {"testbed": {"sut": "synthetic"}, "synthetic": {"o_sat_pps": 500_000, "plr_at_sat": 0.002, "seed": 7},
         "method": {"loads": ["200kpps", "450kpps", "600kpps"], "runs": 3, "duration_s": 1.0},
         "matrix": {"traffic.frame_bytes": [64, 1518]}}


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("stores")
    for name, seed in (("a", 7), ("b", 8)):
        run_campaign(CampaignSpec.model_validate({**SWEEP, "name": name,
                                                  "synthetic": {**SWEEP["synthetic"], "seed": seed}}), d / name)
    return d


def test_stored_results_compared_fit(two_stores):
    assert_fits(at_80("compare", str(two_stores / "a"), str(two_stores / "b")))


def test_trends_and_analysis_fit(two_stores):
    assert_fits(at_80("trend", str(two_stores / "a"), str(two_stores / "b")))
    assert_fits(at_80("analyze", str(two_stores / "a")))


def test_the_reference_pages_are_the_help_texts_and_the_models():
    """The CLI, spec and result references and the JSON schemas, as the code writes them now."""
    from softnet.cli.reference_spec import pages

    for name, text in {**cli_reference(), **pages()}.items():
        page = ROOT / "docs/reference" / name
        assert page.exists() and page.read_text() == text, \
            f"{page} is stale: python -m softnet.cli.reference docs/reference; " \
            "python -m softnet.cli.reference_spec docs/reference"


COMMANDS = ["trial", "evaluate", "run", "search", "compare", "latency", "profile", "analyze", "report", "serve",
            "trend", "export", "demo", "clean", "doctor", "inventory check", "fleet worker", "fleet scheduler",
            "host prepare"]


@pytest.mark.parametrize("command", COMMANDS)
def test_each_commands_help_fits(command):
    assert_fits(at_80(*command.split(), "--help"))
