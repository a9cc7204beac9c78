"""Round-trip statistics of the AF_XDP delay study (softnet/analysis/latency_stats.py):
against numpy on known inputs, accounting, outlier rules, percentile CIs, hop breakdown."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from softnet.analysis import latency_stats as ls
from softnet.results.latency import (
    FLAG_DUPLICATE, FLAG_IMPOSSIBLE, FLAG_RECEIVED, FLAG_REORDERED, HOPS, RECORD_DTYPE, read_records,
)

INTERVAL_NS = 1_000_000
# where each hop stamp sits in the round trip, as a fraction of the RTT (HOPS order)
HOP_FRACTIONS = np.array([0.10, 0.15, 0.20, 0.30, 0.35, 0.40, 0.55, 0.60, 0.65, 0.90])
DATA = Path(__file__).parent / "data" / "latency"


def make_run(rtt_ns, *, interval_ns: int = INTERVAL_NS, start_ns: int = 10**9, seq0: int = 0,
             hops: bool = True) -> np.ndarray:
    """Records of a run where every packet came back after ``rtt_ns``, hop stamps at HOP_FRACTIONS."""
    rtt = np.asarray(rtt_ns, dtype=np.int64)
    r = np.zeros(rtt.size, RECORD_DTYPE)
    r["seq"] = seq0 + np.arange(rtt.size)
    r["t0_ns"] = start_ns + np.arange(rtt.size) * interval_ns
    r["t3_ns"] = r["t0_ns"] + rtt
    if hops:
        r["hop_ns"] = r["t0_ns"][:, None] + (rtt[:, None] * HOP_FRACTIONS).astype(np.int64)
    r["flags"] = FLAG_RECEIVED
    return r


def lognormal_run(rng, median_ns: float, sigma: float, n: int, **kw) -> np.ndarray:
    return make_run(np.maximum(rng.lognormal(math.log(median_ns), sigma, n), 200).astype(np.int64), **kw)


def lose(r: np.ndarray, i: int) -> None:
    r["t3_ns"][i] = 0
    r["hop_ns"][i, 3:] = 0  # it died at C
    r["flags"][i] = 0


# ---- one run ------------------------------------------------------------------

def test_run_statistics_match_numpy():
    rtt = np.random.default_rng(3).integers(5_000, 80_000, 1001)
    s = ls.run_stats(make_run(rtt), "r")
    x = rtt.astype(float)
    assert s.rtt.n == 1001 and s.received == 1001 and s.lost == s.impossible == 0
    assert s.rtt.mean_ns == pytest.approx(x.mean())
    assert s.rtt.median_ns == np.median(x)
    assert s.rtt.std_ns == pytest.approx(x.std(ddof=1))
    assert (s.rtt.q1_ns, s.rtt.q3_ns) == tuple(np.percentile(x, [25, 75]))
    assert (s.rtt.min_ns, s.rtt.max_ns) == (x.min(), x.max())
    assert (s.rtt.p90_ns, s.rtt.p99_ns, s.rtt.p999_ns) == tuple(np.percentile(x, [90, 99, 99.9]))
    np.testing.assert_array_equal(s.rtt_ns, rtt)


def test_a_percentile_needs_a_round_trip_beyond_it():
    """p90 from 10 round trips, p99 from 100, p99.9 from 1,000: below that
    no sample lies beyond the percentile, and none is given."""
    rtt = np.arange(1, 1001) * 1000
    for n, given in ((9, ()), (10, ("p90_ns",)), (99, ("p90_ns",)), (100, ("p90_ns", "p99_ns")),
                     (999, ("p90_ns", "p99_ns")), (1000, ls.TAIL)):
        s = ls.RttSummary.of(rtt[:n])
        assert {k for k in ls.TAIL if not math.isnan(getattr(s, k))} == set(given), n
    est = ls.percentile_cis(rtt[:99], ls.PERCENTILES, n_resamples=50)
    assert math.isnan(est["p99"].value_ns) and est["p99"].method == "too_few" and est["p99"].n == 99
    assert est["p90"].value_ns == np.percentile(rtt[:99], 90)


def test_lost_and_impossible_are_counted_never_used():
    rtt = np.arange(1, 101) * 1000
    r = make_run(rtt)
    for i in (3, 50):
        lose(r, i)
    r["flags"][10] |= FLAG_IMPOSSIBLE                    # the tool saw it
    r["hop_ns"][20, 4] = r["hop_ns"][20, 3] - 1          # C read it before its XDP hook: the tool missed it
    r["t3_ns"][30] = r["t0_ns"][30] - 5                  # a negative RTT, unflagged
    s = ls.run_stats(r, "r")
    assert (s.sent, s.received, s.lost, s.impossible, s.unflagged_impossible) == (100, 95, 2, 3, 2)
    assert s.received + s.lost + s.impossible == s.sent
    keep = np.setdiff1d(np.arange(100), [3, 50, 10, 20, 30])
    np.testing.assert_array_equal(s.rtt_ns, rtt[keep])
    assert s.rtt.min_ns > 0 and s.rtt.mean_ns == pytest.approx(rtt[keep].mean())


def test_duplicates_and_reordering_are_counted_and_kept():
    r = make_run(np.full(10, 20_000))
    r["flags"][2] |= FLAG_DUPLICATE
    r["flags"][[4, 5]] |= FLAG_REORDERED
    s = ls.run_stats(r, "r")
    assert (s.duplicates, s.reordered, s.received) == (1, 2, 10)


def _gap(r):
    r["seq"][5:] += 2


def _dup_seq(r):
    r["seq"][7] = r["seq"][6]


def _flag_without_t3(r):
    r["t3_ns"][4] = 0


def _t3_without_flag(r):
    r["flags"][4] = 0


def _no_t0(r):
    r["t0_ns"][8] = 0


def _orphan_duplicate(r):
    lose(r, 2)
    r["flags"][2] = FLAG_DUPLICATE


@pytest.mark.parametrize("corrupt, words", [
    (_gap, "2 missing (first: 5)"), (_dup_seq, "sequence number 6 has more than one record"),
    (_flag_without_t3, "sequence number 4: the reply flag and the reply time disagree"),
    (_t3_without_flag, "sequence number 4: the reply flag"), (_no_t0, "sequence number 8 has no send time"),
    (_orphan_duplicate, "sequence number 2 is flagged duplicate or reordered but has no reply"),
])
def test_accounting_errors_name_the_run(corrupt, words):
    r = make_run(np.full(20, 10_000))
    corrupt(r)
    with pytest.raises(ls.AccountingError) as e:
        ls.run_stats(r, "cfg 7 run 2")
    assert str(e.value).startswith("cfg 7 run 2: ") and words in str(e.value)


def test_accounting_against_the_tools_sent_count():
    r = make_run(np.full(20, 10_000))
    assert ls.run_stats(r, "x", sent=20).sent == 20
    with pytest.raises(ls.AccountingError, match="x: the tool sent 22 packets but 20 records are here: 2"):
        ls.run_stats(r, "x", sent=22)


def test_config_stats_name_the_failing_run():
    good, bad = make_run(np.full(10, 1000)), make_run(np.full(10, 1000))
    _gap(bad)
    with pytest.raises(ls.AccountingError, match=r"^busy_poll=true run 1: "):
        ls.config_stats({"busy_poll": True}, [good, bad, good])


def test_records_of_another_dtype_are_refused():
    with pytest.raises(ValueError, match="RECORD_DTYPE"):
        ls.run_stats(np.zeros(3, dtype=[("seq", "<u8")]), "r")


def test_empty_run():
    s = ls.run_stats(make_run([]), "r", sent=0)
    assert s.sent == s.received == 0 and math.isnan(s.rtt.mean_ns)


# ---- one configuration -------------------------------------------------------------

def test_seven_statistics_are_averaged_over_runs():
    rng = np.random.default_rng(5)
    runs = [lognormal_run(rng, m, 0.3, 300) for m in (10_000, 12_000, 14_000)]
    c = ls.config_stats({"busy_poll": True}, runs, n_resamples=300)
    per_run = [ls.run_stats(r) for r in runs]
    for k in ls.SEVEN + ls.TAIL:
        assert c.averaged[k] == pytest.approx(np.mean([getattr(s.rtt, k) for s in per_run]), nan_ok=True), k
    assert math.isnan(c.averaged["p999_ns"])  # 300 round trips per run: none lies beyond a p99.9
    assert c.mean_ns == c.averaged["mean_ns"] and c.median_ns == c.averaged["median_ns"]
    pooled = np.concatenate([s.rtt_ns for s in per_run]).astype(float)
    for name, q in ls.PERCENTILES.items():
        if name != "p99.9":  # 900 pooled: none beyond it
            assert c.percentiles[name].value_ns == pytest.approx(np.percentile(pooled, q))
    assert math.isnan(c.percentiles["p99.9"].value_ns)
    assert c.accounting == {"sent": 900, "received": 900, "lost": 0, "impossible": 0, "duplicates": 0,
                            "reordered": 0}
    assert c.flags == ()
    json.dumps(c.to_dict(), allow_nan=False)


def test_percentile_confidence_intervals_are_seeded_and_cover():
    rng = np.random.default_rng(8)
    x = rng.lognormal(10, 0.5, 2000)
    a = ls.percentile_cis(x, ls.PERCENTILES, seed=1, n_resamples=500)
    assert a == ls.percentile_cis(x, ls.PERCENTILES, seed=1, n_resamples=500)
    assert a["p50"] != ls.percentile_cis(x, ls.PERCENTILES, seed=2, n_resamples=500)["p50"]
    for name in ("p50", "p90", "p99"):
        e = a[name]
        assert e.method == "resample" and e.ci_low_ns < e.value_ns < e.ci_high_ns
    # p99.9 of 2000 packets: 2 beyond it, too few for an interval
    assert a["p99.9"].method == "too_few" and math.isnan(a["p99.9"].ci_low_ns)


def test_exact_bootstrap_agrees_with_resampling_and_theory(monkeypatch):
    """Above RESAMPLE_MAX_N the CI of a percentile is the exact bootstrap
    distribution of the order statistic: it must agree with resampling and,
    for the median of U(0,1), with the normal approximation."""
    n = 8000
    x = np.random.default_rng(2).uniform(0, 1, n)
    exact = ls.percentile_ci(x, 50)
    assert exact.method == "exact" and exact.value_ns == np.sort(x)[n // 2 - 1]
    half = 1.96 * math.sqrt(0.25 / n)
    assert exact.ci_low_ns == pytest.approx(exact.value_ns - half, abs=0.003)
    assert exact.ci_high_ns == pytest.approx(exact.value_ns + half, abs=0.003)
    monkeypatch.setattr(ls, "RESAMPLE_MAX_N", 10**9)
    resampled = ls.percentile_ci(x, 50, n_resamples=1000)
    assert resampled.method == "resample"
    assert resampled.ci_low_ns == pytest.approx(exact.ci_low_ns, abs=0.002)
    assert resampled.ci_high_ns == pytest.approx(exact.ci_high_ns, abs=0.002)


def test_few_runs_and_no_rtt_are_flagged():
    one = ls.config_stats({"k": 1}, [make_run(np.full(10, 5000))], n_resamples=50)
    assert one.flags == ("few_runs",)
    lost = make_run(np.full(4, 5000))
    for i in range(4):
        lose(lost, i)
    none = ls.config_stats({"k": 2}, [lost] * 3, n_resamples=50)
    assert none.flags == ("no_rtt",) and math.isnan(none.median_ns) and none.accounting["lost"] == 12
    json.dumps(none.to_dict(), allow_nan=False)


def test_the_same_configuration_twice_is_an_error():
    runs = [make_run(np.full(5, 1000))] * 3
    with pytest.raises(ValueError, match="appears twice"):
        ls.campaign_stats([({"a": 1, "b": 2}, runs), ({"b": 2, "a": 1}, runs)], n_resamples=50)


# ---- outlier rules ---------------------------------------------------------------

def _config(rtt_ns, **kw):
    return ls.config_stats({"k": 1}, [make_run(rtt_ns)] * 3, n_resamples=50, **kw)


def test_worse_than_kernel_baseline_as_a_number_or_a_run_of_pings():
    rtt = np.full(50, 40_000)
    assert "worse_than_kernel" in _config(rtt, kernel_baseline=30_000).flags
    assert "worse_than_kernel" not in _config(rtt, kernel_baseline=50_000).flags
    pings = np.array([20_000, 35_000, 36_000, 90_000, 1_000_000])  # median 36 us
    c = _config(rtt, kernel_baseline=pings)
    assert c.flags == ("worse_than_kernel",) and "36 us" in c.reasons["worse_than_kernel"]
    assert _config(np.full(50, 30_000), kernel_baseline=pings).flags == ()
    with pytest.raises(ValueError, match="empty"):
        _config(rtt, kernel_baseline=[])
    with pytest.raises(ValueError, match="positive"):
        _config(rtt, kernel_baseline=0)


def test_stalled_by_median_or_by_a_mode_at_the_interval():
    near = np.full(50, int(0.93 * INTERVAL_NS))
    assert _config(near, send_interval_ns=INTERVAL_NS).flags == ("stalled",)
    assert _config(np.full(50, int(0.85 * INTERVAL_NS)), send_interval_ns=INTERVAL_NS).flags == ()
    # median 20 us, but 30% of the packets waited for the next send: a mode at the interval
    mode = np.r_[np.full(35, 20_000), np.full(15, INTERVAL_NS + 3_000)]
    c = _config(mode, send_interval_ns=INTERVAL_NS)
    assert c.flags == ("stalled",) and "30% of the packets" in c.reasons["stalled"]
    fewer = np.r_[np.full(40, 20_000), np.full(10, INTERVAL_NS)]  # 20%: below STALL_SHARE
    assert _config(fewer, send_interval_ns=INTERVAL_NS).flags == ()
    assert _config(near).flags == ()  # no interval given: the rule is not applied


# ---- per-hop breakdown ----------------------------------------------------------

def test_hop_segments_add_up_to_the_rtt():
    rtt = np.random.default_rng(1).integers(10_000, 30_000, 500)
    c = ls.config_stats({"k": 1}, [make_run(rtt)] * 3, n_resamples=50)
    bd = c.breakdown
    assert [s.name for s in bd.segments] == [s[0] for s in ls.SEGMENTS]
    assert bd.n_packets == 1500 and bd.n_left_out == 0
    assert sum(s.mean_ns for s in bd.segments) == pytest.approx(bd.rtt_mean_ns) == pytest.approx(rtt.mean())
    cut = [0.0] + [HOP_FRACTIONS[HOPS.index(b)] for b in ls.BOUNDARIES] + [1.0]
    for s, lo, hi in zip(bd.segments, cut, cut[1:]):
        assert s.mean_ns == pytest.approx((hi - lo) * rtt.mean(), abs=1.0), s.name


def test_a_missing_stamp_merges_its_segments():
    r = make_run(np.full(100, 20_000))
    r["hop_ns"][:, HOPS.index("b_user_rx_fwd")] = 0   # B's userspace read never stamped
    r["hop_ns"][:3, HOPS.index("c_xdp_rx")] = 0        # C's hook missed on 3 packets
    bd = ls.hop_breakdown([ls.run_stats(r)])
    assert [s.name for s in bd.segments] == ["a_send", "b_xdp_to_user+b_transmit", "c_reflect", "return",
                                              "a_receive"]
    assert (bd.n_packets, bd.n_left_out) == (97, 3)
    assert sum(s.mean_ns for s in bd.segments) == pytest.approx(20_000)


def test_no_hop_stamps_no_breakdown():
    bd = ls.hop_breakdown([ls.run_stats(make_run(np.full(10, 9000), hops=False))])
    assert bd.segments == () and bd.n_left_out == 10


# ---- captured per-packet data ------------------------------------------------------

def captured() -> list[tuple[dict, list[np.ndarray]]]:
    """(knobs, runs) of the real runs in tests/data/latency (configs.json says how they were taken)."""
    meta = json.loads((DATA / "configs.json").read_text())
    return [(c["knobs"], [read_records(p) for p in sorted(DATA.glob(f"{name}_run*.bin"))])
            for name, c in meta["configs"].items()]


def test_captured_runs_read_and_account():
    items = captured()
    assert [len(runs) for _, runs in items] == [3, 3, 3]
    configs = ls.campaign_stats(items, send_interval_ns=INTERVAL_NS, n_resamples=200)
    for c in configs:
        assert c.accounting["sent"] == 900
        assert c.accounting["received"] + c.accounting["lost"] + c.accounting["impossible"] == 900
        assert all(r.sent == 300 for r in c.runs)
        assert 0 < c.averaged["min_ns"] <= c.median_ns <= c.averaged["max_ns"] < 1e9
        p = c.percentiles["p90"]
        assert p.method == "resample" and p.ci_low_ns <= p.value_ns <= p.ci_high_ns
        # only A's XDP hook is stamped in these runs: two segments, merged before it
        assert [s.name for s in c.breakdown.segments] == [
            "a_send+b_xdp_to_user+b_transmit+c_reflect+return", "a_receive"]
        assert sum(s.mean_ns for s in c.breakdown.segments) == pytest.approx(c.breakdown.rtt_mean_ns)
        json.dumps(c.to_dict(), allow_nan=False)
    by = {c.knobs["need_wakeup"] if not c.knobs["busy_poll"] else "bp": c for c in configs}
    # on this 2-CPU VM, spinning applications sharing a CPU wait for the scheduler: milliseconds
    assert by[True].median_ns < 1e6 < by[False].median_ns
