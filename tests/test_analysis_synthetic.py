"""Synthetic SUT (PASTRAMI eq. 3-5) and recovery of known saturation points."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from softnet.analysis.saturation import Verdict, analyze_rows, format_load
from softnet.analysis.synthetic import LoadLossModel, simulate_sweep

GRID = [i * 100_000.0 for i in range(1, 21)]  # 0.1 .. 2.0 Mpps


def test_equations_fig4_parameters():
    # Fig. 4: O^sat = 1 Mpps, PLR(O^sat) = 1%, O^trash = 1.5 Mpps, M = 1 Mpps.
    m = LoadLossModel(o_sat_pps=1e6, plr_at_sat=0.01, o_trash_pps=1.5e6, m_pps=1e6)
    assert m.t_sat_pps == pytest.approx(0.99e6)
    assert m.throughput_pps(1.2e6) == pytest.approx(0.99e6)             # eq. 4 with f = 1
    assert m.plr(1.2e6) == pytest.approx(1 - 0.99e6 / 1.2e6)           # eq. 3
    assert m.throughput_pps(2.0e6) == pytest.approx(0.99e6 * 0.5)       # eq. 5: 1 - 0.5/1
    assert m.throughput_pps(3.0e6) == 0.0                               # max(0, .)
    assert m.throughput_pps(1e6) == pytest.approx(0.99e6)               # continuous at O^sat
    assert m.plr(0.5e6) < m.plr(0.9e6) < 0.01                           # loss grows towards O^sat


def test_ideal_model_has_no_loss_below_saturation():
    m = LoadLossModel(o_sat_pps=1e6, noise=False)
    assert m.plr(0.999e6) == 0.0 and m(0.5e6, 10, None) == (5_000_000, 5_000_000)
    assert m(2e6, 10, None) == (20_000_000, 10_000_000)


def test_binomial_noise_is_seeded_and_unbiased():
    m = LoadLossModel(o_sat_pps=1e6)
    a = [m(1.25e6, 1, np.random.default_rng(7)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    rng = np.random.default_rng(8)
    rx = np.array([m(1.25e6, 1, rng)[1] for _ in range(400)])
    # E[rx] = tx * DR = 1e6; std of the mean = sqrt(tx p (1-p) / 400) = 22.4 packets.
    assert abs(rx.mean() - 1e6) < 5 * math.sqrt(1.25e6 * 0.8 * 0.2 / 400)
    assert rx.std() > 0
    with pytest.raises(ValueError, match="Generator"):
        m(1.25e6, 1, None)


@pytest.mark.parametrize("bad", [dict(o_sat_pps=0), dict(o_sat_pps=1e6, plr_at_sat=1.0),
                                 dict(o_sat_pps=1e6, o_trash_pps=0.5e6), dict(o_sat_pps=1e6, m_pps=0)])
def test_parameters_validated(bad):
    with pytest.raises(ValueError):
        LoadLossModel(**bad)


def expected_pdr_point(model, grid, x=0.005):
    """From eq. 3: PLR(O) = 1 - T^sat/O > x  <=>  O > T^sat / (1 - x) (above O^sat)."""
    return min(o for o in grid if o > model.o_sat_pps and o > model.t_sat_pps / (1 - x))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("o_sat", [0.55e6, 1.0e6, 1.097e6, 1.73e6])
def test_known_saturation_point_recovered(o_sat, seed):
    model = LoadLossModel(o_sat_pps=o_sat, plr_at_sat=0.001)  # 0.1% < 0.5% at O^sat
    rows = simulate_sweep(model, GRID, runs=10, duration_s=10, rng=np.random.default_rng(seed))
    a = analyze_rows(rows)
    r = a.report
    point = expected_pdr_point(model, GRID)
    assert r.verdict is Verdict.GOOD, r.reason
    assert r.pdr_point_load_pps == point
    # Where eq. 3 crosses 0.5% loss: O* = T^sat / (1 - x), within 0.5% of O^sat.
    o_star = model.t_sat_pps / (1 - 0.005)
    assert abs(o_star - o_sat) <= 0.005 * o_sat
    assert r.pdr_load_pps <= o_star < r.pdr_point_load_pps  # bracketed by adjacent grid loads
    assert r.pdr_point_load_pps - r.pdr_load_pps == pytest.approx(100_000)
    assert format_load(point) in r.reason
    json.dumps(a.to_dict(), allow_nan=False)


def test_ideal_model_ndr_and_pdr_equal_saturation_on_grid():
    model = LoadLossModel(o_sat_pps=1.2e6)
    r = analyze_rows(simulate_sweep(model, GRID, runs=5, duration_s=10, rng=np.random.default_rng(0))).report
    assert (r.pdr_load_pps, r.ndr_load_pps, r.pdr_point_load_pps) == (1.2e6, 1.2e6, 1.3e6)
    assert r.flags == []


def test_thrashing_tir_equals_slope_of_eq5():
    model = LoadLossModel(o_sat_pps=1e6, plr_at_sat=0.001, o_trash_pps=1.5e6, m_pps=1e6)
    a = analyze_rows(simulate_sweep(model, GRID, runs=10, duration_s=10, rng=np.random.default_rng(4)))
    assert a.report.verdict is Verdict.GOOD
    # Between loads >= O^trash, dT/dO = -T^sat / M (eq. 5).
    steps = [s for s in a.stats.tir_steps if s.from_load_pps >= 1.5e6]
    assert len(steps) == 5
    for s in steps:
        assert s.tir == pytest.approx(-model.t_sat_pps / model.m_pps, abs=0.01)


def test_fig4_realistic_curve_pdr_falls_below_saturation():
    # PLR(O^sat) = 1% > 0.5%: PDR@0.5% is reached before O^sat (the paper's warning).
    model = LoadLossModel(o_sat_pps=1e6, plr_at_sat=0.01, o_trash_pps=1.5e6, m_pps=1e6)
    r = analyze_rows(simulate_sweep(model, GRID, runs=10, duration_s=10, rng=np.random.default_rng(5))).report
    assert r.pdr_point_load_pps <= 1e6
    assert model.plr(r.pdr_point_load_pps) > 0.005 >= model.plr(r.pdr_load_pps)


def test_gradual_loss_is_bad_at_the_expected_step():
    # Fig. 6(b)-like: loss creeps up long before saturation, throughput keeps growing.
    model = LoadLossModel(o_sat_pps=1.5e6, plr_at_sat=0.05, pre_sat_exponent=2)
    r = analyze_rows(simulate_sweep(model, GRID, runs=10, duration_s=10, rng=np.random.default_rng(6))).report
    point = min(o for o in GRID if model.plr(o) > 0.005)
    tir = [(b, (model.throughput_pps(b) - model.throughput_pps(a)) / (b - a))
           for a, b in zip(GRID, GRID[1:]) if a >= point]
    first_bad = next(b for b, t in tir if t >= 0.1)
    assert r.pdr_point_load_pps == point
    assert r.verdict is Verdict.BAD
    assert r.violations[0].to_load_pps == first_bad
    assert format_load(r.violations[0].from_load_pps) in r.reason


def test_inconclusive_and_no_saturation_grids():
    model = LoadLossModel(o_sat_pps=1e6)
    rng = np.random.default_rng(9)
    r = analyze_rows(simulate_sweep(model, GRID[:11], runs=5, duration_s=10, rng=rng)).report
    assert r.verdict is Verdict.INCONCLUSIVE and r.pdr_point_load_pps == 1.1e6
    r = analyze_rows(simulate_sweep(model, GRID[:10], runs=5, duration_s=10, rng=rng)).report
    assert r.verdict is Verdict.NO_SATURATION and r.pdr_load_pps is None


def test_generator_limited_runs_are_excluded():
    model = LoadLossModel(o_sat_pps=1e6)

    def weak_generator(load, duration, rng):  # cannot send more than 1.5 Mpps
        tx, rx = model(min(load, 1.5e6), duration, rng)
        return tx, rx

    a = analyze_rows(simulate_sweep(weak_generator, GRID, runs=4, duration_s=10, rng=np.random.default_rng(1)))
    assert a.stats.empty_loads_pps == GRID[15:]  # 1.6 .. 2.0 Mpps never applied
    assert {e.reason for e in a.stats.excluded} == {"generator_limited"} and len(a.stats.excluded) == 20
    assert a.report.verdict is Verdict.GOOD
    (flag,) = [f for f in a.report.flags if f.kind == "excluded_runs"]
    assert flag.count == 20 and "1.6 Mpps" in flag.message


def test_pre_sat_exponent_from_the_spec_shapes_the_loss_below_saturation(tmp_path):
    """[synthetic] pre_sat_exponent reaches the model: at half the saturation
    load the loss ratio is plr_at_sat x 0.5 ** exponent (no noise)."""
    from softnet.campaign.measurers import SyntheticMeasurer
    from softnet.campaign.spec import load_spec

    losses = {}
    for k in (2, 8):
        (tmp_path / "s.toml").write_text(f'name = "s"\n[testbed]\nsut = "synthetic"\n[method]\nloads = ["250kpps"]\n'
                                         f'[synthetic]\no_sat_pps = 500000\nplr_at_sat = 0.1\npre_sat_exponent = {k}\n'
                                         'noise = false\n')
        r = SyntheticMeasurer(load_spec(tmp_path / "s.toml"), 0).measure(250_000, 0, 0)
        losses[k] = r["lost_pkts"] / r["sent_pkts"]
    assert losses[2] == pytest.approx(0.1 * 0.5 ** 2, rel=1e-3) and losses[8] == pytest.approx(0.1 * 0.5 ** 8, rel=1e-2)


def test_the_report_draws_the_model_and_the_measured_means(tmp_path):
    """A sweep of the paper's Fig. 4 model (O^sat 1 Mpps, 1% at saturation,
    O^trash 1.5 Mpps, M 1 Mpps): the curve is eq. 3-5, the ideal one Fig. 3's,
    and each measured mean lies on the model within its binomial noise; the
    report has the figure."""
    from softnet.analysis.synthetic import model_curve
    from softnet.campaign.runner import run_campaign
    from softnet.campaign.spec import load_spec
    from softnet.report.html import synthetic_curve, write_report
    from softnet.results import readers

    (tmp_path / "s.toml").write_text(
        'name = "fig4"\n[testbed]\nsut = "synthetic"\n[synthetic]\no_sat_pps = 1000000\nplr_at_sat = 0.01\n'
        'o_trash_pps = 1500000\nm_pps = 1000000\n[method]\nloads = ["400kpps", "1Mpps", "1.2Mpps", "1.8Mpps"]\n'
        'runs = 3\nduration_s = 1\n')
    cid = run_campaign(load_spec(tmp_path / "s.toml"), tmp_path / "r")
    with readers.open_results(tmp_path / "r") as store:
        (cell,) = readers.sweep_cells(store, [cid])
    curve = synthetic_curve("fig4", cell)
    model = LoadLossModel(o_sat_pps=1e6, plr_at_sat=0.01, o_trash_pps=1.5e6, m_pps=1e6)
    for o, plr in curve.measured:
        n = 3 * o  # packets over the three 1 s runs
        assert abs(plr - model.plr(o)) <= 5 * math.sqrt(max(model.plr(o), 1 / n) / n), (o, plr)
    i = curve.loads_pps.index(min(curve.loads_pps, key=lambda x: abs(x - 1.8e6)))
    assert curve.plr[i] == pytest.approx(model.plr(curve.loads_pps[i]))
    assert curve.ideal_plr[i] == pytest.approx(1 - 1e6 / curve.loads_pps[i])
    assert curve == model_curve("fig4", model, curve.measured)
    html = write_report(tmp_path / "r", tmp_path / "r.html").read_text()
    assert "The synthetic SUT's model (PASTRAMI Figs. 3-5)" in html
