"""Interleaved pairing: the variants' trials in the same seconds, their
bursts taking turns (softnet.campaign.interleave)."""
from __future__ import annotations

import glob
import json
import subprocess
import threading

import pytest

from softnet.campaign.interleave import GUARD_S, PARTNER_STOPPED, Turns, run_together
from softnet.errors import InputError, TestbedError
from softnet.results.trial import TrialSpec
from tests.conftest import needs_root, softnet_cmd


def test_a_turn_sends_the_load_in_its_slot_and_the_cycles_line_up():
    turns = Turns(2, 0.02)
    assert turns.duty == pytest.approx(0.5 - GUARD_S / 0.02)
    s = turns.spec(TrialSpec(rate_pps=200e3, duration_s=1.0, warmup_s=0.5))
    # inside its burst the SUT sees the load's rate; the burst fills the slot less the guard
    assert s.rate_pps / s.on_duty == pytest.approx(200e3, rel=1e-3)
    assert s.burst_pkts / s.rate_pps == pytest.approx(0.02, rel=1e-9)  # one cycle = one period, exactly
    assert s.arrivals == "onoff" and s.sleep_gaps_us is not None
    # twice the window: each variant sends 0.9 of what it would alone, in the trial-seconds two would take
    assert s.duration_s == 2.0 and s.window_pkts == pytest.approx(0.9 * 200e3, rel=1e-3)
    s.validate(4)
    assert Turns(3, 0.03).offset_ns(2) == 20_000_000


def test_slots_too_short_and_lone_variants_are_refused():
    with pytest.raises(InputError, match="interleave_ms.*2.5 ms"):
        Turns(2, 0.004).check("compare.interleave_ms")
    with pytest.raises(InputError, match="two or more"):
        Turns(1, 0.02).check("compare.interleave_ms")


def test_trials_start_together_and_a_failing_one_stops_its_partners():
    seen = []

    def run(k, slot):
        t0 = slot.start_at()
        seen.append(t0)
        slot.sent()
        return {"k": k}

    assert run_together(Turns(3, 0.03), run) == [{"k": 0}, {"k": 1}, {"k": 2}]
    assert max(seen) - min(seen) == 20_000_000  # one origin, each shifted to its slot

    waited = threading.Event()

    def fails(k, slot):
        if k == 1:
            raise TestbedError("variant 1's testbed failed")
        waited.set()
        slot.start_at()  # would wait for ever for variant 1 without the abort
        return {}

    # the partner's own error is raised, not the broken wait it caused
    with pytest.raises(TestbedError, match="variant 1's testbed failed"):
        run_together(Turns(2, 0.02), fails)
    assert waited.is_set()

    def late(k, slot):
        slot.start_at()
        if k == 0:
            raise TestbedError("variant 0 failed after the start")
        slot.sent()
        return {}

    with pytest.raises(TestbedError) as exc:
        run_together(Turns(2, 0.02), late)
    assert str(exc.value) != PARTNER_STOPPED


