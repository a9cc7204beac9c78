"""Loss in time: when packets were lost, when the CPUs of the data path did
not run, and which loss the host explains.

Inputs are raw reads (pure functions, testable on captured files):
- the sink's timeline: lost sequence numbers per bin of ``bin_pkts`` and the
  maximal runs of them, the highest one-way delay per bin;
- the generator's report: its absolute schedule (seq s was due at
  schedule_start_ns + s x interval), so every lost packet has a due time;
- the stall probe's events (softnet-stalls): a task kept waiting for a CPU
  ("runq") or a busy CPU whose clock jumped ("gap": the hypervisor did not run
  it), each with the task that held the CPU;
- the generator's late episodes: a long one is its CPU not running it;
- optionally the stall injector's own record, the truth to check detection by.

A stall of a CPU the data path needs (generator, SUT, sink) opens an influence
window from just before it starts to POST_NS after it ends, and on for as
long as the sink's one-way delay says the queue it left has not drained
(at 440 kpps on this VM the queue took up to 10 ms to drain after
a 1-2 ms stall, and loss went on until it had): a queue that was not drained
overflows, and a generator that caught up sends a burst. Loss in a window
beyond the trial's loss rate elsewhere (the baseline, which overload keeps
high and a healthy SUT keeps at zero) is explained by the stall; the rest is
the data path's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from softnet.results.raw import GeneratorReport, InjectedReport, RawPlacement, SinkTimeline, StallEvent, StallReport
from softnet.results.trial import (CpuStalls, HostStalls, InjectedFound, LossAttribution, LossSeries, LossTimeline,
                                   LostRun, LostRuns, RunsOfCause, StallLoss, StallProbeInfo)
from softnet.results.trial import Stall as StallRow

GEN_FP_SHIFT = 20  # native/gen/gen.h: the interval in 1/2^20 ns
VETH_RING_PKTS = 256  # drivers/net/veth.c VETH_RING_SIZE: the queue a stalled CPU leaves undrained
PRE_NS = 100_000  # stall start known to the probe's sample; send times lag due times by microseconds
POST_NS = 1_000_000  # after a stall: the backlog drains and a late generator catches up
QUALIFY_FILL_SHARE = 0.25  # a stall shorter than this share of the ring's fill time cannot overflow it
HOST_INTERFERENCE = "host_interference"  # the trial flag (informational: the trial stays valid)
HOST_INTERFERENCE_SHARE = 0.10  # the flag: stalls explain at least this share of the loss
# Loss outside stalls is overload when it is spread over the window (in this share of the bins outside
# stall windows) or the SUT CPU was this busy (tick-sampled); otherwise it is unexplained.
OVERLOAD_SPREAD = 0.5
OVERLOAD_BUSY = 0.90
# A CPU held by the data path itself (NAPI threads, softirq threads, softnet's
# generator, the udp-relay SUT's relay: comm keeps 15 characters) is load, not interference.
DATA_PATH_TASKS = ("napi/", "ksoftirqd/", "softnet-gen", "softnet-udprela")
REALTIME_POLICIES = (1, 2)  # SCHED_FIFO, SCHED_RR: they take a CPU from every normal task
# A lost run after the one-way delay rose to this share of the ring's fill time (and well above the
# trial's usual delay) followed a queue left undrained: a stall too short for the probe to see.
UNSEEN_FILL_SHARE = 0.8
UNSEEN_OVER_MEDIAN = 4
UNSEEN_MAX_SPREAD = 0.1  # in a trial the SUT CPU was busy for: the rest's loss in at most this share of the ms
# A stall's window follows its queue while the delay stays this x the trial's median (at overload the
# median is a full queue's, so no window grows) and a quarter of the ring's fill time, for at most
# POST_MAX_NS after the stall.
DRAIN_OVER_MEDIAN = 4
POST_MAX_NS = 20_000_000
SERIES_POINTS = 1000  # the result's time series are pooled down to at most this many points
KEEP_STALLS = 200  # stalls listed one by one in the result (all are counted)


def counted_received(result: dict, host_stall_loss: str = "set_apart") -> int:
    """Packets a method (PASTRAMI statistics, the search) counts as received:
    with host-stall loss set apart, the packets host stalls explain count as
    delivered (the SUT did not lose them); a trial without a stall probe (or
    from before it) counts all its loss."""
    sent, received = int(result["sent_pkts"] or 0), int(result["received_pkts"] or 0)
    if host_stall_loss == "set_apart" and result.get("sut_lost_pkts") is not None:
        return sent - int(result["sut_lost_pkts"])
    return received


def interval_fp(rate_pps: float) -> int:
    """The generator's fixed-point interval (llround, as gen.c computes it)."""
    return int(math.floor(1e9 / rate_pps * (1 << GEN_FP_SHIFT) + 0.5))


