"""The system recovery benchmark (RFC 2544 section 26.5): the SUT is
overloaded (110% of its throughput) for a while, then at time A the load
drops (to 50%); the recovery time is from A to the last frame lost (B).

The generator steps its rate inside one trial on one absolute schedule, and
the sink knows every lost sequence number, so A and B are due times on that
schedule: the recovery is measured to one packet interval, where a hardware
tester reports seconds. softnet also gives the drain time: from A until the
one-way delay is back to the recovery load's own (the queue the overload
left has drained). Loss a host stall explains is the host's, not the SUT's:
lost runs after the SUT's last one that fall in a stall's window are set
apart and counted, and B is the last loss no stall explains.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from softnet.analysis import loss_time
from softnet.analysis.loss_stats import MeanCI
from softnet.jsonsafe import json_safe
from softnet.results.raw import RawTrial
from softnet.results.stored import StoredTrial, by_cell_load
from softnet.results.trial import RecoveryResult, TrialSpec

TAIL_SHARE = 0.25  # the recovery load's own delay: the median bin delay over the window's last quarter
DRAIN_OVER_TAIL = 2.0  # drained: a bin's highest delay within twice that...
DRAIN_MIN_NS = 100_000  # ...or 0.1 ms above it, whichever is more
# a stall that held the drain up this long (and a tenth of it) makes the drain time the host's too;
# a shorter one adds its length at most, within the drain's own precision
DRAIN_STALL_NS, DRAIN_STALL_SHARE = 500_000, 0.1
# a ring a stall left full drains at the SUT's capacity in a few ms (1,000 frames at 400 kpps: 2.5 ms);
# loss that goes on longer after the stall is not the stall's
STALL_DRAIN_NS = 5_000_000


def recovery_result(raw: RawTrial, spec: TrialSpec) -> RecoveryResult:
    gen, tl = raw.generator, raw.sink_timeline
    out = RecoveryResult(overload_pps=spec.rate_pps, recovery_pps=spec.step_rate_pps, step_s=spec.step_at_s,
                         recovery_ms=None, lost_after_step_pkts=None, drain_ms=None)
    if tl is None or gen.schedule_start_ns is None or gen.step_seq is None:
        out.missing = "no sink timeline or generator schedule"
        return out
    s0 = gen.step_seq
    a = loss_time.due_ns(gen, s0)
    after = [(s, n) for s, n in tl.runs if s + n > s0]
    gap = loss_time.unlisted_seqs(tl)
    listed = gap is None or gap[1] <= s0  # the sink's listed runs reach back to the step
    out.lost_after_step_pkts = sum(s + n - max(s, s0) for s, n in after) if listed else None
    stalls = loss_time.data_path_stalls(raw.stalls, raw.testbed.placement)
    if not listed:
        out.missing = "the sink listed too few lost runs to reach back to the step: the last loss is unknown"
    else:
        # B: the last lost run after A that no host stall explains; later ones the host's, set apart
        last, apart = None, 0
        for s, n in reversed(after):
            # a run that began and ended in a stall's window is the stall's: a ring it left full loses until
            # drained; one that goes on past the window (a block that began with a stall) is not
            st = loss_time.stall_at(stalls, loss_time.due_ns(gen, max(s, s0)))
            if st is not None and loss_time.due_ns(gen, s + n - 1) <= st.end_ns + STALL_DRAIN_NS:
                apart += s + n - max(s, s0)
                continue
            last = s + n - 1
            break
        b = loss_time.due_ns(gen, last) if last is not None else a
        out.recovery_ms = max(0.0, (b - a) / 1e6)
        # packets queued in a stall at A are handled after it (a block refreshed late); ones queued in a
        # stall at B before a timer fired pass after it (the block reads short)
        st = loss_time.stall_at(stalls, a) or loss_time.stall_at(stalls, b)
        if st is not None:
            out.recovery_spoilt = f"{st.words()}, {(st.start_ns - a) / 1e6:+.1f} ms from the step"
        if apart:
            out.stall_lost_pkts = apart
    delays = np.asarray(tl.delay_max_ns_per_bin, dtype=np.int64)
    bins = loss_time.Bins.of(tl, gen)
    k0 = int(np.searchsorted(bins.due_start, a, "left"))
    if len(delays) == len(bins.pkts) and len(delays) - k0 >= 8:
        tail = delays[len(delays) - max(1, int(TAIL_SHARE * (len(delays) - k0))):]
        level = max(DRAIN_OVER_TAIL * float(np.median(tail)), float(np.median(tail)) + DRAIN_MIN_NS)
        done = np.nonzero(delays[k0:] <= level)[0]
        if done.size:
            end = int(bins.due_start[k0 + done[0]])
            out.drain_ms = max(0.0, (end - a) / 1e6)
            held = max(DRAIN_STALL_NS, DRAIN_STALL_SHARE * (end - a))
            for st in stalls:  # a data-path CPU that stopped while the queue drained held the drain up
                if st.start_ns <= end and st.end_ns >= a and min(st.end_ns, end) - max(st.start_ns, a) >= held:
                    out.drain_spoilt = f"{st.words()}, {(st.start_ns - a) / 1e6:+.1f} ms from the step"
                    break
    return out


@dataclass(frozen=True)
class RecoverySummary:
    """One configuration of a recovery campaign over its runs (RFC 2544
    26.5 reports the average)."""

    cell_id: int
    label: str
    overload_pps: float
    recovery_pps: float
    overload_s: float
    runs: int
    stall_runs: int  # runs where host stalls explained loss after the last loss of the SUT's (set apart)
    spoilt_runs: int  # runs a host stall at the step or the last loss spoilt: left out of recovery_ms
    recovery_ms: MeanCI
    drain_ms: MeanCI
    lost_after_step_pkts: MeanCI

    def to_dict(self) -> dict:
        return json_safe(asdict(self))


def summarize_recoveries(trials: Sequence[StoredTrial], labels: dict[int, str],
                         confidence: float = 0.95) -> list[RecoverySummary]:
    out = []
    for key, stored in by_cell_load(trials, "recovery"):
        rs = [r.recovery for r in stored]
        good = [r for r in rs if r.recovery_ms is not None]
        out.append(RecoverySummary(
            key[0], labels.get(key[0], ""), float(rs[0].overload_pps), float(rs[0].recovery_pps),
            float(rs[0].step_s), len(rs), sum(bool(r.stall_lost_pkts) for r in rs),
            sum(r.recovery_spoilt is not None for r in good),
            MeanCI.of([r.recovery_ms for r in good if r.recovery_spoilt is None], confidence),
            MeanCI.of([r.drain_ms for r in good if r.drain_ms is not None and r.drain_spoilt is None], confidence),
            MeanCI.of([r.lost_after_step_pkts for r in good if r.lost_after_step_pkts is not None], confidence)))
    return out
