"""Clusters of AF_XDP configurations, what explains them, the study's findings
(softnet/analysis/latency_clusters.py), and the figures (softnet/report/latency_plots.py).

Campaigns are planted: a full factorial of the study's knobs whose RTTs are
drawn, with a fixed seed, from a log-normal whose median a rule of the knobs
decides, so the true clusters and their always-present knobs are known."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from softnet.analysis import latency_clusters as lc
from softnet.analysis import latency_stats as ls
from softnet.report import latency_plots as lp
from tests.test_latency_stats import INTERVAL_NS, captured, lognormal_run
from tests.test_report import assert_no_tick_overlap, assert_titles_fit

SPACE = {"bind_mode": ["copy"], "busy_poll": [False, True], "need_wakeup": [False, True],
         "poll_sender": [False, True], "poll_forwarder": [False, True], "poll_receiver": [False, True],
         "cstate_limit": ["C1", "C6"], "coalescing": ["unsupported"]}  # 64 configurations
MEDIANS_NS = (10_000, 25_000, 60_000, 150_000)


def four_clusters(k: dict) -> int:
    """The planted truth: the study's Table I in four rows."""
    if k["busy_poll"]:
        return 0 if not k["need_wakeup"] and not k["poll_receiver"] else 1
    return 3 if k["poll_receiver"] else 2


def factorial(space: dict) -> list[dict]:
    return [dict(zip(space, values)) for values in itertools.product(*space.values())]


def planted(median_of, *, space: dict = SPACE, seed: int = 0, n: int = 100, sigma: float = 0.1,
            stall=lambda k: False, **kw) -> list[ls.ConfigStats]:
    """ConfigStats of a factorial campaign: 3 runs of ``n`` packets per configuration,
    RTT ~ log-normal(median_of(knobs), sigma); ``stall`` ones take the send interval."""
    rng = np.random.default_rng(seed)
    items = []
    for k in factorial(space):
        median, s = (INTERVAL_NS * 1.01, 0.01) if stall(k) else (median_of(k), sigma)
        items.append((k, [lognormal_run(rng, median, s, n) for _ in range(3)]))
    return ls.campaign_stats(items, send_interval_ns=INTERVAL_NS, n_resamples=100, **kw)


@pytest.fixture(scope="module")
def study():
    return planted(lambda k: MEDIANS_NS[four_clusters(k)])


def truth(configs) -> np.ndarray:
    return np.array([four_clusters(c.knobs) for c in configs])


# ---- k-means ----------------------------------------------------------------------

def test_silhouette_finds_the_four_planted_clusters(study):
    cl = lc.cluster_configurations(study)
    assert cl.chosen_by == "silhouette" and cl.k == 4
    assert sorted(cl.silhouette) == list(range(2, 9))
    assert cl.silhouette[4] == max(cl.silhouette.values())
    assert adjusted_rand_score(truth(study), cl.labels) == 1.0
    assert np.array_equal(cl.labels, truth(study))  # numbered by mean latency, as planted
    assert [c.mean_ns for c in cl.clusters] == sorted(c.mean_ns for c in cl.clusters)
    assert cl.constant_knobs == {"bind_mode": "copy", "coalescing": "unsupported"}
    assert [c.always_present for c in cl.clusters] == [
        {"busy_poll": True, "need_wakeup": False, "poll_receiver": False},
        {"busy_poll": True},
        {"busy_poll": False, "poll_receiver": False},
        {"busy_poll": False, "poll_receiver": True},
    ]
    for c, m in zip(cl.clusters, MEDIANS_NS):
        assert c.mean_ns == pytest.approx(m * math.exp(0.1 ** 2 / 2), rel=0.03)
        assert 0 < c.std_ns < 0.03 * m
    json.dumps(cl.to_dict(study), allow_nan=False)