def due_ns(gen: GeneratorReport, seq):
    """When sequence number(s) ``seq`` were due on the generator's schedule (exact integer arithmetic)."""
    step = interval_fp(gen.intended_rate_pps)
    if gen.step_seq is not None:  # a rate step: a second constant schedule from the step's own due time
        s0, step2 = gen.step_seq, interval_fp(gen.step_rate_pps)
        at = (s0 * step) >> GEN_FP_SHIFT
        if isinstance(seq, np.ndarray):
            q = seq.astype(object)
            due = np.where(seq < s0, q * step >> GEN_FP_SHIFT, at + ((q - s0) * step2 >> GEN_FP_SHIFT))
            return gen.schedule_start_ns + due.astype(np.int64)
        q = int(seq)
        return gen.schedule_start_ns + ((q * step) >> GEN_FP_SHIFT if q < s0 else at + (((q - s0) * step2)
                                                                                        >> GEN_FP_SHIFT))
    if isinstance(seq, np.ndarray):
        return gen.schedule_start_ns + (seq.astype(object) * step >> GEN_FP_SHIFT).astype(np.int64)
    return gen.schedule_start_ns + ((int(seq) * step) >> GEN_FP_SHIFT)


@dataclass(frozen=True)
class Stall:
    cpu: int
    role: str
    kind: str  # "runq" | "gap" (the probe) | "gen_lag" (the generator's late episodes) | "merged"
    start_ns: int
    end_ns: int
    by: str  # the task that held the CPU ("" when unknown)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    def words(self) -> str:
        return f"host stall on CPU {self.cpu} ({self.role}) {self.duration_ns / 1e6:.2f} ms"


def cpu_roles(placement: RawPlacement) -> dict[int, str]:
    """The CPUs the data path needs and what each does there."""
    roles: dict[int, list[str]] = {}
    for c in dict.fromkeys([placement.gen_cpu, *(placement.gen_cpus or [])]):  # several generators
        roles.setdefault(c, []).append("generator")
    for c in placement.sut_cpus:
        roles.setdefault(c, []).append("SUT")
    if placement.sink_cpu is not None:
        roles.setdefault(placement.sink_cpu, []).append("sink")
    return {c: "/".join(r) for c, r in roles.items()}


def is_host_stall(e: StallEvent) -> bool:
    """A probe event that kept the data path from a CPU: every clock gap of a
    busy CPU (the vCPU did not run); a data-path task kept waiting by anything
    but the data path itself; any task kept waiting by a realtime task or by
    an idle CPU that woke late (the vCPU was not running). Two other tasks
    sharing a CPU fairly are not a stall of the data path."""
    if e.kind != "runq":
        return True
    if e.by.startswith(DATA_PATH_TASKS):
        return False
    return e.task.startswith(DATA_PATH_TASKS) or e.by_policy in REALTIME_POLICIES or e.by_pid == 0


def probe_stalls(probe: StallReport, roles: dict[int, str]) -> list[Stall]:
    """The probe's events on the data path's CPUs that are host stalls."""
    return [Stall(e.cpu, roles[e.cpu], e.kind, e.start_ns, e.end_ns, e.by)
            for e in probe.stalls if e.cpu in roles and is_host_stall(e)]


