"""Loss in time, on the real local testbed: the sink's timeline (which
sequence numbers were lost, the largest delay per bin) and the generator's
late episodes (docs/explanation/generator.md, "Loss in time")."""
from __future__ import annotations

import json
import math
import os
import subprocess
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from softnet.analysis.loss_time import due_ns
from softnet.errors import TestbedError
from softnet.results.raw import GeneratorReport
from softnet.testbed.local import LocalTestbed
from softnet.tools import hostcmd
from softnet.tools.changes import HostChanges
from softnet.traffic.native import (TIMELINE_MAX_BINS, TIMELINE_MAX_RUNS, GeneratorJob, Sink,
                                    timeline_bin_pkts)
from tests.conftest import needs_root

NATIVE = Path(os.environ.get("SOFTNET_NATIVE_DIR") or Path(__file__).resolve().parents[1] / "native" / "build")
GEN_LATE_NS = 10_000
GEN_MAX_EPISODES = 4096


@contextmanager
def local_testbed(sut: str = "ipv4-fwd"):
    with HostChanges() as ch:
        tb = LocalTestbed(ch, sut)
        yield tb, tb.build()


def send(tb, ep, rate: float, total: int, warmup: int, bin_pkts: int | None = None, before=None):
    """Sink with a timeline, generator at rate, drain, timeline: (gen, sink counters, timeline)."""
    n = bin_pkts or timeline_bin_pkts(rate, total)
    with HostChanges() as tc:
        sink = Sink(tc, ep.sink_ns, ep.sink_if, total, warmup, bin_pkts=n)
        if before:
            before()
        job = GeneratorJob.start(tc, ep, rate, total, warmup, 64, 1, tb.placement.gen_cpu)
        gen = job.wait(timeout=total / min(rate, 4e6) * 2 + 10)
        counts, _ = sink.drain()
        tl = sink.timeline(gen["sent_pkts"])
    return gen, counts, tl


