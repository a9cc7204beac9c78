"""The system recovery benchmark (RFC 2544 26.5) on the namespace testbed,
against known truths: a FIFO behind a 20 kpps token bucket loses nothing
after the load drops and drains its 500 frames in 2 x 500 / 20k = 50 ms; an
nftables block that the overload keeps refreshing ends when its 200 ms
timeout runs out after the drop; loss that injected host stalls cause after
the drop is set apart. Bad parameters are refused by name."""
from __future__ import annotations

from pathlib import Path

import pytest

from softnet.campaign.spec import load_spec
from softnet.errors import InputError
from tests.conftest import needs_root, run_spec as run

QUEUE, OUT_PPS = 500, 20_000
# The bucket holds 25 frames: with a 2-frame bucket every late qdisc timer on this VM lost its tokens
# for good, and the queue drained at 18.5k, not 20k, a second (79 ms, not 50 ms, in one CI run)
FIFO = f"""
[testbed.custom]
l3 = true
setup = ["tc qdisc replace dev $SN_OUT root handle 1: tbf rate 9600kbit burst 1500 limit 100000",
         "tc qdisc replace dev $SN_OUT parent 1:1 handle 10: pfifo limit {QUEUE}"]
teardown = ["tc qdisc del dev $SN_OUT root"]
"""
# Every packet over 15 kpps (re)adds the sink's address with a 200 ms timeout; the next rule drops it.
# The overload (22 kpps: one over every 0.14 ms) keeps the element fresh; after the drop to 10 kpps it
# expires 196-200 ms (one jiffy at HZ=250) after its last refresh, which is the drop itself.
TIMEOUT_MS, JIFFY_MS = 200, 4
REFRESH = ("nft add rule inet sn_rec c limit rate over 15000/second burst 200 packets "
           f"update @blk '{{ ip daddr timeout {TIMEOUT_MS}ms }}'")
BLOCK = f"""
[testbed.custom]
l3 = true
setup = ["nft add table inet sn_rec",
         "nft add set inet sn_rec blk '{{ type ipv4_addr; flags dynamic,timeout; }}'",
         "nft add chain inet sn_rec c '{{ type filter hook forward priority 0; policy accept; }}'",
         "{REFRESH}",
         "nft add rule inet sn_rec c ip daddr @blk drop"]
teardown = ["nft delete table inet sn_rec"]
"""


def spec_text(sut: str, extra: str = "", method: str = "") -> str:
    return f"""name = "recovery"
[testbed]
sut = "{sut}"
[method]
kind = "recovery"
throughput = "20kpps"
overload_s = 1.0
recovery_s = 1.0
warmup_s = 0.2
runs = 2
{method}
{extra}"""


@needs_root
@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
def test_a_fifo_recovers_at_once_and_drains_in_the_time_its_queue_predicts(tmp_path):
    (summary,), trials = run(tmp_path, spec_text("custom", FIFO).replace("runs = 2", "runs = 5"))
    drain_ms = 2 * QUEUE / OUT_PPS * 1e3  # full queue, draining at 20k - 10k per second
    for t in trials:
        rec = t["recovery"]
        assert (rec["overload_pps"], rec["recovery_pps"], rec["step_s"]) == (22_000, 10_000, 1.0)
        # the rate stepped on one schedule: every packet of both parts sent, at the mean rate
        assert t["intended_pkts"] == t["sent_pkts"] == 32_000 and "generator_limited" not in t["flags"]
        assert t["lost_pkts"] > 1000  # the overload overflowed the queue...
        # ...and, the queue draining, at most a few ms of loss after the drop (a block holds it 200 ms)
        assert rec["recovery_ms"] < 10, rec
        # a vCPU stall while the queue drains holds its dequeue up (named): later, never sooner
        assert rec["drain_ms"] >= 0.95 * drain_ms, rec
        if rec.get("drain_spoilt") is None:  # stalls under a tenth of the drain (or unseen) add a few ms
            assert rec["drain_ms"] <= 1.5 * drain_ms, rec
    # nothing after the drop but the frames meeting the full queue at the drop itself: within the first
    # ms (10 frames at the recovery load), and a frame at its edge. Per run, a vCPU stall shorter than the
    # stall probe's 4 ms period can go unseen and hold the queue full a few ms longer: the median is the truth
    recs = [t["recovery"] for t in trials]
    assert sorted(r["recovery_ms"] for r in recs)[2] <= 1, recs
    assert sorted(r["lost_after_step_pkts"] - r.get("stall_lost_pkts", 0) for r in recs)[2] <= 11, recs
    clean = sorted(t["recovery"]["drain_ms"] for t in trials if t["recovery"].get("drain_spoilt") is None)
    assert clean, [t["recovery"] for t in trials]  # five runs: at least one drain no stall held up
    # within 10% and one sink bin (22 packets: 2.2 ms at the recovery load). Noise only lengthens a drain
    # (45 runs here: 33 read 50.6 ms, the rest 52.8-66), so the shortest is the truth's estimate
    assert abs(clean[0] - drain_ms) <= 0.1 * drain_ms + 2.2, clean
    spoilt = sum(t["recovery"].get("recovery_spoilt") is not None for t in trials)
    assert summary["recovery_ms"]["n"] == 5 - spoilt and summary["overload_s"] == 1.0