def data_path_stalls(probe: StallReport | None, placement: RawPlacement) -> list[Stall]:
    """The probe's host stalls of the data path's CPUs, one per stall (none without a probe)."""
    return [] if probe is None or probe.missing else merge(probe_stalls(probe, cpu_roles(placement)))


def stall_at(stalls: list[Stall], at_ns: int) -> Stall | None:
    """The first stall whose window (from just before it to its backlog's
    drain after it) holds the instant at_ns: a loss that began then is the
    host's as much as the SUT's."""
    return next((s for s in stalls if s.start_ns - PRE_NS <= at_ns <= s.end_ns + POST_NS), None)


def generator_stalls(gen: GeneratorReport, roles: dict[int, str], threshold_ns: int) -> list[Stall]:
    """The generator's late episodes that lasted the probe's threshold: its CPU
    did not run it (it then catches up back to back, a burst). From the first
    late packet's due time for as long as the episode's largest lag. Several
    generators (a merged report: its "streams"): each stream's on its own CPU."""
    streams = gen.streams if isinstance(gen.streams, list) else [gen]
    return [Stall(s.cpu, roles.get(s.cpu, "generator"), "gen_lag", due_ns(gen, first), due_ns(gen, first) + lag, "")
            for s in streams for first, _, lag in s.late_episodes if lag >= threshold_ns]


def merge(stalls: list[Stall]) -> list[Stall]:
    """Overlapping stalls of one CPU as one (a waiting task and a clock gap
    often see the same stall); sorted by start."""
    out: list[Stall] = []
    for s in sorted(stalls, key=lambda s: (s.cpu, s.start_ns)):
        last = out[-1] if out else None
        if last and last.cpu == s.cpu and s.start_ns <= last.end_ns:
            by = last.by if last.by == s.by or not s.by else (last.by or s.by)
            out[-1] = Stall(s.cpu, s.role, last.kind if last.kind == s.kind else "merged", last.start_ns,
                            max(last.end_ns, s.end_ns), by)
        else:
            out.append(s)
    return sorted(out, key=lambda s: s.start_ns)


def per_cpu_summary(stalls: list[Stall], roles: dict[int, str], steal_ms: dict[int, float] | None,
                    probe: StallReport) -> dict[str, CpuStalls]:
    """Per CPU of the data path: count, total and longest stall, and what the
    probe and the kernel's steal clock saw."""
    out = {}
    for cpu, role in sorted(roles.items()):
        mine = [s for s in stalls if s.cpu == cpu]
        d = [s.duration_ns / 1e6 for s in mine]
        out[str(cpu)] = CpuStalls(role=role, count=len(mine), total_ms=sum(d), max_ms=max(d, default=0.0),
                                  by=sorted({s.by for s in mine if s.by}),
                                  probe_samples=probe.samples_per_cpu.get(cpu),
                                  steal_ms=None if steal_ms is None else steal_ms.get(cpu))
    return out


@dataclass
class Bins:
    """The window's sequence numbers cut in the sink's bins: packets, losses and due times."""

    first_bin: int
    pkts: np.ndarray
    lost: np.ndarray
    due_start: np.ndarray  # due time of each bin's first packet
    due_end: np.ndarray  # due time of the packet after its last

    @classmethod
    def of(cls, timeline: SinkTimeline, gen: GeneratorReport) -> "Bins":
        b, lo, hi = timeline.bin_pkts, timeline.first_seq, timeline.end_seq
        b0, b1 = lo // b, (hi - 1) // b
        edges = np.clip(np.arange(b0, b1 + 2, dtype=np.int64) * b, lo, hi)
        lost = np.zeros(b1 - b0 + 1, dtype=np.int64)
        for k, n in timeline.lost_per_bin:
            lost[k - b0] += n
        due = due_ns(gen, edges)
        return cls(b0, np.diff(edges), lost, due[:-1], due[1:])