def lost_per_bin(runs: list, n: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for a, la in runs:
        s = a
        while s < a + la:
            hi = min((s // n + 1) * n, a + la)
            out[s // n] = out.get(s // n, 0) + hi - s
            s = hi
    return out


def check_timeline(tl: dict, gen: dict, counts: dict) -> None:
    """Everything the timeline promises, against the sink's own counters."""
    sent, warmup, n = gen["sent_pkts"], gen["warmup_pkts"], tl["bin_pkts"]
    assert tl["first_seq"] == warmup and tl["end_seq"] == sent
    assert counts["out_of_range_pkts"] == 0
    # nothing in flight: every window seq either arrived once or is lost
    assert tl["lost_pkts"] == sent - warmup - counts["rx_window_pkts"]
    runs = tl["runs"]
    assert len(runs) == min(tl["runs_total"], TIMELINE_MAX_RUNS)
    assert tl["runs_truncated"] == (tl["runs_total"] > TIMELINE_MAX_RUNS)
    for (a, la), (b, _) in zip(runs, runs[1:]):
        assert a + la < b  # in order, maximal: a seen seq between two runs
    assert all(warmup <= a and la >= 1 and a + la <= sent for a, la in runs)
    if not tl["runs_truncated"]:
        assert sum(la for _, la in runs) == tl["lost_pkts"]
        assert lost_per_bin(runs, n) == dict(map(tuple, tl["lost_per_bin"]))
    hist = dict(map(tuple, tl["run_length_hist"]))
    assert sum(hist.values()) == tl["runs_total"]
    assert all(2 ** k <= la < 2 ** (k + 1) and k in hist for _, la in runs for k in [la.bit_length() - 1])
    bins = [b for b, _ in tl["lost_per_bin"]]
    assert bins == sorted(set(bins)) and all(lost > 0 for _, lost in tl["lost_per_bin"])
    assert sum(lost for _, lost in tl["lost_per_bin"]) == tl["lost_pkts"]
    delays = tl["delay_max_ns_per_bin"]
    assert len(delays) == ((sent - 1) // n - warmup // n + 1 if sent > warmup else 0)
    assert max(delays, default=0) == counts["latency_max_ns"]
    # a bin whose window seqs were all lost has no delay
    whole = {b for b, lost in tl["lost_per_bin"] if lost == min((b + 1) * n, sent) - max(b * n, warmup)}
    assert all(delays[b - warmup // n] == 0 for b in whole)


def check_episodes(gen: dict) -> None:
    """Episodes late by at least late_episodes_min_lag_ns are listed (up to
    GEN_MAX_EPISODES); every episode is counted."""
    eps, total, keep = gen["late_episodes"], gen["late_episodes_total"], gen["late_episodes_min_lag_ns"]
    sent, warmup = gen["sent_pkts"], gen["warmup_pkts"]
    assert len(eps) <= min(total, GEN_MAX_EPISODES)
    for (f, last, lag) in eps:
        assert 0 <= f <= last < sent and lag >= keep > GEN_LATE_NS
    for (_, last, _), (f, _, _) in zip(eps, eps[1:]):
        assert last + 1 < f  # in order, maximal: an on-time packet between two episodes
    late_in_window = sum(max(0, last + 1 - max(f, warmup)) for f, last, _ in eps)
    assert late_in_window <= gen["window_late_pkts"]
    if len(eps) < GEN_MAX_EPISODES and gen["window_lag_max_ns"] >= keep:
        assert max(lag for _, _, lag in eps) >= gen["window_lag_max_ns"]


def test_bin_pkts_helper():
    assert timeline_bin_pkts(300_000, 3_000_000) == 300  # 1 ms of schedule
    assert timeline_bin_pkts(100, 1000) == 1
    assert timeline_bin_pkts(5e6, 50 * 5_000_000) == 5000
    big = timeline_bin_pkts(1e6, 1 << 33)  # the sink's largest count: bins capped
    assert math.ceil((1 << 33) / big) <= TIMELINE_MAX_BINS < math.ceil((1 << 33) / (big - 1))


def test_bin_pkts_too_fine_names_the_option():
    path = NATIVE / "softnet-sink"
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built (make -C native)")
    r = subprocess.run([str(path), "--ifname", "lo", "--count", str(10 * TIMELINE_MAX_BINS), "--bin-pkts", "4"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("softnet-sink: --bin-pkts: ") and "--bin-pkts 10 or more" in r.stderr, r.stderr
    r = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=10)
    assert "--bin-pkts N" in r.stdout and "timeline SENT" in r.stdout


@needs_root
@pytest.mark.netns
def test_timeline_needs_bin_pkts_and_a_count_within_range(host_unchanged):
    ns = f"snopt-{uuid.uuid4().hex[:8]}"  # not "sn-": that prefix marks a softnet run
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        with HostChanges() as ch:
            plain = Sink(ch, ns, "lo", 640, 64)
            with pytest.raises(TestbedError, match="started without --bin-pkts"):
                plain.timeline(640)
            plain.close()  # one XDP program per interface
            sink = Sink(ch, ns, "lo", 640, 64, bin_pkts=100)
            with pytest.raises(TestbedError, match="beyond --count"):
                sink.timeline(641)
            tl = sink.timeline(640)  # nothing arrived: the whole window is one run
            assert tl["runs"] == [[64, 576]] and tl["lost_pkts"] == 576 and tl["run_length_hist"] == [[9, 1]]
            assert tl["lost_per_bin"] == [[0, 36], [1, 100], [2, 100], [3, 100], [4, 100], [5, 100], [6, 40]]
            assert tl["delay_max_ns_per_bin"] == [0] * 7
            assert sink.timeline(10)["runs"] == [] and sink.timeline(10)["delay_max_ns_per_bin"] == []
            assert sink.read()["rx_test_pkts"] == 0  # still answers reads
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)


@needs_root
@pytest.mark.netns
@pytest.mark.parametrize("rate,seconds", [(50_000, 2.0), (3_000_000, 0.5)], ids=["low", "overload"])
def test_timeline_accounts_for_every_lost_packet(rate, seconds, host_unchanged):
    total = int(rate * seconds)
    warmup = total // 5
    with local_testbed() as (tb, ep):
        gen, counts, tl = send(tb, ep, rate, total, warmup)
    assert gen["sent_pkts"] == total and not gen["interrupted"]
    check_timeline(tl, gen, counts)
    check_episodes(gen)
    if rate > 1e6:  # beyond what the kernel forwards on one CPU: most is lost, in many runs
        assert tl["lost_pkts"] > (total - warmup) // 3 and tl["runs_total"] > 100


@needs_root
@pytest.mark.netns
def test_past_its_limit_the_sink_lists_the_first_and_the_last_runs(host_unchanged):
    """The SUT drops every other test frame (nft numgen): 30,000 runs of one
    frame. The sink lists the first 10,000 and the last 10,000, in order, so
    both ends of the window stay known (a recovery's last loss)."""
    rate, total, warmup = 60_000, 75_000, 15_000
    rules = ["table inet sn {", " chain sn_forward {", "  type filter hook forward priority 0;",
             "  udp dport 7 numgen inc mod 2 == 0 drop", " }", "}"]
    with local_testbed() as (tb, ep):
        arm = lambda: hostcmd.in_netns(tb.ns["sut"], ["nft", "-f", "-"], input="\n".join(rules) + "\n")  # noqa: E731
        gen, counts, tl = send(tb, ep, rate, total, warmup, before=arm)
    check_timeline(tl, gen, counts)
    runs, head = tl["runs"], tl["runs_head"]
    assert tl["runs_truncated"] and tl["runs_total"] >= 25_000 and len(runs) == TIMELINE_MAX_RUNS
    assert head == TIMELINE_MAX_RUNS // 2
    assert runs[0][0] <= warmup + 1  # the window's first loss...
    assert runs[-1][0] + runs[-1][1] >= gen["sent_pkts"] - 2  # ...and its last
    # every other frame: runs of one, two apart (a stall may merge a few)
    assert sum(la == 1 for _, la in runs) >= 0.95 * len(runs)
    assert runs[head][0] - runs[head - 1][0] > 2 * (tl["runs_total"] - TIMELINE_MAX_RUNS)  # the unlisted middle
    from softnet.analysis.loss_time import unlisted_seqs
    from softnet.results.raw import SinkTimeline

    lo, hi = unlisted_seqs(SinkTimeline.model_validate(tl))
    assert lo == runs[head - 1][0] + runs[head - 1][1] and hi == runs[head][0]


@needs_root
@pytest.mark.netns
def test_a_known_hole_sits_at_its_time(host_unchanged):
    """The SUT drops every test frame during one wall-clock second (nft meta
    time, exact to the ns in the kernel): the timeline's lost run must start
    and end where the generator's schedule passes those instants."""
    rate = 20_000
    with local_testbed() as (tb, ep):
        real0, mono0 = time.clock_gettime_ns(time.CLOCK_REALTIME), time.monotonic_ns()
        hole_s = math.ceil((real0 + 1.5e9) / 1e9)  # a whole second, far enough ahead to arm everything
        hole_mono = hole_s * 10**9 - (real0 - mono0)
        total = int(rate * ((hole_mono - mono0) / 1e9 + 1.5))
        warmup = rate // 5
        rules = ["table inet sn {", " chain sn_forward {", "  type filter hook forward priority 0;",
                 f'  meta time >= {hole_s} meta time < {hole_s + 1} udp dport 7 counter drop comment "hole"',
                 " }", "}"]
        arm = lambda: hostcmd.in_netns(tb.ns["sut"], ["nft", "-f", "-"], input="\n".join(rules) + "\n")  # noqa: E731
        gen, counts, tl = send(tb, ep, rate, total, warmup, before=arm)
        out = json.loads(hostcmd.in_netns(tb.ns["sut"], ["nft", "-j", "list", "ruleset"]))
    dropped = next(e["counter"]["packets"] for item in out["nftables"] if item.get("rule", {}).get("comment") == "hole"
                   for e in item["rule"]["expr"] if "counter" in e)
    check_timeline(tl, gen, counts)
    assert abs(dropped - rate) <= rate * 0.01
    first, length = max(tl["runs"], key=lambda r: r[1])  # the hole; a VM stall may lose a few more elsewhere
    last = first + length - 1
    ms = 1e6
    report = GeneratorReport.model_validate(gen)  # as a raw trial keeps it
    assert abs(due_ns(report, first) - hole_mono) < 3 * ms, (due_ns(report, first) - hole_mono) / ms
    assert abs(due_ns(report, last) - (hole_mono + 10**9)) < 3 * ms, (due_ns(report, last) - hole_mono - 10**9) / ms
    assert length >= dropped
    n = tl["bin_pkts"]
    assert n == rate // 1000  # 1 ms bins
    lost = dict(map(tuple, tl["lost_per_bin"]))
    inner = range(first // n + 1, last // n)  # bins wholly inside the hole
    assert all(lost[b] == n for b in inner)
    assert all(tl["delay_max_ns_per_bin"][b - warmup // n] == 0 for b in inner)


@needs_root
@pytest.mark.netns
def test_an_overloaded_generator_reports_late_episodes(host_unchanged):
    """Beyond what one CPU sends (~5 Mpps): packets go out late, in episodes
    consistent with the window's late count."""
    with local_testbed("none") as (tb, ep):
        gen, counts, tl = send(tb, ep, 12e6, 2_000_000, 200_000)
    assert gen["sent_pkts"] == 2_000_000
    assert gen["window_late_pkts"] > 100_000
    assert gen["late_episodes_total"] >= 1 and gen["late_episodes"]
    check_episodes(gen)
    check_timeline(tl, gen, counts)
