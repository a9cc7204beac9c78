"""evaluate(raw, spec) -> TrialResult: a trial's figures and flags from its raw
reads, with no I/O, so every rule is testable on captured raw trials.

Loss is computed over the window packets only (sequence numbers >= the
warm-up count), so packets still in flight at the window edges are neither
lost nor double counted.
"""
from __future__ import annotations

import math

import numpy as np

from softnet.analysis import counters, latency_hist, loss_time
from softnet.analysis.victim_check import victim_check
from softnet.analysis.cpu_audit import audit_cpu, cpu_profile
from softnet.analysis.kernel_functions import functions_of
from softnet.analysis.kernel_stats import trial_kernel_stats
from softnet.analysis.profile_reads import delta as profiler_delta
from softnet.analysis.profile_reads import name_drops
from softnet.analysis.back_to_back import back_to_back_result
from softnet.analysis.recovery import recovery_result
from softnet.analysis.reset import reset_result
from softnet.analysis.stages import stage_breakdown
from softnet.errors import InputError
from softnet.results.raw import (GeneratorReport, ProcSnapshot, RawPace, RawProfile, RawTestbed, RawTrial, RawVictim,
                                 SinkReport, StallReport, check_raw)
from softnet.results.series import Series
from softnet.results.trial import (KNOWN_RAW_SCHEMA_VERSIONS, RESULT_SCHEMA_OF_RAW, Diagnosis, Direction, FlowCounts,
                                   GeneratorSummary, HostPace, HostStalls, KernelStats, LatencyExact, LatencyHistogram,
                                   PlacementObserved, PlacementRequested, ProfileResult, SizeLoss, ThreadCpu,
                                   Rfc8219Latency, TrafficShape, TrialPlacement, TrialResult, TrialSpec)
from softnet.results import shapes

PLACEMENT_MIN_SHARE = 0.99  # of sink packets counted on the requested CPUs
PACING_TOLERANCE = 0.005  # achieved load within +-0.5% of intended, or the trial is flagged
# Flags that inform without invalidating: the trial still measured the SUT
# (host_interference: host stalls explain part of its loss, which is set apart).
# a trial that took turns whose bursts ran, on average, past its slot's idle guard into a partner's slot
TURNS_OVERLAPPED = "turns_overlapped"
INFORMATIONAL_FLAGS = frozenset({loss_time.HOST_INTERFERENCE, TURNS_OVERLAPPED})


def turns_overlapped(raw: RawTrial, gen: GeneratorReport) -> bool:
    """The generator's mean lag in the window beyond the guard left idle at
    the end of each slot (the generator could not pace its bursts)."""
    t = raw.interleave
    if t is None or gen.window_lag_mean_ns is None:
        return False
    guard_s = t.period_s / t.variants - t.duty * t.period_s
    return gen.window_lag_mean_ns > guard_s * 1e9


def latency_v1(sink: SinkReport) -> dict:
    """Raw schema 1 (a log2 histogram): percentiles only as the upper edge of
    their power-of-two bucket, the fields of a schema 2 result."""
    n = sink.rx_window_pkts
    hist = sink.latency_log2_hist
    upper = {}
    for q in (50, 99, 99.9):
        key = f"latency_p{q:g}_upper_ns".replace(".", "_")
        upper[key] = None
        if n:
            acc = 0
            for b, c in enumerate(hist):
                acc += c
                if acc >= n * q / 100:
                    upper[key] = 2 ** (b + 1)
                    break
    return dict(latency_min_ns=sink.latency_min_ns if n else None,
                latency_mean_ns=sink.latency_sum_ns / n if n else None,
                latency_max_ns=sink.latency_max_ns if n else None, **upper, latency_log2_hist=hist)