Window = tuple[int, int, list[Stall]]  # (start ns, end ns, the stalls in it)


def _joined(windows: list[Window]) -> list[Window]:
    """Windows sorted by start, overlapping ones joined."""
    out: list[Window] = []
    for lo, hi, ss in windows:
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi), out[-1][2] + ss)
        else:
            out.append((lo, hi, ss))
    return out


def influence_windows(stalls: list[Stall]) -> list[Window]:
    """Union of [start - PRE, end + POST] over the stalls, with the stalls in each."""
    return _joined([(s.start_ns - PRE_NS, s.end_ns + POST_NS, [s])
                    for s in sorted(stalls, key=lambda s: s.start_ns)])


def follow_drain(windows: list[Window], bins: Bins, delays: np.ndarray, drain_at: float) -> list[Window]:
    """Each window extended bin by bin while the sink's delay is at least
    ``drain_at`` (the queue the stall left is still there), up to POST_MAX_NS
    after its last stall; windows that come to overlap are joined."""
    grown = []
    for lo, hi, ss in windows:
        cap = max(s.end_ns for s in ss) + POST_MAX_NS
        k = int(np.searchsorted(bins.due_end, hi, "left"))  # the bin the window ends in
        while k < len(delays) and bins.due_start[k] < cap and delays[k] >= drain_at:
            hi = max(hi, int(bins.due_end[k]))
            k += 1
        grown.append((lo, hi, ss))
    return _joined(grown)


def _pool(values: np.ndarray, how) -> tuple[int, list]:
    """At most SERIES_POINTS values: consecutive groups of k pooled with ``how``."""
    k = max(1, math.ceil(len(values) / SERIES_POINTS))
    n = math.ceil(len(values) / k) * k
    padded = np.concatenate([values, np.zeros(n - len(values), dtype=values.dtype)])
    return k, [int(v) for v in how(padded.reshape(-1, k), axis=1)]


def loss_series(timeline: SinkTimeline, bins: Bins, window_due_ns: int) -> LossSeries:
    """Lost packets and the highest one-way delay over the window, against
    the schedule, pooled to at most SERIES_POINTS points."""
    delays = np.asarray(timeline.delay_max_ns_per_bin, dtype=np.int64)
    k, lost = _pool(bins.lost, np.sum)
    _, delay = _pool(delays, np.max)
    t = (bins.due_start[::k] - window_due_ns) / 1e9
    return LossSeries(t_s=[float(x) for x in t],
                      step_s=float((bins.due_end[-1] - bins.due_start[0]) / 1e9 / max(len(bins.pkts), 1) * k),
                      lost_pkts=lost, delay_max_ns=delay)


def unlisted_seqs(timeline: SinkTimeline) -> tuple[int, int] | None:
    """The seqs [lo, hi) whose lost runs the sink did not list (it lists the
    first and the last runs past its limit; an older sink only the first);
    None when it listed them all."""
    if not timeline.runs_truncated:
        return None
    runs, k = timeline.runs, timeline.runs_head
    if k is None or k >= len(runs):
        return (runs[-1][0] + runs[-1][1], timeline.end_seq) if runs else (timeline.first_seq, timeline.end_seq)
    return runs[k - 1][0] + runs[k - 1][1], runs[k][0]


def lost_runs(timeline: SinkTimeline, gen: GeneratorReport, window_due_ns: int) -> LostRuns:
    """The lost runs (first seq, length, due time), and their sizes."""
    runs = timeline.runs
    return LostRuns(total=timeline.runs_total, truncated=timeline.runs_truncated,
                    length_hist_log2=timeline.run_length_hist, longest_pkts=max((n for _, n in runs), default=0),
                    first=[LostRun(first_seq=s, pkts=n, due_s=(due_ns(gen, s) - window_due_ns) / 1e9)
                           for s, n in runs[:KEEP_STALLS]])


