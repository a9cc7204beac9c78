"""Bidirectional trials: both directions at once through the SUT, each with
its own generator and sink; per-direction counts add up exactly to the
totals, and the SUT's own counters see both directions."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from softnet.analysis.trial_eval import evaluate
from softnet.campaign.trial import run_trial
from softnet.errors import InputError
from softnet.results.trial import TrialSpec
from softnet.testbed.local import LocalTestbed
from softnet.tools.changes import HostChanges
from tests.conftest import needs_root, softnet_cmd

CAPTURED = Path(__file__).parent / "data" / "raw_trials" / "ipv4fwd_60kpps_bidirectional.json"
SUMMED = ("intended_pkts", "sent_pkts", "received_pkts", "lost_pkts", "sut_lost_pkts", "reordered_pkts",
          "duplicate_pkts", "achieved_rate_pps", "intended_rate_pps")


def check_sums(r: dict) -> None:
    f, b = r["directions"]["forward"], r["directions"]["reverse"]
    for k in ("sent_pkts", "received_pkts", "lost_pkts", "sut_lost_pkts", "reordered_pkts", "duplicate_pkts",
              "intended_rate_pps"):
        assert r[k] == f[k] + b[k], k
    assert r["intended_rate_pps"] == 2 * f["intended_rate_pps"]
    assert r["loss_ratio"] == pytest.approx(r["lost_pkts"] / r["sent_pkts"])
    assert r["valid"] == (f["valid"] and b["valid"])
    assert set(r["flags"]) == set(f["flags"]) | set(b["flags"])


def test_captured_bidirectional_trial_sums_its_directions():
    """A trial captured on this VM (60 kpps in all, 4 sources x 2 ports per
    direction): re-evaluated, each direction's figures add up to the totals,
    flow by flow too."""
    d = json.loads(CAPTURED.read_text())
    r = evaluate(d["raw"]).to_dict()
    check_sums(r)
    f, b = r["directions"]["forward"], r["directions"]["reverse"]
    assert f["sent_pkts"] == b["sent_pkts"] == 15_000
    assert f["flow_counts"]["flows"] == b["flow_counts"]["flows"] == 8
    assert r["flow_counts"]["sum_pkts"] == f["flow_counts"]["sum_pkts"] + b["flow_counts"]["sum_pkts"] \
        == r["received_pkts"]
    assert f["latency_p50_ns"] and b["latency_p50_ns"]
    # every packet of both directions (warm-up included) was routed by the SUT's kernel
    sent_all = d["raw"]["generator"]["sent_pkts"] + d["raw"]["reverse"]["generator"]["sent_pkts"]
    assert r["path_counters"]["ip_forw_datagrams"] == sent_all


@needs_root
@pytest.mark.usefixtures("host_unchanged")
@pytest.mark.parametrize("args, option", [
    (["--sut", "vxlan", "--bidirectional"], "--bidirectional"),
    (["--bidirectional", "--dst-ips", "4"], "--dst-ips"),
])
def test_bad_bidirectional_input_names_the_option(args, option):
    r = subprocess.run(softnet_cmd("trial", "--rate", "10kpps", "--duration", "0.2", *args),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert option in r.stderr


def test_one_way_testbed_refuses_a_bidirectional_trial():
    with HostChanges() as changes:
        with pytest.raises(InputError) as e:
            LocalTestbed(changes, "vxlan", bidirectional=True)
        assert e.value.field == "bidirectional" and "one way" in e.value.message
        assert changes.applied == []


def test_evaluate_shows_each_direction_in_80_columns():
    r = subprocess.run(softnet_cmd("evaluate", str(CAPTURED)), capture_output=True, text=True, timeout=60,
                       env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert "per direction" in r.stdout and "forward" in r.stdout and "reverse" in r.stdout
    assert "bidirectional (sums)" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
