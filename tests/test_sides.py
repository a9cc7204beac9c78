"""The path's direction and per-side settings of the SUT (steering, GRO,
XDP) on the real testbed: the receiving interface gets its side's settings."""
from __future__ import annotations

import json

import pytest

from softnet.campaign.measurers import TestbedMeasurer
from softnet.campaign.spec import CampaignSpec, load_spec
from softnet.errors import InputError
from softnet.results.series import Series
from softnet.tools import hostcmd
from tests.conftest import needs_root, valid_or_held

pytestmark = [needs_root, pytest.mark.netns]


def spec(**testbed) -> CampaignSpec:
    return CampaignSpec.model_validate({
        "name": "dir", "testbed": {"sut": "ipv4-fwd", "gen_cpu": 0, "sut_cpus": [1], **testbed},
        "method": {"kind": "sweep", "loads": ["20kpps"], "runs": 1, "duration_s": 0.3, "warmup_s": 0.1},
        "collect": {"sample": False}})


def test_direction_puts_the_other_sides_settings_on_the_receiving_interface(host_unchanged):
    s = spec(direction="b_to_a", side_a={"steering": "threaded"}, side_b={"steering": "rps"})
    with TestbedMeasurer(s, 0) as m:
        mask = hostcmd.read_ns_file(m.tb.ns["sut"], f"/sys/class/net/{m.tb.ifs['sut_in']}/queues/rx-0/rps_cpus")
        r = m.measure(20_000, 0, 0)
    assert valid_or_held(r) and r["path"]["sut_in_side"] == "b" and r["path"]["ingress_steering"] == "rps"
    assert r["placement"]["requested"]["steering"] == "rps" and int(mask, 16) == 0b10
    assert "kernel" not in r  # collect.sample = false



def link(m, role: str) -> dict:
    return json.loads(hostcmd.in_netns(m.tb.ns["sut"], ["ip", "-j", "link", "show", "dev", m.tb.ifs[role]]))[0]


def gro(m, role: str) -> str:
    out = hostcmd.in_netns(m.tb.ns["sut"], ["ethtool", "-k", m.tb.ifs[role]])
    return next(line.split(":")[1].split()[0] for line in out.splitlines() if "generic-receive-offload" in line)


def test_xdp_pass_and_gro_off_on_the_receiving_side(host_unchanged):
    s = spec(direction="b_to_a", side_b={"gro": False, "xdp": "pass"}, side_a={"gro": False, "xdp": "none"})
    with TestbedMeasurer(s, 0) as m:
        r = m.measure(20_000, 0, 0)
        assert "xdp" in link(m, "sut_in") and "xdp" not in link(m, "sut_out")
        assert gro(m, "sut_in") == "off" and gro(m, "sut_out") == "off"
    # Forwarding still works through XDP_PASS with GRO off: nothing lost on the path.
    assert valid_or_held(r) and r["received_pkts"] >= r["sent_pkts"] - r["diagnosis"]["ingress_ring_full_pkts"] - 5
    assert r["path"]["sides"]["b"] == {"steering": None, "gro": False, "xdp": "pass"}


def test_receiving_side_without_napi_is_refused_before_anything_changes(tmp_path, host_unchanged):
    path = tmp_path / "s.toml"
    path.write_text('name = "x"\n[testbed]\nside_a = { gro = false }\n[method]\nloads = ["1kpps"]\n')
    with pytest.raises(InputError, match="testbed.*gro = false needs xdp"):
        load_spec(path)
    # Sending side: allowed (it receives nothing of the test traffic).
    assert spec(side_b={"gro": False}).testbed.side_b.gro is False


def test_an_egress_qdisc_queues_what_the_sut_sends(host_unchanged):
    """side_b.qdisc (pfifo here: this kernel has no fq_codel; doctor says
    which it has): the SUT's egress veth gets it as its root,
    every forwarded packet goes through it (its counters, sampled as for
    any queueing root), and the result's path names it."""
    s = spec(side_b={"qdisc": "pfifo limit 2000"})
    s = s.model_copy(update={"collect": s.collect.model_copy(update={"sample": True, "sample_interval_s": 0.25})})
    with TestbedMeasurer(s, 0) as m:
        shown = hostcmd.in_netns(m.tb.ns["sut"], ["tc", "qdisc", "show", "dev", m.tb.ifs["sut_out"]])
        r = m.measure(20_000, 0, 0)
    assert shown.startswith("qdisc pfifo") and "limit 2000p" in shown, shown
    assert r["path"]["sides"]["b"]["qdisc"] == "pfifo limit 2000" and "qdisc" not in r["path"]["sides"]["a"]
    assert r["kernel"]["qdisc"]["sut_out.packets"] > 0
    # Counted where the counts must agree: the sampler's first sample precedes the first test packet
    # and its last follows the drain, so the qdisc passed every test packet the sink received, and a
    # few of the kernel's own (IPv6 control packets, sent at any time; the sink counts those that came
    # before its read). (Over the window they cannot agree exactly: the sink's window is counted in
    # packets, the kernel's in time between two reads some ms apart.)
    series = Series.from_json(r["raw_trial"]["series"])
    key = ("qdisc", "sut_out.packets", -1)
    through = series.samples[-1][key] - series.samples[0][key]
    sink = r["raw_trial"]["sink"]
    assert 0 <= through - sink["rx_test_pkts"] <= sink["other_pkts"] + 10, (through, sink)


def test_a_qdisc_the_kernel_refuses_is_named_and_the_host_restored(host_unchanged):
    """tc refuses it (an unknown kind here, a bad limit where fq_codel is built)."""
    from softnet.errors import TestbedError

    with pytest.raises(TestbedError, match="qdisc 'fq_codel limit banana' on the SUT's sut_out interface"):
        with TestbedMeasurer(spec(side_b={"qdisc": "fq_codel limit banana"}), 0):
            pass


def test_an_unknown_qdisc_kind_is_refused_by_name():
    with pytest.raises(ValueError, match=r"side_b.qdisc[\s\S]*'nonsense 1': expected one of pfifo"):
        spec(side_b={"qdisc": "nonsense 1"})
