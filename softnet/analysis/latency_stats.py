"""Round-trip statistics of the AF_XDP delay study (shared/papers/af-xdp-delays.md,
sec. VI-1), from the per-packet records of ``softnet.results.latency``.

Per run (``run_stats``):

* every sequence number is accounted for: received + lost + impossible = sent,
  or ``AccountingError`` naming the run (missing or repeated sequence numbers,
  a reply flag without a reply time, fewer records than the tool sent);
* RTT = t3 - t0 of received packets whose stamps are in path order. A packet
  the tool flagged FLAG_IMPOSSIBLE, or whose present stamps go backwards (the
  tool missed it: ``unflagged_impossible``), is counted and never used;
* mean, median, std (ddof=1), Q1, Q3, min, max, p90, p99, p99.9 (numpy's
  linear percentiles), all in ns.

Per configuration (``config_stats``): the study's seven statistics (mean,
median, std, Q1, Q3, min, max) and p90/p99/p99.9 averaged over runs, as the
study does; p50/p90/p99/p99.9 of the pooled RTTs with a seeded bootstrap
confidence interval (``percentile_ci``); the per-hop breakdown
(``hop_breakdown``); and the study's outlier rules (``outlier_reasons``):

* ``worse_than_kernel``: the configuration's median is above the kernel
  ping baseline's median (baseline: a number of ns or an array of ping RTTs);
* ``stalled``: latency ~ the send interval, i.e. the median within
  ``STALL_TOLERANCE`` (10%) of the interval, or at least ``STALL_SHARE``
  (25%) of the packets within 10% of it (a mode at the interval: the packet
  waited for the next send to push it through);
* ``few_runs`` (fewer than ``MIN_RUNS``), ``no_rtt`` (no usable RTT).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import numpy as np

from softnet.results.latency import (
    FLAG_DUPLICATE, FLAG_IMPOSSIBLE, FLAG_RECEIVED, FLAG_REORDERED, HOPS, RECORD_DTYPE, RecordColumns,
)
from softnet.units import format_duration_ns

MIN_RUNS = 3               # the study: at least 3 runs per configuration
STALL_TOLERANCE = 0.10     # "latency ~ the interval": within 10% of it
STALL_SHARE = 0.25         # a mode at the interval: a quarter of the packets there
MIN_TAIL = 5               # a percentile's CI needs this many packets beyond it on each side
RESAMPLE_MAX_N = 5_000     # above: exact bootstrap distribution of the order statistic
DEFAULT_RESAMPLES = 2000
DEFAULT_CONFIDENCE = 0.95

SEVEN = ("mean_ns", "median_ns", "std_ns", "q1_ns", "q3_ns", "min_ns", "max_ns")
TAIL = ("p90_ns", "p99_ns", "p999_ns")
TAIL_MIN_N = {"p90_ns": 10, "p99_ns": 100, "p999_ns": 1000}  # samples a percentile needs: one at or beyond it
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9}

# The round trip cut at XDP hooks and B's userspace read; consecutive, so the
# segments of one packet add up to its RTT (t3 - t0).
SEGMENTS = (
    ("a_send", "t0", "b_xdp_rx_fwd"),               # A's send path and the wire to B
    ("b_xdp_to_user", "b_xdp_rx_fwd", "b_user_rx_fwd"),
    ("b_transmit", "b_user_rx_fwd", "c_xdp_rx"),    # B's forwarding, TX path, wire to C
    ("c_reflect", "c_xdp_rx", "b_xdp_rx_ret"),      # all of C, and the wire back to B
    ("return", "b_xdp_rx_ret", "a_xdp_rx"),         # B forwards the reply to A
    ("a_receive", "a_xdp_rx", "t3"),                # A's XDP hook to its application
)
BOUNDARIES = tuple(s[2] for s in SEGMENTS[:-1])
_BOUNDARY_COLS = [HOPS.index(b) for b in BOUNDARIES]


class AccountingError(ValueError):
    """A run whose sequence numbers do not all add up to sent; the message names the run."""


@dataclass(frozen=True)
class RttSummary:
    """Statistics of one sample of RTTs (ns); NaN where the sample is too small."""

    n: int
    mean_ns: float
    median_ns: float
    std_ns: float   # ddof=1
    q1_ns: float
    q3_ns: float
    min_ns: float
    max_ns: float
    p90_ns: float
    p99_ns: float
    p999_ns: float

    @classmethod
    def of(cls, rtt_ns) -> "RttSummary":
        x = np.asarray(rtt_ns, dtype=float)
        if x.size == 0:
            return cls(0, *([math.nan] * 10))
        q1, med, q3, *tail = np.percentile(x, [25, 50, 75, 90, 99, 99.9])
        # a percentile rests on the samples beyond it: none below 1 / (1 - p) samples (p99 needs 100)
        p90, p99, p999 = (float(v) if x.size >= TAIL_MIN_N[k] else math.nan for k, v in zip(TAIL, tail))
        std = float(x.std(ddof=1)) if x.size > 1 else math.nan
        return cls(int(x.size), float(x.mean()), float(med), std, float(q1), float(q3),
                   float(x.min()), float(x.max()), p90, p99, p999)

    def to_dict(self) -> dict:
        return {k: _num(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True, eq=False)
class RunStats:
    """One run: its accounting, its RTT statistics, and the RTTs themselves."""

    run: str
    sent: int
    received: int              # replies with a usable RTT
    lost: int
    impossible: int            # flagged by the tool or found here; never used
    unflagged_impossible: int  # of those, found here (stamps backwards) but not flagged
    duplicates: int
    reordered: int
    rtt: RttSummary
    rtt_ns: np.ndarray = field(repr=False)
    # per usable packet, each BOUNDARIES stamp minus t0 (ns; NaN where not stamped)
    hop_offsets_ns: np.ndarray = field(repr=False)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("run", "sent", "received", "lost", "impossible",
                                           "unflagged_impossible", "duplicates", "reordered")}
        return d | {"rtt": self.rtt.to_dict()}


@dataclass(frozen=True)
class Estimate:
    """A statistic of pooled RTTs with its bootstrap confidence interval (ns).
    The interval is NaN when fewer than ``MIN_TAIL`` packets lie beyond the
    percentile: a bootstrap cannot see past the sample's extremes."""

    value_ns: float
    ci_low_ns: float
    ci_high_ns: float
    n: int
    method: str  # "resample" | "exact" | "too_few"

    def to_dict(self) -> dict:
        return {"value_ns": _num(self.value_ns), "ci_low_ns": _num(self.ci_low_ns),
                "ci_high_ns": _num(self.ci_high_ns), "n": self.n, "method": self.method}


