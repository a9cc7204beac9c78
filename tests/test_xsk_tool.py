"""softnet-xsk (native/xsk): its command line without root; with root, a real
A-B-C path of three namespaces and real AF_XDP sockets (copy mode on veth)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from softnet.results import latency
from softnet.tools.changes import HostChanges
from tests.conftest import needs_root

ROOT = Path(__file__).resolve().parents[1]
NATIVE = Path(os.environ.get("SOFTNET_NATIVE_DIR") or ROOT / "native" / "build")
XSK = NATIVE / "softnet-xsk"
OPTIONS = ["role", "netns", "ifname", "ifname2", "queue", "src-mac", "dst-mac", "src-ip", "dst-ip", "a-mac",
           "c-mac", "size", "count", "interval-ns", "rate-pps", "arrivals", "seed", "records", "drain-ms",
           "batch", "zero-copy", "copy", "need-wakeup", "no-need-wakeup", "rx-mode", "tx-kick", "busy-poll-us",
           "prefer-busy-poll", "busy-poll-budget", "frame-size", "ring-size", "xdp-mode", "cpu", "no-stamp",
           "verbose", "help"]
PING = ["--role", "ping", "--ifname", "lo", "--src-mac", "02:00:00:00:00:01", "--dst-mac", "02:00:00:00:00:02",
        "--src-ip", "198.18.0.1", "--dst-ip", "198.19.0.1"]


def xsk(*args: str, timeout: float = 30, stdin: str = "") -> subprocess.CompletedProcess:
    if not os.access(XSK, os.X_OK):
        pytest.skip(f"{XSK} is not built (make -C native)")
    return subprocess.run([str(XSK), *args], input=stdin, capture_output=True, text=True, timeout=timeout)


def test_help_lists_every_option_within_80_columns():
    r = xsk("--help")
    assert r.returncode == 0 and not r.stderr
    assert r.stdout.startswith("usage: softnet-xsk")
    for name in OPTIONS:
        assert f"--{name}" in r.stdout, f"--{name} missing from --help"
    assert all(len(line) <= 80 for line in r.stdout.splitlines())


@pytest.mark.parametrize("args,named", [
    (["--role", "bogus", "--ifname", "lo"], "--role"),
    ([*PING, "--rx-mode", "spin"], "--rx-mode"),
    ([*PING, "--ring-size", "1000"], "--ring-size"),
    ([*PING, "--frame-size", "3000"], "--frame-size"),
    ([*PING, "--size", "63"], "--size"),
    ([*PING, "--busy-poll-budget", "0"], "--busy-poll-budget"),
    ([*PING, "--xdp-mode", "offload"], "--xdp-mode"),
    ([*PING, "--src-mac", "02:00:00:00:00"], "--src-mac"),
    ([*PING, "--dst-ip", "2001:2::1"], "--dst-ip"),
    ([*PING, "--rate-pps", "1000", "--interval-ns", "1000000"], "--rate-pps"),
    ([*PING, "--ifname2", "lo"], "--ifname2"),
    (["--role", "forward", "--ifname", "lo"], "--ifname2"),
    (["--role", "reflect", "--ifname", "lo", "--count", "5"], "--count"),
    (["--role", "ping", "--ifname", "lo"], "--src-mac"),
    (["--ifname", "lo"], "--role"),
    (["--role", "reflect"], "--ifname"),
    ([*PING, "--no-such-option"], "--no-such-option"),
])
def test_bad_options_exit_2_naming_the_option(args, named):
    r = xsk(*args)
    assert r.returncode == 2, r
    assert r.stderr.startswith("softnet-xsk: ") and r.stderr.count("\n") == 1, r.stderr
    assert named in r.stderr and not r.stdout


def test_no_such_interface_exits_1():
    r = xsk("--role", "reflect", "--ifname", "sn-no-such-if")
    assert r.returncode == 1 and "'sn-no-such-if'" in r.stderr and r.stderr.count("\n") == 1


def test_hops_and_flags_match_the_record_format():
    """xsk.h's hop slots and xsk.c's record flags are softnet/results/latency.py's."""
    header = (ROOT / "native" / "xsk" / "xsk.h").read_text()
    hops = re.findall(r"^\tHOP_(\w+),", header, re.M)
    assert tuple(h.lower() for h in hops) == latency.HOPS
    source = (ROOT / "native" / "xsk" / "xsk.c").read_text()
    flags = dict(re.findall(r"FLAG_(\w+) = (\d+)", source))
    assert {k: int(v) for k, v in flags.items()} == {
        "RECEIVED": latency.FLAG_RECEIVED, "DUPLICATE": latency.FLAG_DUPLICATE,
        "REORDERED": latency.FLAG_REORDERED, "IMPOSSIBLE": latency.FLAG_IMPOSSIBLE}
    assert "_Static_assert(sizeof(struct record) == 112" in source