def latency(sink: SinkReport) -> dict:
    """Min, mean and max exact; percentiles from the log-linear histogram
    (softnet.analysis.latency_hist), each within latency_percentile_rel_error
    of the nearest-rank delay; and, with --exact, the truth to check them by."""
    h = sink.latency_hist
    n, sub_bits = sink.latency_pkts, h.sub_bucket_bits
    clamp = (sink.latency_min_ns, sink.latency_max_ns) if n else None
    pct = latency_hist.percentiles(h.buckets, sink.latency_over_range_pkts, sub_bits=sub_bits, clamp=clamp)
    out = dict(latency_min_ns=sink.latency_min_ns if n else None,
               latency_mean_ns=sink.latency_sum_ns / n if n else None,
               latency_max_ns=sink.latency_max_ns if n else None,
               latency_pkts=n, latency_negative_pkts=sink.latency_negative_pkts,
               **{latency_hist.percentile_key(q): v for q, v in pct.items()},
               latency_percentile_rel_error=latency_hist.rel_error_bound(sub_bits),
               latency_hist=LatencyHistogram(sub_bucket_bits=sub_bits, range_log2_ns=h.range_log2_ns,
                                             buckets=h.buckets, over_range_pkts=sink.latency_over_range_pkts))
    if sink.latency_exact_ns is not None:
        out.update(latency_exact=exact_check(sink.latency_exact_ns, sink.latency_exact_seen_pkts, n, pct))
    out.update(rfc8219=rfc8219(out, sink))
    return out


def rfc8219(lat: dict, sink: SinkReport) -> Rfc8219Latency | None:
    """RFC 8219's latency figures from the window's delays. IPDV needs
    consecutive delays, which the sink keeps one by one only when asked
    (collect.exact_delays): in arrival order, so reordered frames (counted
    by the sink) pair with their neighbours in time, not in sequence."""
    lo, p999 = lat["latency_min_ns"], lat.get(latency_hist.percentile_key(99.9))
    if lo is None:
        return None
    out = Rfc8219Latency(typical_ns=lat.get(latency_hist.percentile_key(50)), worst_case_ns=p999,
                         pdv_ns=p999 - lo if p999 is not None else None)
    d = sink.latency_exact_ns
    if not d or len(d) < 2:
        out.ipdv_missing = "the sink kept no delays one by one (collect.exact_delays)"
        return out
    kept = np.asarray(d[:min(len(d), sink.latency_exact_seen_pkts or len(d))], dtype=np.int64)
    ipdv = np.diff(kept)
    out.ipdv_min_ns, out.ipdv_median_ns, out.ipdv_max_ns = int(ipdv.min()), float(np.median(ipdv)), int(ipdv.max())
    out.ipdv_pkts = int(ipdv.size)
    return out


def exact_check(delays: list[int], seen: int, n: int, pct: dict) -> LatencyExact:
    """The exact nearest-rank percentiles of the delays the sink kept one by
    one, and how far the histogram's are from them (only when it kept them all)."""
    xs = sorted(delays)
    complete = seen == n == len(xs) and (not xs or xs[0] > 0)
    exact = {q: xs[latency_hist.rank(q, len(xs)) - 1] if xs else None for q in pct}
    errors = [abs(pct[q] - exact[q]) / exact[q] for q in pct if complete and xs and pct[q] is not None]
    return LatencyExact(kept_pkts=len(xs), complete=complete,
                        **{latency_hist.percentile_key(q): v for q, v in exact.items()},
                        max_rel_error=max(errors) if errors else None)


def placement(tb: RawTestbed, gen: GeneratorReport, sink: SinkReport, window: ProcSnapshot) -> TrialPlacement:
    """Requested against observed placement. Evidence over configuration: the
    generator reports the CPU it ran on, the sink counts per CPU, and NET_RX
    softirqs show where receive work ran. A few stray packets elsewhere do not
    make a trial invalid; a real misplacement moves most of them."""
    p = tb.placement
    threads = tb.napi_thread_cpus
    busy = {str(c): counters.busy_ratio(t) for c, t in window.cpu_ticks.items()}
    per_cpu = sink.rx_test_pkts_per_cpu
    sink_cpus = [c for c, n in enumerate(per_cpu) if n]
    receive_cpus = set(p.sut_cpus) | ({p.sink_cpu} if p.sink_cpu is not None else set())
    on_requested = sum(n for c, n in enumerate(per_cpu) if c in receive_cpus) / max(sum(per_cpu), 1)
    ok = gen.cpu == p.gen_cpu and on_requested >= PLACEMENT_MIN_SHARE
    if p.steering == "threaded":
        def wanted(dev: str) -> list[int]:  # the sink's own NAPI thread (sink_cpu) sits apart from the SUT's
            return [p.sink_cpu] if dev == tb.sink_ifname and p.sink_cpu is not None else p.sut_cpus
        ok = ok and all(cpu in wanted(dev) for dev, t in threads.items() for cpu in t.values() if cpu is not None)
    net_rx = window.softirqs.get("NET_RX", {})
    return TrialPlacement(
        requested=PlacementRequested(**p.model_dump(exclude_unset=True)),
        observed=PlacementObserved(gen_cpu=gen.cpu, sink_cpus=sink_cpus, sink_share_on_requested_cpus=on_requested,
                                   sink_rx_pkts_per_cpu=per_cpu, napi_thread_cpus=threads,
                                   net_rx_softirqs_per_cpu={str(c): n for c, n in net_rx.items()},
                                   cpu_busy_ratio_per_cpu=busy),
        as_requested=ok,
    )


