"""Run a soak (method kind "soak"): per cell, trials back to back for
soak.wall_s, each at a load drawn from the critical load's posterior
(softnet.analysis.plr_model), each a little longer than the one before, the
SUT host's resources read after each (softnet.collect.drift). Every trial is
stored as it ends with its place in the soak and the estimate after it
(results.soak.SoakMark); the summary when the cell's soak ends.

Resumable like every campaign: the stored trials are the model's evidence,
the next load is a function of them and the trial's index, and the soak's
clock goes on from the stored trials' (the time a killed soak lay dead does
not count). A resumed soak rebuilds its testbed, so what a leak had grown is
gone: the drift watch reads the series from the resume on."""
from __future__ import annotations

import time
from typing import Callable

from softnet.analysis.plr_model import LossEvidence, PlrModel, Posterior, step_start, witness
from softnet.analysis.soak import evidence_of, summarize, trial_rates
from softnet.campaign.live import LiveWriter
from softnet.campaign.measurers import measurer_for
from softnet.campaign.spec import CampaignSpec
from softnet.results import readers
from softnet.results.soak import SOAK, DriftSample, SoakMark, SoakSummary
from softnet.results.store import Store
from softnet.units import format_rate

# a trial whose loss the estimate gives less than this chance (either tail) is surprising
SURPRISE = 1e-4
MIN_TRIALS = 8  # trials an estimate reads before it may be surprised (the early ones explore)
Tell = Callable[[str, int, int, str], None]  # (kind, seconds done, seconds planned, text)


def model_of(cell: CampaignSpec) -> PlrModel:
    lo, hi = cell.search_range_pps()
    return PlrModel(lo, hi, cell.soak.target_loss_ratio, cell.soak.confidence)


def estimate_text(m: SoakMark) -> str:
    e = m.estimate
    if e is None:
        return "-"
    return f"critical load {format_rate(e.median_pps)} [{format_rate(e.lower_pps)}, {format_rate(e.upper_pps)}]"


def judge(model: PlrModel, post: Posterior | None, evidence: list[LossEvidence], active: int,
          prev: SoakMark | None, e: LossEvidence) -> tuple[float | None, str | None, int | None, int | None]:
    """A new trial against the estimate before it: (its surprise, which side,
    the witness that makes it suspect, the trial a confirmed step began at).
    Surprising, and earlier trials at its load all behaved otherwise (not
    the fits' shape failing); a repeat's witnesses are those of the trial it
    repeats. A confirmed step may have begun before the trial that showed
    it: it goes back to the first trial since the witness that the new SUT
    explains better."""
    if post is None or len(evidence) - active < MIN_TRIALS:
        return None, None, None, None
    tail, side = post.surprise(e)
    repeat = prev is not None and prev.suspect
    upto = prev.index if repeat else len(evidence)
    seen = witness(evidence[active:upto], e, side) if tail < SURPRISE else None
    seen = None if seen is None else active + seen
    if not (repeat and seen is not None and side == prev.surprise_side):
        return tail, side, seen, None
    after = model.posterior([*evidence[prev.index:], e])
    before = model.posterior(evidence[active:prev.witness + 1])
    between = evidence[prev.witness + 1:prev.index]
    return tail, side, seen, prev.witness + 1 + step_start(before, after, between)


def soak_cell(store: Store, cid: str, cell_id: int, knobs: dict, cell: CampaignSpec, tell: Tell,
              live: LiveWriter | None) -> SoakSummary:
    """One cell's soak, from what is stored on; its summary, stored too."""
    s, m = cell.soak, cell.method
    model = model_of(cell)
    stored = readers.stored_trials(store, cid, cell_id, 0)
    docs = [t.document for t in stored]
    marks = [SoakMark.model_validate(d[SOAK]) for d in docs]
    evidence = [evidence_of(d, m.host_stall_loss) for d in docs]
    elapsed = marks[-1].elapsed_s if marks else 0.0
    tell("plan", int(elapsed), int(s.wall_s), f"cell {cell_id}: soak of {s.wall_s:g} s, {len(marks)} trial(s) "
         f"stored ({elapsed:.0f} s)" + (f", {estimate_text(marks[-1])}" if marks else ""))
    active = marks[-1].model_from if marks else 0
    post = model.posterior(evidence[active:]) if evidence else None
    if elapsed < s.wall_s:
        with measurer_for(cell, cell_id) as meter:
            first = True
            while elapsed < s.wall_s:
                i = len(evidence)
                prev = marks[-1] if marks else None
                last = docs[-1] if docs else None
                received = (last["received_pkts"] or 0) / last["duration_s"] if last else None
                # a surprising trial is repeated at its load: two in a row and the SUT changed
                if prev and prev.suspect:
                    load = evidence[-1].load_pps
                else:
                    load = model.next_load(post, i, s.seed, received, evidence[active:])
                # PLRsearch's growing trials, none past the soak's end (nor shorter than a window can be)
                duration = max(0.1, min(m.duration_s + s.duration_step_s * (i - active), s.max_trial_s,
                                        s.wall_s - elapsed))
                t0 = time.monotonic()
                tell("start", int(elapsed), int(s.wall_s), f"cell {cell_id} trial {i}: {format_rate(load)} for "
                     f"{duration:.3g} s")
                result = meter.measure(load, i, 0, duration, live=live and live.trial(
                    cell_id, i, 0, knobs, load, cell, duration))
                levels = meter.drift_levels() if s.drift else None
                e = evidence_of(result, m.host_stall_loss)
                tail, side, seen, step_from = judge(model, post, evidence, active, prev, e)
                odd = seen is not None
                if step_from is not None:
                    active = step_from  # the estimate starts afresh from the new SUT's first trial
                evidence.append(e)
                post = model.posterior(evidence[active:])
                wall = time.monotonic() - t0
                elapsed += wall
                mark = SoakMark(index=i, elapsed_s=elapsed, wall_s=wall, estimate=post.estimate,
                                drift=DriftSample.model_validate(levels) if levels else None, segment_start=first,
                                surprise=tail, surprise_side=side, suspect=odd and not (prev and prev.suspect),
                                witness=seen,
                                model_from=active, step_from=step_from)
                result[SOAK] = mark.model_dump()
                store.add_trial(cid, cell_id, i, 0, knobs, result)
                docs.append(result)
                marks.append(mark)
                first = False
                if live:
                    live.estimate(cell_id, post.estimate)
                tell("trial", int(min(elapsed, s.wall_s)), int(s.wall_s),
                     f"cell {cell_id} trial {i}: loss {e.lost_pkts}/{result.get('sent_pkts') or 0}; "
                     f"{estimate_text(mark)}" + (f"; the SUT changed at trial {step_from}" if step_from is not None
                                                 else "; surprising, repeated" if mark.suspect else ""))
    summary = summarize(model, marks, evidence, trial_rates(docs), finished=elapsed >= s.wall_s)
    store.set_soak(cid, cell_id, summary, time.time())
    for flag in summary.flags:
        tell("flag", int(elapsed), int(s.wall_s), f"cell {cell_id}: {flag}")
    return summary