def test_fixed_k_and_repeatability(study):
    six = lc.cluster_configurations(study, k=6)
    assert six.chosen_by == "fixed" and six.k == 6 and set(six.silhouette) == {6}
    assert [c.mean_ns for c in six.clusters] == sorted(c.mean_ns for c in six.clusters)
    assert np.array_equal(lc.cluster_configurations(study, k=6).labels, six.labels)
    assert np.array_equal(lc.cluster_configurations(study, k=4).labels, truth(study))
    with pytest.raises(ValueError, match="k = 65"):
        lc.cluster_configurations(study, k=65)


def test_outliers_are_left_out(study):
    stalled = planted(lambda k: MEDIANS_NS[four_clusters(k)], stall=lambda k: k["need_wakeup"] and k["poll_forwarder"]
                      and not k["busy_poll"] and k["poll_receiver"], kernel_baseline=400_000)
    cl = lc.cluster_configurations(stalled)
    out = [i for i, c in enumerate(stalled) if "stalled" in c.flags]
    assert len(out) == 4 and sorted(cl.excluded) == out
    assert all(cl.excluded[i] == ("worse_than_kernel", "stalled") for i in out)
    assert (cl.labels[out] == -1).all() and cl.k == 4
    keep = cl.labels >= 0
    assert adjusted_rand_score(truth(stalled)[keep], cl.labels[keep]) == 1.0


def test_too_few_configurations_to_choose_k(study):
    with pytest.raises(ValueError, match="too few to choose k"):
        lc.cluster_configurations(study[:2])
    assert lc.cluster_configurations(study[:2], k=2).k == 2


# ---- stability ----------------------------------------------------------------------

def test_the_same_campaign_twice_is_stable(study):
    again = planted(lambda k: MEDIANS_NS[four_clusters(k)], seed=11)[::-1]  # other draws, other order
    s = lc.cluster_stability(lc.cluster_configurations(study), study, lc.cluster_configurations(again), again)
    assert (s.ari, s.verdict, s.n_common) == (1.0, "stable", 64)


def test_a_campaign_whose_clusters_move_is_unstable(study):
    moved = planted(lambda k: MEDIANS_NS[(four_clusters(k) + k["poll_sender"] + 2 * (k["cstate_limit"] == "C6")) % 4],
                    seed=12)
    s = lc.cluster_stability(lc.cluster_configurations(study, k=4), study,
                             lc.cluster_configurations(moved, k=4), moved)
    assert s.verdict == "unstable" and s.ari < 0.8
    assert s.to_dict()["threshold"] == 0.8


# ---- what explains the clusters ---------------------------------------------------------

def test_decision_tree_rules_recover_the_planted_rule(study):
    cl = lc.cluster_configurations(study)
    rules = lc.explain_clusters(study, cl)
    assert rules.accuracy == 1.0
    assert "busy_poll = on and need_wakeup = off and poll_receiver = off -> cluster 0 (8 configs, 100%)" in \
        [r.replace("poll_receiver = off and need_wakeup = off", "need_wakeup = off and poll_receiver = off")
         for r in rules.rules]
    assert all("cstate_limit" not in r and "poll_sender" not in r for r in rules.rules)
    assert "busy_poll" in rules.text


def test_knob_effects_are_paired_with_intervals(study):
    effects = {e.knob: e for e in lc.knob_effects(study)}
    assert set(effects) == {"busy_poll", "need_wakeup", "poll_sender", "poll_forwarder", "poll_receiver",
                            "cstate_limit"}  # bind_mode and coalescing do not vary
    pr = effects["poll_receiver"]
    assert (pr.reference, pr.value, pr.method, pr.n) == (False, True, "paired", 32)
    assert pr.ci_low_ns <= pr.diff_ns <= pr.ci_high_ns
    assert pr.rel_ci_low <= pr.relative <= pr.rel_ci_high
    cs = effects["cstate_limit"]
    assert (cs.reference, cs.value) == ("C1", "C6")
    assert abs(cs.relative) < 0.03 and cs.rel_ci_low < 0 < cs.rel_ci_high
    bp = effects["busy_poll"]
    assert bp.relative < -0.5 and bp.rel_ci_high < 0
    assert lc.knob_effects(study) == lc.knob_effects(study)  # seeded
    json.dumps([e.to_dict() for e in effects.values()], allow_nan=False)


