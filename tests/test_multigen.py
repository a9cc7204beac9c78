"""Several generators on one schedule, RSS spread by source addresses, and the
XDP mode the tools report: merge rules offline, then real
namespaces and real packets."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from softnet.campaign.trial import TrialSpec, first_source, run_trial
from softnet.errors import InputError
from softnet.testbed.local import LocalTestbed, Placement
from softnet.tools import hostcmd
from softnet.tools.changes import HostChanges
from softnet.traffic.native import merge_reports
from tests.conftest import needs_root
from tests.frames import CAPTURE, csum

NATIVE = Path(os.environ.get("SOFTNET_NATIVE_DIR") or Path(__file__).resolve().parents[1] / "native" / "build")


def gen_report(stream: int, sent: int, warmup: int, first: int, window: int, last: int, lag_mean: float,
               episodes: list, cpu: int, **kw) -> dict:
    return {"sent_pkts": sent, "intended_pkts": sent, "warmup_pkts": warmup, "intended_rate_pps": 1000.0,
            "schedule_start_ns": 1_000, "first_send_ns": first, "window_start_ns": window, "last_send_ns": last,
            "calls": 3, "batch": 16, "window_lag_mean_ns": lag_mean, "window_lag_max_ns": 10 * stream + 5,
            "window_late_pkts": stream, "late_episodes_total": len(episodes), "late_episodes_min_lag_ns": 100000,
            "late_episodes": episodes, "frame_bytes": 64, "cpu": cpu, "stream": stream, "streams": 2,
            "src_ips": 1, "xdp_mode": "native", "interrupted": False, "error": "", **kw}


def test_merged_report_has_the_single_generators_keys_and_sums():
    a = gen_report(0, 50, 5, 1_010, 11_000, 99_000, 100.0, [[4, 8, 200_000]], 0)
    b = gen_report(1, 49, 5, 2_010, 10_000, 100_000, 400.0, [[1, 3, 300_000], [9, 11, 150_000]], 1)
    m = merge_reports([b, a], cpus=[0, 1])
    assert set(a) <= set(m)
    assert m["sent_pkts"] == 99 and m["intended_pkts"] == 99 and m["warmup_pkts"] == 10
    assert m["first_send_ns"] == 1_010 and m["window_start_ns"] == 10_000 and m["last_send_ns"] == 100_000
    assert m["window_lag_mean_ns"] == pytest.approx((45 * 100 + 44 * 400) / 89)
    assert m["window_lag_max_ns"] == 15 and m["window_late_pkts"] == 1 and m["calls"] == 6
    assert m["late_episodes"] == [[1, 3, 300_000], [4, 8, 200_000], [9, 11, 150_000]]
    assert m["late_episodes_total"] == 3
    assert m["cpu"] == 0 and m["cpus"] == [0, 1] and m["stream"] is None
    assert [s["stream"] for s in m["streams"]] == [0, 1]  # kept, in stream order
    assert not m["interrupted"] and m["error"] == "" and m["xdp_mode"] == "native"
    # a stream that ran elsewhere than asked fails the placement check (cpu -1)
    assert merge_reports([a, b], cpus=[0, 0])["cpu"] == -1
    bad = merge_reports([a, dict(b, interrupted=True, error="No buffer space available")], cpus=[0, 1])
    assert bad["interrupted"] and bad["error"] == "stream 1: No buffer space available"


def test_one_report_is_left_as_it_is():
    a = gen_report(0, 50, 5, 1_010, 11_000, 99_000, 100.0, [], 0, streams=1)
    assert merge_reports([a]) is a


def test_bad_traffic_input_is_refused_naming_the_field():
    for bad in (0, 65537, -1, 2.5):
        with pytest.raises(InputError) as e:
            TrialSpec(rate_pps=1000, src_ips=bad).validate(4)
        assert e.value.field == "src_ips" and "[1, 65536]" in e.value.message
    TrialSpec(rate_pps=1000, src_ips=65536).validate(4)
    for bad, words in (([], "one or more"), ([0, 0], "twice"), (list(range(22)), "at most 21"),
                       ([-1], "one or more"), ("0,1", "one or more")):
        with pytest.raises(InputError) as e:
            TrialSpec(rate_pps=1000, gen_cpus=bad).validate(4)
        assert e.value.field == "gen_cpus" and words in e.value.message, e.value.message


def test_sources_skip_the_suts_own_addresses():
    assert first_source(4, "198.18.0.1", 1) == "198.18.0.1"
    assert first_source(4, "198.18.0.1", 16) == "198.18.0.3"  # 198.18.0.2 is the SUT's: a martian to it
    assert first_source(4, "198.18.0.1", 65535) == "198.18.0.3"  # up to 198.19.0.1, short of the SUT's .2
    with pytest.raises(InputError) as e:
        first_source(4, "198.18.0.1", 65536)
    assert e.value.field == "src_ips" and "198.18.0.0/15" in e.value.message
    assert first_source(6, "2001:2::1", 8) == "2001:2::3"
    with pytest.raises(InputError) as e:
        first_source(6, "2001:2::1", 65534)
    assert "last 16 bits" in e.value.message and "65533" in e.value.message


def native(tool: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    path = NATIVE / f"softnet-{tool}"
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built (make -C native)")
    return subprocess.run([str(path), *args], input="", capture_output=True, text=True, timeout=timeout)


GEN = ["--ifname", "lo", "--src-mac", "02:00:00:00:00:01", "--dst-mac", "02:00:00:00:00:02", "--size", "64",
       "--rate", "1000", "--count", "10"]


@pytest.mark.parametrize("args,words", [
    (["--streams", "2", "--stream", "2"], "--stream: 2 is not below --streams 2"),
    (["--stream", "1"], "--stream: 1 is not below --streams 1"),
    (["--streams", "0"], "--streams"),
    (["--src-ips", "0"], "--src-ips"),
    (["--src-ips", "65537"], "--src-ips"),
    (["--src-ips", "255", "--src-ip", "255.255.255.2"], "run past 255.255.255.255"),
    (["--t0-ns", "18000000000000000"], "--t0-ns"),
])
def test_gen_refuses_bad_streams_and_sources(args, words):
    ips = [] if "--src-ip" in args else ["--src-ip", "198.18.0.1"]
    r = native("gen", *GEN, *ips, "--dst-ip", "198.19.0.1", *args)
    assert r.returncode == 2 and words in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_gen_refuses_ipv6_sources_beyond_the_last_16_bits():
    r = native("gen", *GEN, "--src-ip", "2001:2::fff0", "--dst-ip", "2001:2:0:1::1", "--src-ips", "17")
    assert r.returncode == 2 and "overflow its last 16 bits (at most 16" in r.stderr, r.stderr


def test_sink_refuses_bad_streams():
    r = native("sink", "--ifname", "lo", "--count", "64", "--streams", "1025")
    assert r.returncode == 2 and "--streams" in r.stderr, r.stderr


# ---- real packets --------------------------------------------------------------------------------------
def path_drops(r) -> int:
    d = r["diagnosis"]
    # with RPS a stall of the SUT CPU can also fill its backlog (netdev_max_backlog)
    return (d["ingress_ring_full_pkts"] + d["interface_deltas"].get("sut_out", {}).get("tx_dropped", 0)
            + d["softnet_dropped_pkts"])


@needs_root
@pytest.mark.netns
def test_two_generators_send_every_seq_once(host_unchanged):
    """Two softnet-gen processes on CPUs 0 and 1, 200 kpps together, through
    IPv4 forwarding. The SUT's receive work runs in softirq (RPS steering):
    with threaded NAPI its kthread would queue behind the generator spinning on
    the same CPU (both CPUs have one here) and the 256-packet ring overflow
    within a scheduler slice (12-15% lost, measured). A host stall can still
    overflow a ring now and then (the VM's, docs/explanation/host-stalls.md): then the loss
    must be exactly the kernel's ring drops (warm-up included), and the trial
    is run again, up to 5 times. A CI run saw ring drops in 3 attempts in a
    row; then every seq still arrived once or was one of those drops."""
    with HostChanges() as ch:
        tb = LocalTestbed(ch, "ipv4-fwd", Placement(gen_cpu=0, sut_cpus=[1], steering="rps"))
        ep = tb.build()
        paced = None  # the last attempt no stall held a stream back in
        for attempt in range(5):
            r = run_trial(tb, ep, TrialSpec(rate_pps=200_000, duration_s=1.0, warmup_s=0.2, gen_cpus=[0, 1]),
                          ch, keep_raw=True)
            raw = r["raw_trial"]
            assert r["duplicate_pkts"] == 0 and r["reordered_pkts"] == 0 and r["out_of_range_pkts"] == 0
            # the ring counters span the warm-up too: its lost packets count there
            warmup_lost = 40_000 - raw["sink"]["rx_warmup_pkts"]
            assert r["lost_pkts"] + warmup_lost == path_drops(r)
            # a vCPU stall can also hold a stream back (achieved 0.990 once, flagged generator_limited):
            # measured again, as a ring overflow is
            if "generator_limited" not in r["flags"]:
                paced = r
            if path_drops(r) == 0 and paced is r:
                break
    gen = raw["generator"]
    streams = gen["streams"]
    assert [s["stream"] for s in streams] == [0, 1] and [s["streams"] for s in streams] == [2, 2]
    assert [s["cpu"] for s in streams] == [0, 1] and gen["cpus"] == [0, 1] and gen["cpu"] == 0
    assert abs(streams[0]["sent_pkts"] - streams[1]["sent_pkts"]) <= 1
    assert gen["sent_pkts"] == sum(s["sent_pkts"] for s in streams) == 240_000
    assert len({s["schedule_start_ns"] for s in streams}) == 1  # one t0
    assert r["sent_pkts"] == 200_000 and r["intended_pkts"] == 200_000
    assert paced is not None and abs(paced["achieved_ratio"] - 1) < 0.005, [r["flags"], r["achieved_ratio"]]
    assert r["placement"]["as_requested"] and r["placement"]["requested"]["gen_cpus"] == [0, 1]
    # every seq exactly once, none twice: each one arrived or was a ring drop
    assert r["received_pkts"] + r["lost_pkts"] == 200_000
    assert raw["sink_timeline"]["lost_pkts"] == r["lost_pkts"]
    if path_drops(r) == 0:
        assert r["lost_pkts"] == 0 and raw["sink"]["rx_warmup_pkts"] == 40_000
    assert raw["sink"]["xdp_mode"] == "native" and gen["xdp_mode"] == "native"


def check_frame(f: bytes) -> tuple[bytes, int]:
    """The frame's checksums are right: (source address, UDP source port)."""
    if f[12:14] == b"\x08\x00":
        ip, udp = f[14:34], f[34:]
        assert csum(ip) == 0xffff, "IPv4 header checksum"
        udp = udp[:struct.unpack("!H", udp[4:6])[0]]
        pseudo = ip[12:20] + struct.pack("!BBH", 0, 17, len(udp))
        src = ip[12:16]
    else:
        ip, udp = f[14:54], f[54:]
        udp = udp[:struct.unpack("!H", udp[4:6])[0]]
        pseudo = ip[8:40] + struct.pack("!IxxxB", len(udp), 17)
        src = ip[8:24]
    assert struct.unpack("!H", udp[2:4])[0] == 7
    assert csum(pseudo + udp) == 0xffff, "UDP checksum"
    return src, struct.unpack("!H", udp[0:2])[0]


@needs_root
@pytest.mark.netns
@pytest.mark.parametrize("sut,family,src_ips,flows", [("ipv4-fwd", "ip", 16, 4), ("ipv6-fwd", "ip6", 8, 3)])
def test_source_addresses_are_forwarded_with_right_checksums(sut, family, src_ips, flows, host_unchanged):
    """src_ips x flows distinct flows: the SUT's kernel forwards every packet
    (an nft rule counts them and keeps the source addresses it saw in a set),
    and the frames it received carry right IP and UDP checksums."""
    saddr = "ip saddr" if family == "ip" else "ip6 saddr"
    kind = "ipv4_addr" if family == "ip" else "ipv6_addr"
    n_capture = 400
    with HostChanges() as ch:
        tb = LocalTestbed(ch, sut, Placement(gen_cpu=0, sut_cpus=[1]))
        ep = tb.build()
        ns = tb.ns["sut"]
        hostcmd.in_netns(ns, ["nft", "-f", "-"], input="\n".join([
            f"table {family} sn {{", f"  set srcs {{ type {kind}; flags dynamic; size 65536; }}",
            "  chain sn_forward { type filter hook forward priority 0;",
            f'    udp dport 7 add @srcs {{ {saddr} }} counter comment "fwd"', "  }", "}"]) + "\n")
        cap = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", CAPTURE, tb.ifs["sut_in"],
                                str(n_capture)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert cap.stdout.readline().strip() == "ready", cap.stderr.read()
            r = run_trial(tb, ep, TrialSpec(rate_pps=20_000, duration_s=0.5, warmup_s=0.1, flows=flows,
                                            src_ips=src_ips, frame_bytes=64 if family == "ip" else 90),
                          ch, keep_raw=True)
            frames = [bytes.fromhex(h) for h in json.loads(cap.communicate(timeout=30)[0])]
        finally:
            if cap.poll() is None:
                cap.kill()
                cap.wait()
        ruleset = json.loads(hostcmd.in_netns(ns, ["nft", "-j", "list", "ruleset"]))["nftables"]
    forwarded = next(e["counter"]["packets"] for item in ruleset if (item.get("rule") or {}).get("comment") == "fwd"
                     for e in item["rule"]["expr"] if "counter" in e)
    seen = next(item["set"].get("elem", []) for item in ruleset if "set" in item)
    total = r["sent_pkts"] + r["warmup_sent_pkts"]
    assert forwarded == total == 12_000 and r["lost_pkts"] == path_drops(r)
    assert len(seen) == src_ips
    first = r["raw_trial"]["testbed"]["src_ip_first"]
    assert first == ("198.18.0.3" if family == "ip" else "2001:2::3")
    tuples = {check_frame(f) for f in frames}
    assert len(frames) == n_capture and len(tuples) == src_ips * flows
    assert len({src for src, _ in tuples}) == src_ips and len({port for _, port in tuples}) == flows


def _gen_into(ns: str, ifname: str, *extra: str) -> dict:
    r = native("gen", "--netns", ns, "--ifname", ifname, "--src-mac", "02:00:00:00:00:01", "--dst-mac",
               "02:00:00:00:00:02", "--src-ip", "198.18.0.1", "--dst-ip", "198.19.0.1", "--size", "64", "--rate",
               "10000", "--count", "100", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@needs_root
def test_xdp_mode_is_reported(host_unchanged):
    """softnet-gen says whether its interface takes XDP frames (a veth whose
    peer has neither GRO nor XDP does not: "none"); softnet-sink how the kernel
    attached its program (native on veth, generic on lo)."""
    ns = f"snmg-{uuid.uuid4().hex[:8]}"  # not "sn-": that prefix marks a softnet run
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for argv in (["link", "add", "mga", "type", "veth", "peer", "name", "mgb"], ["link", "set", "lo", "up"],
                     ["link", "set", "mga", "up"], ["link", "set", "mgb", "up"]):
            subprocess.run(["ip", "-n", ns, *argv], check=True)
        assert _gen_into(ns, "mga")["xdp_mode"] == "none"
        hostcmd.in_netns(ns, ["ethtool", "-K", "mgb", "gro", "on"])
        rep = _gen_into(ns, "mga", "--streams", "3", "--stream", "2", "--t0-ns", str(time.monotonic_ns() + 10**8))
        assert rep["xdp_mode"] == "native"
        assert rep["stream"] == 2 and rep["streams"] == 3 and rep["sent_pkts"] == rep["intended_pkts"] == 33
        assert rep["first_send_ns"] >= rep["schedule_start_ns"]
        for ifname, mode in (("mgb", "native"), ("lo", "generic")):
            r = native("sink", "--netns", ns, "--ifname", ifname, "--count", "64", "--streams", "4")
            assert r.returncode == 0, r.stderr
            hello, = (json.loads(line) for line in r.stdout.splitlines())
            assert hello["xdp_mode"] == mode and hello["streams"] == 4
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)