def loss_timeline(timeline: SinkTimeline, gen: GeneratorReport, bins: Bins | None = None) -> LossTimeline:
    """The result's loss in time: lost runs and the pooled series, in seconds
    from the window's first due time (``bins``: already cut, or cut here)."""
    bins = bins or Bins.of(timeline, gen)
    window_due = int(bins.due_start[0])
    return LossTimeline(bin_pkts=timeline.bin_pkts, lost_runs=lost_runs(timeline, gen, window_due),
                        series=loss_series(timeline, bins, window_due))


# An injected stall is the truth planted when its spinner ran this share of
# its span; less means the host took the CPU from the injector itself.
DELIVERED_PCT = 90.0


def injected_found(injected: InjectedReport, stalls: list[Stall], gen: GeneratorReport) -> InjectedFound:
    """Each injected stall while the generator was sending (the data path
    needed the CPU then; outside, nothing waits for it to be seen) is found
    when a detected stall of its CPU overlaps it."""
    cpu = injected.cpu
    mine = [s for s in stalls if s.cpu == cpu]
    during = [(b, e) for b, e in injected.stalls if b < gen.last_send_ns and e > gen.first_send_ns]
    found = [any(s.start_ns <= e + PRE_NS and s.end_ns >= b - PRE_NS for s in mine) for b, e in during]
    out = InjectedFound(cpu=cpu, busy_ms=injected.busy_ns / 1e6, every_ms=injected.period_ns / 1e6,
                        injected=len(found), found=sum(found), outside_traffic=len(injected.stalls) - len(during),
                        missed_at_ns=[b for (b, _), f in zip(during, found) if not f])
    short = []
    if injected.cpu_ns:
        out.delivered_pct = 100 * sum(injected.cpu_ns) / (len(injected.cpu_ns) * injected.busy_ns)
        if out.delivered_pct < DELIVERED_PCT:
            short.append(f"its stalls ran {out.delivered_pct:.0f}% of the {out.busy_ms:g} ms planted "
                         "(the hypervisor held the vCPU for the rest)")
    if injected.missed:
        out.skipped = injected.missed
        short.append(f"{injected.missed} stall(s) skipped (the injector woke too late)")
    if short:  # set only when it says something: results of older trials re-evaluate to themselves
        out.disturbed = "; ".join(short)
    return out


def _ms_range(stalls: list[Stall]) -> str:
    d = sorted(s.duration_ns / 1e6 for s in stalls)
    return f"{d[0]:.1f} ms" if len(d) == 1 or d[-1] - d[0] < 0.05 else f"{d[0]:.1f}-{d[-1]:.1f} ms"


def words(lost: int, explained: int, windows: list, cause_rest: str, inline: bool = False) -> str:
    """The attribution in one sentence; ``inline``: cause_rest follows the
    rest's count directly ("the other 86 followed ...")."""
    if lost == 0:
        return "no packet lost"
    hit = [s for _, _, ss in windows for s in ss]
    if not explained:
        where = f" ({len(hit)} stalls of the data path's CPUs had no excess loss)" if hit else ""
        return f"none of the {lost:,} lost packets fell in a host stall{where}: {cause_rest}"
    roles = sorted({s.role for s in hit})
    cpus = " and ".join(f"the {r} CPU" for r in roles)
    text = f"{explained:,} of {lost:,} lost packets fell in {len(hit)} stall{'s' * (len(hit) != 1)} of {cpus} " \
           f"of {_ms_range(hit)}"
    rest = lost - explained
    if rest <= 0.1 * lost:
        return text + ": the host, not the data path"
    return text + f"; the other {rest:,}{' ' if inline else ': '}{cause_rest}"


