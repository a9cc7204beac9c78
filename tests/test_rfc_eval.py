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
    assert 196 - 2 <= rec.recovery_ms <= 200 + 2 and rec.stall_lost_pkts == 0
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