def diagnosis(raw: RawTrial, trial_delta: ProcSnapshot) -> Diagnosis:
    b, a = raw.after, raw.before
    links = {role: {k: v - a.links[role][k] for k, v in stats.items()} for role, stats in b.links.items()}
    eth0, eth1 = a.ethtool_gen, b.ethtool_gen  # the generator's veth (ethtool -S: stats named by the driver)
    softnet = trial_delta.softnet.values()
    return Diagnosis(
        # Frames the generator's XDP transmit could not put into the peer
        # veth's ring: the SUT's ingress, or the sink's without a SUT.
        ingress_ring_of="sink" if raw.testbed.sut == "none" else "SUT",
        qdisc_dropped_pkts=b.qdisc_drops - a.qdisc_drops,
        ingress_ring_full_pkts=eth1.get("tx_queue_0_xdp_xmit_errors", 0) - eth0.get("tx_queue_0_xdp_xmit_errors", 0),
        softnet_dropped_pkts=sum(v["dropped"] for v in softnet),
        softnet_time_squeeze=sum(v["time_squeeze"] for v in softnet),
        interface_deltas=links,
        interface_rx_dropped_pkts=sum(v["rx_dropped"] for v in links.values()),
        interface_tx_dropped_pkts=sum(v["tx_dropped"] for v in links.values()),
    )


SINK_DROP_SHARE, SINK_DROP_MIN = 0.1, 10


def sink_limited(diag: Diagnosis, tb: RawTestbed, lost: int | None) -> bool:
    """The sink's veth ring overflowed for a share of the loss: packets the
    SUT forwarded were dropped on the last hop because the sink's receive
    work did not keep up (e.g. its NAPI kthread on a busy generator's CPU),
    so the loss is not all the SUT's. The hop is the SUT interface facing
    the sink (sut_in for a bidirectional trial's reverse way); whole-trial
    drops, counted against the window's loss."""
    links = diag.interface_deltas
    hop = tb.sink_hop or "sut_out"
    if tb.sut == "none" or not lost or hop not in links:
        return False
    drops = links[hop].get("tx_dropped", 0)
    return drops > max(SINK_DROP_MIN, SINK_DROP_SHARE * lost)