def run_causes(timeline: SinkTimeline, gen: GeneratorReport, bins: Bins, delays: np.ndarray, hit: list, rest_cause: str,
               fill_ns: float, unseen_possible: bool) -> tuple[dict[str, list[int]], list[float]]:
    """Each listed lost run's cause ([runs, packets] per cause): host_stall
    when it falls in a stall window with excess loss, else the trial's
    rest_cause; with ``unseen_possible``, a run of the rest after the one-way
    delay rose towards the ring's fill time is unseen_stall. Also the delays
    (ms) before those."""
    run_cause = {"host_stall": [0, 0], rest_cause: [0, 0]}
    starts = np.array([lo for lo, _, _ in hit], dtype=np.int64)
    ends = np.array([hi for _, hi, _ in hit], dtype=np.int64)
    unseen_at = max(UNSEEN_FILL_SHARE * fill_ns, UNSEEN_OVER_MEDIAN * float(np.median(delays)) if len(delays) else 0)
    unseen_ms = []
    for s, n in timeline.runs:
        a, b = due_ns(gen, s), due_ns(gen, s + n - 1)
        j = np.searchsorted(starts, b, "right") - 1
        key = "host_stall" if j >= 0 and ends[j] >= a else rest_cause
        if key == rest_cause and unseen_possible:
            k = s // timeline.bin_pkts - bins.first_bin
            before = int(delays[max(k - 3, 0):k + 1].max()) if len(delays) else 0
            if before >= unseen_at:
                key = "unseen_stall"
                unseen_ms.append(before / 1e6)
        run_cause.setdefault(key, [0, 0])
        run_cause[key][0] += 1
        run_cause[key][1] += n
    return run_cause, unseen_ms


def _blind(probe: StallReport) -> str:
    """What the probe cannot see, for loss it could not place: a vCPU stall
    shorter than its clock's period leaves no gap."""
    if not probe.period_ns:
        return ""
    ms = probe.period_ns / 1e6
    return f"; stalls under the probe's {ms:g} ms period go unseen (a denser probe: --stall-period)"


@dataclass(frozen=True)
class Attribution:
    """The loss in time and the share of it host stalls explain (the result's parts)."""

    host_stalls: HostStalls
    loss_timeline: LossTimeline
    loss_attribution: LossAttribution
    explained: StallLoss
    host_interference: bool  # the flag: stalls explain at least HOST_INTERFERENCE_SHARE of the loss


