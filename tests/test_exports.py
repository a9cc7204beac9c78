"""A lab's Parquet exports read as one results store: `softnet analyze`,
`compare` and `serve` give from the export what they give from the stores
it was exported from."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from softnet.campaign.runner import run_campaign
from softnet.campaign.spec import CampaignSpec
from tests.conftest import softnet_cmd
from tests.test_serve import Server

# long end-to-end tests: `make test` runs them, `make check` does not
pytestmark = pytest.mark.slow

SWEEP = {"testbed": {"sut": "synthetic"}, "synthetic": {"o_sat_pps": 500_000, "plr_at_sat": 0.002, "seed": 7},
         "method": {"loads": ["200kpps", "450kpps", "600kpps"], "runs": 3, "duration_s": 1.0}}
SEARCH = {"name": "s", "testbed": {"sut": "synthetic"}, "synthetic": {"o_sat_pps": 400_000, "seed": 3},
          "method": {"kind": "search", "goals": ["ndr", "pdr0.5"], "runs": 1, "duration_s": 1.0}}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(softnet_cmd(*args), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """Store a: a sweep; store b: the same sweep on another host's SUT
    (another seed) and a search; both exported into one folder."""
    d = tmp_path_factory.mktemp("lab")
    run_campaign(CampaignSpec.model_validate({**SWEEP, "name": "a"}), d / "a")
    run_campaign(CampaignSpec.model_validate({**SWEEP, "name": "b", "synthetic": {**SWEEP["synthetic"], "seed": 8}}),
                 d / "b")
    run_campaign(CampaignSpec.model_validate(SEARCH), d / "b")
    for store in ("a", "b"):
        r = cli("export", str(d / store), "--out", str(d / "export"))
        assert r.returncode == 0, r.stderr
    return d


def json_of(*args: str):
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_analyze_reads_a_labs_export_as_the_stores_themselves(lab):
    exported = json_of("analyze", str(lab / "export"), "--json")
    separate = json_of("analyze", str(lab / "a"), "--json") + json_of("analyze", str(lab / "b"), "--json")
    configs = [c for c in exported if not c.get("search")]
    assert len(configs) == 2
    # same figures, load by load; the like-named cells are told apart by their campaign's name
    by_id = {c["meta"]["campaign_id"]: c for c in separate if not c.get("search")}
    for c in configs:
        own = by_id[c["meta"]["campaign_id"]]
        assert c["stats"] == own["stats"] and c["report"] == own["report"]
        assert c["label"] == f"{c['meta']['campaign_id'].split('-')[0]}: {own['label']}"
    searches = [s for s in exported if s.get("search")]
    assert [s["goal"] for s in searches] == [s["goal"] for s in separate if s.get("search")] and len(searches) == 2
    assert searches == [s for s in separate if s.get("search")]


def test_a_labs_part_by_kernel_and_driver_and_a_value_it_lacks(lab, tmp_path):
    """The part of a lab its kernel and driver name (here: all of it) reads as
    the whole; a testbed, kernel or driver no trial has is refused by name,
    with those the lab has."""
    export = str(lab / "export")
    whole = json_of("analyze", export, "--json")
    assert json_of("analyze", export, "--json", "--kernel", os.uname().release, "--driver", "veth") == whole
    assert json_of("trend", export, "--json", "--testbed", "local")["series"] == json_of("trend", export,
                                                                                       "--json")["series"]
    for option, value, have in [("--testbed", "sim9", "local"), ("--kernel", "2.6.32", os.uname().release),
                                ("--driver", "ix'gbe", "veth")]:
        r = cli("analyze", export, option, value)
        assert r.returncode == 2 and f"{option}: '{value}'" in r.stderr and have in r.stderr, r.stderr
    r = cli("report", str(lab / "a"), "--testbed", "sim9", "--out", str(tmp_path / "r.html"))
    assert r.returncode == 2 and "'sim9'" in r.stderr and not (tmp_path / "r.html").exists()


def test_compare_takes_two_campaigns_of_one_export(lab):
    ids = [c["meta"]["campaign_id"] for c in json_of("analyze", str(lab / "export"), "--json")
           if not c.get("search")]
    export = str(lab / "export")
    from_export = json_of("compare", export, export, "--campaign", ids[0], "--campaign", ids[1], "--json")
    from_stores = json_of("compare", str(lab / "a"), str(lab / "b"), "--campaign", ids[0], "--campaign", ids[1],
                          "--json")
    assert from_export["baseline"] == f"{export} ({ids[0]})"

    def figures(summary):
        return [[{k: v for k, v in d.items() if k != "label"} for d in ds] for ds in summary["differences"].values()]

    assert figures(from_export) == figures(from_stores) and figures(from_stores)[0]
    # each testbed's store exported on its own: the same verdicts again
    for store in ("a", "b"):
        assert cli("export", str(lab / store), "--out", str(lab / f"export-{store}")).returncode == 0
    apart = json_of("compare", str(lab / "export-a"), str(lab / "export-b"), "--campaign", ids[0], "--campaign",
                    ids[1], "--json")
    assert figures(apart) == figures(from_stores)
    r = cli("compare", export, export, "--campaign", ids[0])
    assert r.returncode != 0 and "--campaign" in r.stderr and "one per results directory" in r.stderr
    r = cli("compare", export, export, "--campaign", ids[0], "--campaign", "nope-1")
    assert r.returncode != 0 and "has no campaign nope-1" in r.stderr


def test_serve_shows_an_export_and_says_where_raw_files_are(lab):
    server = Server(str(lab / "export"), str(lab / "a"))
    try:
        status, body = server.get("/api/campaigns")
        listed = {(c["store"], c["name"]): c for c in json.loads(body)}
        assert status == 200 and set(listed) == {(0, "a"), (0, "b"), (0, "s"), (1, "a")}
        assert listed[(0, "a")]["trials"] == listed[(1, "a")]["trials"] == 9
        cid = listed[(0, "a")]["campaign_id"]
        assert server.get(f"/api/c/0/{cid}/verdicts") == server.get(f"/api/c/1/{cid}/verdicts")
        status, body = server.get(f"/api/c/0/{cid}/raw/0/0/0")
        assert status == 404 and "Parquet export" in body and "raw trial files stay" in body
        assert server.get(f"/api/c/1/{cid}/raw/0/0/0")[0] == 200
    finally:
        server.stop()


def test_an_export_is_not_exported_again_and_a_foreign_folder_is_named(lab, tmp_path):
    r = cli("export", str(lab / "export"), "--out", str(tmp_path / "x"))
    assert r.returncode != 0 and "export already" in r.stderr and not (tmp_path / "x").exists()
    (tmp_path / "trials").mkdir()
    r = cli("compare", str(tmp_path), str(lab / "a"))
    assert r.returncode != 0 and str(tmp_path) in r.stderr and "Parquet" in r.stderr
