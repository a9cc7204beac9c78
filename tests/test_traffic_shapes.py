"""Traffic shapes: flows over addresses and
ports, frame mixes, arrival processes, VXLAN-encapsulated test frames.
Parsing and refusals offline; then real namespaces, real packets, the
sink's own counters and frames captured off the SUT's input."""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from softnet.campaign.trial import TrialSpec, run_trial
from softnet.errors import InputError
from softnet.testbed.local import LocalTestbed, Placement
from softnet.tools.changes import HostChanges
from softnet.results import shapes
from tests.conftest import needs_root, softnet_cmd
from tests.frames import CAPTURE, csum

NATIVE = Path(os.environ.get("SOFTNET_NATIVE_DIR") or Path(__file__).resolve().parents[1] / "native" / "build")


# ---- offline -------------------------------------------------------------------------------------------
def test_imix_table_spreads_sizes_and_matches_the_generators():
    mix = shapes.parse_mix("imix", 64)
    assert mix == [(64, 7), (570, 4), (1518, 1)] and shapes.mix_text(mix) == shapes.IMIX
    table = shapes.mix_table(mix)
    # softnet-gen's table (smooth weighted round robin), as captured off the wire
    assert table + table[:2] == [64, 570, 64, 64, 570, 64, 1518, 64, 570, 64, 570, 64, 64, 570]
    assert [table.count(s) for s in (64, 570, 1518)] == [7, 4, 1]
    runs = max(len(r) for r in "".join("a" if s == 64 else " " for s in table + table).split())
    assert runs <= 2  # spread, never 7 small frames in a row
    assert shapes.mean_frame_bytes(mix) == pytest.approx((7 * 64 + 4 * 570 + 1518) / 12)
    sent = shapes.sent_per_size(mix, 5, 5 + 12 * 10 + 3)
    assert sum(sent.values()) == 123 and sent[1518] in (10, 11)
    assert shapes.parse_mix("64:58.33%,570:33.33%,1518:8.34%", 64) == [(64, 583), (570, 333), (1518, 83)]
    assert shapes.parse_mix("128", 64) == [(128, 1)]


def test_flow_mapping_is_mixed_radix_source_port_fastest():
    seen = {shapes.flow_tuple(s, 4, 4, 4, 2) for s in range(128)}
    assert len(seen) == 128
    assert shapes.flow_tuple(0, 4, 4, 4, 2) == (0, 0, 0, 0)
    assert shapes.flow_tuple(1, 4, 4, 4, 2) == (1, 0, 0, 0)
    assert shapes.flow_tuple(4, 4, 4, 4, 2) == (0, 1, 0, 0)
    assert shapes.flow_tuple(16, 4, 4, 4, 2) == (0, 0, 1, 0)
    assert shapes.flow_tuple(64 + 128, 4, 4, 4, 2) == (0, 0, 0, 1)


@pytest.mark.parametrize("kw,field,words", [
    ({"mix": "64:7,,570"}, "mix", "does not parse"),
    ({"mix": ""}, "mix", "empty"),
    ({"mix": "64:x"}, "mix", "does not parse"),
    ({"mix": "64:0,570:1"}, "mix", "not positive"),
    ({"mix": "64:-1"}, "mix", "does not parse"),
    ({"mix": "40:1"}, "mix", "outside [64, 1518]"),
    ({"mix": "64:1,1519:1"}, "mix", "outside [64, 1518]"),
    ({"mix": "64:50%,570:40%"}, "mix", "sum to 90, not 100"),
    ({"mix": "64:50%,570:4"}, "mix", "percentage or none"),
    ({"mix": "64:1000,570:100"}, "mix", "at most 1024"),
    ({"dst_ips": 0}, "dst_ips", "[1, 65536]"),
    ({"dst_ports": 1025}, "dst_ports", "[1, 1024]"),
    ({"dst_ips": 64, "dst_ports": 32, "flows": 64}, "dst_ips", "at most 65536"),
    ({"dst_ports": 2, "src_ips": 40000}, "dst_ports", "at most 65536"),
    ({"arrivals": "bursty"}, "arrivals", "const, poisson, onoff"),
    ({"arrivals": "onoff", "on_duty": 0}, "on_duty", "(0, 1]"),
    ({"arrivals": "onoff", "burst_pkts": 0}, "burst_pkts", "[1, 1048576]"),
    ({"seed": -1}, "seed", "whole number"),
])
def test_bad_shape_is_refused_naming_the_field(kw, field, words):
    with pytest.raises(InputError) as e:
        TrialSpec(rate_pps=1000, **kw).validate(4)
    assert e.value.field == field, e.value
    assert words is None or words in e.value.message, e.value.message


