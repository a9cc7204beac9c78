"""The eBPF routers (xdp-router, tc-router) and the VXLAN gateway on the real
testbed: real namespaces, real packets, and the counters that prove the path."""
from __future__ import annotations

import ctypes
import os
import re
import socket
import struct
from contextlib import contextmanager
from pathlib import Path

import pytest

from softnet.campaign.trial import TrialSpec, run_trial
from softnet.testbed.local import ADDR, LocalTestbed
from softnet.testbed.personalities import parse_sut
from softnet.testbed.personalities.xdp_router import ROUTER_STATS
from softnet.tools import hostcmd
from softnet.tools.changes import HostChanges
from softnet.tools.process import native_dir
from tests.conftest import needs_root

pytestmark = [needs_root, pytest.mark.netns]

ROUTERS = ["xdp-router", "xdp-router:mode=generic", "tc-router"]
REPO = Path(__file__).resolve().parents[1]


def delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def trial(sut: str, rate: float = 100_000, **spec) -> tuple[dict, dict, LocalTestbed]:
    """One short trial; the personality's counters read around it (their deltas)."""
    with HostChanges() as ch:
        tb = LocalTestbed(ch, sut)
        ep = tb.build()
        c0 = tb.personality.counters(tb)
        r = run_trial(tb, ep, TrialSpec(rate_pps=rate, **{"duration_s": 0.5, "warmup_s": 0.1,
                                                          "sample_interval_s": None, **spec}), ch)
        c1 = tb.personality.counters(tb)
    return r, delta(c0, c1), tb


def ring_drops(r) -> int:
    """Drops at the veth rings of the path (the SUT's ingress ring; the sink's,
    seen as tx_dropped on sut_out): a busy shared VM overflows them now and
    then at any rate. Losses anywhere else would be the data path's own."""
    d = r["diagnosis"]
    return d["ingress_ring_full_pkts"] + d["interface_deltas"]["sut_out"]["tx_dropped"]


def test_router_stats_follow_the_enum_of_router_h():
    text = (REPO / "native/router/router.h").read_text()
    names = re.findall(r"^\s*SN_RT_([A-Z_]+)[\s=,]", text, re.M)
    assert names[-1] == "STATS_MAX"
    assert tuple(n.lower() for n in names[:-1]) == ROUTER_STATS


@pytest.mark.parametrize("sut", ROUTERS)
def test_ebpf_router_forwards_around_the_kernel_stack(sut, host_unchanged):
    r, d, _ = trial(sut)
    ifs = r["diagnosis"]["interface_deltas"]
    assert r["valid"] and r["sent_pkts"] == 50_000
    # (near) no loss at 100 kpps, and whatever was lost overflowed a veth ring, not the router
    assert r["lost_pkts"] <= ring_drops(r)
    assert r["received_pkts"] >= 0.8 * r["sent_pkts"]
    # the program redirected every test frame that reached it (warm-up included), the kernel forwarded none
    reached = ifs["sut_in"]["rx_packets"]
    assert reached - 5 <= d["router_redirected"] <= reached
    assert d["router_redirected"] >= r["received_pkts"]
    assert abs(ifs["sink"]["rx_packets"] - d["router_redirected"]) <= 5
    assert d["ip_forw_datagrams"] <= 5
    assert d["router_pass_no_neigh"] == d["router_pass_fwd_disabled"] == d["router_pass_frag_needed"] == 0


# ---- the forwarded frame itself ---------------------------------------------
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


@contextmanager
def in_netns(ns: str):
    """This thread in namespace ``ns`` (sockets made here stay in it)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
        yield
    finally:
        _libc.setns(own, CLONE_NEWNET)
        os.close(own)
        os.close(target)


def ip_checksum(header: bytes) -> int:
    s = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def test_frame(ttl: int, dst: str = ADDR["sink"][0], payload: bytes = b"softnet-router-check") -> bytes:
    udp = struct.pack("!HHHH", 4000, 7, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, ttl, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(ADDR["gen"][0]), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    return mac(ADDR["sut_in"][2]) + mac(ADDR["gen"][2]) + b"\x08\x00" + ip + udp


test_frame.__test__ = False  # a helper, not a test


@pytest.mark.parametrize("sut", ROUTERS)
def test_forwarded_frame_has_ttl_minus_one_a_valid_checksum_and_the_next_hops_macs(sut, host_unchanged):
    """Frames sent by hand from the generator's namespace, read by a packet
    socket on the sink's veth (no sink program: GRO on gives the veth the
    NAPI an XDP redirect into it needs)."""
    with HostChanges() as ch:
        tb = LocalTestbed(ch, sut)
        tb.build()
        hostcmd.in_netns(tb.ns["sink"], ["ethtool", "-K", tb.ifs["sink"], "gro", "on"])
        ch.record(f"{tb.ns['sink']}/{tb.ifs['sink']}: gro on", lambda: None)  # dies with the veth
        c0 = tb.personality.counters(tb)
        with in_netns(tb.ns["sink"]):
            rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
        with in_netns(tb.ns["gen"]):
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        with rx, tx:
            rx.bind((tb.ifs["sink"], 0x0800))
            rx.settimeout(3)
            tx.bind((tb.ifs["gen"], 0))
            for ttl in (64, 1, 2):  # TTL 1: expired, to the stack (which answers with ICMP)
                tx.send(test_frame(ttl))
            got = []
            while len(got) < 2:
                frame = rx.recv(2048)
                if frame[14 + 9] == socket.IPPROTO_UDP and frame.endswith(b"softnet-router-check"):
                    got.append(frame)
        d = delta(c0, tb.personality.counters(tb))
    assert d["router_redirected"] == 2 and d["router_ttl_expired"] >= 1 and d["ip_forw_datagrams"] == 0
    for frame, ttl in zip(got, (63, 1)):
        assert frame[:6] == mac(ADDR["sink"][2]) and frame[6:12] == mac(ADDR["sut_out"][2])
        ip = frame[14:34]
        assert ip[8] == ttl and ip_checksum(ip) == 0


def test_params_and_requirements():
    assert parse_sut("xdp-router").spec == "xdp-router"
    assert parse_sut("xdp-router:mode=generic").values["mode"] == "generic"
    from softnet.errors import InputError
    with pytest.raises(InputError, match="accepted: native, generic"):
        parse_sut("xdp-router:mode=offload")
    reqs = {r.what for r in parse_sut("tc-router").requires}
    assert {"tool:bpftool", "CONFIG_BPF_SYSCALL", "CONFIG_NET_CLS_BPF", "CONFIG_NET_SCH_INGRESS"} <= reqs
    from softnet.doctor.personalities import missing
    assert missing(parse_sut("tc-router")) == [] and missing(parse_sut("xdp-router")) == []
    assert (native_dir() / "router.bpf.o").exists()