def profile(prof: RawProfile, interface_ids: list, window: ProcSnapshot, packets: int,
            threads: set[int] | None = None) -> ProfileResult:
    """Per-CPU eBPF times over the window, drops by reason and device (host-wide:
    the sink's XDP drops of skbs count too, on its device), and the audit
    against the same window's /proc/stat ticks."""
    reads, events = prof.reads, prof.events
    devices = {(ino, idx): name for ino, idx, name in interface_ids}
    d = profiler_delta(reads.window_start if reads.window_start is not None else reads.start, reads.window_end)
    per_cpu = {cpu: cpu_profile(d, cpu) for cpu in range(len(d.cpus)) if cpu in window.cpu_ticks}
    transitions = {cpu: [[events[f], events[t], ns, n] for f, t, ns, n in d.cpus[cpu].transitions] for cpu in per_cpu}
    polled, polled_sampled = (sum(c.napi_work for c in cpus) for cpus in (d.cpus, d.sampled_cpus))
    functions, functions_missing = functions_of(prof.stacks, packets, threads)
    return ProfileResult(
        # set only where stacks were sampled: a result without them is as it was before softnet-stacks
        **({"functions": functions, "functions_missing": functions_missing} if prof.stacks is not None else {}),
        plan=prof.plan, window_s=d.wall_ns / 1e9, window_monotonic_ns=d.monotonic_ns,
        per_cpu=per_cpu,
        # drops: counted while sampled (all the window at duty 1), and estimated over the window by the
        # packets polled then against in all (not by time: the CPU drains a backlog faster in sampled periods)
        drops=name_drops(d.drops, prof.drop_reasons, devices, polled / polled_sampled if polled_sampled else 0.0),
        sampled_time_share=d.sampled_ns / d.wall_ns if d.wall_ns else None,
        base_time_share=d.base_share,
        sampled_packet_share=polled_sampled / polled if polled else None,
        drop_keys_full=sum(c.drop_keys_full for c in d.cpus),
        audit={cpu: audit_cpu(m, window.cpu_ticks[cpu]) for cpu, m in per_cpu.items()},
        # the stage clock's raw (from event, to event, ns, count), named, and the stages
        transitions=transitions,
        duty=prof.duty,
        stages={cpu: stage_breakdown(d.cpus[cpu], d.sampled_cpus[cpu], transitions[cpu], d.wall_ns / 1e9,
                                     d.sampled_ns / 1e9, packets) for cpu in per_cpu} if d.sampled_ns else {},
        stages_missing=None if d.sampled_ns else (
            "no stage events: the light plan (no per-packet tracepoints)" if prof.duty == 0 else
            f"no sampled period fell inside the {d.wall_ns / 1e9:.2f} s window (stage events attached "
            f"{100 * prof.duty:g}% of every {prof.period_ms} ms): use a longer window or duty 1"),
    )


def flags(spec: TrialSpec, gen: GeneratorReport, sent: int, received: int, achieved: float, sink: SinkReport,
          other_runs: list[str]) -> list[str]:
    """The validity rules, in the order they are reported."""
    out = []
    intended = spec.mean_rate_pps
    if gen.sent_pkts < spec.warmup_pkts + spec.window_pkts or achieved < (1 - PACING_TOLERANCE) * intended:
        out.append("generator_limited")
    elif achieved > (1 + PACING_TOLERANCE) * intended:
        # Behind schedule at the window start, then catching up back to back:
        # the SUT saw a higher load than intended.
        out.append("generator_overshoot")
    # a send time after the arrival on one clock: a corrupt stamp
    if received > sent or sink.out_of_range_pkts or sink.latency_negative_pkts:
        out.append("counters_inconsistent")
    if gen.interrupted:
        out.append("interrupted")
    if other_runs:
        out.append("overlapped_other_run")
    return out


def host_stalls_in_time(raw: RawTrial, window: ProcSnapshot, sent: int, lost: int | None,
                        generator_lag: bool) -> tuple[dict, bool]:
    """Loss in time, the data path's CPU stalls and the loss they explain
    (softnet.analysis.loss_time); the SUT's own loss is what is left. Also
    whether the stalls explain enough of it for the host_interference flag."""
    timeline, probe, p = raw.sink_timeline, raw.stalls or StallReport(), raw.testbed.placement
    missing = probe.missing or (None if timeline else "no sink timeline")
    if missing or lost is None:
        out = dict(host_stalls=HostStalls(missing=missing or "loss unknown (counters inconsistent)"),
                   sut_lost_pkts=lost, sut_loss_ratio=lost / sent if sent and lost is not None else None)
        if timeline and lost is not None:  # when packets were lost is known without the probe
            out.update(loss_timeline=loss_time.loss_timeline(timeline, raw.generator))
        return out, False
    ticks = window.cpu_ticks
    busy = [counters.busy_ratio(ticks[c]) for c in p.sut_cpus if c in ticks]
    busy = [b for b in busy if b is not None]
    steal = {c: 10.0 * t.get("steal", 0) for c, t in ticks.items()}  # USER_HZ 100: 10 ms a tick
    a = loss_time.attribute(timeline, raw.generator, probe, p, sum(busy) / len(busy) if busy else None,
                            steal, raw.injected_stalls, generator_lag)
    # the sink's bitmap and its counters agree when nothing is in flight; if not, the counters rule
    sut_lost = max(lost - a.explained.pkts, 0)
    return dict(host_stalls=a.host_stalls, loss_timeline=a.loss_timeline, loss_attribution=a.loss_attribution,
                loss_explained_by_host_stalls=a.explained, sut_lost_pkts=sut_lost,
                sut_loss_ratio=sut_lost / sent if sent else None), a.host_interference


