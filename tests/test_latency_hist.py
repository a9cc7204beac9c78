"""The log-linear delay histogram's bucket math (softnet.analysis.latency_hist)
against numpy, and its constants against the sink's (native/sink/sink.h)."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from softnet.analysis import latency_hist as lh

SINK_H = Path(__file__).resolve().parents[1] / "native" / "sink" / "sink.h"


def sparse(values) -> list[list[int]]:
    return [[i, c] for i, c in sorted(Counter(lh.index(int(v)) for v in values).items())]


def test_constants_are_the_sinks():
    defines = dict(re.findall(r"#define (SINK_HIST_\w+) (\d+)", SINK_H.read_text()))
    assert int(defines["SINK_HIST_SUB_BITS"]) == lh.SUB_BITS
    assert int(defines["SINK_HIST_RANGE_LOG2"]) == lh.RANGE_LOG2_NS
    # SINK_HIST_BUCKETS is derived the same way in C
    assert "((SINK_HIST_RANGE_LOG2 - SINK_HIST_SUB_BITS + 1) << SINK_HIST_SUB_BITS)" in SINK_H.read_text()


def test_buckets_tile_the_range_without_gaps():
    edges = [lh.bounds(i) for i in range(lh.n_buckets())]
    assert edges[0] == (0, 1)
    assert all(a[1] == b[0] for a, b in zip(edges, edges[1:]))
    assert edges[-1][1] == 2 ** lh.RANGE_LOG2_NS
    for i, (low, high) in enumerate(edges):
        assert lh.index(low) == lh.index(high - 1) == i
        assert (high - low - 1) / 2 / max(low, 1) <= lh.rel_error_bound()
    assert lh.rel_error_bound() < 0.01


@pytest.mark.parametrize("v", [0, 1, 255, 256, 257, 1000, 2 ** 20 + 12345, 2 ** 36 - 1])
def test_a_value_lies_in_its_bucket(v):
    low, high = lh.bounds(lh.index(v))
    assert low <= v < high


@pytest.mark.parametrize("seed, dist", [(1, "lognormal"), (2, "exponential"), (3, "bimodal"), (4, "heavy")])
def test_percentiles_are_within_the_bound_of_numpys(seed, dist):
    rng = np.random.default_rng(seed)
    n = 20_011  # q * n / 100 never whole: numpy's float rank and the exact one agree
    x = {"lognormal": lambda: rng.lognormal(10, 1, n),
         "exponential": lambda: 2_000 + rng.exponential(30_000, n),
         "bimodal": lambda: np.concatenate([rng.normal(20_000, 500, n - 500), rng.normal(4e6, 1e5, 500)]),
         "heavy": lambda: 1_000 * (1 + rng.pareto(1.2, n))}[dist]()
    values = np.clip(np.rint(x), 1, 2 ** lh.RANGE_LOG2_NS - 1).astype(np.int64)
    got = lh.percentiles(sparse(values))
    for q in lh.PERCENTILES:
        exact = np.percentile(values, q, method="inverted_cdf")
        assert abs(got[q] - exact) / exact <= lh.rel_error_bound() < 0.01


def test_no_delays_and_over_range_give_no_percentile():
    assert lh.percentiles([]) == {q: None for q in lh.PERCENTILES}
    got = lh.percentiles([[lh.index(5_000), 990]], over_range=10)
    assert got[50] == got[99] == lh.midpoint(lh.index(5_000)) and got[99.9] is None


def test_nearest_rank_is_exact_arithmetic():
    assert lh.rank(99.9, 10_000) == 9990 and lh.rank(50, 1) == 1 and lh.rank(50, 3) == 2
