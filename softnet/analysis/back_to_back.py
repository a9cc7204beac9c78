"""The back-to-back frames benchmark (RFC 2544 section 26.4, as updated by
RFC 9004): the longest burst at the burst frame rate that the SUT forwards
without loss, and the buffer time it implies.

RFC 2544 searches the burst length by trials, one burst each. softnet sends
bursts of a fixed, longer length and reads each burst's answer off once:
the generator's schedule puts a burst's frame k at the same time whatever
the burst's length, so a shorter burst is the prefix of a longer one, and
the frames ahead of the first lost one are the longest burst that goes
through whole (a FIFO cannot lose an earlier frame because of a later one).
Each burst is one of the RFC's trials; a burst spoilt by a host stall or by
the generator falling behind is named and left out.
"""
from __future__ import annotations

import bisect
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from softnet.analysis import loss_time
from softnet.analysis.loss_stats import MeanCI
from softnet.jsonsafe import json_safe
from softnet.results.raw import RawTrial
from softnet.results.stored import StoredTrial, by_cell_load
from softnet.results.trial import BackToBackResult, BurstRead, TrialSpec

# a lag the generator keeps (its late episodes) from this long: the burst was not at its rate
GENERATOR_LATE_NS = 200_000


@dataclass(frozen=True)
class BurstPlan:
    """A back-to-back trial as onoff arrivals: ``bursts`` bursts of ``pkts``
    frames at ``rate_pps``, ``gap_s`` of silence after each for the queues to
    drain, after one warm-up burst (RFC 2544's learning frames)."""

    rate_pps: float
    pkts: int
    gap_s: float
    bursts: int

    @property
    def cycle_s(self) -> float:
        return self.pkts / self.rate_pps + self.gap_s

    @property
    def duty(self) -> float:
        return self.pkts / self.rate_pps / self.cycle_s

    @property
    def mean_rate_pps(self) -> float:
        return self.pkts / self.cycle_s

    @property
    def window_s(self) -> float:
        return self.bursts * self.cycle_s


def burst_due_ns(gen, spec: TrialSpec, seq: int) -> int:
    """When ``seq`` was due on an onoff schedule (burst seq // burst_pkts,
    frame seq % burst_pkts of it), as the generator computes it to the ns."""
    step = loss_time.interval_fp(spec.rate_pps)
    period = spec.burst_pkts * step  # a cycle: exactly burst_pkts mean intervals
    c, k = divmod(int(seq), spec.burst_pkts)
    return gen.schedule_start_ns + ((c * period) >> loss_time.GEN_FP_SHIFT) \
        + round(k * spec.on_duty * 1e9 / spec.rate_pps)


def _spoilt(first: int, last: int, spec: TrialSpec, raw: RawTrial, stalls: list[loss_time.Stall]) -> str | None:
    """Why frames first..last of a burst (up to its first loss) say nothing
    of the SUT: a data-path CPU stalled, or the generator fell behind."""
    for f, l, lag in raw.generator.late_episodes:
        if f <= last and l >= first and lag >= GENERATOR_LATE_NS:
            return f"generator late by {lag / 1e6:.2f} ms"
    lo = burst_due_ns(raw.generator, spec, first) - loss_time.PRE_NS
    hi = burst_due_ns(raw.generator, spec, last)
    for s in stalls:
        if s.start_ns <= hi and s.end_ns >= lo:
            return s.words()
    return None


