"""Back-to-back and recovery figures from captured raw trials (tests/data/
raw_trials, run on this VM's namespace testbed against known truths)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from softnet.analysis import loss_time
from softnet.analysis.trial_eval import evaluate
from softnet.results.raw import RawTrial

DATA = Path(__file__).parent / "data" / "raw_trials"


def raw(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())["raw"]


def test_each_burst_reads_its_lossless_prefix():
    """A 500-frame FIFO behind 20 kpps, bursts at 200 kpps: the queue
    predicts (500 + 2) / 0.9 = 557.8 frames; each burst's first loss is
    the frame after its lossless prefix."""
    r = raw("custom_200kpps_back_to_back")
    b2b = evaluate(r).back_to_back
    assert b2b.burst_pkts == 1500 and b2b.burst_rate_pps == 200_000 and len(b2b.bursts) + b2b.unknown == 10
    runs = r["sink_timeline"]["runs"]
    for b in b2b.bursts:
        assert b.first_seq % 1500 == 0 and b.first_seq >= r["sink_timeline"]["first_seq"]  # whole bursts only
        first_lost = b.first_seq + b.lossless_pkts
        assert any(s == first_lost or s < first_lost < s + n for s, n in runs)  # the first lost frame
        assert not any(b.first_seq <= s < first_lost for s, _ in runs)  # none lost before it
        if b.spoilt is None:
            assert abs(b.lossless_pkts - 557.8) <= 0.05 * 557.8


def test_a_block_outliving_the_overload_is_its_recovery():
    rec = evaluate(raw("custom_22kpps_recovery_block")).recovery
    assert 196 - 2 <= rec.recovery_ms <= 200 + 2 and rec.stall_lost_pkts == 0 and rec.recovery_spoilt is None
    assert rec.lost_after_step_pkts == pytest.approx(rec.recovery_ms * 10, abs=30)  # 10 kpps after the drop


def test_the_step_is_one_schedule():
    """After the step the schedule goes on at the recovery rate from the
    step's own due time: 10,000 packets at 10 kpps are 1 s."""
    g = RawTrial.model_validate(raw("custom_22kpps_recovery_block")).generator
    a = loss_time.due_ns(g, g.step_seq)
    assert a - loss_time.due_ns(g, g.step_seq - 22) == pytest.approx(1e6, abs=1)  # 22 at 22 kpps: 1 ms
    assert loss_time.due_ns(g, g.step_seq + 10_000) - a == pytest.approx(1e9, abs=1)


def test_loss_in_host_stalls_after_the_drop_is_set_apart():
    """Injected 40 ms stalls of the SUT CPU: the runs they caused after the
    drop are the host's. Without the stall probe's report the same trial
    would put the recovery at the last of them, 787 ms after the drop."""
    r = raw("ipv4fwd_22kpps_recovery_stalls")
    rec = evaluate(r).recovery
    assert rec.recovery_ms == 0 and rec.stall_lost_pkts == rec.lost_after_step_pkts > 0
    blind = copy.deepcopy(r)
    blind["stalls"] = {"missing": "no probe"}
    assert evaluate(blind).recovery.recovery_ms == pytest.approx(787.4, abs=0.1)


def test_a_stall_inside_the_interruption_changes_nothing():
    """A 200 ms nft block (truth 196-200 ms) with the SUT CPU taken for
    20 ms every 150 ms: a stall in the middle of the interruption only
    delays packets the path drops anyway. Not spoilt, within the truth."""
    r = raw("custom_50kpps_reset_stall_inside")
    res = evaluate(r).reset
    assert res.spoilt is None and 196 - 2 <= res.interruption_ms <= 200 + 2
    g = RawTrial.model_validate(r)
    w0 = loss_time.due_ns(g.generator, 0) + int((g.spec["warmup_s"] + res.started_s) * 1e9)
    inside = [s for s in loss_time.data_path_stalls(g.stalls, g.testbed.placement)
              if s.duration_ns > 15e6 and w0 + 20e6 < s.start_ns < w0 + 180e6]
    assert inside  # the injected stall, well inside the interruption


