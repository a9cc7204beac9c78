"""Latency campaigns (method kind "latency", the AF_XDP lab) end to end: real
namespaces, real AF_XDP sockets, kill -9 and resume, re-evaluation of the raw
runs, the report, and bad knob values."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest

from softnet.analysis.latency_eval import evaluate_run
from softnet.results.latency import read_records
from softnet.results.store import DB_NAME
from tests.conftest import host_state, needs_root, softnet_cmd, wait_host_state

SPEC = """
name = "lat-test"
[method]
kind = "latency"
runs = 3
duration_s = 0.5
[latency]
interval_s = 0.005
baseline_count = 10
poll_sender = true
rerun_per_cluster = 1
rerun_count = 300
[matrix]
"latency.poll_forwarder" = [false, true]
"latency.poll_receiver" = [false, true]
"""


@pytest.mark.parametrize("args, option", [(["--arrivals", "bursty"], "--arrivals"), (["--batch", "0"], "--batch"),
                                          (["--bind-mode", "fast"], "--bind-mode"),
                                          (["--interval", "0"], "--interval")])
def test_bad_latency_knobs_name_the_option(args, option, tmp_path):
    r = subprocess.run(softnet_cmd("latency", "--results", str(tmp_path), *args), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and option in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / DB_NAME).exists()


def test_unknown_latency_knob_in_a_matrix_is_refused(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.replace('"latency.poll_receiver"', '"latency.poll_everything"'))
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r")), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "latency.poll_everything" in r.stderr


@needs_root
@pytest.mark.netns
def test_latency_campaign_killed_mid_run_resumes_and_re_evaluates(tmp_path):
    spec = tmp_path / "lat.toml"
    spec.write_text(SPEC)
    results = tmp_path / "results"
    before = host_state()
    proc = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(results), "--json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(list((results / "raw").glob("*/*-latency-run*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    first = {p.name: p.stat().st_mtime_ns for p in (results / "raw").glob("*/*-latency-run*.json")}
    assert 2 <= len(first) < 12
    assert subprocess.run(softnet_cmd("clean"), capture_output=True).returncode == 0
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(results), "--json"), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["configurations"]) == 4
    db = duckdb.connect(str(results / DB_NAME), read_only=True)
    keys = sorted(db.execute("SELECT cell_id, run_index FROM latency_runs WHERE run_index < 100").fetchall())
    assert keys == [(c, r) for c in range(4) for r in range(3)]  # nothing lost, nothing twice
    # the second phase: per cluster one configuration again, at its minimum RTT's rate and as a flood
    k = out["clustering"]["k"]
    assert sorted(r["phase"] for r in out["reruns"]) == ["fast"] * k + ["flood"] * k
    assert all(r["sent"] == 300 and r["interval_s"] < 0.005 for r in out["reruns"])
    # runs stored before the kill were kept, not measured again
    now = {p.name: p.stat().st_mtime_ns for p in (results / "raw").glob("*/*-latency-run*.json")}
    assert all(now[name] == t for name, t in first.items())
    for path in (results / "raw").glob("*/*-latency-run*.json"):
        d = json.loads(path.read_text())
        records = read_records(d["raw"]["records_path"])
        n = 100 if d["result"]["phase"] == "base" else 300
        assert len(records) == d["result"]["sent"] == n  # every sequence number accounted for
        assert d["result"]["received"] + d["result"]["lost"] + d["result"]["impossible"] == n
        again = evaluate_run(d["raw"], records).to_dict()
        assert json.loads(json.dumps(again, default=str)) == d["result"]
        if d["result"]["phase"] == "base" and d["raw"]["run"].endswith("run 2"):
            assert d["result"]["kernel_baseline"]["received"] == 10  # once per configuration, after its last run
    report = subprocess.run(softnet_cmd("report", str(results), "--out", str(tmp_path / "r.html")),
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r.html").read_text()
    assert "AF_XDP round-trip latency" in html and "poll_receiver=true" in html and "second phase" in html
    db.close()
    again = subprocess.run(softnet_cmd("run", str(spec), "--results", str(results)), capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0 and "re-runs of" in again.stdout + again.stderr, again.stderr
    db = duckdb.connect(str(results / DB_NAME), read_only=True)
    assert db.execute("SELECT count(*) FROM latency_runs").fetchone()[0] == 12 + 2 * k  # nothing measured again
    assert wait_host_state(before) == before


def test_latency_cpus_that_do_not_exist_are_refused_at_load(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.replace("[matrix]", "app_cpus = {b = 99}\n[matrix]"))
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r")), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "latency.app_cpus.b" in r.stderr and "CPU 99" in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()


def test_receive_mode_per_role_overrides_poll():
    from softnet.campaign.latency import socket_options
    from softnet.campaign.spec import CampaignSpec

    spec = CampaignSpec.model_validate({"name": "x", "method": {"kind": "latency"},
                                        "latency": {"poll_receiver": True, "rx_mode_forwarder": "epoll"}})
    assert socket_options(spec, "reflect", 0).rx_mode == "poll"
    assert socket_options(spec, "forward", 1).rx_mode == "epoll"
    assert socket_options(spec, "ping", 0).rx_mode == "busy"


def test_side_stamps_fill_the_records_empty_hop_slots():
    """Planted: ten records, B's and C's stamps for some of them beside the
    frames (one for a sequence number never sent, one past the hops, two for
    one slot, one where the frame carried its own)."""
    from softnet.results.latency import HOPS, RECORD_DTYPE, SIDE_STAMP_DTYPE, merge_side_stamps

    records = np.zeros(10, dtype=RECORD_DTYPE)
    records["seq"] = np.arange(10)
    records["hop_ns"][3, 0] = 111  # this slot travelled in the frame
    stamps = np.array([(3, 0, 0, 999), (3, 1, 0, 300), (7, 5, 0, 705), (7, 5, 0, 799), (42, 0, 0, 1),
                       (2, len(HOPS), 0, 1), (9, 8, 0, 908)], dtype=SIDE_STAMP_DTYPE)
    assert merge_side_stamps(records, stamps) == 3
    assert records["hop_ns"][3, 0] == 111 and records["hop_ns"][3, 1] == 300
    assert records["hop_ns"][7, 5] == 705 and records["hop_ns"][9, 8] == 908  # the first of two wins
    assert records["hop_ns"].sum() == 111 + 300 + 705 + 908


@needs_root
@pytest.mark.netns
def test_64_byte_frames_get_their_per_hop_breakdown(tmp_path, host_unchanged):
    """The study's 64 B frames carry no hop slot: B and C keep their nine
    stamps per round trip beside them and the run merges them; every packet
    then has the whole path, in order, and the segments add up to the RTT."""
    spec = tmp_path / "s.toml"
    spec.write_text('name = "lat64"\n[traffic]\nframe_bytes = 64\n[method]\nkind = "latency"\nruns = 1\n'
                    'duration_s = 1\n[latency]\ninterval_s = 0.01\n')
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r"), "--json"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    (path,) = (tmp_path / "r" / "raw").glob("*/*-latency-run*.json")
    d = json.loads(path.read_text())
    back = d["result"]["received"]
    assert back >= 90 and d["raw"]["side_stamps"] == 9 * back and d["result"]["impossible"] == 0
    records = read_records(d["raw"]["records_path"])
    got = records[records["t3_ns"] > 0]
    assert (got["hop_ns"] > 0).all() and (np.diff(got["hop_ns"], axis=1) >= 0).all()
    breakdown = json.loads(r.stdout)["configurations"][0]["breakdown"]
    assert [s["name"] for s in breakdown["segments"]] == ["a_send", "b_xdp_to_user", "b_transmit", "c_reflect",
                                                          "return", "a_receive"]
    assert breakdown["n_packets"] == back and breakdown["n_left_out"] == 0
    assert sum(s["mean_ns"] for s in breakdown["segments"]) == pytest.approx(breakdown["rtt_mean_ns"], rel=1e-6)
