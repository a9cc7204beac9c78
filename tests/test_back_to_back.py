"""The back-to-back frames benchmark (RFC 2544 26.4, RFC 9004) on the
namespace testbed: a known queue (a 500-frame FIFO in front of a 20 kpps
token bucket) gives the burst the queue predicts; bad parameters are
refused by name before anything runs."""
from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

import pytest

from softnet.analysis.back_to_back import BurstPlan, buffer_times
from softnet.campaign.spec import load_spec
from softnet.errors import InputError
from tests.conftest import needs_root, run_spec as run, softnet_cmd

# tbf's rate is in bytes of the frame without its FCS: 60 B at 9.6 Mbit/s = 20 kpps. Its bucket holds 120 B
# (two frames), the FIFO 500: a burst at 200 kpps fills the queue 180 frames per 200 that come in.
QUEUE, BUCKET, OUT_PPS, BURST_PPS = 500, 2, 20_000, 200_000
PREDICTED = (QUEUE + BUCKET) / (1 - OUT_PPS / BURST_PPS)  # 557.8 frames
QUEUED = f"""
[testbed.custom]
l3 = true
setup = ["tc qdisc replace dev $SN_OUT root handle 1: tbf rate 9600kbit burst 120 limit 100000",
         "tc qdisc replace dev $SN_OUT parent 1:1 handle 10: pfifo limit {QUEUE}"]
teardown = ["tc qdisc del dev $SN_OUT root"]
"""


def spec_text(sut: str, extra: str = "", method: str = "") -> str:
    return f"""name = "b2b"
[testbed]
sut = "{sut}"
[method]
kind = "back-to-back"
loads = ["200kpps"]
burst_pkts = 1500
bursts = 10
burst_gap_s = 0.1
runs = 2
throughput = "20kpps"
{method}
{extra}"""


@needs_root
@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
def test_a_known_queue_gives_the_burst_it_predicts(tmp_path):
    (summary,), trials = run(tmp_path, spec_text("custom", QUEUED))
    assert len(trials) == 2
    for t in trials:
        b2b = t["back_to_back"]
        assert b2b["burst_rate_pps"] == BURST_PPS and b2b["burst_pkts"] == 1500
        assert len(b2b["bursts"]) + b2b["unknown"] == 10  # the warm-up burst is not counted
        for b in b2b["bursts"]:
            if b["spoilt"] is None:  # the queue overflowed: every frame past the FIFO's fill was lost or queued
                assert b["lost_pkts"] > 0 and b["lossless_pkts"] < 1500
    # A vCPU stall shorter than the probe's period stops the queue's drain unseen and shortens that burst:
    # the typical burst must match the queue (median within 5%), the RFC's mean stay near it (10%)
    counted = sorted(b["lossless_pkts"] for t in trials for b in t["back_to_back"]["bursts"] if b["spoilt"] is None)
    median = statistics.median(counted)
    mean = summary["lossless_pkts"]["mean"]
    assert abs(median - PREDICTED) <= 0.05 * PREDICTED, (counted, summary)
    # noise only shortens a burst: the mean never runs past the queue, and a fifth trimmed off each
    # end leaves the few bursts an unseen stall cut out of the lower side
    trimmed = counted[len(counted) // 5:len(counted) - len(counted) // 5]
    assert mean <= 1.05 * PREDICTED and mean == pytest.approx(sum(counted) / len(counted)), summary
    assert abs(statistics.mean(trimmed) - PREDICTED) <= 0.10 * PREDICTED, (counted, summary)
    assert summary["bursts"] >= 6 and summary["bursts"] + summary["spoilt"] + summary["unknown"] == 20
    assert summary["lossless_pkts"]["ci_lower"] <= mean <= summary["lossless_pkts"]["ci_upper"]
    implied, corrected = buffer_times(mean, BURST_PPS, OUT_PPS)
    assert summary["implied_buffer_s"] == pytest.approx(implied) and corrected == pytest.approx(0.9 * implied)
    assert summary["corrected_buffer_s"] == pytest.approx(corrected)
    # the store answers the same through analyze
    a = subprocess.run(softnet_cmd("analyze", str(tmp_path / "r"), "--json"), capture_output=True, text=True)
    assert a.returncode == 0 and [x for x in json.loads(a.stdout) if x.get("back_to_back")][0]["bursts"] \
        == summary["bursts"]
    # and the report has its table
    rep = subprocess.run(softnet_cmd("report", str(tmp_path / "r"), "--out", str(tmp_path / "r.html")),
                         capture_output=True, text=True)
    html = (tmp_path / "r.html").read_text()
    assert rep.returncode == 0 and "Back-to-back frames" in html and f">{mean:.0f}<" in html


def test_a_burst_plan_is_whole_cycles():
    p = BurstPlan(200_000, 1500, 0.1, 10)
    assert p.cycle_s == pytest.approx(0.1075) and p.duty == pytest.approx(0.0075 / 0.1075)
    assert round(p.mean_rate_pps * p.cycle_s) == 1500 and round(p.mean_rate_pps * p.window_s) == 15000


@pytest.mark.parametrize("change, field", [
    ('burst_pkts = 2000000', "burst_pkts"),  # longer than the generator's arrival table
    ('throughput = "250kpps"', "method.throughput"),  # not an overload: no buffer fills
])
def test_bad_parameters_are_refused_by_name(tmp_path, change, field):
    key = change.split(" = ")[0]
    text = "\n".join(line for line in spec_text("ipv4-fwd").splitlines() if not line.startswith(key + " ="))
    (tmp_path / "s.toml").write_text(text.replace("[method]", f"[method]\n{change}"))
    with pytest.raises(InputError) as e:
        load_spec(tmp_path / "s.toml")
    assert field in str(e.value), str(e.value)


@pytest.mark.parametrize("sut, extra, field", [
    ("synthetic", "", "testbed.sut"),
    ("ipv4-fwd", '[traffic]\nmix = "imix"', "traffic.mix"),
])
def test_testbeds_without_a_burst_are_refused(tmp_path, sut, extra, field):
    (tmp_path / "s.toml").write_text(spec_text(sut, extra))
    with pytest.raises(InputError) as e:
        load_spec(tmp_path / "s.toml")
    assert field in str(e.value)
