"""The AF_XDP lab's three-namespace testbed: real namespaces, real kernel
ping over A -> B -> C, knobs applied or recorded unsupported, host restored."""
from __future__ import annotations

from pathlib import Path

import pytest

from softnet.errors import InputError
from softnet.testbed.latency import LatencyKnobs, LatencyTestbed, parse_netstat
from softnet.tools.changes import HostChanges
from softnet.traffic.ping import kernel_ping, parse_ping
from tests.conftest import needs_root

DATA = Path(__file__).parent / "data"


def test_netstat_parser_on_this_machines_file():
    d = parse_netstat((DATA / "procfs" / "netstat").read_text())
    assert "TcpExt.BusyPollRxPackets" in d and "IpExt.InOctets" in d
    assert all(isinstance(v, int) for v in d.values())


def test_netstat_parser_names_a_bad_pair():
    with pytest.raises(ValueError, match="TcpExt has 2 names and 1 values"):
        parse_netstat("TcpExt: A B\nTcpExt: 1\n")


def test_ping_parser():
    text = ("PING 198.19.0.1 (198.19.0.1) 26(54) bytes of data.\n"
            "34 bytes from 198.19.0.1: icmp_seq=1 ttl=63 time=0.060 ms\n"
            "34 bytes from 198.19.0.1: icmp_seq=3 ttl=63 time=1.25 ms\n")
    seqs, rtts = parse_ping(text)
    assert list(seqs) == [1, 3] and list(rtts) == [60_000, 1_250_000]


@pytest.mark.parametrize("field, value", [("napi_defer_hard_irqs", -1), ("busy_poll_us", "50"),
                                          ("cstate_limit_us", True), ("gro_flush_timeout_ns", 10**10),
                                          ("irq_suspend_timeout_ns", -5)])
def test_bad_knobs_name_the_field(field, value):
    with pytest.raises(InputError, match=f"knobs.{field}"):
        LatencyKnobs(**{field: value}).validate()


@needs_root
@pytest.mark.netns
def test_kernel_ping_over_a_b_c_and_knobs_restored(host_unchanged):
    sysctl = Path("/proc/sys/net/core/busy_poll")
    before = sysctl.read_text()
    with HostChanges() as ch:
        tb = LatencyTestbed(ch, LatencyKnobs(threaded_napi=True, napi_defer_hard_irqs=2, gro_flush_timeout_ns=20000,
                                             busy_poll_us=50, cstate_limit_us=0, coalesce_rx_usecs=10,
                                             irq_suspend_timeout_ns=20000))
        hosts = tb.build()
        r = kernel_ping(hosts["a"].ns, hosts["c"].ip, count=20, interval_s=0.01)
        assert r["received"] == 20 and (r["rtt_ns"] > 1_000).all() and (r["rtt_ns"] < 100_000_000).all()
        assert sysctl.read_text().strip() == "50"
        applied = tb.describe()["applied"]
        assert applied["napi_defer_hard_irqs.b_a"] == 2 and applied["cstate_limit_us"] == 0
        # veth has no interrupt coalescing: recorded, not fatal
        assert "unsupported" in applied["coalesce_rx_usecs.b_c"]
        assert len(tb.napi_threads) == 4
        # napi-set took effect: the kernel reports it back for every NAPI of B
        for view in tb.napi_view("b").values():
            assert view["napis"] and all(n["irq_suspend_timeout_ns"] == 20000 for n in view["napis"])
    assert sysctl.read_text() == before