@dataclass(frozen=True)
class Segment:
    """One piece of the round trip (see ``SEGMENTS``); merged pieces join names with '+'."""

    name: str
    mean_ns: float
    median_ns: float


@dataclass(frozen=True)
class HopBreakdown:
    """Segments over the packets that carry every kept stamp; their means add
    up to ``rtt_mean_ns``. A boundary stamped in fewer than half the packets is
    dropped and its two segments merged; no segment when no hop is stamped."""

    segments: tuple[Segment, ...]
    n_packets: int        # packets in the breakdown
    n_left_out: int       # usable packets lacking a kept stamp
    rtt_mean_ns: float

    def to_dict(self) -> dict:
        return {"segments": [{"name": s.name, "mean_ns": _num(s.mean_ns), "median_ns": _num(s.median_ns)}
                             for s in self.segments],
                "n_packets": self.n_packets, "n_left_out": self.n_left_out,
                "rtt_mean_ns": _num(self.rtt_mean_ns)}


@dataclass(frozen=True, eq=False)
class ConfigStats:
    """One configuration (a dict of knob values) over its runs."""

    knobs: dict
    label: str
    runs: tuple[RunStats, ...]
    averaged: dict        # SEVEN + TAIL, each the mean over runs of the run's value (ns)
    percentiles: dict     # PERCENTILES name -> Estimate, of the pooled RTTs
    accounting: dict      # sent, received, lost, impossible, duplicates, reordered (sums)
    breakdown: HopBreakdown
    flags: tuple[str, ...]
    reasons: dict         # flag -> why, in words

    @property
    def mean_ns(self) -> float:
        return self.averaged["mean_ns"]

    @property
    def median_ns(self) -> float:
        return self.averaged["median_ns"]

    @property
    def rtt_ns(self) -> np.ndarray:
        """All usable RTTs of all runs (ns)."""
        return np.concatenate([r.rtt_ns for r in self.runs]) if self.runs else np.empty(0, np.int64)

    def to_dict(self) -> dict:
        return {"knobs": dict(self.knobs), "label": self.label,
                "averaged": {k: _num(v) for k, v in self.averaged.items()},
                "percentiles": {k: e.to_dict() for k, e in self.percentiles.items()},
                "accounting": dict(self.accounting), "breakdown": self.breakdown.to_dict(),
                "flags": list(self.flags), "reasons": dict(self.reasons),
                "runs": [r.to_dict() for r in self.runs]}