def achieved_rate(spec: TrialSpec, gen: GeneratorReport, sent: int, span_s: float) -> float:
    """The window's achieved rate: (packets - 1) / send span at constant
    arrivals; with poisson/onoff the intended rate scaled by the schedule's
    span over the send span (the window need not hold whole bursts or a mean
    sample of gaps: the schedule itself is the reference)."""
    if span_s <= 0:
        return 0.0
    due_span_ns = (gen.last_due_ns or 0) - (gen.window_due_start_ns or 0)
    if (spec.arrivals != "const" or spec.step_at_s is not None) and gen.window_due_start_ns and due_span_ns > 0:
        return spec.mean_rate_pps * (due_span_ns / 1e9) / span_s
    return (sent - 1) / span_s


def traffic_shape(spec: TrialSpec, sink: SinkReport, sent: int, received: int, span_s: float) -> dict:
    """The shape's figures: frame mix, mean frame size and bits throughput
    from the bytes received (window first copies, sizes incl. FCS), per-flow
    counts (the sink's seq % flows) and per-size loss (sent per size from the
    mix's table over the window's seqs [warm-up, warm-up + sent))."""
    mix = spec.mix_sizes()
    mean = shapes.mean_frame_bytes(mix) if mix else spec.frame_bytes
    rx_bytes = sink.window_frame_bytes if mix else received * spec.frame_bytes
    if rx_bytes is None:
        rx_bytes = received * mean
    out = dict(frame_mix=shapes.mix_text(mix) if mix else None, mean_frame_bytes=mean,
               throughput_bps=rx_bytes * 8 / span_s if span_s > 0 else None, arrivals=spec.arrivals,
               traffic_shape=TrafficShape(
                   arrivals=spec.arrivals, seed=spec.seed if spec.arrivals == "poisson" else None,
                   burst_pkts=spec.burst_pkts if spec.arrivals == "onoff" else None,
                   on_duty=spec.on_duty if spec.arrivals == "onoff" else None,
                   flows=spec.flows, src_ips=spec.src_ips, dst_ips=spec.dst_ips, dst_ports=spec.dst_ports,
                   flows_total=shapes.total_flows(spec.flows, spec.src_ips, spec.dst_ips, spec.dst_ports)))
    counts = sink.flow_pkts
    if counts:
        out.update(flow_counts=FlowCounts(flows=len(counts), min_pkts=min(counts), max_pkts=max(counts),
                                          sum_pkts=sum(counts)))
    if mix and sink.size_pkts is not None:
        sent_by = shapes.sent_per_size(mix, spec.warmup_pkts, spec.warmup_pkts + sent)
        rows = {}
        for size, _ in mix:
            n_sent, n_rx = sent_by[size], sink.size_pkts.get(str(size), 0)
            lost = n_sent - n_rx if n_rx <= n_sent else None
            rows[str(size)] = SizeLoss(sent_pkts=n_sent, received_pkts=n_rx, lost_pkts=lost,
                                       loss_ratio=lost / n_sent if n_sent and lost is not None else None)
        out.update(size_loss=rows)
    return out


def _sum(a, b):
    """Both directions' figure; None when either has none."""
    return None if a is None or b is None else a + b


def _ratio(n, sent: int):
    return n / sent if sent and n is not None else None


