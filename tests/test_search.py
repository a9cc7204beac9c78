"""softnet.search: the algorithm on simulated SUTs, search campaigns, the CLI,
and one real search on the local testbed."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from softnet.campaign.runner import campaign_id, run_campaign
from softnet.campaign.search_runner import as_measurement
from softnet.campaign.spec import CampaignSpec
from softnet.search import Goal, Measurement, SearchConfig, search
from softnet.analysis.pastrami_files import list_pastrami_files, read_pastrami_file
from softnet.search.classify import LOWER, PENDING, UPPER, classify, pool_monotone
from softnet.search.strategy.knee import (KNEE_SPAN, crossing_posterior, crossing_quantiles, host_confirmed,
                                          stall_words)
from softnet.search.simulated import ResampledSut, SimulatedSut
from softnet.results.store import Store
from tests.conftest import needs_root, run_until_interrupted, softnet_cmd

GOALS = [Goal(loss_ratio=0.0), Goal(loss_ratio=0.005)]


def config(goals=GOALS, max_load_pps=1e7, **settings) -> SearchConfig:
    """The tests' search: 10 kpps up to 10 Mpps, width 0.5%, the Bayesian rule
    (most tests here are of its knee model; the specification's rule has its own)."""
    return SearchConfig(goals=goals, min_load_pps=1e4, max_load_pps=max_load_pps, relative_width=0.005,
                        **{"rule": "bayes", **settings})


def flat_capacity(capacity: float, low_load_loss: float = 0.0):
    """A deterministic SUT: forwards min(load, capacity), minus a fixed ratio."""
    def measure(load, duration):
        offered = int(load * duration)
        fwd = min(offered, int(capacity * duration))
        return Measurement(load, duration, offered, int(fwd * (1 - low_load_loss)))
    return measure


def trial(bad: bool) -> Measurement:
    return Measurement(1e6, 1.0, 1_000_000, 999_000 if bad else 1_000_000)


def test_classification_needs_agreeing_trials_not_one_unlucky_trial():
    g = Goal(loss_ratio=0.0, confidence=0.95)
    assert classify(g, 1e6, [trial(True)], 9).kind == PENDING  # one bad trial decides nothing
    assert classify(g, 1e6, [trial(True), trial(True)], 9).kind == PENDING
    assert classify(g, 1e6, [trial(True)] * 3, 9).kind == UPPER
    mixed = [trial(True)] + [trial(False)] * 6
    assert classify(g, 1e6, mixed, 9).kind == LOWER
    c = classify(g, 1e6, [trial(True), trial(False)] * 4 + [trial(True)], 9)
    assert c.majority and c.kind == UPPER and c.confidence < 0.95


def test_monotone_pooling_borrows_evidence_only_in_the_direction_monotone_loss_allows():
    g = Goal(loss_ratio=0.0)
    # Loads ascending: a flat region where each load alone is a coin toss (1 bad of 2).
    flat = [(2, 1), (2, 1), (2, 0), (2, 1), (2, 0), (2, 0)]
    pooled = pool_monotone(flat, g)
    assert pooled[0][0] > 2 and pooled[0][1] / pooled[0][0] < 0.5  # borrows the good trials above it
    assert classify(g, 1.0, [trial(True), trial(False)], 11, pooled=pooled[0]).kind == LOWER
    assert classify(g, 1.0, [trial(True), trial(False)], 11).kind == PENDING  # alone it decides nothing
    # A clean knee: nothing to borrow across it.
    knee = [(3, 0), (3, 0), (3, 3), (3, 3)]
    assert [k / n for n, k in pool_monotone(knee, g)] == [0, 0, 1, 1]
    # Conclusive evidence on both sides of a load contradicts monotone loss: it keeps its own counts.
    inverted = [(5, 5), (1, 0), (5, 0)]
    assert pool_monotone(inverted, g)[1] == (1, 0)


def test_bursty_low_load_loss_is_not_mistaken_for_a_failing_minimum_load():
    # Regression: seed 6 of the bench gave min_load_fails from two bad trials at the minimum
    # load, although about 70% of trials there lose nothing.
    sut = SimulatedSut("low_load_loss", 616334.5, 6)
    r = search(sut, config())
    for g, x in zip(r.goals, (0.0, 0.005)):
        truth = sut.truth(x, 0.5, 1.0, 1e4, 1e7)["conservative"]
        assert g.status == "found", g.diagnosis
        assert abs(g.lower_bound_pps / truth - 1) < 0.01


@pytest.mark.slow
def test_rare_stall_bursts_at_every_load_do_not_pin_the_knee_low():
    """This VM's host, simulated: rare stall bursts at every load. Over 3 seeds the lower
    bounds stay within 5% of the truth on average (MLRsearch's mean error on
    this shape, seeds 0-19; softnet's here: 2.8%) and no search runs away."""
    errors = []
    for seed in range(3):
        capacity = float(np.exp(np.random.default_rng([seed, 99]).uniform(np.log(5e5), np.log(5e6))))
        sut = SimulatedSut("stalls", capacity, seed)
        r = search(sut, config())
        assert r.trial_count < 120  # two knee budgets (44 each) and the bracketing
        for g, x in zip(r.goals, (0.0, 0.005)):
            errors.append(abs(g.lower_bound_pps / sut.truth(x, 0.5, 1.0, 1e4, 1e7)["conservative"] - 1))
    assert np.mean(errors) < 0.05, errors


def test_host_stall_flags_do_not_stop_the_knee_and_its_verdict_says_what_they_explain():
    """Flags alone stop nothing (the loss the stalls explain is set apart before
    a trial is judged): every trial flagged, the knee places the same trials
    and gives the same verdict (an earlier version of the search stopped early here).
    What an unstable verdict says of the attribution: the replay test below."""
    def flagged(sut):
        def measure(load, duration):
            m = sut(load, duration)
            m.flags = ("host_interference",)
            return m
        return measure

    plain = search(SimulatedSut("gradual", 1e6, 5), config(GOALS[:1]))
    stalled = search(flagged(SimulatedSut("gradual", 1e6, 5)), config(GOALS[:1]))
    assert [m.intended_load_pps for m in stalled.trials] == [m.intended_load_pps for m in plain.trials]
    g, p = stalled.goals[0], plain.goals[0]
    assert g.knee.host_stalls.flagged_trials == g.knee.trials > 0
    assert (g.status, g.lower_bound_pps, g.diagnosis) == (p.status, p.lower_bound_pps, p.diagnosis)


def test_the_knees_stall_verdict_counts_bad_trials_not_packets():
    """This host's NDR: most bad trials near the knee lost a few
    thousand packets, nearly all in host stalls; a few lost far more to the
    data path. Per packet the host's share is small, per bad trial it is most:
    the spread (which trials went bad) is the host's."""
    def attributed(sut):
        bad_seen = []

        def measure(load, duration):
            m = sut(load, duration)
            lost = m.offered_count - m.forwarded_count
            if lost > 0:
                bad_seen.append(m)
                if len(bad_seen) % 4:  # three in four: a stall, 90% of the loss set apart
                    m.lost_pkts_all, m.host_lost_pkts = lost * 10, lost * 9
                else:  # one in four: a burst the probe did not see, 100x the loss
                    m.lost_pkts_all, m.host_lost_pkts = lost * 100, 0
            return m
        return measure

    r = search(attributed(SimulatedSut("gradual", 1e6, 5)), config(GOALS[:1]))
    st = r.goals[0].knee.host_stalls
    assert st.bad_trials >= 8, st
    assert st.host_share < 0.5 <= st.host_trial_share < 1, st  # some unseen bursts are near it
    assert host_confirmed(st)
    assert stall_words(st).endswith(f"in {st.host_bad_trials} of its {st.bad_trials} bad trials "
                                    f"({st.host_trial_share:.0%}) the attribution ties most of the loss to "
                                    f"host stalls ({st.host_lost_pkts:,} of {st.lost_pkts:,} packets): "
                                    "the spread is the host's")


def test_a_knee_whose_bad_trials_were_overloaded_says_its_capacity_varied():
    """This host's PDR0.5%: most bad trials near the knee lost their
    packets over most of the second, little of it in host stalls. Not the
    host's stalls; the words say the SUT's capacity varied."""
    def overloaded(sut):
        def measure(load, duration):
            m = sut(load, duration)
            lost = m.offered_count - m.forwarded_count
            m.lost_pkts_all, m.host_lost_pkts = lost, lost // 20
            m.sut_overloaded = lost > 0
            return m
        return measure

    r = search(overloaded(SimulatedSut("gradual", 1e6, 5)), config(GOALS[1:]))
    st = r.goals[0].knee.host_stalls
    assert st.bad_trials >= 8 and st.overloaded_bad_trials == st.bad_trials, st
    assert not host_confirmed(st)
    assert stall_words(st).endswith(f"in {st.bad_trials} of them the SUT was overloaded over most of the "
                                    "trial: its capacity varied from trial to trial")


def test_a_real_trials_attribution_reaches_the_search():
    """as_measurement on captured trials: the overloaded one (loss in every ms,
    1.8 Mpps) is sut_overloaded; the stalled one (440 kpps, all loss in stalls)
    is not, and its loss is the host's."""
    data = Path(__file__).parent / "data" / "raw_trials"
    over = as_measurement(json.loads((data / "ipv4fwd_1800kpps_overload.json").read_text())["result"])
    stalled = as_measurement(json.loads((data / "ipv4fwd_440kpps_drain.json").read_text())["result"])
    assert over.sut_overloaded and not stalled.sut_overloaded
    assert stalled.all_lost == stalled.host_lost_pkts > 1000 and stalled.loss_ratio == 0


def test_a_goals_knee_budget_counts_the_trials_it_asked_for():
    """On this host the NDR's knee trials sit where the PDR's bad share is
    ~13%, inside the PDR's knee window; counted against the PDR's budget they ended
    its knee before it had a trial of its own near its crossing."""
    r = search(ResampledSut(host_sweep(), 2), SearchConfig(
        goals=[Goal(loss_ratio=x, relative_width=0.02) for x in (0.0, 0.005)], min_load_pps=1e4,
        max_load_pps=2e6, relative_width=0.02, knee_trials=20, rule="bayes"))
    pdr = r.goals[1].knee
    assert 0 < pdr.asked <= 20 < pdr.trials  # others' trials near it came free
    near = [m for m in r.trials if pdr.interval80_pps[0] * 0.95 <= m.intended_load_pps
            <= pdr.interval80_pps[1] * 1.05]
    assert len(near) >= pdr.asked // 2, (pdr, len(near))


HOST_SWEEP = Path(__file__).parent / "data" / "search" / "host_sweep_ipv4fwd.json"


def host_sweep() -> list[dict]:
    """This VM measured (bench/search_host_sweep.py): kernel IPv4 forwarding,
    64 B, 10 trials of 1 s at each of 16 loads 100 kpps..1.6 Mpps."""
    return json.loads(HOST_SWEEP.read_text())["trials"]


def test_resampled_host_draws_measured_trials_and_knows_its_truth():
    trials = host_sweep()
    sut = ResampledSut(trials, 0)
    at = [t for t in trials if t["intended_rate_pps"] == sut.loads[9]]
    measured = sorted(t["counted_lost_pkts"] / t["sent_pkts"] for t in at)
    draws = [sut(float(sut.loads[9]), 1.0) for _ in range(200)]
    # at a measured load every draw is one of its trials, with its flags and host share
    assert {round(m.loss_ratio, 4) for m in draws} <= {round(x, 4) for x in measured}
    assert all(m.host_lost_pkts <= m.all_lost for m in draws)
    share = np.mean([x > 0 for x in measured])
    assert sut.bad_share(float(sut.loads[9]), 0.0) == pytest.approx(share)
    for x in (0.0, 0.005):
        truth = sut.truth(x, 0.5, 1e4, 2e6)
        assert sut.bad_share(truth * 0.999, x) <= 0.5 < sut.bad_share(truth * 1.002, x)
    with pytest.raises(ValueError, match="two loads"):
        ResampledSut(at, 0)


@pytest.mark.slow
def test_search_on_this_hosts_replay_reads_near_its_truth_and_says_why():
    """The replayed host (width 2%, as the real bench): over 6 seeds
    the lower bounds are within 6% of the truth on average (30 seeds: 3.3% NDR,
    1.7% PDR; MLRsearch at its 21 s duration sum: 3.1%, 1.8%), a search stays
    under 120 trials (two knee budgets of 44 and the bracketing), and an
    unstable knee says what the stall attribution found."""
    trials = host_sweep()
    goals = [Goal(loss_ratio=x, relative_width=0.02) for x in (0.0, 0.005)]
    truths = [ResampledSut(trials, 0).truth(x, 0.5, 1e4, 2e6) for x in (0.0, 0.005)]
    errors = [[], []]
    for seed in range(6):
        r = search(ResampledSut(trials, seed), SearchConfig(goals=goals, min_load_pps=1e4, max_load_pps=2e6,
                                                            relative_width=0.02, rule="bayes"))
        assert r.trial_count < 120
        for i, g in enumerate(r.goals):
            errors[i].append(abs(g.lower_bound_pps / truths[i] - 1))
            assert g.status in ("found", "unstable"), g.diagnosis
            if g.status == "unstable":
                st = g.knee.host_stalls
                assert f"in {st.host_bad_trials} of its {st.bad_trials} bad trials" in g.diagnosis
                assert ("the spread is the host's" in g.diagnosis) == (st.host_trial_share >= 0.5)
    assert np.mean(errors[0]) < 0.06 and np.mean(errors[1]) < 0.06, errors


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sharp_knee_bounds_bracket_the_truth_within_the_width(seed):
    sut = SimulatedSut("sharp", 1.2e6, seed)
    r = search(sut, config())
    assert r.stopped_by == "done" and r.trial_count == len(r.trials) < 80
    for g, x in zip(r.goals, (0.0, 0.005)):
        truth = sut.truth(x, 0.5, 1.0, 1e4, 1e7)["conservative"]
        assert g.status == "found", g.diagnosis
        assert (g.upper_bound_pps - g.lower_bound_pps) / g.upper_bound_pps <= 0.005 + 1e-9
        assert abs(g.lower_bound_pps / truth - 1) < 0.01
        assert g.lower.confidence > 0.5 and g.lower.loss_ratio_ci95[0] <= g.lower.loss_ratio <= g.lower.loss_ratio_ci95[1]
    assert r.trial_seconds == pytest.approx(sum(m.duration_s for m in r.trials))


@pytest.mark.slow
def test_gradual_knee_is_modelled_and_its_interval_covers_the_truth():
    """A knee where the bad-trial share climbs from 16% to 84% over ~15% of
    load: no load settles, so the knee model places the trials and states an
    80% interval of the crossing. Over 10 seeds it must hold the truth at
    least 6 times (80% nominal; fewer than 6 of 10 has a 3% chance if coverage
    is 80%), and the lower bound must stay within 2.5% on average."""
    covered, errors = 0, []
    for seed in range(10):
        sut = SimulatedSut("gradual", 1e6, seed)
        g = search(sut, config(GOALS[:1])).goals[0]
        truth = sut.truth(0.0, 0.5, 1.0, 1e4, 1e7)["conservative"]
        assert g.knee is not None and "knee model" in g.diagnosis, g.diagnosis
        lo, hi = g.knee.interval80_pps
        # Unstable exactly when the crossing is not pinned within 5%: bounds, but no value.
        assert g.status == ("unstable" if hi / lo - 1 > 0.05 else "found"), g.diagnosis
        assert (g.value_pps is None) == (g.status == "unstable")
        covered += lo <= truth <= hi
        assert lo <= g.knee.crossing_pps <= hi and g.knee.asked <= 4 * 11  # the knee budget
        assert g.lower_bound_pps < g.upper_bound_pps and g.lower.confidence >= 0.5
        errors.append(abs(g.lower_bound_pps / truth - 1))
    assert covered >= 6 and np.mean(errors) < 0.025


def test_sharp_knee_resolves_where_a_load_sits_on_the_capacity():
    """A load within the capacity's 0.2% jitter is a coin toss; the knee model
    pins the crossing from the loads around it instead of 11 trials there."""
    sut = SimulatedSut("sharp", 531_540.55, 121)  # bench seed 121: bisection lands on the knee
    g = search(sut, config(GOALS[:1])).goals[0]
    truth = sut.truth(0.0, 0.5, 1.0, 1e4, 1e7)["conservative"]
    assert g.knee is not None and g.status == "found"
    lo, hi = g.knee.interval80_pps
    assert hi / lo - 1 <= 0.005 and g.knee.asked < 30
    assert g.lower_bound_pps <= truth * 1.001 and g.upper_bound_pps >= truth * 0.999
    assert (g.upper_bound_pps - g.lower_bound_pps) / g.upper_bound_pps <= 0.005 + 1e-9


@pytest.mark.parametrize("exceed", [0.02, 0.5, 0.98])
def test_knee_model_at_any_exceed_ratio(exceed):
    """Floors and ceilings keep clear of the exceed ratio; at the extremes only
    the plain 0..1 curve is left, never nothing."""
    loads = 1e6 * np.exp(np.linspace(-0.05, 0.05, 11))
    bad = np.array([0, 0, 0, 1, 2, 5, 8, 9, 10, 10, 10], float)
    xc, mass = crossing_posterior(loads, np.full(11, 10.0), bad, exceed)
    [median] = crossing_quantiles(xc, mass, (0.5,))
    assert np.isfinite(mass).all() and mass.sum() == pytest.approx(1)
    assert 0.96e6 < median < 1.04e6 and (exceed != 0.5 or 0.99e6 < median < 1.01e6)


def test_knee_model_finds_pastrami_crossings():
    """The knee model on PASTRAMI's published runs (PDR0.5%: a run is bad above
    0.5% loss): where the bad-run share rises monotonically through the knee,
    the crossing's posterior median lies between the highest grid load with
    fewer than half its runs bad and the next load with more, give or take a
    tenth of the grid step (a share of 0.52 of 50 runs puts the crossing at the
    load within noise)."""
    checked = 0
    for path in list_pastrami_files():
        by: dict[float, list[bool]] = {}
        for row in read_pastrami_file(path, check_runs=False):
            if row.tx_pkts and not row.counters_inconsistent:
                by.setdefault(row.offered_load_pps, []).append(1 - row.rx_pkts / row.tx_pkts > 0.005)
        loads = sorted(by)
        first_bad = next((i for i, ld in enumerate(loads) if np.mean(by[ld]) > 0.5), 0)
        if first_bad == 0:
            continue
        near = [ld for ld in loads if loads[first_bad] / KNEE_SPAN <= ld <= loads[first_bad] * KNEE_SPAN]
        share = [np.mean(by[ld]) for ld in near]
        if any(b < a for a, b in zip(share, share[1:])):
            continue  # not monotone through the knee: the model does not apply
        xc, mass = crossing_posterior(np.array(near), np.array([len(by[ld]) for ld in near], float),
                                      np.array([sum(by[ld]) for ld in near], float), 0.5)
        [median] = crossing_quantiles(xc, mass, (0.5,))
        below = max(ld for ld in loads[:first_bad] if np.mean(by[ld]) < 0.5)
        slack = (loads[first_bad] - below) / 10
        assert below - slack <= median <= loads[first_bad] + slack, (path.name, list(zip(near, share)), median)
        checked += 1
    assert checked >= 80


def test_minimum_load_already_losing_gives_a_diagnosis_not_an_exception():
    r = search(flat_capacity(5e5, low_load_loss=0.02), config())
    for g in r.goals:
        assert g.status == "min_load_fails" and g.lower_bound_pps is None and g.upper_bound_pps == 1e4
        assert "minimum load" in g.diagnosis and g.value_pps is None


def test_goal_met_at_the_maximum_load():
    r = search(flat_capacity(2e7), config(max_load_pps=1e6))
    assert [g.status for g in r.goals] == ["above_max_load"] * 2
    assert all(g.lower_bound_pps == 1e6 and g.upper_bound_pps is None for g in r.goals)


def test_budget_returns_best_known_bounds_with_a_diagnosis():
    r = search(SimulatedSut("sharp", 1e6, 3), config(max_trials=6))
    assert r.trial_count == 6 and r.stopped_by == "budget"
    assert {g.status for g in r.goals} == {"budget_exhausted"}
    r = search(SimulatedSut("sharp", 1e6, 3), config(max_trial_seconds=4.5))
    assert r.trial_seconds <= 4.5 and r.stopped_by == "budget"


def test_generator_limited_trials_are_never_evidence():
    """Above 2 Mpps the 'generator' cannot keep up: those trials are flagged and
    their counts (all lost) must not make an upper bound."""
    def measure(load, duration):
        offered = int(load * duration)
        if load > 2e6:
            return Measurement(load, duration, offered, 0, ("generator_limited",), achieved_load_pps=2.1e6)
        return Measurement(load, duration, offered, offered)  # the SUT itself never loses

    r = search(measure, config())
    for g in r.goals:
        assert g.upper_bound_pps is None and g.status == "above_max_load"
        assert g.lower_bound_pps <= 2.1e6 and "could not be offered" in g.diagnosis
    flagged = [m for m in r.trials if not m.valid]
    assert flagged and all(m.intended_load_pps > 2e6 for m in flagged)


def test_loss_inversion_is_found_and_reported():
    """Loss at low load that vanishes at higher load: the min-load check finds it."""
    sut = SimulatedSut("inversion", 1e6, 5)
    r = search(sut, config())
    for g in r.goals:
        assert g.status == "min_load_fails"
        assert g.inversions and g.inversions[-1].meets_goal_at_pps > 0.9e6
        assert "loss inversion" in g.diagnosis


def test_low_load_majority_is_no_loss_inversion():
    """Found on held-out benchmark seed 215: bursts made 30% of trials at the
    minimum load bad, yet 8 of its 11 were. A majority after the trial cap is
    not the final confidence a loss inversion needs: the goal is found at the
    knee and the diagnosis names the unconfirmed evidence. The minimum load
    replays that seed's 11 results; above it the SUT is clean."""
    at_min = iter([True, True, False, True, True, False, True, True, False, True, True])
    clean = flat_capacity(741_264)

    def measure(load, duration):
        if load == 1e4:
            offered = int(load * duration)
            return Measurement(load, duration, offered, offered - (51 if next(at_min) else 0))
        return clean(load, duration)

    r = search(measure, config())
    ndr = r.goals[0]
    assert sum(m.intended_load_pps == 1e4 for m in r.trials) == 11
    assert ndr.status == "found" and not ndr.inversions
    assert "10,000 pps failed the goal in 8 of 11 trials" in ndr.diagnosis and "not confirmed" in ndr.diagnosis
    assert ndr.lower_bound_pps <= 741_264 <= ndr.upper_bound_pps


def test_short_trials_bracket_and_final_trials_decide():
    sut = SimulatedSut("sharp", 8e5, 4)
    goals = [Goal(loss_ratio=0.005, initial_trial_duration=0.1, final_trial_duration=1.0)]
    r = search(sut, config(goals))
    g = r.goals[0]
    assert g.status == "found"
    assert any(m.duration_s == 0.1 for m in r.trials)
    for load, evidence in ((g.lower_bound_pps, g.lower), (g.upper_bound_pps, g.upper)):
        finals = [m for m in r.trials if m.intended_load_pps == load and m.duration_s == 1.0]
        assert evidence.trials == len(finals) >= 2  # bounds rest on final-duration trials only


@pytest.mark.parametrize("kwargs, text", [
    ({"loss_ratio": 1.5}, "Goal.loss_ratio"), ({"exceed_ratio": 1.0}, "Goal.exceed_ratio"),
    ({"duration_sum": 0.5}, "Goal.duration_sum = 0.5: expected >= final_trial_duration"),
    ({"confidence": 0.3}, "Goal.confidence"),
    ({"initial_trial_duration": 5.0, "final_trial_duration": 1.0}, "Goal.initial_trial_duration")])
def test_bad_goals_name_the_field(kwargs, text):
    with pytest.raises(ValueError, match=text):
        Goal(**kwargs)


@pytest.mark.parametrize("kwargs, text", [
    ({"knee_trials": 0}, r"SearchConfig.knee_trials = 0: expected None or >= 1"),
    ({"max_trials_per_load": 1}, r"SearchConfig.max_trials_per_load = 1: expected >= 2"),
    ({"relative_width": 1.5}, r"SearchConfig.relative_width = 1.5: expected in \(0, 1\)"),
    ({"max_trials": 0}, r"SearchConfig.max_trials = 0: expected None or >= 1"),
    ({"max_trial_seconds": -1.0}, r"SearchConfig.max_trial_seconds = -1.0: expected None or > 0"),
    ({"final_confidence": 1.0}, r"SearchConfig.final_confidence = 1.0: expected in \(0.5, 1\)"),
    ({"bracket_factor": 0.5}, r"SearchConfig.bracket_factor = 0.5: expected >= 1"),
    ({"unstable_width": -0.1}, r"SearchConfig.unstable_width = -0.1: expected >= 0"),
    ({"min_load_pps": 1e7, "max_load_pps": 1e4}, r"expected 0 < min_load_pps < max_load_pps, got 10000000.0, 10000.0"),
    ({"goals": []}, r"SearchConfig.goals is empty"),
    ({"goals": [0.005]}, r"SearchConfig.goals holds 0.005: expected softnet.search.Goal")])
def test_bad_search_settings_name_the_setting_and_its_range(kwargs, text):
    with pytest.raises(ValueError, match=text):
        SearchConfig(**{"goals": GOALS, "min_load_pps": 1e4, "max_load_pps": 1e7, **kwargs})


def test_search_takes_a_config_object():
    cfg = config(max_trials=6)
    assert cfg.goals == tuple(GOALS) and cfg.knee_trial_budget == 4 * cfg.max_trials_per_load
    with pytest.raises(TypeError, match="SearchConfig"):
        search(flat_capacity(1e6), GOALS)
    with pytest.raises(Exception):  # frozen: one config, read by the controller and every strategy
        cfg.max_trials = 7


@pytest.mark.slow
def test_search_decides_as_recorded(monkeypatch):
    """tests/data/search_golden.json: 19 searches (5 shapes x 3 seeds, a budget
    in trials and in seconds, no minimum-load check, a small knee budget)
    recorded by bench/search_golden.py (first before the search was split into
    strategies; re-recorded when the knee model changed). Every
    trial, reason and result must come out the same; a deliberate change of
    method re-records the file."""
    path = Path(__file__).resolve().parents[1] / "bench" / "search_golden.py"
    spec = importlib.util.spec_from_file_location("search_golden", path)
    golden = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, golden)  # its worker processes find run() by module name
    spec.loader.exec_module(golden)
    moved, total = golden.check(Path(__file__).parent / "data" / "search_golden.json")
    assert total == 19 and not moved, f"{len(moved)} of {total} searches decide differently: {moved}"