def _num(x):
    """JSON has no NaN: None instead."""
    return float(x) if x is not None and math.isfinite(x) else None


# ---- one run ----------------------------------------------------------------

def _stamps(rec: RecordColumns) -> np.ndarray:
    """t0, hop stamps in HOPS order, t3: one int64 row per record, 0 = absent."""
    return np.column_stack([rec.t0_ns.astype(np.int64), rec.hop_ns.astype(np.int64), rec.t3_ns.astype(np.int64)])


def _backwards(stamps: np.ndarray) -> np.ndarray:
    """Rows where a present stamp is earlier than a present stamp before it on the path."""
    if stamps.shape[0] == 0:
        return np.zeros(0, bool)
    before = np.maximum.accumulate(stamps, axis=1)[:, :-1]  # absent stamps (0) never raise the max
    return ((stamps[:, 1:] > 0) & (stamps[:, 1:] < before)).any(axis=1)


def _check_accounting(rec: RecordColumns, run: str, sent: int | None) -> None:
    n = len(rec)
    if sent is not None and sent != n:
        raise AccountingError(f"{run}: the tool sent {sent} packets but {n} records are here: "
                              f"{abs(sent - n)} sequence numbers unaccounted for")
    if n == 0:
        return
    seq = np.sort(rec.seq.astype(np.int64))
    if np.any(np.diff(seq) == 0):
        dup = int(seq[1:][np.diff(seq) == 0][0])
        raise AccountingError(f"{run}: sequence number {dup} has more than one record")
    if seq[-1] - seq[0] + 1 != n:
        first = int(seq[np.flatnonzero(np.diff(seq) > 1)[0]] + 1)  # unique, so a gap exists
        raise AccountingError(f"{run}: sequence numbers {int(seq[0])}..{int(seq[-1])} with {n} records: "
                              f"{int(seq[-1] - seq[0] + 1 - n)} missing (first: {first})")
    flags = rec.flags
    received = (flags & FLAG_RECEIVED) != 0
    t3 = rec.t3_ns
    if np.any(received != (t3 != 0)):
        i = int(np.flatnonzero(received != (t3 != 0))[0])
        raise AccountingError(f"{run}: sequence number {int(rec.seq[i])}: the reply flag and "
                              f"the reply time disagree (flags {int(flags[i])}, t3_ns {int(t3[i])})")
    orphan = ((flags & (FLAG_DUPLICATE | FLAG_REORDERED)) != 0) & ~received
    if orphan.any():
        i = int(np.flatnonzero(orphan)[0])
        raise AccountingError(f"{run}: sequence number {int(rec.seq[i])} is flagged duplicate "
                              f"or reordered but has no reply")
    if np.any(rec.t0_ns == 0):
        i = int(np.flatnonzero(rec.t0_ns == 0)[0])
        raise AccountingError(f"{run}: sequence number {int(rec.seq[i])} has no send time")


