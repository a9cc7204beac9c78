"""loss_stats (mean / std / t confidence interval, TIR) and saturation verdicts on hand-made sweeps."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from softnet.analysis.loss_stats import (MeanCI, RunPolicy, check_confidence, load_stats,
                                         summarize_sweep, t_critical)
from softnet.analysis.pastrami_files import TrialRow
from softnet.analysis.saturation import Verdict, analyze_rows, assess


def runs(load_pps, counts, duration_s=1.0):
    return [TrialRow(float(load_pps), i, tx, rx, float(duration_s)) for i, (tx, rx) in enumerate(counts)]


@pytest.mark.parametrize("n", [2, 3, 5, 30, 50])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_ci_matches_scipy_interval(n, confidence):
    rng = np.random.default_rng(1000 * n + int(confidence * 100))
    x = rng.lognormal(-6, 1.5, size=n)
    ci = MeanCI.of(x, confidence)
    lo, hi = stats.t.interval(confidence, n - 1, loc=x.mean(), scale=stats.sem(x))
    assert ci.n == n
    assert ci.mean == pytest.approx(np.mean(x), rel=1e-12)
    assert ci.std == pytest.approx(np.std(x, ddof=1), rel=1e-12)
    assert (ci.ci_lower, ci.ci_upper) == pytest.approx((lo, hi), rel=1e-10)


def test_k2_against_textbook_t_value():
    # t_{1, 0.975} = 12.706 in every printed t table: CI = 2 -+ 12.706 * sqrt(2)/sqrt(2).
    ci = MeanCI.of([1.0, 3.0])
    assert (ci.mean, ci.std) == pytest.approx((2.0, math.sqrt(2)))
    assert (ci.ci_lower, ci.ci_upper) == pytest.approx((2 - 12.706, 2 + 12.706), abs=1e-3)
    assert t_critical(0.95, 49) == pytest.approx(2.010, abs=1e-3)  # table row df = 49


def test_k1_and_k0_have_no_interval():
    one = MeanCI.of([0.25])
    assert one.n == 1 and one.mean == 0.25
    assert math.isnan(one.std) and math.isnan(one.ci_lower) and math.isnan(one.ci_upper)
    assert math.isnan(MeanCI.of([]).mean)


def test_zero_spread_gives_zero_width_interval():
    ci = MeanCI.of([0.01] * 4)
    assert ci.ci_lower == ci.ci_upper == pytest.approx(0.01)


@pytest.mark.parametrize("bad", [0, 1, 95, -0.1, 1.5])
def test_confidence_must_be_a_fraction(bad):
    with pytest.raises(ValueError, match="confidence"):
        check_confidence(bad)
    with pytest.raises(ValueError):
        MeanCI.of([1.0, 2.0], bad)


def test_load_stats_by_hand():
    # 10 s at 100 pps; losses 10 and 0 packets, one run over-counts by 2 (clamped).
    s = load_stats(runs(100, [(1000, 990), (1000, 1000), (1000, 1002)], duration_s=10))
    assert s.n_runs == 3 and s.n_rx_clamped == 1
    assert s.plr_ratio.mean == pytest.approx(0.01 / 3)
    assert s.dr_ratio.mean == pytest.approx(1 - 0.01 / 3)
    assert s.throughput_pps.mean == pytest.approx((99 + 100 + 100) / 3)
    assert s.plr_ratio.std == pytest.approx(np.std([0.01, 0, 0], ddof=1))
    # Delta UCL95 = t * s / sqrt(K) / PLR, with the table value t_{2, 0.975} = 4.303.
    expected = 4.303 * np.std([0.01, 0, 0], ddof=1) / math.sqrt(3) / (0.01 / 3)
    assert s.plr_delta_ucl == pytest.approx(expected, rel=1e-3)


def test_delta_ucl_undefined_without_loss():
    s = load_stats(runs(100, [(100, 100), (100, 100)]))
    assert s.plr_ratio.mean == 0 and math.isnan(s.plr_delta_ucl)


def test_load_stats_refuses_tx_zero_and_mixed_loads():
    with pytest.raises(ValueError, match="tx_pkts == 0"):
        load_stats(runs(100, [(0, 0), (100, 100)]))
    with pytest.raises(ValueError, match="mix"):
        load_stats(runs(100, [(100, 100)]) + runs(200, [(200, 200)]))


def test_sweep_sorts_loads_and_computes_tir():
    rows = runs(200, [(200, 150), (200, 150)]) + runs(100, [(100, 100), (100, 100)])
    sw = summarize_sweep(rows)
    assert [s.load_pps for s in sw.loads] == [100.0, 200.0]
    (step,) = sw.tir_steps
    assert (step.from_load_pps, step.to_load_pps, step.tir) == (100.0, 200.0, pytest.approx(0.5))


def test_exclusions_with_reasons_and_empty_load():
    rows = (runs(100, [(100, 100), (100, 100), (50, 50)])                 # generator-limited run
            + runs(200, [(200, 190), (200, 190), (250, 200), (200, 260)])  # overshoot, rx >> tx
            + runs(300, [(10, 10), (10, 10)])                             # every run limited
            + runs(400, [(400, 300), (400, 300)]))
    sw = summarize_sweep(rows)
    assert sorted((e.load_pps, e.run_index, e.reason) for e in sw.excluded) == [
        (100.0, 2, "generator_limited"), (200.0, 2, "generator_overshoot"),
        (200.0, 3, "counters_inconsistent"), (300.0, 0, "generator_limited"), (300.0, 1, "generator_limited")]
    assert sw.empty_loads_pps == [300.0]
    assert [s.load_pps for s in sw.loads] == [100.0, 200.0, 400.0]
    assert [s.n_excluded for s in sw.loads] == [1, 2, 0]
    assert sw.tir_steps[1].from_load_pps == 200.0 and sw.tir_steps[1].to_load_pps == 400.0
    rep = assess(sw)
    (flag,) = [f for f in rep.flags if f.kind == "excluded_runs"]
    assert flag.count == 5
    assert "3 generator_limited" in flag.message and "300 pps" in flag.message
    # A looser policy keeps the overshooting run.
    loose = summarize_sweep(rows, policy=RunPolicy(generator_tolerance=0.5))
    assert "generator_overshoot" not in {e.reason for e in loose.excluded}


def test_to_dict_is_strict_json_with_k1():
    a = analyze_rows(runs(100, [(100, 99)]) + runs(200, [(200, 100)]))
    text = json.dumps(a.to_dict(), allow_nan=False)
    d = json.loads(text)
    assert d["stats"]["loads"][0]["plr_ratio"]["ci_lower"] is None
    assert d["report"]["verdict"] in {"GOOD", "BAD", "INCONCLUSIVE", "NO-SATURATION"}
    assert any(f["kind"] == "single_run" for f in d["report"]["flags"])


# --- verdicts on sweeps whose PLR/TIR are known by construction -----------------

def sweep(points, k=2, duration_s=1.0):
    """points: [(load_pps, rx per run)] with tx = load * duration for every run."""
    rows = []
    for load, rx in points:
        tx = int(load * duration_s)
        rows += runs(load, [(tx, rx)] * k, duration_s)
    return summarize_sweep(rows)


def test_good_verdict_names_pdr_point():
    # zero loss to 2000 pps, then throughput flat at 2000 pps (TIR 0).
    r = assess(sweep([(1000, 1000), (2000, 2000), (3000, 2000), (4000, 2000)]))
    assert r.verdict is Verdict.GOOD
    assert (r.pdr_point_load_pps, r.pdr_load_pps, r.ndr_load_pps) == (3000.0, 2000.0, 2000.0)
    assert "3 kpps" in r.reason and r.violations == []
    assert r.saturation_load_pps == 3000.0


def test_bad_verdict_names_the_step():
    # PLR 1% at 2000 pps but throughput keeps growing by 50% of the extra load.
    r = assess(sweep([(1000, 1000), (2000, 1980), (3000, 2480), (4000, 2480)]))
    assert r.verdict is Verdict.BAD
    assert r.violations[0].from_load_pps == 2000.0 and r.violations[0].to_load_pps == 3000.0
    assert "between 2 kpps and 3 kpps" in r.reason
    assert r.saturation_load_pps == 3000.0  # TIR 0 from 3000 to 4000 pps
    # Throughput still growing on the last step: no saturation onset seen.
    r = assess(sweep([(1000, 1000), (2000, 1980), (3000, 2480), (4000, 2980)]))
    assert r.verdict is Verdict.BAD and r.saturation_load_pps is None
    assert len(r.violations) == 2 and "last step" in r.reason


def test_inconclusive_and_no_saturation():
    r = assess(sweep([(1000, 1000), (2000, 2000), (3000, 2000)]))
    assert r.verdict is Verdict.INCONCLUSIVE and "3 kpps" in r.reason
    r = assess(sweep([(1000, 1000), (2000, 1995)]))  # 0.25% < 0.5%
    assert r.verdict is Verdict.NO_SATURATION and "2 kpps" in r.reason
    assert r.pdr_load_pps is None and r.ndr_load_pps == 1000.0


def test_ties_plr_equal_to_x_and_tir_equal_to_eta():
    # PLR exactly 0.5% does not exceed 0.5% (PDR requires DR >= 99.5%).
    r = assess(sweep([(1000, 995), (2000, 1000), (3000, 1000)]))
    assert r.pdr_point_load_pps == 2000.0 and r.pdr_load_pps == 1000.0
    # TIR exactly eta = 0.1 (900 -> 1000 pps over +1000 pps) is not below eta: BAD.
    r = assess(sweep([(1000, 900), (2000, 1000)]))
    assert r.steps_checked[0].tir == 0.1 and r.verdict is Verdict.BAD
    # A larger X or eta changes the outcome as the definitions say.
    assert assess(sweep([(1000, 900), (2000, 1000)]), eta=0.11).verdict is Verdict.GOOD
    assert assess(sweep([(1000, 900), (2000, 1000)]), pdr_loss_ratio=0.5).verdict is Verdict.NO_SATURATION


def test_ndr_is_highest_zero_loss_load_below_pdr_point():
    r = assess(sweep([(1000, 1000), (2000, 1999), (3000, 3000), (4000, 3000), (5000, 3000)]))
    assert r.pdr_point_load_pps == 4000.0 and r.ndr_load_pps == 3000.0


def test_low_load_loss_and_inversion_flags():
    # 2% loss at the lowest load, none at the next: both flags, PDR point is the first load.
    sw = summarize_sweep(runs(1000, [(1000, 970), (1000, 990)]) + runs(2000, [(2000, 2000)] * 2)
                         + runs(3000, [(3000, 2000)] * 2))
    r = assess(sw)
    kinds = {f.kind: f for f in r.flags}
    assert kinds["low_load_loss"].loads_pps == [1000.0] and "sets the PDR point" in kinds["low_load_loss"].message
    # LCL at 1000 pps: 0.02 - 12.706 * 0.01414 / sqrt(2) < 0, so 0% at 2000 pps is not an inversion.
    assert "loss_inversion" not in kinds
    # With a tight spread the same drop is significant.
    sw = summarize_sweep(runs(1000, [(1000, 980), (1000, 981), (1000, 979)]) + runs(2000, [(2000, 2000)] * 3))
    (inv,) = [f for f in assess(sw).flags if f.kind == "loss_inversion"]
    assert inv.loads_pps == [1000.0, 2000.0] and "1 kpps" in inv.message and "2 kpps" in inv.message
    # Loss below the 1e-6 floor at the lowest load is not flagged.
    quiet = summarize_sweep(runs(10**6, [(10**7, 10**7 - 1)] * 2, duration_s=10))
    assert not [f for f in assess(quiet).flags if f.kind == "low_load_loss"]


def test_pdr_threshold_validated():
    with pytest.raises(ValueError, match="fraction"):
        assess(sweep([(1000, 1000)]), pdr_loss_ratio=0.5 * 100)
