"""RFC 9971's definitions (softnet.analysis.mlr_spec) against MLRsearch 1.2.1's
own computation on the same trials: random trial lists, searches MLRsearch
ran on simulated SUTs, and searches on this host's recorded trials."""
from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from MLRsearch import MeasurementResult
from MLRsearch.target_stat import TargetStat

from softnet.analysis.mlr_spec import SpecGoal, SpecTrial, classify, goal_result, quantile_loss_ratio
from softnet.search import Goal, Measurement, SearchConfig
from softnet.search.reference import search_mlrsearch
from softnet.search.simulated import ResampledSut, SimulatedSut

DATA = Path(__file__).parent / "data" / "search"


def mlr_stat(goal: SpecGoal, trials: list[SpecTrial]) -> TargetStat:
    """MLRsearch's aggregate of one load's trials for one target (its own class)."""
    target = SimpleNamespace(loss_ratio=goal.loss_ratio, exceed_ratio=goal.exceed_ratio,
                             trial_duration=goal.final_trial_duration_s, duration_sum=goal.duration_sum_s)
    stat = TargetStat(target=target)
    for t in trials:
        offered = 100_000
        stat.add(MeasurementResult(intended_duration=t.duration_s, intended_load=t.load_pps, offered_count=offered,
                                   loss_count=round(t.loss_ratio * offered)))
    return stat


def random_case(rng: np.random.Generator) -> tuple[SpecGoal, list[SpecTrial]]:
    final = float(rng.choice([1.0, 2.0, 5.0]))
    goal = SpecGoal(loss_ratio=float(rng.choice([0.0, 0.005, 0.1])), exceed_ratio=float(rng.choice(
        [0.0, 0.1, 0.2, 0.5, 0.9])), final_trial_duration_s=final,
        duration_sum_s=final * float(rng.choice([1, 2, 3, 7.5, 21])))
    # loss ratios that hit the goal's exactly (ties), none, a little, all
    losses = [0.0, 0.00001, 0.005, 0.1, 0.3, 1.0]
    trials = [SpecTrial(1e6, final * float(rng.choice([0.1, 0.5, 1.0, 1.0, 1.5])), float(rng.choice(losses)))
              for _ in range(int(rng.integers(0, 12)))]
    return goal, trials


def test_classification_and_quantile_match_mlrsearch_on_random_trial_lists():
    """2000 random loads: every exceed ratio (0 included), duration sums of one
    to 21 final trials, short and long trials, ties at the goal loss ratio."""
    rng = np.random.default_rng(7)
    kinds = {"lower": 0, "upper": 0, "undecided": 0}
    for _ in range(2000):
        goal, trials = random_case(rng)
        kind, _ = classify(goal, trials)
        optimistic, pessimistic = mlr_stat(goal, trials).estimates()
        theirs = "lower" if optimistic and pessimistic else "upper" if not optimistic and not pessimistic \
            else "undecided"
        assert kind == theirs, (goal, trials)
        kinds[kind] += 1
        if any(t.duration_s >= goal.final_trial_duration_s for t in trials) or not trials:
            assert quantile_loss_ratio(goal, trials) == mlr_stat(goal, trials).pessimistic_loss_ratio
    assert min(kinds.values()) > 100, kinds  # every class was exercised


def test_the_examples_of_the_specification():
    """RFC 9971 appendix C.4: one 60 s trial without loss and one with 0.1%
    at 1 Mfps. 60f120d0l50e: conditional throughput 1 Mfps; 60f60d0.5l20e
    (remaining 96 s of the 120 s whole): the 0.1% trial sets it, 999 kfps."""
    trials = [SpecTrial(1e6, 60.0, 0.0), SpecTrial(1e6, 60.0, 0.001)]
    a = goal_result(SpecGoal(0.0, 0.5, 60.0, 120.0), trials)
    assert a.conditional_throughput_pps == 1e6 and a.relevant_lower_bound_pps == 1e6
    b = goal_result(SpecGoal(0.005, 0.2, 60.0, 60.0), trials)
    assert math.isclose(b.conditional_throughput_pps, 999_000)
    # RFC 2544's setting (exceed 0, one trial): one high-loss trial makes the load an upper bound
    assert classify(SpecGoal(0.0, 0.0, 60.0, 60.0), [SpecTrial(1e6, 60.0, 1e-7)])[0] == "upper"