def both_directions(raw: RawTrial, spec: TrialSpec) -> TrialResult:
    """A bidirectional trial: each direction evaluated as a one-way trial of
    half the rate (the reverse one from the raw's "reverse" reads, without
    the host-wide samples the forward one carries), then counts, rates and
    loss summed; flags united, valid when both are."""
    one = spec.one_direction()
    r = raw.reverse
    fwd_raw = raw.model_copy(update={"reverse": None})
    rev_raw = fwd_raw.model_copy(update={
        "generator": r.generator, "sink": r.sink, "drain_s": r.drain_s, "sink_timeline": r.sink_timeline,
        "series": None, "profile": None,
        "testbed": raw.testbed.model_copy(update={"sink_ifname": r.sink_ifname, "src_ip_first": r.src_ip_first,
                                                  "sink_hop": "sut_in"})})
    fwd, rev = _evaluate(fwd_raw, one), _evaluate(rev_raw, one)
    out = fwd.model_copy(deep=True)
    out.intended_pkts = fwd.intended_pkts + rev.intended_pkts
    out.sent_pkts = sent = fwd.sent_pkts + rev.sent_pkts
    out.warmup_sent_pkts = fwd.warmup_sent_pkts + rev.warmup_sent_pkts
    out.received_pkts = fwd.received_pkts + rev.received_pkts
    out.reordered_pkts = fwd.reordered_pkts + rev.reordered_pkts
    out.duplicate_pkts = fwd.duplicate_pkts + rev.duplicate_pkts
    out.out_of_range_pkts = fwd.out_of_range_pkts + rev.out_of_range_pkts
    out.warmup_received_pkts = fwd.warmup_received_pkts + rev.warmup_received_pkts
    out.achieved_rate_pps = fwd.achieved_rate_pps + rev.achieved_rate_pps
    out.intended_rate_pps = fwd.intended_rate_pps + rev.intended_rate_pps
    out.lost_pkts, out.sut_lost_pkts = _sum(fwd.lost_pkts, rev.lost_pkts), _sum(fwd.sut_lost_pkts, rev.sut_lost_pkts)
    out.loss_ratio, out.sut_loss_ratio = _ratio(out.lost_pkts, sent), _ratio(out.sut_lost_pkts, sent)
    out.achieved_ratio = out.achieved_rate_pps / spec.rate_pps
    if fwd.throughput_bps is not None and rev.throughput_bps is not None:
        out.throughput_bps = fwd.throughput_bps + rev.throughput_bps
    if fwd.flow_counts and rev.flow_counts:  # each direction's flows are flows of their own
        f, b = fwd.flow_counts, rev.flow_counts
        out.flow_counts = FlowCounts(flows=f.flows + b.flows, min_pkts=min(f.min_pkts, b.min_pkts),
                                     max_pkts=max(f.max_pkts, b.max_pkts), sum_pkts=f.sum_pkts + b.sum_pkts)
    if fwd.size_loss and rev.size_loss:
        out.size_loss = {}
        for size, a in fwd.size_loss.items():
            b = rev.size_loss[size]
            n, lost = a.sent_pkts + b.sent_pkts, _sum(a.lost_pkts, b.lost_pkts)
            out.size_loss[size] = SizeLoss(sent_pkts=n, received_pkts=a.received_pkts + b.received_pkts,
                                           lost_pkts=lost, loss_ratio=_ratio(lost, n))
    out.flags = sorted(set(fwd.flags) | set(rev.flags))
    out.valid = fwd.valid and rev.valid
    out.directions = {name: Direction(**d.model_dump(include=set(Direction.model_fields)))
                      for name, d in (("forward", fwd), ("reverse", rev))}
    return out


def pace_ips(v: RawVictim) -> float | None:
    """A pace run's iterations per second of its own run time."""
    rows = [r for r in v.series if len(r) >= 3]
    if len(rows) < 2 or rows[-1][2] <= rows[0][2]:
        return None
    return (rows[-1][1] - rows[0][1]) / ((rows[-1][2] - rows[0][2]) / 1e9)


def host_pace(p: RawPace) -> HostPace:
    b, a = pace_ips(p.before), pace_ips(p.after)
    out = HostPace(cpu=p.before.cpu, before_ips=b, after_ips=a)
    if b and a:
        out.ips, out.drift_pct = math.sqrt(a * b), 100 * (a / b - 1)
    return out


