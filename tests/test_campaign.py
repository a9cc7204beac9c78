"""Campaigns: specs, the store, resumption, and the PASTRAMI verdict end to end."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pytest

from softnet.analysis.campaigns import analyze_path
from softnet.analysis.trial_eval import evaluate
from softnet.campaign.runner import campaign_id, run_campaign
from softnet.campaign.spec import CampaignSpec, load_spec
from softnet.errors import InputError
from softnet.results.store import DB_NAME, Store
from tests.conftest import host_state, needs_root, run_until_interrupted, softnet_cmd, wait_host_state

SYNTH = {"name": "synth", "testbed": {"sut": "synthetic"},
         "synthetic": {"o_sat_pps": 500_000, "plr_at_sat": 0.002, "seed": 7},
         "method": {"start": "100kpps", "stop": "1Mpps", "step": "100kpps", "runs": 5, "duration_s": 2.0}}


def write_spec(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, field", [
    ('name = "x"\n[method]\nloads = ["1kpps"]\nruns = 0\n', "method.runs"),
    ('name = "x"\n[method]\nloads = ["1 furlong"]\n', "method.loads"),
    ('name = "x"\n[method]\nloads = ["1kpps"]\nstart = "1kpps"\nstop = "2kpps"\nstep = "1kpps"\n', "method"),
    ('name = "x"\n[method]\nloads = ["1kpps"]\n[traffic]\nframe_bytes = 9000\n', "traffic.frame_bytes"),
    ('name = "x"\n[method]\nloads = ["1kpps"]\n[testbed]\nsut = "vpp"\n', "testbed.sut"),
    ('name = "x"\n[method]\nloads = ["1kpps"]\n[matrix]\n"testbed.colour" = ["red"]\n', "matrix"),
    ('name = "x"\n[method]\nloads = ["1kpps"]\n[matrix]\n"traffic.frame_bytes" = [64, 99999]\n',
     "traffic.frame_bytes"),
    ('name = "x"\n[method]\nloads = ["1kpps"]\nbogus = 1\n', "method.bogus"),
    ('name = "x"\n[method\n', "spec.toml"),
])
def test_bad_specs_name_the_field(tmp_path, text, field):
    with pytest.raises(InputError) as err:
        load_spec(write_spec(tmp_path, text))
    assert field in str(err.value)


def test_matrix_is_full_factorial_with_knob_values(tmp_path):
    spec = CampaignSpec.model_validate({**SYNTH, "matrix": {"synthetic.o_sat_pps": [3e5, 6e5],
                                                            "traffic.frame_bytes": [64, 512, 1518]}})
    cells = spec.cells()
    assert len(cells) == 6
    assert {(k["synthetic.o_sat_pps"], k["traffic.frame_bytes"]) for k, _ in cells} == \
        {(a, b) for a in (3e5, 6e5) for b in (64, 512, 1518)}
    assert all(c.traffic.frame_bytes == k["traffic.frame_bytes"] for k, c in cells)


@pytest.mark.parametrize("o_sat", [300_000, 500_000, 800_000])
def test_synthetic_campaign_recovers_the_saturation_point(tmp_path, o_sat):
    spec = CampaignSpec.model_validate({**SYNTH, "synthetic": {"o_sat_pps": o_sat, "plr_at_sat": 0.002}})
    cid = run_campaign(spec, tmp_path)
    (cfg,) = analyze_path(tmp_path, cid)
    r = cfg.analysis.report
    assert r.verdict.value == "GOOD"
    # The first 100 kpps step above O_sat is where the mean PLR crosses 0.5%.
    assert o_sat < r.pdr_point_load_pps <= o_sat + 100_000
    assert r.ndr_load_pps < o_sat


def test_interrupted_synthetic_campaign_resumes_to_identical_results(tmp_path, monkeypatch):
    spec = CampaignSpec.model_validate(SYNTH)
    whole = tmp_path / "whole"
    run_campaign(spec, whole)
    parts = tmp_path / "parts"
    run_until_interrupted(monkeypatch, lambda: run_campaign(spec, parts), after_trials=17)
    events = []
    run_campaign(spec, parts, events.append)
    assert "17 already stored" in events[0].message
    cid = campaign_id(spec)
    q = "SELECT cell_id, load_index, run_index, sent_pkts, received_pkts FROM trials ORDER BY 1, 2, 3"
    with Store(whole, read_only=True) as a, Store(parts, read_only=True) as b:
        assert a.query(q) == b.query(q)
        assert len(b.done_keys(cid)) == 50


def test_raw_file_without_row_is_recovered_not_rerun(tmp_path):
    spec = CampaignSpec.model_validate(SYNTH)
    cid = run_campaign(spec, tmp_path)
    with Store(tmp_path) as s:
        s.db.execute("DELETE FROM trials WHERE load_index = 3 AND run_index = 2")
        before = s.raw_path(cid, 0, 3, 2).read_text()
    events = []
    run_campaign(spec, tmp_path, events.append)
    assert "1 recovered from raw files" in events[0].message
    assert [e for e in events if e.kind == "trial"] == []  # nothing was measured again
    with Store(tmp_path, read_only=True) as s:
        assert len(s.done_keys(cid)) == 50
        assert s.raw_path(cid, 0, 3, 2).read_text() == before


def test_export_csv_and_parquet(tmp_path):
    run_campaign(CampaignSpec.model_validate(SYNTH), tmp_path)
    for fmt, source in (("csv", "read_csv_auto('{d}/trials.csv')"),
                        ("parquet", "read_parquet('{d}/trials/**/*.parquet', hive_partitioning = true)")):
        r = subprocess.run(softnet_cmd("export", str(tmp_path), "--format", fmt), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        n = duckdb.connect().execute(f"SELECT count(*) FROM {source.format(d=tmp_path / 'export')}").fetchone()[0]
        assert n == 50


def test_the_stores_of_a_lab_export_into_one_parquet_tree(tmp_path):
    """Two stores (two controllers, or two labs) export into one folder,
    partitioned by testbed and campaign; DuckDB reads them as one table; a
    campaign exported again replaces its partition, not adds to it."""
    out = tmp_path / "lab"
    for name, n in (("a", 2), ("b", 3)):
        run_campaign(CampaignSpec.model_validate({**SYNTH, "name": name, "method": {**SYNTH["method"], "runs": n}}),
                     tmp_path / name)
        r = subprocess.run(softnet_cmd("export", str(tmp_path / name), "--out", str(out)), capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
    r = subprocess.run(softnet_cmd("export", str(tmp_path / "a"), "--out", str(out)), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    trials = f"read_parquet('{out}/trials/**/*.parquet', hive_partitioning = true)"
    rows = duckdb.connect().execute(f"SELECT testbed, split_part(campaign_id, '-', 1), count(*) FROM {trials} "
                                    "GROUP BY ALL ORDER BY ALL").fetchall()
    assert rows == [("local", "a", 10 * 2), ("local", "b", 10 * 3)]
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["testbed=local"]
    camps = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{out}/campaigns/**/*.parquet')").fetchone()
    assert camps == (2,)


def test_analyze_cli_on_published_pastrami_file_json():
    path = "/work/shared/data/pastrami/bare-metal/confronto_clab/clab_tb1_raw_50_exp_t_10_k6.8_intel_bare-metal_as-is.txt"
    if not Path(path).exists():
        pytest.skip("PASTRAMI data not present")
    r = subprocess.run(softnet_cmd("analyze", path, "--json"), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (cfg,) = json.loads(r.stdout)
    assert cfg["report"]["verdict"] in ("GOOD", "BAD", "INCONCLUSIVE", "NO-SATURATION")
    assert cfg["knobs"]["kernel"] == "6.8" and cfg["knobs"]["runs"] == 50
    lines = [l for l in Path(path).read_text().splitlines() if l.strip()]
    assert len(cfg["stats"]["loads"]) == len(lines)  # one line per offered load in the file
    assert cfg["stats"]["loads"][0]["load_pps"] == json.loads(lines[0])[0][0]


def test_analyze_cli_bad_path():
    r = subprocess.run(softnet_cmd("analyze", "/nonexistent/x"), capture_output=True, text=True)
    assert r.returncode == 2 and "no such file" in r.stderr


@needs_root
@pytest.mark.netns
def test_real_campaign_killed_mid_run_resumes_without_loss_or_duplicates(tmp_path):
    spec = write_spec(tmp_path, """