def test_relevant_bounds_are_the_conservative_pair():
    """A lower bound above the lowest upper bound (a loss inversion) is not
    the relevant lower bound; undecided loads are neither."""
    g = SpecGoal(0.0, 0.5, 1.0, 3.0)
    ok, bad = 0.0, 0.01
    trials = [SpecTrial(load, 1.0, loss) for load, loss in [
        (100, ok), (100, ok), (200, ok), (200, bad), (300, bad), (300, bad), (400, ok), (400, ok)]]
    r = goal_result(g, trials)
    assert (r.relevant_lower_bound_pps, r.relevant_upper_bound_pps) == (100, 300)
    assert [s.classification for s in r.loads] == ["lower", "undecided", "upper", "lower"]
    none = goal_result(g, [])
    assert (none.relevant_lower_bound_pps, none.relevant_upper_bound_pps, none.conditional_throughput_pps) == (
        None, None, None)


def recorded(search_result) -> list[SpecTrial]:
    return [m.spec_trial() for m in search_result.trials]


def check_against_mlrsearch(r) -> int:
    """MLRsearch's own relevant bounds and conditional throughput against the
    definition over its trials; returns how many goals had both bounds."""
    regular = 0
    for g in r.goals:
        assert g.compliant, g.diagnosis
        spec = goal_result(g.goal.spec, recorded(r))
        assert spec == g.spec
        regular += spec.relevant_upper_bound_pps is not None and spec.relevant_lower_bound_pps is not None
    return regular


@pytest.mark.parametrize("shape", ["sharp", "gradual", "stalls", "low_load_loss", "inversion"])
def test_mlrsearch_answers_as_the_definition_on_simulated_searches(shape):
    goals = [Goal(loss_ratio=x, exceed_ratio=e, relative_width=0.02, duration_sum=s)
             for x, e, s in ((0.0, 0.5, 3.0), (0.005, 0.5, 3.0), (0.005, 0.2, 5.0), (0.0, 0.0, 1.0))]
    regular = 0
    for seed in range(3):
        r = search_mlrsearch(SimulatedSut(shape, 5e5, seed), SearchConfig(
            goals=goals, min_load_pps=1e4, max_load_pps=2e6, relative_width=0.02))
        regular += check_against_mlrsearch(r)
    assert regular >= 10


def test_mlrsearch_answers_as_the_definition_on_this_hosts_recorded_trials():
    """Trials drawn from this VM's recorded sweeps (real, noisy: loss at every load)."""
    trials = [t for p in ("host_sweep_ipv4fwd.json", "host_sweep_ipv4fwd_drift.json")
              for t in json.loads((DATA / p).read_text())["trials"]]
    goals = [Goal(loss_ratio=x, relative_width=0.02, duration_sum=3.0) for x in (0.0, 0.005)]
    regular = 0
    for seed in range(4):
        r = search_mlrsearch(ResampledSut(trials, seed), SearchConfig(
            goals=goals, min_load_pps=1e4, max_load_pps=2e6, relative_width=0.02))
        regular += check_against_mlrsearch(r)
    assert regular == 8


def test_an_invalid_trial_counts_as_total_loss_for_every_engine():
    """The generator could not offer the load: a trial that lost everything,
    as MLRsearch reads unsent packets."""
    m = Measurement(1e6, 1.0, 500_000, 500_000, flags=("generator_limited",))
    assert m.spec_trial().loss_ratio == 1.0
    assert Measurement(1e6, 1.0, 1_000_000, 999_000).spec_trial().loss_ratio == pytest.approx(0.001)


@pytest.mark.parametrize("kwargs, field", [
    ({"exceed_ratio": 1.0}, "exceed_ratio"), ({"exceed_ratio": -0.1}, "exceed_ratio"),
    ({"duration_sum_s": 0.5}, "duration_sum_s"), ({"loss_ratio": 1.0}, "loss_ratio")])
def test_bad_goal_attributes_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"SpecGoal.{field}"):
        SpecGoal(**{"loss_ratio": 0.0, "exceed_ratio": 0.5, "final_trial_duration_s": 1.0, "duration_sum_s": 3.0,
                    **kwargs})
