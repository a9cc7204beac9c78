"""The SUT CPUs' time by kernel function, from softnet-stacks' samples.

Each sample is one fixed CPU-clock period of one sampled CPU, so a count of
samples is a time: samples x period_ns. Two cumulative reads at the window's
edges give the window's counts per (CPU, thread, stack); the stacks' names
(root first) were read from the SUT host's kallsyms after the traffic.

A sample is *idle* when the idle task was on the CPU and no interrupt or
softirq frame is on its stack (the CPU was halted, or in the idle loop's own
bookkeeping); every other sample is *busy*: the data path's work (in its
NAPI kthread, ksoftirqd, or a softirq run on an interrupt's exit while the
CPU was idle) and anything else the CPU ran. Per function: *self* time (it
was the innermost frame) and *inclusive* time (anywhere on the stack, counted
once per sample), both per forwarded packet.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np

from softnet.analysis.paired import decide, tost_confidence
from softnet.results.comparison import FunctionChange, FunctionChanges, PairedDifference
from softnet.results.raw import RawStacks, StacksRead
from softnet.results.trial import FunctionProfile, FunctionRow

USER = "[user]"  # a sample in user space: no kernel frames
# Frames that mean an interrupt or a softirq was running: under the idle task
# they are work, not idleness (a softirq run on an interrupt's exit).
IRQ_FRAMES = frozenset({"handle_softirqs", "__do_softirq", "do_softirq", "__irq_exit_rcu", "irq_exit_rcu",
                        "common_interrupt", "sysvec_apic_timer_interrupt", "flush_smp_call_function_queue"})


def _is_irq(frame: str) -> bool:
    return frame in IRQ_FRAMES or frame.startswith("asm_")


def window_counts(start: StacksRead | None, end: StacksRead) -> Counter:
    """(cpu, tid, comm, stack id) -> samples between the two reads."""
    out: Counter = Counter({(c, t, n, k): v for c, t, n, k, v in end.counts})
    if start is not None:
        out.subtract({(c, t, n, k): v for c, t, n, k, v in start.counts})
    return +out  # keys gone to zero dropped


def busy_stacks(raw: RawStacks, threads: set[int] | None = None) -> tuple[Counter, dict[str, int]]:
    """The window's busy samples by stack (frames root first; a user-space
    sample is [USER]), and the window's tally: samples, idle, user, lost.
    ``threads``: only these threads' samples (the trial's own SUT kthreads
    where other trials' SUTs share its CPUs)."""
    counts = window_counts(raw.window_start, raw.window_end)
    if threads is not None:
        counts = Counter({k: n for k, n in counts.items() if k[1] in threads})
    stacks: Counter = Counter()
    tally = {"samples": 0, "idle": 0, "user": 0, "lost": 0}
    for (_, tid, _, sid), n in counts.items():
        tally["samples"] += n
        if sid < 0:  # -EFAULT: the sample interrupted user space; others: no stack kept
            key = "user" if sid == -14 else "lost"
            tally[key] += n
            if key == "user":
                stacks[(USER,)] += n
            continue
        frames = tuple(raw.stacks.get(sid, "").split(";")) if sid in raw.stacks else None
        if frames is None:
            tally["lost"] += n
            continue
        if tid == 0 and not any(_is_irq(f) for f in frames):
            tally["idle"] += n
            continue
        stacks[frames] += n
    if threads is None:  # samples the counts map missed: in the totals only, of no thread
        missed = raw.window_end.missed - (raw.window_start.missed if raw.window_start else 0)
        tally["lost"] += missed
        tally["samples"] += missed
    return stacks, tally


def function_profile(raw: RawStacks, forwarded_pkts: int, threads: set[int] | None = None) -> FunctionProfile:
    """Per function, self and inclusive samples and their time per forwarded packet."""
    stacks, tally = busy_stacks(raw, threads)
    self_n: Counter = Counter()
    incl_n: Counter = Counter()
    for frames, n in stacks.items():
        self_n[frames[-1]] += n
        for f in set(frames):
            incl_n[f] += n
    period = raw.period_ns
    per_pkt = (lambda s: s * period / forwarded_pkts) if forwarded_pkts else (lambda s: None)
    rows = [FunctionRow(function=f, self_samples=self_n[f], incl_samples=incl_n[f], self_ns_per_pkt=per_pkt(self_n[f]),
                        incl_ns_per_pkt=per_pkt(incl_n[f]))
            for f in sorted(incl_n, key=lambda f: (-incl_n[f], -self_n[f], f))]
    start_ns = raw.window_start.monotonic_ns if raw.window_start else raw.window_end.monotonic_ns
    busy = tally["samples"] - tally["idle"]
    return FunctionProfile(freq_hz=raw.freq_hz, period_ns=period, cpus=raw.cpus,
                           window_s=(raw.window_end.monotonic_ns - start_ns) / 1e9, samples=tally["samples"],
                           idle_samples=tally["idle"], user_samples=tally["user"], lost_samples=tally["lost"],
                           busy_samples=busy, forwarded_pkts=forwarded_pkts, busy_ns_per_pkt=per_pkt(busy),
                           functions=rows, unknown_frames=raw.unknown_frames,
                           threads=None if threads is None else sorted(threads))