def test_ipv6_mix_needs_larger_frames():
    TrialSpec(rate_pps=1000, mix="82:1,1518:1").validate(6)
    with pytest.raises(InputError) as e:
        TrialSpec(rate_pps=1000, mix="64:1,1518:1").validate(6)
    assert e.value.field == "mix" and "[82, 1518]" in e.value.message


def test_old_raw_specs_still_load():
    spec = TrialSpec.from_dict({"rate_pps": 1000.0, "frame_bytes": 64, "flows": 1})
    assert spec.mix is None and spec.arrivals == "const" and spec.dst_ips == 1


@needs_root
@pytest.mark.parametrize("args,option,words", [
    (["--mix", "64:0"], "--mix", "not positive"),
    (["--mix", "64:1,2000:1"], "--mix", "outside [64, 1518]"),
    (["--mix", "64:70%,570:20%"], "--mix", "not 100"),
    (["--mix", "imix", "--sut", "ipv6-fwd"], "--mix", "[82, 1518]"),
    (["--arrivals", "bursty"], "--arrivals", "accepted"),
    (["--dst-ips", "40000"], "--dst-ips", "at most"),
    (["--dst-ips", "64", "--dst-ports", "64", "--flows", "32"], "--dst-ips", "at most 65536"),
    (["--arrivals", "onoff", "--duty-on", "1.5"], "--duty-on", "(0, 1]"),
])
def test_cli_refuses_bad_shapes_before_touching_the_host(args, option, words, host_unchanged):
    r = subprocess.run(softnet_cmd("trial", "--rate", "10kpps", "--duration", "0.2", *args), capture_output=True,
                       text=True, timeout=60, env={**os.environ, "SOFTNET_WAIT": "3600"})
    assert r.returncode == 2, r.stderr
    assert option in r.stderr and words in r.stderr, r.stderr


def native(tool: str, *args: str, timeout: float = 30, stdin: str = "") -> subprocess.CompletedProcess:
    path = NATIVE / f"softnet-{tool}"
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built (make -C native)")
    return subprocess.run([str(path), *args], input=stdin, capture_output=True, text=True, timeout=timeout)


GEN = ["--ifname", "lo", "--src-mac", "02:00:00:00:00:01", "--dst-mac", "02:00:00:00:00:02", "--rate", "1000",
       "--count", "10", "--src-ip", "198.18.0.1"]


def test_tools_name_the_new_options_in_help():
    out = native("gen", "--help").stdout
    for opt in ("--dst-ips", "--dst-ports", "--mix", "--arrivals", "--seed", "--burst", "--duty"):
        assert opt in out
    out = native("sink", "--help").stdout
    for opt in ("--flows", "--mix", "--dst-ports"):
        assert opt in out
    assert all(len(line) <= 80 for line in out.splitlines())


@pytest.mark.parametrize("args,words", [
    (["--dst-ip", "198.19.0.1", "--mix", "64:0"], "--mix"),
    (["--dst-ip", "198.19.0.1", "--mix", "64:1,64:2"], "appears twice"),
    (["--dst-ip", "198.19.0.1", "--mix", "64:1000,128:100"], "more than 1024"),
    (["--dst-ip", "198.19.0.1", "--size", "64", "--mix", "imix"], "give one of them"),
    (["--dst-ip", "198.19.0.1"], "give one of them"),
    (["--dst-ip", "2001:2::1", "--src-ip", "2001:2::2", "--mix", "64:1"], "at least 82 B"),
    (["--dst-ip", "198.19.0.1", "--size", "64", "--burst", "4"], "only with --arrivals onoff"),
    (["--dst-ip", "198.19.0.1", "--size", "64", "--arrivals", "bursty"], "const, poisson or onoff"),
    (["--dst-ip", "198.19.0.1", "--size", "64", "--dst-ips", "256", "--dst-ports", "512"], "at most 65536"),
    (["--dst-ip", "255.255.255.250", "--size", "64", "--dst-ips", "8"], "run past 255.255.255.255"),
    (["--dst-ip", "2001:2::fff0", "--src-ip", "2001:2::2", "--size", "90", "--dst-ips", "17"], "last 16 bits"),
    (["--dst-ip", "198.19.0.1", "--size", "64", "--dst-ports", "1025"], "--dst-ports"),
])
def test_gen_refuses_bad_shapes(args, words):
    base = GEN[:-2] if "--src-ip" in args else GEN
    r = native("gen", *base, *args)
    assert r.returncode == 2 and words in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_sink_refuses_bad_shapes():
    for args, words in ((["--flows", "65537"], "--flows"), (["--mix", "1519"], "--mix"),
                        (["--dst-ports", "0"], "--dst-ports")):
        r = native("sink", "--ifname", "lo", "--count", "64", *args)
        assert r.returncode == 2 and words in r.stderr, r.stderr