def run_stats(records: np.ndarray, run: str = "run", *, sent: int | None = None) -> RunStats:
    """Accounting and RTT statistics of one run's records (``read_records``).
    ``sent``: the tool's own count of packets sent, checked against the records."""
    records = np.asarray(records)
    if records.dtype != RECORD_DTYPE:
        raise ValueError(f"{run}: records must have softnet.results.latency.RECORD_DTYPE, got {records.dtype}")
    rec = RecordColumns.of(records)
    _check_accounting(rec, run, sent)
    flags = rec.flags
    received = (flags & FLAG_RECEIVED) != 0
    stamps = _stamps(rec)
    backwards = _backwards(stamps)
    flagged = (flags & FLAG_IMPOSSIBLE) != 0
    impossible = flagged | backwards
    usable = received & ~impossible
    lost = ~received & ~impossible
    n = records.shape[0]
    assert int(usable.sum() + lost.sum() + impossible.sum()) == n  # disjoint by construction
    rtt = stamps[usable, -1] - stamps[usable, 0]
    hops = stamps[usable][:, [1 + c for c in _BOUNDARY_COLS]].astype(float)
    offsets = np.where(hops > 0, hops - stamps[usable, :1], np.nan)
    return RunStats(
        run=run, sent=n, received=int(usable.sum()), lost=int(lost.sum()), impossible=int(impossible.sum()),
        unflagged_impossible=int((backwards & ~flagged).sum()),
        duplicates=int(((flags & FLAG_DUPLICATE) != 0).sum()),
        reordered=int(((flags & FLAG_REORDERED) != 0)[usable].sum()),
        rtt=RttSummary.of(rtt), rtt_ns=rtt, hop_offsets_ns=offsets)


# ---- percentiles with confidence intervals ------------------------------------