def sut_thread_cpu(raw: RawTrial, sink: SinkReport) -> ThreadCpu | None:
    """The SUT's kthreads' CPU time over the whole trial (nothing else runs in
    them, so warm-up and drain included) per packet the sink received."""
    b, a = raw.before.sut_thread_runtime_ns, raw.after.sut_thread_runtime_ns
    if not b or not a or set(a) != set(b) or any(v is None for v in (*a.values(), *b.values())):
        return None
    ns = sum(a[pid] - b[pid] for pid in a)
    forwarded = sink.rx_window_pkts + sink.rx_warmup_pkts
    out = ThreadCpu(ns=ns, forwarded_pkts=forwarded, ns_per_pkt=ns / forwarded if forwarded else None, threads=len(a))
    # set only where read (a result keeps no empty field: stored trials re-evaluate exactly)
    if (runs := _delta(raw.before.sut_thread_runs, raw.after.sut_thread_runs, set(a))) is not None:
        out.runs = runs
    edges = (raw.window.start, raw.window.end)
    if None not in edges and (window_ns := _delta(*(e.thread_runtime_ns for e in edges), set(a))) is not None:
        out.window_ns = window_ns
        out.window_ns_per_pkt = window_ns / sink.rx_window_pkts if sink.rx_window_pkts else None
        if (window_runs := _delta(*(e.thread_runs for e in edges), set(a))) is not None:
            out.window_runs = window_runs
    return out


def _delta(before: dict[str, int | None] | None, after: dict[str, int | None] | None, pids: set[str]) -> int | None:
    """A per-thread counter's sum of increases, where both reads have every thread."""
    if not before or not after or set(before) != pids or set(after) != pids \
            or None in (*before.values(), *after.values()):
        return None
    return sum(after[p] - before[p] for p in pids)


def evaluate(raw: dict | RawTrial, spec: TrialSpec | None = None) -> TrialResult:
    """The result of a raw trial (softnet.campaign.trial.measure), as JSON or
    as measured. ``spec`` defaults to the one the raw trial records."""
    if isinstance(raw, dict):
        raw_version = raw.get("raw_schema_version")
        if raw_version not in KNOWN_RAW_SCHEMA_VERSIONS:
            raise InputError("raw trial", f"raw schema version {raw_version!r}: this softnet reads versions "
                             f"{', '.join(map(str, KNOWN_RAW_SCHEMA_VERSIONS))}")
        raw = check_raw(raw)
    spec = spec or TrialSpec.from_dict(raw.spec, "raw trial: spec")
    if raw.reverse is not None:
        return both_directions(raw, spec)
    return _evaluate(raw, spec)