def test_knob_effect_between_groups_when_no_pairs():
    rng = np.random.default_rng(4)
    cfgs = [ls.config_stats({"mode": "a", "other": i}, [lognormal_run(rng, 10_000, 0.1, 50)] * 3, n_resamples=50)
            for i in range(4)]
    cfgs += [ls.config_stats({"mode": "b", "other": 10 + i}, [lognormal_run(rng, 20_000, 0.1, 50)] * 3,
                             n_resamples=50) for i in range(4)]
    e = lc.knob_effect(cfgs, "mode", "a", "b")
    assert e.method == "groups" and e.n == 4 and e.relative == pytest.approx(1.0, abs=0.1)
    assert lc.knob_effect(cfgs, "mode", "a", "zzz") is None


# ---- the study's findings ------------------------------------------------------------------

def verdicts(configs, **kw) -> dict:
    cl = lc.cluster_configurations(configs, **kw)
    return {f.key: f.verdict for f in lc.study_findings(configs, cl)}


def test_findings_on_the_four_planted_clusters(study):
    found = {f.key: f for f in lc.study_findings(study, lc.cluster_configurations(study))}
    a, b, c = (found[k] for k in ("cstates_coalescing_negligible", "poll_receiver_worse", "best_cluster_busy_poll"))
    assert a.verdict == lc.HELD and "coalescing: not testable, one supported value (unsupported)" in a.detail
    # with busy polling and need_wakeup on, poll() at the receiver changes nothing here: not always worse
    assert b.verdict == lc.NOT_HELD and "of 32 pairs" in b.detail
    # cluster 0 has poll() at the sender or forwarder in some members
    assert c.verdict == lc.NOT_HELD and "poll_" in c.detail
    json.dumps([f.to_dict() for f in found.values()], allow_nan=False)


def test_finding_a_cstates_and_coalescing():
    def rtt(k, c6=1.0):
        return 20_000 * (2 if k["poll_receiver"] else 1) * (c6 if k["cstate_limit"] == "C6" else 1)
    small = dict(SPACE, poll_sender=[False], poll_forwarder=[False], need_wakeup=[False])
    assert verdicts(planted(rtt, space=small), k=2)["cstates_coalescing_negligible"] == lc.HELD
    assert verdicts(planted(lambda k: rtt(k, 1.3), space=small), k=2)["cstates_coalescing_negligible"] == lc.NOT_HELD
    # coalescing supported and without effect, C-states not varied: held on coalescing alone
    coal = dict(small, cstate_limit=["C1"], coalescing=["off", "adaptive"])
    found = lc.study_findings(planted(rtt, space=coal), lc.cluster_configurations(planted(rtt, space=coal), k=2))
    assert found[0].verdict == lc.HELD and "cstate_limit: not testable" in found[0].detail
    none = dict(small, cstate_limit=["C1"])
    assert verdicts(planted(rtt, space=none), k=2)["cstates_coalescing_negligible"] == lc.NOT_TESTABLE


def test_finding_b_poll_at_the_receiver():
    def worse(k):
        return 20_000 * (1 + k["busy_poll"]) * (1.5 if k["poll_receiver"] else 1.0)
    assert verdicts(planted(worse), k=4)["poll_receiver_worse"] == lc.HELD

    def one_exception(k):
        better = k["busy_poll"] and k["need_wakeup"] and k["poll_sender"] and k["poll_forwarder"] \
            and k["cstate_limit"] == "C1"
        return worse(k) * (0.5 if better and k["poll_receiver"] else 1.0)
    f = lc.study_findings(planted(one_exception), lc.cluster_configurations(planted(one_exception), k=4))[1]
    assert f.verdict == lc.NOT_HELD and "poll() worse in 31 of 32 pairs" in f.detail
    assert verdicts(planted(worse, space=dict(SPACE, poll_receiver=[False])), k=4)["poll_receiver_worse"] \
        == lc.NOT_TESTABLE