def back_to_back_result(raw: RawTrial, spec: TrialSpec) -> BackToBackResult | None:
    """Each whole burst of the window: its lossless length, its loss, and
    whether a stall spoilt it."""
    tl, n = raw.sink_timeline, spec.burst_pkts
    if tl is None or raw.generator.schedule_start_ns is None:
        return None
    stalls = loss_time.data_path_stalls(raw.stalls, raw.testbed.placement)
    gap = loss_time.unlisted_seqs(tl)  # a burst there: its lost runs may not all be listed
    first_burst = -(-tl.first_seq // n)
    bursts, unknown = [], 0
    runs = sorted(tl.runs)
    starts = [s for s, _ in runs]
    for b in range(first_burst, tl.end_seq // n):
        a, z = b * n, (b + 1) * n
        if gap is not None and a < gap[1] and z > gap[0]:
            unknown += 1
            continue
        i, j = max(bisect.bisect_left(starts, a) - 1, 0), bisect.bisect_left(starts, z)
        mine = [(s, k) for s, k in runs[i:j] if s + k > a]
        lost = sum(min(s + k, z) - max(s, a) for s, k in mine)
        lossless = (max(mine[0][0], a) - a) if mine else n
        bursts.append(BurstRead(first_seq=a, lossless_pkts=lossless, lost_pkts=lost,
                                spoilt=_spoilt(a, a + max(lossless, 1) - 1 if lossless < n else z - 1, spec, raw,
                                               stalls)))
    return BackToBackResult(burst_rate_pps=spec.burst_rate_pps, burst_pkts=n, bursts=bursts, unknown=unknown)


@dataclass(frozen=True)
class BackToBackSummary:
    """One configuration and burst rate of a back-to-back campaign, over all
    its bursts (RFC 9004 section 6 asks for the average, minimum, maximum
    and standard deviation), with the buffer time the average implies."""

    cell_id: int
    label: str
    burst_rate_pps: float
    burst_pkts: int
    bursts: int  # the RFC's trials: bursts that count
    spoilt: int  # left out, each named in its trial's result
    unknown: int
    lossless_pkts: MeanCI  # back-to-back frames: mean, standard deviation and interval over the bursts
    min_pkts: int | None
    max_pkts: int | None
    whole: int  # bursts that went through whole, counted at burst_pkts: then the mean is a lower bound
    throughput_pps: float | None
    implied_buffer_s: float | None  # RFC 9004: back-to-back frames / burst (max) frame rate
    corrected_buffer_s: float | None  # RFC 9004: less what the SUT forwarded during the burst
    reasons: dict[str, int]

    def to_dict(self) -> dict:
        return json_safe(asdict(self))


def buffer_times(frames: float, rate_pps: float, throughput_pps: float | None) -> tuple[float, float | None]:
    """RFC 9004's buffer times: the implied one (the burst's frames over the
    frame rate they came at) and the corrected one, which takes off the frames
    the SUT forwarded while the burst came in (at its throughput): the frames
    that were in its buffer, over the frame rate."""
    implied = frames / rate_pps
    if throughput_pps is None:
        return implied, None
    return implied, implied * (1 - throughput_pps / rate_pps)


def summarize_back_to_back(trials: Sequence[StoredTrial], labels: dict[int, str],
                           throughput_pps: float | None = None,
                           confidence: float = 0.95) -> list[BackToBackSummary]:
    out = []
    for key, stored in by_cell_load(trials, "back_to_back"):
        results = [r.back_to_back for r in stored]
        reads = [b for r in results for b in r.bursts]
        good = np.array([b.lossless_pkts for b in reads if b.spoilt is None], dtype=float)
        reasons: dict[str, int] = {}
        for b in reads:
            if b.spoilt:
                kind = b.spoilt.split(" by ")[0].split(" on ")[0]  # "generator late", "host stall"
                reasons[kind] = reasons.get(kind, 0) + 1
        r0 = results[0]
        mean = MeanCI.of(list(good), confidence)
        implied, corrected = buffer_times(mean.mean, r0.burst_rate_pps, throughput_pps) \
            if len(good) else (None, None)
        out.append(BackToBackSummary(
            key[0], labels.get(key[0], ""), float(r0.burst_rate_pps), r0.burst_pkts, len(good),
            len(reads) - len(good), sum(r.unknown for r in results), mean,
            int(good.min()) if len(good) else None, int(good.max()) if len(good) else None,
            int((good == r0.burst_pkts).sum()),
            throughput_pps, implied, corrected, reasons))
    return out

