"""The udp-relay personality: the test frames end at a UDP socket on the SUT
(the eBPF receive-path study's path) and a relay application sends each on
to the sink. Its counters prove the socket got them; the profiler times the
IP-to-transport stage that forwarding never takes; teardown leaves nothing."""
from __future__ import annotations

import pytest

from softnet.testbed.personalities import parse_sut
from tests.conftest import needs_root, run_spec

SPEC = """name = "relay"
[testbed]
sut = "udp-relay"
[method]
loads = ["20kpps"]
runs = 1
duration_s = 1
warmup_s = 0.2
[collect]
profile = true
profile_duty = 1
"""


@needs_root
@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
def test_frames_end_at_a_socket_and_the_profiler_times_ip_to_transport(tmp_path):
    _, (t,) = run_spec(tmp_path, SPEC)
    # relayed to the sink; a scheduling gap of the relay's CPU (a host stall) overflows its socket
    # buffer, and that loss is the host's
    assert t["sent_pkts"] > 0 and t["received_pkts"] >= 0.5 * t["sent_pkts"]
    assert t["sut_lost_pkts"] <= 0.05 * t["sent_pkts"], (t["sut_lost_pkts"], t.get("host_stalls"))
    c = t["path_counters"]
    # every packet the sink counted went through the socket: read by the relay, counted by UDP's MIB
    assert c["relay_received_pkts"] >= t["received_pkts"] and c["relay_sent_pkts"] >= t["received_pkts"]
    assert c["udp_in_datagrams"] >= c["relay_received_pkts"] and c["udp_no_ports"] == 0
    sut = t["placement"]["requested"]["sut_cpus"][0]
    ebpf = {r["stage"]: r for r in t["profile"]["stages"][str(sut)]["ebpf_profile"]}
    wifi = {r["stage"]: r for r in t["profile"]["stages"][str(sut)]["wifi_ap"]}
    assert ebpf["IP to transport"]["ns_per_packet"] > 50  # ip_local_deliver, udp_rcv, the queue
    assert wifi["IP Stack"]["ns_per_packet"] >= ebpf["IP to transport"]["ns_per_packet"]


@needs_root
@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
def test_more_destination_ports_than_the_relay_binds_are_refused(tmp_path):
    import subprocess

    from tests.conftest import softnet_cmd

    r = subprocess.run(softnet_cmd("trial", "--sut", "udp-relay", "--rate", "10kpps", "--duration", "0.5",
                                   "--dst-ports", "2"), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "dst_ports" in r.stderr and "at most 1" in r.stderr, r.stderr


def test_the_relay_is_one_way_and_runs_on_inventory_hosts_too():
    p = parse_sut("udp-relay")
    assert not p.bidirectional and "one socket" in p.one_way_why and p.max_dst_ports == 1
    p.require_remote("testbed.sut")  # tests/test_trial_hosts.py runs it on emulated hosts