SEARCH_SPEC = {"name": "s", "testbed": {"sut": "synthetic"}, "synthetic": {"o_sat_pps": 400_000, "seed": 3},
               "method": {"kind": "search", "goals": ["ndr", "pdr0.5"], "runs": 2, "duration_s": 1.0}}


@pytest.mark.parametrize("engine", ["softnet", "mlrsearch", "bayes"])
def test_search_campaign_is_stored_and_resumes_by_replay(tmp_path, monkeypatch, engine):
    """Every engine is a function of its trials: killed mid-search, it resumes
    by replaying them and ends with the same trials and answers."""
    spec = CampaignSpec.model_validate({**SEARCH_SPEC, "method": {**SEARCH_SPEC["method"], "engine": engine}})
    run_campaign(spec, tmp_path / "whole")
    with Store(tmp_path / "whole", read_only=True) as a:
        first = a.query("SELECT max(trial_count) AS n FROM searches WHERE run_index = 0")[0]["n"]
    parts = tmp_path / "parts"
    # stored trials up to the middle of the second search
    run_until_interrupted(monkeypatch, lambda: run_campaign(spec, parts), after_trials=first + 3)
    events = []
    run_campaign(spec, parts, events.append)
    assert "1 already complete" in events[0].message
    cid = campaign_id(spec)
    q = ("SELECT cell_id, run_index, load_index, intended_rate_pps, duration_s, sent_pkts, received_pkts "
         "FROM trials ORDER BY cell_id, run_index, load_index")
    with Store(tmp_path / "whole", read_only=True) as a, Store(parts, read_only=True) as b:
        assert a.query(q) == b.query(q)
        assert a.searches(cid) == b.searches(cid)
        assert {r["status"] for r in b.searches(cid)} == {"found"}
        assert {r["engine"] for r in b.searches(cid)} == {engine}
        assert all(r["conditional_throughput_pps"] for r in b.searches(cid))