def test_a_stall_at_the_interruptions_end_is_named_and_left_out():
    """The same block, the SUT CPU taken for 30 ms every 90 ms: a stall
    spans the block's expiry, so packets due before it were forwarded
    after it, and the measured gap is 183 ms, off the truth. The run names
    the stall and the summary leaves it out of the mean."""
    from softnet.analysis.reset import summarize_resets
    from softnet.results.stored import StoredResult, StoredTrial

    res = evaluate(raw("custom_50kpps_reset_stall_at_end")).reset
    assert res.interruption_ms < 196 - 2 and res.spoilt.startswith("host stall on CPU 1 (SUT) 30.")
    trials = [StoredTrial("c", 0, 0, i, StoredResult.parse(evaluate(raw(name)).model_dump(), name), {})
              for i, name in enumerate(["custom_50kpps_reset_stall_at_end", "custom_50kpps_reset_stall_inside"])]
    (s,) = summarize_resets(trials, {0: "custom"})
    assert (s.runs, s.host_interference, s.interruption_ms.n) == (2, 1, 1)
    assert s.interruption_ms.mean == evaluate(raw("custom_50kpps_reset_stall_inside")).reset.interruption_ms


@pytest.mark.parametrize("where", ["run_start", "drop"])
def test_a_block_that_began_in_a_host_stall_is_still_the_suts(monkeypatch, where):
    """A stall planted where the block's lost run began (in the overload),
    or at the drop: the run goes on 200 ms past the stall, so the stall
    does not explain it, and the recovery is still the block's."""
    from softnet.analysis import recovery

    r = raw("custom_22kpps_recovery_block")
    g = RawTrial.model_validate(r)
    s0 = g.generator.step_seq
    first = next(s for s, n in g.sink_timeline.runs if s + n > s0)
    at = loss_time.due_ns(g.generator, first if where == "run_start" else s0)
    planted = [loss_time.Stall(1, "SUT", "runq", at - 2_000_000, at + 1_000_000, "kworker")]
    monkeypatch.setattr(recovery.loss_time, "data_path_stalls", lambda *_: planted)
    rec = evaluate(r).recovery
    assert 196 - 2 <= rec.recovery_ms <= 200 + 2 and not rec.stall_lost_pkts
    # at the drop, overload packets the stall held refresh the block late: the run says so
    assert (rec.recovery_spoilt is not None) == (where == "drop"), rec.recovery_spoilt


def test_a_loss_apart_from_the_resets_gap_is_not_part_of_it():
    """A lost run planted 10 ms before the block (as softnet's own commands
    on the SUT's CPU cause before the action takes effect), and one within
    a millisecond of its end: the first is another loss, the second part of
    the gap."""
    r = raw("custom_50kpps_reset_stall_inside")
    before = evaluate(r).reset.interruption_ms
    runs = r["sink_timeline"]["runs"]
    k = max(range(len(runs)), key=lambda i: runs[i][1])
    s, n = runs[k]
    planted = copy.deepcopy(r)
    planted["sink_timeline"]["runs"] = sorted(runs[:k] + [[s - 500, 20], [s, n], [s + n + 20, 5]] + runs[k + 1:])
    got = evaluate(planted).reset.interruption_ms
    assert got == pytest.approx(before + (20 + 5) * 0.02, abs=1e-6)  # 50 kpps: 0.02 ms a packet


def test_a_recovery_a_stall_spoilt_is_left_out_of_the_mean(monkeypatch):
    """The block's trial twice, once with a stall planted at the drop: the
    summary counts both runs, names one spoilt and averages the other."""
    from softnet.analysis import recovery
    from softnet.results.stored import StoredResult, StoredTrial

    r = raw("custom_22kpps_recovery_block")
    clean = evaluate(r)
    g = RawTrial.model_validate(r)
    at = loss_time.due_ns(g.generator, g.generator.step_seq)
    planted = [loss_time.Stall(1, "SUT", "runq", at - 2_000_000, at + 1_000_000, "kworker")]
    monkeypatch.setattr(recovery.loss_time, "data_path_stalls", lambda *_: planted)
    spoilt = evaluate(r)
    assert spoilt.recovery.recovery_spoilt.startswith("host stall on CPU 1 (SUT)")
    trials = [StoredTrial("c", 0, 0, i, StoredResult.parse(t.model_dump(), "block"), {})
              for i, t in enumerate([spoilt, clean])]
    (s,) = recovery.summarize_recoveries(trials, {0: "custom"})
    assert (s.runs, s.spoilt_runs, s.recovery_ms.n) == (2, 1, 1)
    assert s.recovery_ms.mean == clean.recovery.recovery_ms