def test_finding_c_the_best_cluster():
    def best(k):
        polls = k["poll_sender"] or k["poll_forwarder"] or k["poll_receiver"]
        return 10_000 if k["busy_poll"] and not k["need_wakeup"] and not polls else 40_000
    cfgs = planted(best)
    cl = lc.cluster_configurations(cfgs)
    assert cl.k == 2 and cl.clusters[0].always_present == {
        "busy_poll": True, "need_wakeup": False, "poll_sender": False, "poll_forwarder": False,
        "poll_receiver": False}
    assert lc.study_findings(cfgs, cl)[2].verdict == lc.HELD
    assert verdicts(planted(lambda k: 10_000 if k["busy_poll"] and k["need_wakeup"] else 40_000))[
        "best_cluster_busy_poll"] == lc.NOT_HELD
    assert verdicts(planted(best, space=dict(SPACE, busy_poll=[True])), k=2)["best_cluster_busy_poll"] \
        == lc.NOT_TESTABLE


# ---- figures ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def with_outliers():
    cfgs = planted(lambda k: MEDIANS_NS[four_clusters(k)] * (1.1 if k["poll_sender"] else 1.0), sigma=0.25,
                   stall=lambda k: k["need_wakeup"] and k["poll_forwarder"] and not k["busy_poll"]
                   and k["poll_receiver"], kernel_baseline=400_000)
    return cfgs, lc.cluster_configurations(cfgs)


LONG = "AF_XDP delays on veth, campaign afxdp-delays (64 configurations x 3 runs x 30 s, $HOME/results)"


@pytest.mark.slow
def test_figures_with_64_configurations_are_readable(with_outliers, tmp_path):
    cfgs, cl = with_outliers
    assert len(cfgs) == 64
    for fig in (lp.kde_figure(cfgs, cl, title=LONG), lp.hop_figure(cfgs, cl, title=LONG),
                lp.cluster_figure(cfgs, cl, title=LONG)):
        assert_no_tick_overlap(fig)
        assert_titles_fit(fig)
    paths = lp.plot_latency(cfgs, cl, tmp_path, title="campaign 3")
    assert [p.name for p in paths] == ["latency_kde.png", "latency_kde.svg", "latency_hops.png",
                                       "latency_hops.svg", "latency_clusters.png", "latency_clusters.svg"]
    assert all(p.stat().st_size > 0 for p in paths)


def test_figures_without_clusters_or_hop_stamps():
    rng = np.random.default_rng(0)
    runs = [lognormal_run(rng, 15_000, 0.2, 40, hops=False) for _ in range(3)]
    cfgs = [ls.config_stats({"busy_poll": bp}, runs if bp else [r[:1] for r in runs], n_resamples=50)
            for bp in (False, True)]
    for fig in (lp.kde_figure(cfgs), lp.hop_figure(cfgs)):
        assert_no_tick_overlap(fig)
    assert lp.short_labels(cfgs) == (["(all off)", "BP"], "BP = busy_poll on")


def test_real_captured_runs_cluster_and_plot():
    cfgs = ls.campaign_stats(captured(), send_interval_ns=INTERVAL_NS, n_resamples=200)
    cl = lc.cluster_configurations(cfgs)
    assert cl.k == 2 and set(cl.silhouette) == {2}
    fastest = cfgs[cl.clusters[0].members[0]]
    assert cl.clusters[0].members == (1,) and fastest.knobs["poll_receiver"] is True
    found = {f.key: f.verdict for f in lc.study_findings(cfgs, cl)}
    assert found["cstates_coalescing_negligible"] == lc.NOT_TESTABLE
    assert found["poll_receiver_worse"] == lc.NOT_TESTABLE  # poll() changed at all three roles at once
    assert found["best_cluster_busy_poll"] == lc.NOT_HELD   # here the poll() configuration is the fastest
    for fig in (lp.kde_figure(cfgs, cl), lp.hop_figure(cfgs, cl), lp.cluster_figure(cfgs, cl)):
        assert_no_tick_overlap(fig)
        assert_titles_fit(fig)