def _evaluate(raw: RawTrial, spec: TrialSpec) -> TrialResult:
    """One direction's result."""
    raw_version = raw.raw_schema_version
    tb, gen, sink = raw.testbed, raw.generator, raw.sink
    warmup, window_pkts = spec.warmup_pkts, spec.window_pkts
    before, after = raw.before.procfs, raw.after.procfs
    window = counters.delta(raw.window.start if raw.window.start is not None else before, raw.window.end)

    sent = max(gen.sent_pkts - warmup, 0)
    received = sink.rx_window_pkts
    span_s = (gen.last_send_ns - gen.window_start_ns) / 1e9 if sent > 1 else 0.0
    achieved = achieved_rate(spec, gen, sent, span_s)
    other_runs = list(raw.other_runs)
    found = flags(spec, gen, sent, received, achieved, sink, other_runs)
    lost = sent - received if received <= sent else None  # negative loss is never a result
    place = placement(tb, gen, sink, window)
    if not place.as_requested:
        found.append("placement_not_as_requested")
    diag = diagnosis(raw, counters.delta(before, after))
    if sink_limited(diag, tb, lost):
        found.append("sink_limited")
    if turns_overlapped(raw, gen):
        found.append(TURNS_OVERLAPPED)
    fields = dict(
        # a raw trial of version 1 (log2 histogram) gives the result it always gave
        schema_version=RESULT_SCHEMA_OF_RAW[raw_version],
        sut=tb.sut, ip_version=tb.ip_version,
        intended_rate_pps=spec.rate_pps, duration_s=spec.duration_s, warmup_s=spec.warmup_s,
        frame_bytes=spec.frame_bytes, flows=spec.flows,
        intended_pkts=window_pkts, sent_pkts=sent, warmup_sent_pkts=min(gen.sent_pkts, warmup),
        achieved_rate_pps=achieved, achieved_ratio=achieved / spec.mean_rate_pps,
        send_span_s=span_s, received_pkts=received,
        lost_pkts=lost, loss_ratio=(lost / sent if sent and lost is not None else None),
        reordered_pkts=sink.reordered_pkts, duplicate_pkts=sink.duplicate_pkts,
        out_of_range_pkts=sink.out_of_range_pkts, warmup_received_pkts=sink.rx_warmup_pkts,
        **(latency(sink) if raw_version >= 2 else latency_v1(sink)),
        drain_s=raw.drain_s,
        generator=GeneratorSummary(calls=gen.calls, batch=gen.batch, window_lag_mean_ns=gen.window_lag_mean_ns,
                                   window_lag_max_ns=gen.window_lag_max_ns, window_late_pkts=gen.window_late_pkts,
                                   cpu=gen.cpu),
        diagnosis=diag,
        placement=place,
        other_runs=other_runs,
        flags=found, valid=not set(found) - INFORMATIONAL_FLAGS,
        started_unix_s=raw.started_unix_s,
    )
    if raw_version >= 3:
        stalls, interference = host_stalls_in_time(raw, window, sent, lost, "generator_limited" not in found)
        fields.update(stalls)
        if interference:
            found.append(loss_time.HOST_INTERFERENCE)
        fields.update(valid=not set(found) - INFORMATIONAL_FLAGS)
    if raw.reset is not None:
        fields.update(reset=reset_result(raw, spec, lost))
        if raw.reset.error:
            found.append("reset_failed")
            fields.update(valid=False)
    if spec.burst_rate_pps is not None:
        fields.update(back_to_back=back_to_back_result(raw, spec))
    if spec.step_at_s is not None:
        fields.update(recovery=recovery_result(raw, spec))
    if raw.series is not None:
        series = Series.from_json(raw.series.model_dump())
        if "start" in series.marks:
            series.marks.setdefault("window_start", series.marks["start"])
        if {"window_start", "window_end"} <= set(series.marks):
            kernel = trial_kernel_stats(series, tb.placement.sut_cpus, received, spec.frame_bytes,
                                        raw.host.cpu_freq_hz, raw.host.sysctls, spec.idle_s, spec.warmup_s)
        else:
            kernel = KernelStats(missing=dict(series.missing), sampler=dict(series.sampler))
        fields.update(kernel=kernel, kernel_samples=series.to_json())
    # taking turns, partners' SUTs share the CPUs: the trial's stacks are its own SUT kthreads' samples
    own = {int(t) for t in raw.before.sut_thread_runtime_ns or {}} if raw.interleave is not None else None
    prof = profile(raw.profile, tb.interface_ids, window, received, own) if raw.profile is not None else None
    if prof is not None:
        fields.update(profile=prof)
    if raw.victim is not None:
        fields.update(victim=victim_check(raw, tuple(prof.window_monotonic_ns) if prof else None,
                                          prof.per_cpu.get(raw.victim.cpu) if prof else None))
    if raw.pace is not None:
        fields.update(host_pace=host_pace(raw.pace))
    if "arrivals" in raw.spec:  # a raw trial from before traffic shapes evaluates as it always did
        fields.update(traffic_shape(spec, sink, sent, received, span_s))
    fields.update(provenance=raw.provenance)
    if raw.path is not None:
        fields.update(path=raw.path)
    if raw.interleave is not None:
        fields.update(interleave=raw.interleave)
    cpu = sut_thread_cpu(raw, sink)
    if cpu is not None:
        fields.update(sut_thread_cpu=cpu)
    if raw.hosts is not None:  # an inventory's hosts
        fields.update(hosts=raw.hosts, window_skew_ms=raw.window_skew_ms)
    b, a = raw.before.path_counters, raw.after.path_counters
    if b is not None and a is not None:  # the personality's proof of path, over the trial
        # counters as differences; gauges (named *_entries: FDB, conntrack) as found after the trial
        fields.update(path_counters={k: v if k.endswith("_entries") else v - b[k] for k, v in a.items() if k in b})
    return TrialResult(**fields)
