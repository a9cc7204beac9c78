"""The sink's log-linear (HDR) delay histogram: bucket math and percentiles.

The XDP sink (native/sink/sink.bpf.c, constants in sink.h) puts each one-way
delay v (ns) in a bucket: v itself below 2^(SUB_BITS+1), above that each
power of two [2^e, 2^(e+1)) split into 2^SUB_BITS equal buckets. A bucket's
width is at most 1/2^SUB_BITS of its lower edge, so reporting the middle of
the bucket that holds a percentile is off by at most half that:
``rel_error_bound()`` (0.39% at SUB_BITS = 7).

Percentiles are nearest-rank (the smallest delay with at least q% of the
delays at or below it: numpy's ``method="inverted_cdf"``); delays are whole
nanoseconds, so a bucket holding one value reports it exactly.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable, Sequence

SUB_BITS = 7  # native/sink/sink.h SINK_HIST_SUB_BITS
RANGE_LOG2_NS = 36  # SINK_HIST_RANGE_LOG2: delays >= 2^36 ns are counted apart
PERCENTILES = (50, 90, 99, 99.9)


def n_buckets(sub_bits: int = SUB_BITS, range_log2: int = RANGE_LOG2_NS) -> int:
    return (range_log2 - sub_bits + 1) << sub_bits


def index(v: int, sub_bits: int = SUB_BITS) -> int:
    """The bucket of a delay of ``v`` ns (v >= 0, below 2^range_log2), as the BPF computes it."""
    e = max(int(v), 1).bit_length() - 1
    shift = max(e - sub_bits, 0)
    return (shift << sub_bits) + (int(v) >> shift)


def bounds(i: int, sub_bits: int = SUB_BITS) -> tuple[int, int]:
    """[low, high) in ns of bucket ``i``: the integer delays it holds."""
    if i < 2 << sub_bits:
        return i, i + 1
    shift = (i >> sub_bits) - 1
    low = (i - (shift << sub_bits)) << shift
    return low, low + (1 << shift)


def midpoint(i: int, sub_bits: int = SUB_BITS) -> int | float:
    """The middle of the integer delays bucket ``i`` holds (exact for width 1)."""
    low, high = bounds(i, sub_bits)
    mid = low + (high - 1 - low) / 2
    return int(mid) if mid.is_integer() else mid


def rel_error_bound(sub_bits: int = SUB_BITS) -> float:
    """Largest |midpoint - v| / v over the delays v of any bucket."""
    return 1 / (2 << sub_bits)


def rank(q: float, n: int) -> int:
    """Nearest rank (1-based) of percentile ``q`` among ``n`` values (exact arithmetic)."""
    return max(1, math.ceil(Fraction(str(q)) * n / 100))


def percentiles(buckets: Iterable[Sequence[int]], over_range: int = 0, qs: Sequence[float] = PERCENTILES,
                sub_bits: int = SUB_BITS, clamp: tuple[float, float] | None = None) -> dict[float, float | None]:
    """Percentiles (ns) of a sparse histogram, [[index, count], ...]: the
    midpoint of the bucket holding each nearest rank, within ``clamp`` (the
    exact min and max: never further from the truth). None when there are no
    delays, or the rank falls among the over-range delays (no bucket)."""
    pairs = sorted((int(i), int(c)) for i, c in buckets if c)
    n = sum(c for _, c in pairs) + over_range
    out: dict[float, float | None] = {}
    for q in qs:
        out[q] = None
        if not n:
            continue
        k, acc = rank(q, n), 0
        for i, c in pairs:
            acc += c
            if acc >= k:
                out[q] = midpoint(i, sub_bits)
                if clamp is not None:
                    out[q] = min(max(out[q], clamp[0]), clamp[1])
                break
    return out


def percentile_key(q: float) -> str:
    """'latency_p99_9_ns' for 99.9."""
    return f"latency_p{q:g}_ns".replace(".", "_")