def test_search_spec_errors_name_the_field():
    bad = {**SEARCH_SPEC, "method": {**SEARCH_SPEC["method"], "goals": ["pdrx"]}}
    with pytest.raises(Exception, match="pdrx"):
        CampaignSpec.model_validate(bad)
    bad = {**SEARCH_SPEC, "method": {**SEARCH_SPEC["method"], "loads": ["1kpps"]}}
    with pytest.raises(Exception, match="chooses its own loads"):
        CampaignSpec.model_validate(bad)
    for method, text in [({"exceed_ratio": 1.0}, "method.exceed_ratio"), ({"engine": "trex"}, "method.engine"),
                         ({"duration_sum_s": 0.5}, "duration_sum_s = 0.5 s is shorter than the final trial"),
                         ({"goals": ["ndr", {"name": "pdr0.5", "duration_sum_s": 0.5}]},
                          r"goals\[1\] \(pdr0.5\): duration_sum_s = 0.5 s"),
                         ({"goals": [{"name": "pdr0.5", "exceed": 0.2}]}, "exceed"),
                         ({"goals": [{"name": "pdrq"}]}, "pdrq")]:
        with pytest.raises(Exception, match=text):
            CampaignSpec.model_validate({**SEARCH_SPEC, "method": {**SEARCH_SPEC["method"], **method}})