def folded(raw: RawStacks, threads: set[int] | None = None) -> dict[str, int]:
    """The window's busy stacks in Brendan Gregg's folded form: "root;...;leaf" -> samples."""
    stacks, _ = busy_stacks(raw, threads)
    return {";".join(frames): n for frames, n in stacks.items()}


Trial = tuple[RawStacks, int, "set[int] | None"]  # a trial's stacks, forwarded packets, its own threads (or all)


def folded_per_packet(trials: Sequence[Trial]) -> dict[str, float]:
    """Several trials' busy stacks together ("root;...;leaf" -> ns per
    forwarded packet): each trial's samples x period summed, over all the
    packets they forwarded."""
    ns: Counter = Counter()
    pkts = 0
    for raw, forwarded, threads in trials:
        pkts += forwarded
        for stack, n in folded(raw, threads).items():
            ns[stack] += n * raw.period_ns
    return {s: v / pkts for s, v in ns.items()} if pkts else {}


def functions_of(raw: RawStacks | None, forwarded_pkts: int,
                 threads: set[int] | None = None) -> tuple[FunctionProfile | None, str | None]:
    """The profile, or why there is none (nothing when stacks were not sampled: --stack-hz 0)."""
    if raw is None:
        return None, None
    if raw.window_end is None:
        return None, "no window-end read of the stack sampler"
    return function_profile(raw, forwarded_pkts, threads), None


# ---- paired differences per function (softnet compare --profile) ----------------------------------------------

MIN_SHARE = 0.01  # a function is tested when it takes this share of the busy time on either side


def paired_t(metric: str, a: Sequence[float], b: Sequence[float], confidence: float, margin: float,
             load_pps: float | None = None, kind: str = "function") -> PairedDifference:
    """b - a over paired rounds (ns per packet), with Student's t interval:
    the per-round differences of sample counts are near normal, and a t
    interval reaches a family-wise confidence with fewer rounds than the
    signed-rank interval (which needs 2 / 2^n below the error rate)."""
    from scipy import stats  # here: its import is 0.6 s, paid only where it is used

    xa, xb = np.asarray(a, float), np.asarray(b, float)
    d, n = xb - xa, len(a)
    base = dict(metric=metric, unit="ns/pkt", better="lower", scale="difference", n_pairs=n, confidence=confidence,
                margin=margin, kind=kind, load_pps=load_pps)
    if n < 2:
        return PairedDifference(**base, baseline_mean=float(xa.mean()) if n else None,
                                candidate_mean=float(xb.mean()) if n else None, estimate=float(d.mean()) if n else None,
                                ci=None, p_value=None, verdict="undecided")
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(n))

    def interval(c: float) -> tuple[float, float]:
        h = float(stats.t.ppf(1 - (1 - c) / 2, n - 1)) * se
        return mean - h, mean + h

    ci, tost = interval(confidence), interval(tost_confidence(confidence))
    p = float(stats.ttest_1samp(d, 0.0).pvalue) if se > 0 else (1.0 if mean == 0 else 0.0)
    verdict, significant = decide(ci, margin, "lower", tost)
    return PairedDifference(**base, baseline_mean=float(xa.mean()), candidate_mean=float(xb.mean()), estimate=mean,
                            ci=ci, p_value=p, verdict=verdict, significant=significant, tost_ci=tost)


# a trial's busy ns per packet, and each function's (self, inclusive) ns per packet
Side = tuple[float, dict[str, tuple[float, float]]]


def function_changes(pairs: Sequence[tuple[Side, Side]], load_pps: float, confidence: float,
                     min_share: float = MIN_SHARE) -> FunctionChanges | None:
    """Each function's own and inclusive time per packet, candidate against
    baseline, paired by round; the functions tested are those with
    ``min_share`` of the busy time (inclusive) on either side, their
    intervals read at Bonferroni's share of the error rate. Sorted by the
    change of their own time: those add up to the busy time's change, as
    perf diff sorts. The equivalence margin is 2% of the baseline's busy time."""
    if len(pairs) < 2:
        return None
    busy_a, busy_b = [a[0] for a, _ in pairs], [b[0] for _, b in pairs]
    ma, mb = float(np.mean(busy_a)), float(np.mean(busy_b))
    names = sorted({f for a, b in pairs for f in (*a[1], *b[1])})

    def vals(f: str, side: int, which: int) -> list[float]:
        return [p[side][1].get(f, (0.0, 0.0))[which] for p in pairs]

    tested = [f for f in names if np.mean(vals(f, 0, 1)) >= min_share * ma or np.mean(vals(f, 1, 1)) >= min_share * mb]
    each = 1 - (1 - confidence) / max(1, 2 * len(tested))
    margin = 0.02 * ma
    rows = [FunctionChange(f, paired_t(f, vals(f, 0, 0), vals(f, 1, 0), each, margin, load_pps),
                           paired_t(f, vals(f, 0, 1), vals(f, 1, 1), each, margin, load_pps)) for f in tested]
    rows.sort(key=lambda c: (-abs(c.self.estimate or 0.0), -abs(c.incl.estimate or 0.0)))
    return FunctionChanges(load_pps=load_pps, busy=paired_t("busy", busy_a, busy_b, confidence, margin, load_pps,
                                                            kind="cpu"),
                           functions=rows, family_confidence=confidence, tested=len(tested), min_share=min_share)