@needs_root
def test_stamp_cost_measures_both_stamps(host_unchanged):
    r = xsk("--role", "stamp-cost", "--count", "100000")
    assert r.returncode == 0, r.stderr
    cost = json.loads(r.stdout)
    assert cost["clock_gettime_ns"] > 0 and cost["user_stamp_ns"] > 0
    assert cost["xdp_run_stamp_ns"] > 0 and cost["xdp_run_no_stamp_ns"] > 0
    assert cost["xdp_meta_refused_pkts"] == 0 and cost["xdp_meta_pkts"] == 7 * 100000  # the metadata path


# ---- three namespaces A - B - C (the lead's testbed/latency.py will replace this) ----

def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


def mac(ns: str, dev: str) -> str:
    return json.loads(ip("-n", ns, "-j", "link", "show", dev))[0]["address"]


@pytest.fixture
def abc():
    """A (xa0, 198.18.1.1) - (xb0) B (xb1) - (xc0, 198.19.1.1) C, static neighbours."""
    tag = uuid.uuid4().hex[:6]
    ns = {h: f"sn-xsk{tag}-{h}" for h in "abc"}
    with HostChanges() as ch:
        for n in ns.values():
            ch.record(f"netns {n}", lambda n=n: ip("netns", "del", n))
            ip("netns", "add", n)
            ip("-n", n, "link", "set", "lo", "up")
        ip("link", "add", "xa0", "netns", ns["a"], "type", "veth", "peer", "name", "xb0", "netns", ns["b"])
        ip("link", "add", "xb1", "netns", ns["b"], "type", "veth", "peer", "name", "xc0", "netns", ns["c"])
        for n, dev, addr in ((ns["a"], "xa0", "198.18.1.1/24"), (ns["b"], "xb0", "198.18.1.2/24"),
                             (ns["b"], "xb1", "198.19.1.2/24"), (ns["c"], "xc0", "198.19.1.1/24")):
            ip("-n", n, "addr", "add", addr, "dev", dev)
            ip("-n", n, "link", "set", dev, "up")
        macs = {"a": mac(ns["a"], "xa0"), "b0": mac(ns["b"], "xb0"), "b1": mac(ns["b"], "xb1"),
                "c": mac(ns["c"], "xc0")}
        for n, dev, addr, lladdr in ((ns["a"], "xa0", "198.18.1.2", macs["b0"]),
                                     (ns["b"], "xb0", "198.18.1.1", macs["a"]),
                                     (ns["b"], "xb1", "198.19.1.1", macs["c"]),
                                     (ns["c"], "xc0", "198.19.1.2", macs["b1"])):
            ip("-n", n, "neigh", "replace", addr, "lladdr", lladdr, "dev", dev, "nud", "permanent")
        ip("-n", ns["a"], "route", "add", "198.19.1.0/24", "via", "198.18.1.2")
        ip("-n", ns["c"], "route", "add", "198.18.1.0/24", "via", "198.19.1.2")
        yield ch, ns, macs


def start_path(ch, ns, macs, knobs=None, size=64):
    from softnet.traffic.xsk import Forward, Ping, Reflect, XskKnobs

    knobs = knobs or XskKnobs()
    reflect = Reflect(ch, ns["c"], "xc0", knobs)
    forward = Forward(ch, ns["b"], "xb0", "xb1", a_mac=macs["a"], c_mac=macs["c"], knobs=knobs)
    ping = Ping(ch, ns["a"], "xa0", macs["a"], macs["b0"], "198.18.1.1", "198.19.1.1", size, knobs)
    return reflect, forward, ping


def xdp_attached(ns: str, dev: str) -> bool:
    return "xdp" in json.loads(ip("-n", ns, "-j", "link", "show", dev))[0]