@pytest.mark.slow  # six CLI processes: in make test, not make check
@pytest.mark.parametrize("variant, more, words", [
    ("name=B;traffic.arrivals=poisson", [], 'traffic.arrivals = "poisson"'),
    ("name=B;traffic.bidirectional=true", [], "bidirectional"),
    ("name=B", ["--profile"], "collect.profile"),  # two profilers would each see both variants' packets
    ("name=B", ["--pace"], "collect.pace_probe"),
    ("name=B;testbed.steering=rps", [], "rps steering"),
])
def test_variants_that_cannot_take_turns_are_refused_by_name(tmp_path, variant, more, words):
    r = subprocess.run(softnet_cmd("compare", "--variant", "name=A;testbed.sut=ipv4-fwd", "--variant", variant,
                                   "--load", "50kpps", "--pairing", "interleaved", "--results", str(tmp_path / "r"),
                                   *more),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "error: --pairing" in r.stderr and words in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()


@needs_root
@pytest.mark.netns
def test_an_interleaved_comparison_takes_turns_on_two_testbeds(tmp_path, host_unchanged):
    r = subprocess.run(softnet_cmd("compare", "--variant", "name=A;testbed.sut=ipv4-fwd", "--variant",
                                   "name=B;testbed.sut=ipv4-fwd", "--load", "50kpps", "--metrics", "cpu,loss",
                                   "--pairing", "interleaved", "--duration", "0.5", "--min-rounds", "2",
                                   "--max-rounds", "2", "--results", str(tmp_path / "r"), "--json"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    raws = {}
    for f in glob.glob(str(tmp_path / "r" / "raw" / "*" / "cell*.json")):
        doc = json.loads(open(f).read())
        raws[(doc["cell_id"], doc["run_index"])] = (doc["raw_trial"], doc["result"])
    assert len(raws) == 4
    for rnd in (0, 1):
        (ra, a), (rb, b) = raws[(0, rnd)], raws[(1, rnd)]
        # each names the other's testbed as its partner, and that overlap is not flagged
        assert ra["interleave"]["partners"] == [rb["testbed"]["run_id"]]
        assert rb["interleave"]["partners"] == [ra["testbed"]["run_id"]]
        assert "overlapped_other_run" not in a["flags"] + b["flags"]
        # the slots alternate between rounds (ABBA), half a period apart on one schedule
        assert {ra["interleave"]["slot"], rb["interleave"]["slot"]} == {0, 1}
        assert ra["interleave"]["slot"] == rnd
        first, second = sorted((ra, rb), key=lambda x: x["interleave"]["slot"])
        assert second["generator"]["schedule_start_ns"] - first["generator"]["schedule_start_ns"] == 10_000_000
        # each generator slept through its partner's bursts, and every packet reached its own sink
        for raw, res in ((ra, a), (rb, b)):
            assert raw["generator"]["gap_sleeps"] >= 40
            assert res["received_pkts"] > 0.9 * res["sent_pkts"] > 0
            assert res["sut_thread_cpu"]["ns_per_pkt"] > 0
    out = json.loads(r.stdout)
    assert out["rounds"] == 2


def test_a_captured_interleaved_pair_reads_capacity_inside_its_bursts():
    """Two trials that took turns at 1.5 Mpps (bursts at that rate for 9 ms of
    every 20): capacity is what each forwarded while its bursts lasted, on the
    scale of a flood's (700-960 kpps on this VM) and over twice its mean
    forwarded rate; the pair agrees within 1%."""
    from pathlib import Path

    from softnet.analysis.comparisons import CAPACITY, compared, usable
    from softnet.analysis.trial_eval import evaluate

    data = Path(__file__).parent / "data" / "raw_trials"
    pair = [json.loads((data / f"ipv4fwd_1500kpps_interleaved_slot{k}.json").read_text()) for k in (0, 1)]
    results = [evaluate(d["raw"]) for d in pair]
    assert [r.interleave.slot for r in results] == [0, 1]
    assert results[0].interleave.partners == [pair[1]["raw"]["testbed"]["run_id"]]
    assert not results[0].flags and not results[1].flags  # the partner's testbed is no other run
    caps = [CAPACITY.read(compared(r)) for r in results]
    for r, cap in zip(results, caps):
        assert cap == pytest.approx(r.received_pkts / r.sent_pkts * r.intended_rate_pps / r.interleave.duty)
        assert 0.5e6 < cap < 1.2e6 and r.received_pkts / r.send_span_s < 0.5 * cap
        assert usable(compared(r), "capacity")
    assert caps[1] / caps[0] == pytest.approx(1, abs=0.01)


@pytest.mark.slow
def test_an_interleaved_comparison_stores_what_a_sequential_one_does_and_resumes(tmp_path, monkeypatch):
    """On the simulated SUT (each trial drawn by its variant, load and
    round) the interleaved runner must store every trial where the
    sequential one does: the same differences, only the pairing differs;
    killed after one trial of a pair, the round is measured again whole."""
    from softnet.analysis.comparisons import stored_paired
    from softnet.campaign.runner import run_campaign
    from tests.conftest import run_until_interrupted
    from tests.test_compare import A, B, synth_spec

    seq = stored_paired(str(tmp_path / "s"), run_campaign(synth_spec([A, B], budget=24), tmp_path / "s"))
    spec = synth_spec([A, B], budget=24, pairing="interleaved")
    inter = stored_paired(str(tmp_path / "i"), run_campaign(spec, tmp_path / "i"))
    assert (seq.pairing, inter.pairing) == ("sequential", "interleaved")
    assert [d.to_dict() for _, d in inter.all_differences()] == [d.to_dict() for _, d in seq.all_differences()]
    run_until_interrupted(monkeypatch, lambda: run_campaign(spec, tmp_path / "cut"), after_trials=5)
    again = stored_paired(str(tmp_path / "cut"), run_campaign(spec, tmp_path / "cut"))
    assert [d.to_dict() for _, d in again.all_differences()] == [d.to_dict() for _, d in inter.all_differences()]


@needs_root
@pytest.mark.netns
@pytest.mark.parametrize("sig, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_trials_take_turns_undoes_both_testbeds(tmp_path, host_unchanged, sig, code):
    """The signal reaches the main thread; both trials' threads see it, stop
    their generators and unwind their own changes; then both testbeds go."""
    import os
    import signal
    import time

    proc = subprocess.Popen(softnet_cmd("compare", "--variant", "name=A;testbed.sut=ipv4-fwd", "--variant",
                                        "name=B;testbed.sut=ipv4-fwd", "--load", "50kpps", "--metrics", "cpu",
                                        "--pairing", "interleaved", "--duration", "5", "--max-rounds", "2",
                                        "--results", str(tmp_path / "r")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    gens = []
    while time.monotonic() < deadline and len(gens) < 2:  # both generators of the pair sending
        gens = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "softnet-gen.*--hold-until"],
                              capture_output=True, text=True).stdout.split()
        time.sleep(0.05)
    assert len(gens) == 2, "the interleaved trial's two generators never ran"
    time.sleep(1.0)  # well inside the window (10 s)
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code and "Traceback" not in err, err
    # both generators stopped (they die with the command too, but it stopped them: no leftovers for clean)
    assert not [g for g in gens if os.path.exists(f"/proc/{g}")]


def test_bursts_that_ran_past_their_slot_are_flagged_but_kept():
    """A generator that fell behind its bursts by more than the slot's idle
    guard on average (as at 3 Mpps here: 7-27 ms) sent into its partner's
    slot: informational, the trial stays valid and its pair is used."""
    import copy
    from pathlib import Path

    from softnet.analysis.comparisons import compared, usable
    from softnet.analysis.trial_eval import evaluate

    d = json.loads((Path(__file__).parent / "data" / "raw_trials" / "ipv4fwd_1500kpps_interleaved_slot0.json")
                   .read_text())
    assert "turns_overlapped" not in evaluate(d["raw"]).flags  # 16 us behind on average
    late = copy.deepcopy(d["raw"])
    late["generator"]["window_lag_mean_ns"] = 7e6
    r = evaluate(late)
    assert r.flags == ["turns_overlapped"] and r.valid and usable(compared(r), "capacity")
    late["generator"]["window_lag_mean_ns"] = 0.9e6  # inside the 1 ms guard
    assert evaluate(late).flags == []