def attribute(timeline: SinkTimeline, gen: GeneratorReport, probe: StallReport, placement: RawPlacement,
              sut_busy: float | None, steal_ms: dict[int, float] | None = None,
              injected: InjectedReport | None = None, generator_lag: bool = True) -> Attribution:
    """Stalls per CPU, loss in time, and how much loss the stalls explain.
    ``generator_lag``: the generator's late episodes count as stalls of its
    CPU (not when it could not offer the load at all: then it is always late)."""
    roles = cpu_roles(placement)
    found = probe_stalls(probe, roles)
    if generator_lag:
        found += generator_stalls(gen, roles, probe.threshold_ns or 200_000)
    stalls = merge(found)
    rate = gen.intended_rate_pps
    fill_ns = VETH_RING_PKTS / rate * 1e9
    qualifying = [s for s in stalls if s.duration_ns >= QUALIFY_FILL_SHARE * fill_ns]
    bins = Bins.of(timeline, gen)
    window_due = int(bins.due_start[0])
    delays = np.asarray(timeline.delay_max_ns_per_bin, dtype=np.int64)
    windows = influence_windows(qualifying)
    if len(delays) == len(bins.pkts):
        drain_at = max(DRAIN_OVER_MEDIAN * float(np.median(delays)), QUALIFY_FILL_SHARE * fill_ns)
        windows = follow_drain(windows, bins, delays, drain_at)
    in_window = np.full(len(bins.pkts), -1)
    for j, (lo, hi, _) in enumerate(windows):
        a, b = np.searchsorted(bins.due_end, lo, "right"), np.searchsorted(bins.due_start, hi, "left")
        seg = in_window[a:b]
        seg[seg < 0] = j
    out_mask = in_window < 0
    pkts_out, lost_out = int(bins.pkts[out_mask].sum()), int(bins.lost[out_mask].sum())
    baseline = lost_out / pkts_out if pkts_out else 0.0
    hit, explained = [], 0
    for j, (lo, hi, ss) in enumerate(windows):
        m = in_window == j
        excess = int(bins.lost[m].sum()) - baseline * int(bins.pkts[m].sum())
        if excess >= 0.5:
            explained += round(excess)
            hit.append((lo, hi, ss))
    lost = int(bins.lost.sum())
    explained = min(explained, lost)
    spread = float((bins.lost[out_mask] > 0).mean()) if out_mask.any() else 0.0
    busy = f"{100 * sut_busy:.0f}% busy" if sut_busy is not None else "busy share unknown"
    overload = spread >= OVERLOAD_SPREAD or (sut_busy is not None and sut_busy >= OVERLOAD_BUSY)
    rest_cause = "overload" if overload else "unexplained"
    rest_words = (f"the data path (overload: loss in {100 * spread:.0f}% of the ms outside stalls, the SUT CPU "
                  f"{busy})" if overload else f"not explained by host stalls (the SUT CPU {busy}){_blind(probe)}")
    runs = timeline.runs
    # A busy SUT CPU alone does not rule out a short stall: threaded NAPI here reads >= 90% busy at
    # 300 kpps, a third of its capacity. Loss over many of the ms does: an overload episode.
    unseen_possible = spread < (UNSEEN_MAX_SPREAD if overload else OVERLOAD_SPREAD)
    run_cause, unseen_ms = run_causes(timeline, gen, bins, delays, hit, rest_cause, fill_ns, unseen_possible)
    inline = False
    if unseen_ms:
        ms = f"{min(unseen_ms):.1f}" if max(unseen_ms) - min(unseen_ms) < 0.05 else \
            f"{min(unseen_ms):.1f}-{max(unseen_ms):.1f}"
        unseen = f"followed the SUT's queue going undrained for {ms} ms (stalls shorter than the probe sees)"
        inline = not run_cause[rest_cause][1]  # all the rest: "the other 86 followed ..."
        unseen_pkts = run_cause["unseen_stall"][1]
        rest_words = unseen if inline else f"{unseen_pkts:,} {unseen}; {run_cause[rest_cause][1]:,} {rest_words}"
    share = explained / lost if lost else 0.0
    host_stalls = HostStalls(
        probe=StallProbeInfo(period_ns=probe.period_ns, threshold_ns=probe.threshold_ns,
                             lost_events=probe.lost_events, events_truncated=probe.events_truncated),
        ring_fill_ms=fill_ns / 1e6, qualifying_min_ms=QUALIFY_FILL_SHARE * fill_ns / 1e6,
        per_cpu=per_cpu_summary(stalls, roles, steal_ms, probe),
        stalls=[StallRow(cpu=s.cpu, role=s.role, kind=s.kind, by=s.by, start_s=(s.start_ns - window_due) / 1e9,
                         duration_ms=s.duration_ns / 1e6) for s in stalls[:KEEP_STALLS]])
    if injected is not None:
        host_stalls.injected = injected_found(injected, stalls, gen)
    attribution = LossAttribution(
        lost_pkts=lost, explained_pkts=explained, explained_share=share, baseline_loss_ratio=baseline,
        stall_windows=len(windows), stall_windows_with_loss=len(hit), rest_cause=rest_cause, sut_busy_ratio=sut_busy,
        loss_spread=spread, runs_by_cause={k: RunsOfCause(runs=r, pkts=p) for k, (r, p) in run_cause.items()},
        runs_counted=len(runs),
        # the part of the rest that followed a queue left undrained (not set apart: the probe did not see it)
        unseen_stall_pkts=run_cause.get("unseen_stall", [0, 0])[1],
        words=words(lost, explained, hit, rest_words, inline))
    return Attribution(host_stalls=host_stalls, loss_timeline=loss_timeline(timeline, gen, bins),
                       loss_attribution=attribution, explained=StallLoss(pkts=explained, share=share),
                       host_interference=explained >= 1 and share >= HOST_INTERFERENCE_SHARE)