@needs_root
@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
def test_a_block_that_outlives_the_overload_is_measured_within_2_ms(tmp_path):
    """Within 2 ms of the kernel's timer in every run no host stall spoilt; a
    stall at the drop or at the expiry moves that end (either way), so such a
    run names it and the mean leaves it out."""
    (summary,), trials = run(tmp_path, spec_text("custom", BLOCK).replace("runs = 2", "runs = 3"))
    for t in trials:
        rec = t["recovery"]
        if rec.get("recovery_spoilt") is None:
            assert TIMEOUT_MS - JIFFY_MS - 2 <= rec["recovery_ms"] <= TIMEOUT_MS + 2, rec
        else:
            assert "host stall on CPU" in rec["recovery_spoilt"], rec
        lost = rec["lost_after_step_pkts"] - rec.get("stall_lost_pkts", 0)
        assert lost == pytest.approx(rec["recovery_ms"] * 10, abs=30)  # 10 per ms
    spoilt = sum(t["recovery"].get("recovery_spoilt") is not None for t in trials)
    assert spoilt < 3 and summary["spoilt_runs"] == spoilt, [t["recovery"] for t in trials]
    assert summary["recovery_ms"]["n"] == 3 - spoilt
    assert TIMEOUT_MS - JIFFY_MS - 2 <= summary["recovery_ms"]["mean"] <= TIMEOUT_MS + 2


@needs_root
@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
def test_loss_host_stalls_cause_after_the_drop_is_set_apart(tmp_path):
    """ipv4-fwd forwards 22 kpps without loss; 40 ms stalls of its CPU every
    300 ms overflow its ring: that loss is the host's, and the recovery is 0."""
    collect = "[collect]\ninject_busy_ms = 40\ninject_every_ms = 300"
    (summary,), trials = run(tmp_path, spec_text("ipv4-fwd", collect))
    for t in trials:
        rec = t["recovery"]
        assert rec["lost_after_step_pkts"] > 0 and rec.get("stall_lost_pkts") == rec["lost_after_step_pkts"], rec
        assert rec["recovery_ms"] == 0
    assert summary["stall_runs"] == 2


@pytest.mark.parametrize("change, field", [
    ("overload = 1.0", "overload"),  # not an overload
    ("recovery_load = 1.0", "recovery_load"),  # no recovery at the throughput
    ('loads = ["10kpps"]', "loads"),  # the loads come from the throughput
])
def test_bad_parameters_are_refused_by_name(tmp_path, change, field):
    (tmp_path / "s.toml").write_text(spec_text("ipv4-fwd", method=change))
    with pytest.raises(InputError) as e:
        load_spec(tmp_path / "s.toml")
    assert field in str(e.value), str(e.value)


def test_a_recovery_needs_a_throughput_and_a_data_path(tmp_path):
    (tmp_path / "s.toml").write_text(spec_text("ipv4-fwd").replace('throughput = "20kpps"\n', ""))
    with pytest.raises(InputError, match="throughput"):
        load_spec(tmp_path / "s.toml")
    (tmp_path / "s.toml").write_text(spec_text("synthetic"))
    with pytest.raises(InputError, match="testbed.sut"):
        load_spec(tmp_path / "s.toml")