def percentile_ci(rtt_ns, q: float, *, confidence: float = DEFAULT_CONFIDENCE,
                  n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Estimate:
    """Percentile ``q`` (0-100) of ``rtt_ns`` with a percentile-bootstrap CI (``percentile_cis``)."""
    return percentile_cis(rtt_ns, {"q": q}, confidence=confidence, n_resamples=n_resamples, seed=seed)["q"]


def percentile_cis(rtt_ns, qs: Mapping[str, float], *, confidence: float = DEFAULT_CONFIDENCE,
                   n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, Estimate]:
    """Percentiles ``qs`` (name -> 0..100) of ``rtt_ns``, each with a
    percentile-bootstrap CI; the same resamples serve every percentile.

    Up to ``RESAMPLE_MAX_N`` values: ``n_resamples`` seeded resamples of the
    linear-interpolated percentile. Above: the estimator is the order
    statistic k = ceil(q n / 100), whose bootstrap distribution is known
    exactly (a resample has at least k values <= x_(j) with probability
    P(Binomial(n, j/n) >= k)), so the CI is that distribution's quantiles:
    what infinitely many resamples would give, at no cost."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    x = np.sort(np.asarray(rtt_ns, dtype=float))
    n = int(x.size)
    alpha = (1.0 - confidence) / 2.0
    out = {}
    if n == 0:
        return {name: Estimate(math.nan, math.nan, math.nan, 0, "too_few") for name in qs}
    few = {name for name, q in qs.items() if n * (100 - q) < 100 - 1e-9}  # no sample lies beyond it
    out.update({name: Estimate(math.nan, math.nan, math.nan, n, "too_few") for name in few})
    qs = {name: q for name, q in qs.items() if name not in few}
    if n > RESAMPLE_MAX_N:
        for name, q in qs.items():
            p = q / 100.0
            k = max(1, math.ceil(p * n))
            if min(k, n - k) < MIN_TAIL:
                out[name] = Estimate(float(x[k - 1]), math.nan, math.nan, n, "too_few")
                continue
            sd = math.sqrt(n * p * (1 - p)) + 1.0
            j = np.arange(max(1, int(k - 12 * sd)), min(n, int(k + 12 * sd) + 2) + 1)
            from scipy import stats  # here: its import is 0.6 s, paid only where it is used

            cdf = stats.binom.sf(k - 1, n, j / n)  # P(the resample's k-th value <= x_(j))
            lo = j[min(np.searchsorted(cdf, alpha), j.size - 1)]
            hi = j[min(np.searchsorted(cdf, 1.0 - alpha), j.size - 1)]
            out[name] = Estimate(float(x[k - 1]), float(x[lo - 1]), float(x[hi - 1]), n, "exact")
        return out
    if not qs:
        return out
    rng = np.random.default_rng(seed)
    q_all = list(qs.values())
    chunk = max(1, 2_000_000 // n)  # bounded memory: chunk x n values at a time
    boot = np.concatenate([np.percentile(x[rng.integers(0, n, size=(min(chunk, n_resamples - s), n))], q_all, axis=1)
                           for s in range(0, n_resamples, chunk)], axis=1)
    for row, (name, q) in zip(boot, qs.items()):
        p = q / 100.0
        value = float(np.percentile(x, q))
        if min(p * n, (1 - p) * n) < MIN_TAIL:
            out[name] = Estimate(value, math.nan, math.nan, n, "too_few")
            continue
        lo, hi = np.percentile(row, [100 * alpha, 100 * (1 - alpha)])
        out[name] = Estimate(value, float(lo), float(hi), n, "resample")
    return out


# ---- per-hop breakdown ---------------------------------------------------------

def hop_breakdown(runs: Sequence[RunStats]) -> HopBreakdown:
    """The round trip cut into ``SEGMENTS`` over the pooled usable packets of ``runs``."""
    rtt = np.concatenate([r.rtt_ns for r in runs]).astype(float) if runs else np.empty(0)
    off = np.concatenate([r.hop_offsets_ns for r in runs]) if runs else np.empty((0, len(BOUNDARIES)))
    if rtt.size == 0:
        return HopBreakdown((), 0, 0, math.nan)
    keep = [i for i in range(len(BOUNDARIES)) if np.isfinite(off[:, i]).mean() >= 0.5]
    if not keep:  # no hop stamped: nothing to break down
        return HopBreakdown((), 0, int(rtt.size), math.nan)
    rows = np.isfinite(off[:, keep]).all(axis=1)
    cuts = np.column_stack([np.zeros(int(rows.sum())), off[rows][:, keep], rtt[rows]])
    pieces = np.diff(cuts, axis=1)
    names, current = [], []
    for i, (name, _, _) in enumerate(SEGMENTS):
        current.append(name)
        if i == len(SEGMENTS) - 1 or i in keep:  # segment i ends at BOUNDARIES[i]
            names.append("+".join(current))
            current = []
    segs = tuple(Segment(name, float(pieces[:, i].mean()), float(np.median(pieces[:, i])))
                 for i, name in enumerate(names)) if rows.any() else ()
    return HopBreakdown(segs, int(rows.sum()), int((~rows).sum()),
                        float(rtt[rows].mean()) if rows.any() else math.nan)


# ---- outlier rules --------------------------------------------------------------

def baseline_median_ns(baseline) -> float:
    """The kernel ping baseline: a number of ns, or an array of ping RTTs (ns) -> their median."""
    arr = np.asarray(baseline, dtype=float)
    if arr.ndim == 0:
        value = float(arr)
    elif arr.size == 0:
        raise ValueError("kernel baseline: an empty run of ping RTTs")
    else:
        value = float(np.median(arr))
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"kernel baseline must be a positive number of ns, got {value!r}")
    return value


def outlier_reasons(median_ns: float, rtt_ns, *, kernel_baseline=None,
                    send_interval_ns: float | None = None) -> dict[str, str]:
    """The study's outlier rules (module docstring) -> {flag: why}; rules whose
    input is None are not applied."""
    out = {}
    if kernel_baseline is not None and math.isfinite(median_ns):
        base = baseline_median_ns(kernel_baseline)
        if median_ns > base:
            out["worse_than_kernel"] = (f"median {format_duration_ns(median_ns)} is above the kernel ping "
                                        f"baseline's {format_duration_ns(base)}")
    if send_interval_ns is not None:
        if not send_interval_ns > 0:
            raise ValueError(f"send interval must be > 0 ns, got {send_interval_ns!r}")
        lo, hi = (1 - STALL_TOLERANCE) * send_interval_ns, (1 + STALL_TOLERANCE) * send_interval_ns
        x = np.asarray(rtt_ns, dtype=float)
        share = float(((x >= lo) & (x <= hi)).mean()) if x.size else 0.0
        if math.isfinite(median_ns) and lo <= median_ns <= hi:
            out["stalled"] = (f"median {format_duration_ns(median_ns)} is within {STALL_TOLERANCE:.0%} of the "
                              f"send interval {format_duration_ns(send_interval_ns)}")
        elif share >= STALL_SHARE:
            out["stalled"] = (f"{share:.0%} of the packets took the send interval "
                              f"{format_duration_ns(send_interval_ns)} (within {STALL_TOLERANCE:.0%})")
    return out


# ---- one configuration ------------------------------------------------------------

def knob_label(knobs: Mapping) -> str:
    """'bind_mode=copy busy_poll=true ...' in the dict's order."""
    return " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in knobs.items())


def config_stats(knobs: Mapping, runs: Sequence, *, label: str | None = None, kernel_baseline=None,
                 send_interval_ns: float | None = None, confidence: float = DEFAULT_CONFIDENCE,
                 n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> ConfigStats:
    """Statistics of one configuration. ``runs``: ``RunStats`` or record arrays
    (named '<label> run <i>' in accounting errors)."""
    label = label if label is not None else knob_label(knobs)
    runs = tuple(r if isinstance(r, RunStats) else run_stats(r, f"{label} run {i}") for i, r in enumerate(runs))
    with_rtt = [r for r in runs if r.rtt.n]
    averaged = {k: float(np.mean([getattr(r.rtt, k) for r in with_rtt])) if with_rtt else math.nan
                for k in SEVEN + TAIL}
    if any(r.rtt.n == 1 for r in with_rtt):  # one packet has no std: average the others
        stds = [r.rtt.std_ns for r in with_rtt if r.rtt.n > 1]
        averaged["std_ns"] = float(np.mean(stds)) if stds else math.nan
    pooled = np.concatenate([r.rtt_ns for r in runs]) if runs else np.empty(0)
    percentiles = percentile_cis(pooled, PERCENTILES, confidence=confidence, n_resamples=n_resamples, seed=seed)
    accounting = {k: int(sum(getattr(r, k) for r in runs))
                  for k in ("sent", "received", "lost", "impossible", "duplicates", "reordered")}
    reasons = outlier_reasons(averaged["median_ns"], pooled, kernel_baseline=kernel_baseline,
                              send_interval_ns=send_interval_ns)
    if len(runs) < MIN_RUNS:
        reasons["few_runs"] = f"{len(runs)} runs, the study asks for at least {MIN_RUNS}"
    if not with_rtt:
        reasons["no_rtt"] = "no run has a usable round-trip time"
    return ConfigStats(dict(knobs), label, runs, averaged, percentiles, accounting, hop_breakdown(runs),
                       tuple(reasons), reasons)


def campaign_stats(configs: Iterable[tuple[Mapping, Sequence]], **kwargs) -> list[ConfigStats]:
    """``config_stats`` of each (knobs, runs); the same knobs twice is an error."""
    out, seen = [], {}
    for knobs, runs in configs:
        key = knob_key(knobs)
        if key in seen:
            raise ValueError(f"configuration {knob_label(knobs)} appears twice")
        seen[key] = True
        out.append(config_stats(knobs, runs, **kwargs))
    return out


def knob_key(knobs: Mapping) -> tuple:
    """A hashable identity of a configuration, independent of the dict's order."""
    return tuple(sorted((str(k), repr(v)) for k, v in knobs.items()))