name = "resume"
[testbed]
sut = "ipv4-fwd"
[method]
loads = ["20kpps", "40kpps"]
runs = 3
duration_s = 0.3
warmup_s = 0.1
""")
    results = tmp_path / "results"
    before = host_state()
    proc = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(results), "--json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    raw = results / "raw"
    deadline = time.monotonic() + 60
    while len(list(raw.glob("*/cell*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    first = {p.name: json.loads(p.read_text())["result"]["started_unix_s"] for p in raw.glob("*/cell*.json")}
    assert 2 <= len(first) < 6
    assert subprocess.run(softnet_cmd("clean"), capture_output=True).returncode == 0
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(results), "--json"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (cfg,) = json.loads(r.stdout)
    assert cfg["report"]["verdict"] in ("NO-SATURATION", "GOOD", "BAD", "INCONCLUSIVE")
    db = duckdb.connect(str(results / DB_NAME), read_only=True)
    keys = db.execute("SELECT load_index, run_index, started_unix_s FROM trials").fetchall()
    assert sorted((k[0], k[1]) for k in keys) == [(l, r) for l in range(2) for r in range(3)]
    # Trials stored before the kill were kept, not measured again.
    stored = {f"cell000-load{l:03d}-run{r:03d}.json": t for l, r, t in keys}
    assert all(stored[name] == t for name, t in first.items())
    # Each trial's provenance lists its testbed's changes and its own sink and
    # generator, not those of the trials before it.
    changes = [json.loads(j)["provenance"]["host_changes_applied"] for (j,) in
               db.execute("SELECT result_json FROM trials").fetchall()]
    assert len({len(c) for c in changes}) == 1
    assert sum("XDP sink program" in c for c in changes[0]) == 1
    # Each raw file holds the trial's reads: re-evaluating them gives the stored result exactly.
    stored_json = {(l, r): j for l, r, j in db.execute("SELECT load_index, run_index, result_json FROM trials").fetchall()}
    for path in raw.glob("*/cell*.json"):
        rec = json.loads(path.read_text())
        again = evaluate(rec["raw_trial"]).to_dict()
        assert json.dumps(again, sort_keys=True, default=str) == json.dumps(rec["result"], sort_keys=True, default=str)
        again.pop("kernel_samples", None)  # kept in its own table, not in result_json
        assert json.loads(json.dumps(again, default=str)) == json.loads(stored_json[(rec["load_index"], rec["run_index"])])
    assert wait_host_state(before) == before