@needs_root
@pytest.mark.netns
def test_round_trip_through_forward_and_reflect(host_unchanged, abc, tmp_path):
    from softnet.traffic.xsk import FULL_FRAME_BYTES

    ch, ns, macs = abc
    reflect, forward, ping = start_path(ch, ns, macs, size=FULL_FRAME_BYTES)
    assert forward.hello["bind_mode"] == "copy" and forward.hello["unsupported"] == []
    summary, rec = ping.run(200, tmp_path / "rec.bin", interval_ns=1_000_000)
    assert ping.hello["hop_slots"] == len(latency.HOPS) and ping.hello["t0_in_payload"]

    assert summary["sent_pkts"] == summary["received_pkts"] == 200, summary
    assert summary["lost_pkts"] == summary["duplicate_pkts"] == summary["impossible_pkts"] == 0
    assert summary["xdp_stamp_meta_pkts"] == 200  # copy mode on veth keeps the XDP metadata
    assert len(rec) == 200 and (rec["seq"] == np.arange(200)).all()
    assert (rec["flags"] & latency.FLAG_RECEIVED).all() and not (rec["flags"] & latency.FLAG_IMPOSSIBLE).any()
    path = np.column_stack([rec["t0_ns"], rec["hop_ns"], rec["t3_ns"]]).astype(np.int64)
    assert (path > 0).all(), "every hop stamped"
    assert (np.diff(path, axis=1) >= 0).all(), "stamps in path order"
    assert (rec["t0_ns"] < rec["hop_ns"][:, 0]).all() and (rec["hop_ns"][:, -1] < rec["t3_ns"]).all()
    rtt = np.median(rec["t3_ns"] - rec["t0_ns"])
    assert 1_000 < rtt < 10_000_000, rtt

    b, c = forward.read(), reflect.read()
    assert b["rx_pkts"] == b["tx_pkts"] == 400 and b["drop_pkts"] == 0, b
    assert c["rx_pkts"] == c["tx_pkts"] == 200, c
    assert [s["ifname"] for s in b["sockets"]] == ["xb0", "xb1"]


@needs_root
@pytest.mark.netns
def test_no_stamp_round_trips_have_rtts_and_no_hop_stamps(host_unchanged, abc, tmp_path):
    """--no-stamp on all three roles (bench/xsk_stamp_bench.py's off arm):
    the XDP program still redirects, A still has T0 and T3, no hop is stamped."""
    from softnet.traffic.xsk import FULL_FRAME_BYTES, XskKnobs

    ch, ns, macs = abc
    reflect, forward, ping = start_path(ch, ns, macs, XskKnobs(stamp=False), size=FULL_FRAME_BYTES)
    summary, rec = ping.run(50, tmp_path / "rec.bin", interval_ns=1_000_000)
    assert not ping.hello["stamp"] and ping.hello["xdp_stamp"] is None and ping.hello["hop_slots"] == 10
    assert summary["received_pkts"] == 50 and summary["impossible_pkts"] == 0, summary
    assert (rec["flags"] & latency.FLAG_RECEIVED).all()
    assert (rec["t0_ns"] > 0).all() and (rec["t3_ns"] > rec["t0_ns"]).all()
    assert (rec["hop_ns"] == 0).all(), "no hop slot stamped"
    b, c = forward.read(), reflect.read()
    for counters in (summary, b, c):
        assert counters["xdp_stamp_meta_pkts"] == counters["xdp_stamp_payload_pkts"] == 0
        assert counters["xdp"]["meta_pkts"] == counters["xdp"]["meta_refused_pkts"] == 0
    assert b["xdp"]["test_pkts"] == b["tx_pkts"] == 100 and c["tx_pkts"] == 50, (b, c)


@needs_root
@pytest.mark.netns
def test_zero_copy_on_veth_is_unsupported_and_falls_back_to_copy(host_unchanged, abc, tmp_path):
    """Decision (docs/reference/xsk.md): a refused zero-copy bind is reported and the
    role carries on in copy mode; a 64 B frame carries no hop slots."""
    from softnet.traffic.xsk import XskKnobs

    ch, ns, macs = abc
    reflect, forward, ping = start_path(ch, ns, macs, XskKnobs(zero_copy=True), size=64)
    for hello in (reflect.hello, forward.hello):
        assert hello["bind_mode"] == "copy"
        assert {"knob": "zero_copy", "unsupported": os.strerror(95)} in hello["unsupported"]
    summary, rec = ping.run(20, tmp_path / "rec.bin", interval_ns=1_000_000)
    assert ping.hello["hop_slots"] == 0 and not ping.hello["t0_in_payload"]
    assert summary["received_pkts"] == 20 and summary["bind_mode"] == "copy", summary
    assert (rec["hop_ns"][:, :-1] == 0).all() and (rec["hop_ns"][:, -1] > rec["t0_ns"]).all()


@needs_root
@pytest.mark.netns
def test_stop_signals_and_end_of_input_detach_the_program(host_unchanged, abc):
    ch, ns, _ = abc
    for how in ("sigterm", "sigint", "eof", "quit"):
        p = subprocess.Popen([str(XSK), "--role", "reflect", "--netns", ns["c"], "--ifname", "xc0"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert json.loads(p.stdout.readline())["ready"]
            assert xdp_attached(ns["c"], "xc0")
            if how == "sigterm":
                p.send_signal(signal.SIGTERM)
            elif how == "sigint":
                p.send_signal(signal.SIGINT)
            elif how == "eof":
                p.stdin.close()
            else:
                p.stdin.write("quit\n")
                p.stdin.flush()
            assert p.wait(timeout=5) == 0, (how, p.stderr.read())
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        deadline = time.monotonic() + 2
        while xdp_attached(ns["c"], "xc0") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not xdp_attached(ns["c"], "xc0"), how