# ---- real packets --------------------------------------------------------------------------------------
def parse_frame(f: bytes) -> dict:
    """An IPv4 test frame as the SUT received it, its lengths and checksums checked."""
    ip, udp = f[14:34], f[34:]
    assert csum(ip) == 0xffff, "IPv4 header checksum"
    assert struct.unpack("!H", ip[2:4])[0] == len(f) - 14, "IPv4 total length"
    assert struct.unpack("!H", udp[4:6])[0] == len(udp), "UDP length"
    assert csum(ip[12:20] + struct.pack("!BBH", 0, 17, len(udp)) + udp) == 0xffff, "UDP checksum"
    assert not any(udp[24:]), "payload past the stamp is zero"
    seq, ts = struct.unpack("!QQ", udp[8:24])
    return {"size": len(f) + 4, "seq": seq, "ts": ts,
            "flow": (ip[12:16], ip[16:20], struct.unpack("!H", udp[0:2])[0], struct.unpack("!H", udp[2:4])[0])}


def trial_with_capture(spec: TrialSpec, n_capture: int) -> tuple[dict, list[dict]]:
    """One trial through kernel IPv4 forwarding (generator CPU 0, SUT CPU 1),
    and the first n_capture test frames the SUT received."""
    with HostChanges() as ch:
        tb = LocalTestbed(ch, "ipv4-fwd", Placement(gen_cpu=0, sut_cpus=[1]))
        ep = tb.build()
        cap = subprocess.Popen(["ip", "netns", "exec", tb.ns["sut"], sys.executable, "-c", CAPTURE, tb.ifs["sut_in"],
                                str(n_capture)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert cap.stdout.readline().strip() == "ready", cap.stderr.read()
            r = run_trial(tb, ep, spec, ch, keep_raw=True)
            frames = [parse_frame(bytes.fromhex(h)) for h in json.loads(cap.communicate(timeout=30)[0])]
        finally:
            if cap.poll() is None:
                cap.kill()
                cap.wait()
    return r, frames


def path_drops(r) -> int:
    d = r["diagnosis"]
    return d["ingress_ring_full_pkts"] + d["interface_deltas"].get("sut_out", {}).get("tx_dropped", 0)


@needs_root
@pytest.mark.netns
def test_imix_through_ipv4_forwarding(host_unchanged):
    """IMIX at 50 kpps: every size leaves with right lengths and checksums
    (pages the SUT forwarded come back to the generator's pool), the sink's
    per-size counts add up exactly to its window count, and the bits
    throughput is sum(size x count) x 8 / send span."""
    r, frames = trial_with_capture(TrialSpec(rate_pps=50_000, duration_s=1.0, warmup_s=0.2, mix="imix"), 1200)
    raw = r["raw_trial"]
    sink = raw["sink"]
    table = shapes.mix_table(shapes.parse_mix("imix", 64))
    assert len(frames) == 1200
    assert all(f["size"] == table[f["seq"] % 12] for f in frames)  # the size seq was meant to have
    assert {f["size"] for f in frames} == {64, 570, 1518}
    assert raw["generator"]["mix"] == "64:7,570:4,1518:1" and raw["generator"]["frame_bytes"] == 1518
    counts = {int(s): n for s, n in sink["size_pkts"].items()}
    assert sum(counts.values()) == sink["rx_window_pkts"] == r["received_pkts"]
    assert sink["window_frame_bytes"] == sum(s * n for s, n in counts.items())
    assert r["frame_mix"] == "64:7,570:4,1518:1" and r["mean_frame_bytes"] == pytest.approx(353.8333, abs=1e-3)
    assert r["throughput_bps"] == pytest.approx(sink["window_frame_bytes"] * 8 / r["send_span_s"], rel=1e-12)
    loss = r["size_loss"]
    assert sum(v["sent_pkts"] for v in loss.values()) == r["sent_pkts"] == 50_000
    for size, weight in ((64, 7), (570, 4), (1518, 1)):
        assert abs(loss[str(size)]["sent_pkts"] - 50_000 * weight / 12) <= 1
        assert loss[str(size)]["received_pkts"] == counts[size]
    assert sum(v["lost_pkts"] for v in loss.values()) == r["lost_pkts"]
    assert abs(r["achieved_ratio"] - 1) < 0.005


@needs_root
@pytest.mark.netns
def test_128_flows_over_ports_and_addresses(host_unchanged):
    """4 source ports x 4 sources x 4 destinations x 2 destination ports: the
    SUT routes all 128 (the destinations are the sink's routed range), the
    frames carry right checksums, and the sink's per-flow counts sum exactly
    to its window count, each flow with its share."""
    spec = TrialSpec(rate_pps=64_000, duration_s=1.0, warmup_s=0.2, flows=4, src_ips=4, dst_ips=4, dst_ports=2)
    r, frames = trial_with_capture(spec, 1000)
    raw = r["raw_trial"]
    assert raw["testbed"]["dst_ip_first"] == "198.19.128.1"
    tuples = {f["flow"] for f in frames}
    assert len(tuples) == 128
    assert {t[3] for t in tuples} == {7, 8} and {t[2] for t in tuples} == {1024, 1025, 1026, 1027}
    for f in frames:  # the mapping: source port fastest, then source, destination, destination port
        sport, src, dst, dport = shapes.flow_tuple(f["seq"], 4, 4, 4, 2)
        assert f["flow"][2] == 1024 + sport and f["flow"][3] == 7 + dport
        assert f["flow"][0] == bytes([198, 18, 0, 3 + src])  # first_source: from .3 (.2 is the SUT's)
        assert f["flow"][1] == bytes([198, 19, 128, 1 + dst])
    counts = raw["sink"]["flow_pkts"]
    assert len(counts) == 128 and sum(counts) == raw["sink"]["rx_window_pkts"] == r["received_pkts"]
    assert r["flow_counts"] == {"flows": 128, "min_pkts": min(counts), "max_pkts": max(counts),
                                "sum_pkts": sum(counts)}
    share = r["sent_pkts"] / 128  # 500 each: the window is 64000 seqs from 12800
    assert all(share - 1 - r["lost_pkts"] <= c <= share + 1 for c in counts)
    if r["lost_pkts"] == 0:
        assert set(counts) == {500}


@needs_root
@pytest.mark.netns
@pytest.mark.parametrize("arrivals,extra", [("poisson", {"seed": 7}),
                                            ("onoff", {"burst_pkts": 100, "on_duty": 0.25})])
def test_arrivals_keep_the_mean_rate_and_vary_the_gaps(arrivals, extra, host_unchanged):
    """100 kpps: the window's mean send rate within +-0.5% of the intended one,
    and the send stamps' gaps far from constant: Poisson's coefficient of
    variation near 1, onoff's gaps at rate / duty inside a burst and one long
    silence per burst."""
    spec = TrialSpec(rate_pps=100_000, duration_s=1.0, warmup_s=0.2, arrivals=arrivals, **extra)
    r, frames = trial_with_capture(spec, 4000)
    gen = r["raw_trial"]["generator"]
    assert gen["arrivals"] == arrivals
    mean_rate = (r["sent_pkts"] - 1) / ((gen["last_send_ns"] - gen["window_start_ns"]) / 1e9)
    assert abs(mean_rate / 100_000 - 1) < 0.005, mean_rate
    assert abs(r["achieved_ratio"] - 1) < 0.005 and "generator_limited" not in r["flags"]
    assert r["arrivals"] == arrivals and r["traffic_shape"]["arrivals"] == arrivals
    ts = {f["seq"]: f["ts"] for f in frames}
    pairs = [s for s in sorted(ts) if s + 1 in ts]
    gaps = np.array([ts[s + 1] - ts[s] for s in pairs], dtype=float)
    assert len(gaps) > 1000
    if arrivals == "poisson":
        cv = gaps.std() / gaps.mean()
        assert cv > 0.6, cv  # constant arrivals: well under 0.3 even with the VM's jitter
    else:
        # The silence (75% of a 1 ms cycle) precedes each burst's first packet
        # (seq a multiple of 100); inside a burst packets are 2.5 us apart. A
        # vCPU stall adds a long gap inside a burst, or eats a silence when the
        # generator catches up, so both are counted where the schedule puts them.
        before_burst = np.array([(s + 1) % 100 == 0 for s in pairs])
        long_gaps = gaps > 50_000
        assert before_burst.sum() >= 30
        assert long_gaps[before_burst].mean() > 0.9, gaps[before_burst]
        assert long_gaps[~before_burst].mean() < 0.05, long_gaps[~before_burst].mean()
        assert np.median(gaps[~before_burst]) < 5_000


# ---- VXLAN: a SUT that encapsulates towards the sink ------------------------------------------------------
def plain_frame(seq: int) -> bytes:
    payload = struct.pack("!QQ", seq, 1)
    udp = struct.pack("!HHHH", 1024, 7, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, bytes([198, 18, 0, 1]),
                     bytes([198, 19, 0, 1]))
    return b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00" + ip + udp


def vxlan(inner: bytes, v6: bool) -> bytes:
    udp = struct.pack("!HHHH", 40000, 4789, 8 + 8 + len(inner), 0) + b"\x08\0\0\0\0\0\x2a\0" + inner
    if v6:
        ip = struct.pack("!IHBB16s16s", 6 << 28, len(udp), 17, 64, socket.inet_pton(socket.AF_INET6, "2001:2::1"),
                         socket.inet_pton(socket.AF_INET6, "2001:2::2"))
        proto = b"\x86\xdd"
    else:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, bytes([10, 0, 0, 1]),
                         bytes([10, 0, 0, 2]))
        proto = b"\x08\x00"
    return b"\x02\0\0\0\0\x04" + b"\x02\0\0\0\0\x03" + proto + ip + udp


SEND = r"""
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
for h in sys.stdin.read().split():
    s.send(bytes.fromhex(h))
"""


@needs_root
def test_sink_counts_vxlan_encapsulated_frames(host_unchanged):
    """Plain, VXLAN over IPv4 and VXLAN over IPv6 test frames into a veth
    whose peer carries the sink: all counted, the encapsulated ones also in
    rx_vxlan_pkts; a VXLAN frame without the I flag is not a test frame."""
    ns = f"snts-{uuid.uuid4().hex[:8]}"  # not "sn-": that prefix marks a softnet run
    subprocess.run(["ip", "netns", "add", ns], check=True)
    sink = None
    try:
        for argv in (["link", "add", "va", "type", "veth", "peer", "name", "vb"], ["link", "set", "va", "up"],
                     ["link", "set", "vb", "up"]):
            subprocess.run(["ip", "-n", ns, *argv], check=True)
        sink = subprocess.Popen([str(NATIVE / "softnet-sink"), "--netns", ns, "--ifname", "vb", "--count", "64",
                                 "--warmup", "2", "--flows", "4", "--mix", "64:1,82:1"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        assert json.loads(sink.stdout.readline())["ready"]
        frames = [plain_frame(0), plain_frame(1), plain_frame(2), vxlan(plain_frame(3), False), vxlan(plain_frame(4), True),
                  vxlan(plain_frame(5), True)]
        no_vni = bytearray(vxlan(plain_frame(6), False))
        no_vni[14 + 20 + 8] = 0
        frames.append(bytes(no_vni))
        subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", SEND, "va"],
                       input=" ".join(f.hex() for f in frames), text=True, check=True, timeout=30)
        sink.stdin.write("read\n")
        sink.stdin.flush()
        c = json.loads(sink.stdout.readline())
    finally:
        if sink is not None:
            sink.stdin.close()
            sink.wait(timeout=10)
        subprocess.run(["ip", "netns", "del", ns], check=True)
    assert c["rx_test_pkts"] == 6 and c["rx_vxlan_pkts"] == 3 and c["rx_window_pkts"] == 4
    assert c["flow_pkts"] == [1, 1, 1, 1]  # window seqs 2, 3, 4, 5 (% 4)
    assert c["size_pkts"] == {"64": 2, "82": 2} and c["window_frame_bytes"] == 2 * 64 + 2 * 82