def test_a_goal_of_its_own_takes_the_methods_attributes_it_leaves_out():
    """Per-goal attributes (RFC 9971's, per search goal) reach the search's goals."""
    from softnet.campaign.search_runner import goals_of

    spec = CampaignSpec.model_validate({**SEARCH_SPEC, "method": {
        **SEARCH_SPEC["method"], "exceed_ratio": 0.2, "duration_sum_s": 5.0,
        "goals": ["ndr", {"name": "pdr0.5", "exceed_ratio": 0.5, "width": 0.01, "duration_sum_s": 2.0}]}})
    ndr, pdr = goals_of(spec)
    assert (ndr.loss_ratio, ndr.exceed_ratio, ndr.duration_sum_s, ndr.relative_width) == (0.0, 0.2, 5.0, 0.005)
    assert (pdr.loss_ratio, pdr.exceed_ratio, pdr.duration_sum_s, pdr.relative_width) == (0.005, 0.5, 2.0, 0.01)
    assert ndr.final_trial_duration == pdr.final_trial_duration == 1.0


@pytest.mark.slow
def test_search_cli_synthetic_json(tmp_path):
    out = subprocess.run(softnet_cmd("search", "--sut", "synthetic", "--repeats", "3", "--results", str(tmp_path),
                                     "--json"), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    by_goal = {s["goal"]: s for s in doc["searches"]}
    assert set(by_goal) == {"NDR", "PDR0.5%"}
    for s in by_goal.values():
        assert len(s["repeats"]) == 3 and s["verdict"] == "found" and s["cv"] < 0.05
        assert s["definition"] == {"standard": "RFC 9971 (MLRsearch)", "engine": "mlrsearch",
                                   "goal_loss_ratio": s["loss_ratio"], "goal_exceed_ratio": 0.5,
                                   "goal_final_trial_duration_s": 1.0, "goal_duration_sum_s": 3.0,
                                   "loss_counted": "host-stall loss set apart"}
        for r in s["repeats"]:
            assert r["relevant_lower_bound_pps"] < r["relevant_upper_bound_pps"]
            assert r["relevant_lower_bound_pps"] == r["lower_bound_pps"]
            assert r["conditional_throughput_pps"] <= r["relevant_lower_bound_pps"]
        assert s["value_pps"] == pytest.approx(np.mean([r["conditional_throughput_pps"] for r in s["repeats"]]))
        assert len(s["all_loss"]) == 3  # the same trials read counting all loss
    report = subprocess.run(softnet_cmd("report", str(tmp_path)), capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "report.html").read_text()
    assert "NDR/PDR searches" in html and "PDR0.5%" in html and "conditional throughput" in html
    assert "engine mlrsearch, goal loss ratio 0, exceed ratio 0.5" in html
    assert "loss counted: host-stall loss set apart; counting all loss, the same trials give" in html


@pytest.mark.parametrize("args, option", [
    (["--goals", "ndr,pdrx"], "--goals"), (["--width", "2"], "--width"), (["--min-load", "5Mpps"], "--max-load"),
    (["--repeats", "0"], "--repeats"), (["--confidence", "0.2"], "--confidence"),
    (["--initial-duration", "5", "--duration", "1"], "--initial-duration"),
    (["--exceed-ratio", "1"], "--exceed-ratio"), (["--exceed-ratio", "-0.1"], "--exceed-ratio"),
    (["--duration-sum", "0.5", "--duration", "1"], "--duration-sum"), (["--width", "0"], "--width"),
    (["--width", "-0.01"], "--width"), (["--engine", "trex"], "--engine"),
    (["--engine", "bayes", "--exceed-ratio", "0"], "--exceed-ratio")])
def test_search_cli_bad_input(tmp_path, args, option):
    out = subprocess.run(softnet_cmd("search", "--sut", "synthetic", "--results", str(tmp_path / "r"), *args),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and option in out.stderr
    assert not (tmp_path / "r").exists()


@needs_root
@pytest.mark.netns
def test_real_search_on_the_testbed(tmp_path, host_unchanged):
    out = subprocess.run(softnet_cmd("search", "--sut", "ipv4-fwd", "--goals", "pdr0.5", "--width", "0.05",
                                     "--min-load", "20kpps", "--max-load", "2Mpps", "--duration", "0.3",
                                     "--warmup", "0.1", "--max-trials", "8", "--results", str(tmp_path), "--json"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)["searches"][0]
    r = s["repeats"][0]
    assert r["status"] in ("found", "unstable", "budget_exhausted", "min_load_fails")
    assert 1 <= r["trial_count"] <= 8
    with Store(tmp_path, read_only=True) as store:
        trials = store.query("SELECT intended_rate_pps, sent_pkts, received_pkts, valid FROM trials")
    assert len(trials) == r["trial_count"]
    assert trials[0]["intended_rate_pps"] == 2e6  # first trial at the maximum load
    assert all(t["sent_pkts"] > 0 for t in trials)  # real counters from the sink and generator
    if r["lower_bound_pps"] is not None:
        assert 20e3 <= r["lower_bound_pps"] < 2e6


LIMIT_PPS = 30_000


@needs_root
@pytest.mark.parametrize("engine", ["softnet", "mlrsearch"])
def test_both_engines_find_a_known_throughput_on_the_testbed(tmp_path, host_unchanged, engine):
    """Known truth: nftables drops every packet beyond 30 kpps (well below this
    host's own forwarding capacity), so the NDR is 30 kpps. In each of two
    repeats each engine's relevant lower bound lies within the goal width
    below it and its relevant upper bound above it. Trials of 0.5 s, the
    median of three deciding a load (duration sum 1.5 s)."""
    width = 0.05
    out = subprocess.run(softnet_cmd(
        "search", "--sut", f"nft-fw:rules=1,limit={LIMIT_PPS}", "--engine", engine, "--goals", "ndr",
        "--width", str(width), "--min-load", "10kpps", "--max-load", "100kpps", "--duration", "0.5",
        "--duration-sum", "1.5", "--warmup", "0.2", "--max-trials", "40", "--repeats", "2", "--results", str(tmp_path),
        "--json"), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)["searches"][0]
    assert s["definition"]["engine"] == engine and s["definition"]["goal_duration_sum_s"] == 1.5
    assert len(s["repeats"]) == 2
    for r in s["repeats"]:
        assert r["status"] == "found", r["diagnosis"]
        lo, up = r["relevant_lower_bound_pps"], r["relevant_upper_bound_pps"]
        # the bucket's 5 ms lets a trial up to 5 ms / 0.7 s = 0.7% over the rate through: between N and
        # N x 1.007 a load may go either way; above it every one fails. Just below N a host stall can make
        # the generator catch up in a burst deeper than the bucket (a CI run: 29.96 kpps lost packets)
        assert LIMIT_PPS * (1 - width) <= lo <= LIMIT_PPS * 1.007 and LIMIT_PPS * 0.99 < up, (lo, up)
        assert r["conditional_throughput_pps"] == pytest.approx(lo)  # no loss at the NDR's lower bound
    with Store(tmp_path, read_only=True) as store:
        trials = store.query("SELECT intended_rate_pps, sent_pkts, received_pkts FROM trials")
    assert len(trials) == sum(r["trial_count"] for r in s["repeats"])
    above = [t for t in trials if t["intended_rate_pps"] > LIMIT_PPS * 1.01]
    assert above and all(t["received_pkts"] < t["sent_pkts"] for t in above)  # the limit dropped the excess
