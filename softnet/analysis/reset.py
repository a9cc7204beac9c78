"""The reset benchmark's figures for one trial (RFC 2544 section 26.6, with
the two methods of RFC 6201): how long the data path stopped forwarding
when its personality was reset during the measurement window.

- Timestamp method: from the last packet forwarded before the reset to the
  first one after it (around the longest lost run near the action; see
  ``gap_around``). The sink knows which sequence numbers it never saw
  (its lost runs) and the generator's schedule says when each was due, so
  the gap is measured on the schedule, to one packet interval (20 us at
  50 kpps), not to the second a hardware tester reports.
- Frame-loss method: the packets lost in the window over the offered rate.
  It counts every loss of the window, a host stall's too; the timestamp
  method counts only the gap around the reset.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from softnet.analysis.loss_stats import MeanCI
from softnet.analysis.loss_time import data_path_stalls, due_ns, stall_at
from softnet.jsonsafe import json_safe
from softnet.results.raw import RawTrial
from softnet.results.stored import StoredTrial, by_cell_load
from softnet.results.trial import ResetResult, TrialSpec

SLACK_S = 0.01  # a lost run starting this close to the reset's action may be the reset's
MERGE_S = 0.001  # lost runs closer than this are one gap


def gap_around(gen, runs: list[tuple[int, int]], near: list[tuple[int, int]]) -> tuple[int, int]:
    """(first, last) lost sequence of the reset's gap: the longest lost run
    that began near its action, joined with the runs less than MERGE_S from
    it on either side (a gap with a few packets through it is one gap).
    Runs further apart are other losses, such as softnet's own commands
    starving the SUT's CPU before the action took effect; the frame-loss
    method counts them, this one not."""
    core = max(near, key=lambda r: r[1])
    k = runs.index(core)
    lo, hi = k, k
    while lo > 0 and due_ns(gen, runs[lo][0]) - due_ns(gen, sum(runs[lo - 1]) - 1) < MERGE_S * 1e9:
        lo -= 1
    while hi + 1 < len(runs) and due_ns(gen, runs[hi + 1][0]) - due_ns(gen, sum(runs[hi]) - 1) < MERGE_S * 1e9:
        hi += 1
    return runs[lo][0], sum(runs[hi]) - 1


def reset_result(raw: RawTrial, spec: TrialSpec, lost_pkts: int | None) -> ResetResult:
    r = raw.reset
    w0 = raw.started_unix_s + spec.warmup_s  # the window's start on the controller's clock

    def rel(t: float | None) -> float:
        return round(t - w0, 6) if t is not None else 0.0

    tl, gen = raw.sink_timeline, raw.generator
    window_due = due_ns(gen, spec.warmup_pkts) if gen.schedule_start_ns is not None else None
    if r.started_mono_ns is not None and r.ended_mono_ns is not None and window_due is not None:
        # the generator's clock: a lost packet's due time and the reset's are comparable to the microsecond
        started, ended = (r.started_mono_ns - window_due) / 1e9, (r.ended_mono_ns - window_due) / 1e9
        at = started - (r.started_unix_s - r.at_unix_s)  # asked for: by the controller's clock, shown on this one
    else:
        started, ended, at = rel(r.started_unix_s), rel(r.ended_unix_s), rel(r.at_unix_s)
    interruption, spoilt = None, None
    if tl is not None and window_due is not None and r.started_unix_s is not None and not r.error:
        near = [(s, n) for s, n in map(tuple, tl.runs)
                if started - SLACK_S <= (due_ns(gen, s) - window_due) / 1e9 <= ended + SLACK_S]
        if near:
            first, last = gap_around(gen, [tuple(r) for r in tl.runs], near)
            # the last packet seen before the first lost one, to the first seen after the last lost one
            interruption = (due_ns(gen, last + 1) - due_ns(gen, first - 1)) / 1e6
            # a stall in the middle changes nothing (the path drops anyway); one at either end moves that end.
            # The action's own processes hold the SUT's CPU while it runs: that time is the reset's.
            action = (r.started_mono_ns or 0, r.ended_mono_ns or 0)
            stalls = [st for st in data_path_stalls(raw.stalls, raw.testbed.placement)
                      if not (action[0] <= st.end_ns and st.start_ns <= action[1])]
            st = stall_at(stalls, due_ns(gen, first)) or stall_at(stalls, due_ns(gen, last))
            spoilt = st and f"{st.words()}, {(st.start_ns - window_due) / 1e6:.1f} ms into the window"
        elif not tl.runs_truncated:
            interruption = 0.0  # nothing lost around the reset
    return ResetResult(what=r.what, at_s=round(at, 6), started_s=round(started, 6), ended_s=round(ended, 6),
                       interruption_ms=interruption,
                       frame_loss_ms=lost_pkts / spec.rate_pps * 1e3 if lost_pkts is not None else None,
                       lost_pkts=lost_pkts, error=r.error, spoilt=spoilt)


@dataclass(frozen=True)
class ResetSummary:
    """One configuration and load of a reset campaign, over its runs."""

    cell_id: int
    label: str
    load_pps: float
    what: str
    runs: int
    failed: int  # runs whose reset action failed (no figure)
    interruption_ms: MeanCI  # timestamp method, over the runs that have it and no host stall spoilt
    frame_loss_ms: MeanCI
    host_interference: int  # runs a host stall spoilt (each trial keeps its figure, and names the stall)

    def to_dict(self) -> dict:
        return json_safe(asdict(self))  # a single run's interval is NaN: null


def summarize_resets(trials: Sequence[StoredTrial], labels: dict[int, str],
                     confidence: float = 0.95) -> list[ResetSummary]:
    """Per cell and load: the interruption's mean and t-interval over the runs."""
    out = []
    for key, runs in by_cell_load(trials, "reset"):
        ok = [r for r in runs if not r.reset.error]
        out.append(ResetSummary(
            key[0], labels.get(key[0], ""), runs[0].intended_rate_pps, runs[0].reset.what, len(runs),
            len(runs) - len(ok),
            MeanCI.of([r.reset.interruption_ms for r in ok
                       if r.reset.interruption_ms is not None and r.reset.spoilt is None], confidence),
            MeanCI.of([r.reset.frame_loss_ms for r in ok if r.reset.frame_loss_ms is not None], confidence),
            sum(r.reset.spoilt is not None for r in ok)))
    return out
