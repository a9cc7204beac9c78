"""One trial: measure (warm-up, a measurement window of T seconds, drain,
read) then evaluate, the same on this host and on an inventory's hosts.

``measure`` is written once, against a trial's pieces on its hosts
(softnet.hosts.trial_hosts.TrialHosts: this host's namespaces, or real hosts
through their agents). It returns the raw trial (a JSON document: tool
reports, counters before/after and at the window edges, samples, observed
placement, host facts); softnet.analysis.trial_eval.evaluate turns it into
the typed result.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from typing import Callable, Protocol

from softnet import interrupts
from softnet.analysis.kernel_stats import live_sample
from softnet.analysis.trial_eval import evaluate
from softnet.errors import TestbedError
from softnet.hosts.this_host import ThisHost
from softnet.hosts.trial_hosts import GenPlan, SamplerHandle, SinkShape, TrialHosts
from softnet.results import shapes
from softnet.results.live import LiveSample
from softnet.results.raw import check_raw
from softnet.results.trial import (MTU_FRAME_BYTES, PAYLOAD_BYTES, RAW_SCHEMA_VERSION, TrialSpec,  # noqa: F401
                                   min_frame_bytes)
from softnet.testbed.local import LocalTestbed, first_destination, first_source
from softnet.tools.changes import HostChanges
from softnet.traffic.native import Shape, timeline_bin_pkts

OVERTIME_FACTOR, OVERTIME_S = 1.5, 10.0  # a generator this far behind schedule is stopped


class Together(Protocol):
    """How a trial keeps time with the trials it takes turns with."""

    def start_at(self) -> int:
        """Wait for the others to be ready; the schedule's origin, CLOCK_MONOTONIC ns."""

    def end_at(self, pkts: int, burst_pkts: int) -> int:
        """When the last of them has sent ``pkts`` in bursts of ``burst_pkts``, CLOCK_MONOTONIC ns."""

    def sent(self) -> None:
        """Wait for the others' generators to finish."""


def traffic_shape(spec: TrialSpec, ip_version: int, dst_ip: str) -> tuple[Shape, SinkShape]:
    """The generator's shape options and the sink's (flows, mix, dst_ports)
    for a spec; ``dst_ip``: the testbed's sink address."""
    mix = spec.mix_sizes()
    shape = Shape(dst_ips=spec.dst_ips, dst_ports=spec.dst_ports,
                  dst_ip=first_destination(ip_version, dst_ip, spec.dst_ips) if spec.dst_ips > 1 else None,
                  mix=shapes.mix_text(mix) if mix else None, arrivals=spec.arrivals, seed=spec.seed,
                  burst_pkts=spec.burst_pkts, on_duty=spec.on_duty, step_seq=spec.step_seq,
                  step_rate_pps=spec.step_rate_pps,
                  sleep_gaps_ns=None if spec.sleep_gaps_us is None else round(spec.sleep_gaps_us * 1e3))
    n = shapes.total_flows(spec.flows, spec.src_ips, spec.dst_ips, spec.dst_ports)
    # per-flow counts when the sink can hold them (--flows and --src-ips alone may address more)
    return shape, SinkShape(flows=n if 1 < n <= shapes.MAX_FLOWS else 1, mix=shape.mix, dst_ports=spec.dst_ports)


def _overdue(gens, expected_s: float, started: float) -> bool:
    """Far behind schedule (its CPU starved, e.g. by receive work steered
    onto it): the generators are stopped; the trial is flagged, not lost."""
    if time.time() - started > expected_s * OVERTIME_FACTOR + OVERTIME_S:
        for g in gens:
            g.interrupt()
        return True
    return False


VICTIM_BASELINE_S = 1.5  # the victim alone on its CPU before the traffic: its baseline rate
VICTIM_AFTER_S = 0.8  # and after it: a host whose pace moved between the two spoils the comparison
PACE_S = 0.1  # the pace probe's loop, before and after the traffic


def pace(hosts, changes) -> dict:
    """The host's pace on the first SUT CPU: the C victim's iterations over
    PACE_S, with its own run time (so a preemption does not count)."""
    v = hosts.victim(changes, "c", PACE_S)
    time.sleep(PACE_S + 0.03)
    return v.read()

def measure(hosts: TrialHosts, spec: TrialSpec, progress: Callable[[float], None] | None = None,
            exact_pkts: int = 0, live: Callable[[LiveSample], None] | None = None,
            together: Together | None = None) -> dict:
    """Run one trial on built hosts and return its raw reads; every piece the
    trial starts (sinks, generators, sampler, probe, injector, profiler) is
    stopped when it returns, however it returns. ``exact_pkts``: the sink
    also keeps that many window delays one by one (the raw's sink
    latency_exact_ns), to check its histogram against. ``live``: called with
    the kernel's figures over each new sample interval while the trial runs.
    ``together``: a trial taking turns with others' in the same seconds
    (softnet.campaign.interleave): they wait for each other before their
    generators start, and again when they have all sent, before any reads."""
    spec.validate(hosts.ip_version)
    hosts.check(spec)
    one = spec.one_direction()  # what each direction sends (the whole spec when one-way)
    gen_cpus = hosts.generator_cpus(spec)
    src0, dst0 = hosts.endpoints(reverse=False)
    src_ip = first_source(hosts.ip_version, src0, spec.src_ips)
    shape, sink_shape = traffic_shape(spec, hosts.ip_version, dst0)
    warmup, total = one.warmup_pkts, one.warmup_pkts + one.window_pkts
    expected_s = total / one.rate_pps if one.step_at_s is None else one.warmup_s + one.duration_s
    hosts.begin(expected_s)
    directions = (False, True) if spec.bidirectional else (False,)
    with HostChanges() as trial_changes:
        c = trial_changes
        sinks = [hosts.sink(c, rev, total, warmup, exact_pkts, timeline_bin_pkts(one.rate_pps, total),
                            len(gen_cpus), sink_shape) for rev in directions]
        probe, probe_missing = None, "off (--no-stall-probe)"
        if spec.stall_probe:
            try:
                probe, probe_missing = hosts.stall_probe(c, hosts.data_path_cpus(gen_cpus),
                                                         spec.stall_period_us), None
            except TestbedError as exc:  # a host without the perf events it needs: stalls unknown
                probe_missing = str(exc)
        injector = None
        if spec.inject_busy_ms:  # a host change like any other: recorded, undone when the trial ends
            injector = hosts.injector(c, spec.inject_cpu, spec.inject_busy_ms, spec.inject_every_ms)
        # the victim cross-check compares against the eBPF times on its CPU: measured all along, not scaled
        base_duty = 1.0 if spec.victim else spec.profile_base_duty
        profiler = hosts.profiler(c, spec.profile_per_packet, spec.profile_duty, base_duty) if spec.profile else None
        prof_start = profiler.read() if profiler else None
        stacks = hosts.stack_sampler(c, spec.profile_stack_hz) if profiler and spec.profile_stack_hz else None
        sampler = hosts.sampler(c, spec.sample_interval_s, profiler) if spec.sample_interval_s is not None else None
        # the host at rest before the traffic: the sampler's idle power, the victim's baseline rate
        pause = max(spec.idle_s if sampler else 0.0, VICTIM_BASELINE_S if spec.victim else 0.0)
        victim = hosts.victim(c, spec.victim, pause + expected_s + VICTIM_AFTER_S + 5) if spec.victim else None
        if pause:
            time.sleep(pause)
        pace_before = pace(hosts, c) if spec.pace_probe and not spec.victim else None
        before = hosts.host_reads()
        gens = []
        t0_ns = together.start_at() if together else None
        if together:
            shape = replace(shape, hold_until_ns=together.end_at(total, one.burst_pkts))
        for rev in directions:
            s0, _ = hosts.endpoints(reverse=rev)
            first = first_source(hosts.ip_version, s0, one.src_ips)
            gens.append(hosts.generators(c, rev, GenPlan(
                one.rate_pps, total, warmup, one.frame_bytes, one.flows, gen_cpus, src_ips=one.src_ips,
                src_ip=first if one.src_ips > 1 else None, shape=shape, t0_ns=t0_ns)))
        started = gens[0].started_unix_s
        interrupts.checkpoint("tools")
        # The window's edges on the SUT host's clock, arranged during the
        # warm-up: nothing needs to reach that host while the window runs.
        hosts.window((started + spec.warmup_s, started + spec.warmup_s + spec.duration_s), sampler, profiler,
                     stacks)
        reset = hosts.reset(c, started + spec.warmup_s + spec.reset_at_s) if spec.reset_at_s is not None else None
        watch = LiveWatch(sampler, live, spec.sample_interval_s)
        while any(g.running() for g in gens):
            elapsed = time.time() - started
            hosts.tick(past_window=elapsed > expected_s)
            if progress:
                progress(min(max(elapsed, 0.0) / expected_s, 1.0))
            watch.poll(elapsed)
            interrupts.check()  # a trial in a worker thread (interleaved): the signal went to the main one
            if _overdue(gens, expected_s, started):
                break
            time.sleep(hosts.poll_s)
        reports = [g.wait(timeout=5) for g in gens]
        if together:  # its reads would take the CPU from a partner's generator still sending
            together.sent()
        edges = hosts.window_reads()
        # named after the traffic (kallsyms read then: the SUT's BPF programs are still loaded)
        stack_names = stacks.symbols() if stacks else None
        drained = [sink.drain() for sink in sinks]
        if victim:
            time.sleep(VICTIM_AFTER_S)
        pace_after = pace(hosts, c) if pace_before is not None else None
        timelines = [sink.timeline(r["sent_pkts"]) for sink, r in zip(sinks, reports)]
        stalls = probe.read() if probe else {"missing": probe_missing}
        injected = injector.read() if injector else None
        reset_read = reset.read() if reset else None
        victim_read = victim.read() if victim else None
        series = sampler.finish() if sampler else None
        after = hosts.host_reads()
    raw = {
        "raw_schema_version": RAW_SCHEMA_VERSION,
        "spec": asdict(spec),
        **hosts.describe(spec, gen_cpus, src_ip, shape.dst_ip, profiler is not None, edges),
        "started_unix_s": started,
        "generator": reports[0], "sink": drained[0][0], "drain_s": drained[0][1],
        "sink_timeline": timelines[0], "stalls": stalls, "injected_stalls": injected,
        "before": before, "after": after, "window": {"start": edges.get("start"), "end": edges.get("end")},
        "series": series, "profile": None,
    }
    if spec.bidirectional:
        s0, _ = hosts.endpoints(reverse=True)
        raw["reverse"] = {"generator": reports[1], "sink": drained[1][0], "drain_s": drained[1][1],
                          "sink_timeline": timelines[1], "sink_ifname": hosts.sink_ifname(True),
                          "src_ip_first": first_source(hosts.ip_version, s0, one.src_ips)}
    if reset_read is not None:
        raw["reset"] = reset_read
    if victim_read is not None:
        raw["victim"] = victim_read
    if pace_before is not None:
        raw["pace"] = {"before": pace_before, "after": pace_after}
    if profiler:
        raw["profile"] = {"reads": {"start": prof_start, "window_start": edges.get("profile_start"),
                                    "window_end": edges.get("profile_end")},
                          "plan": profiler.plan, "events": profiler.events, "drop_reasons": profiler.drop_reasons,
                          "duty": profiler.duty, "period_ms": profiler.period_ms,
                          **({"base_duty": profiler.base_duty} if profiler.base_duty < 1 else {})}
        if stacks:
            raw["profile"]["stacks"] = {"freq_hz": stacks.freq_hz, "period_ns": stacks.period_ns, "cpus": stacks.cpus,
                                        "window_start": edges.get("stacks_start"),
                                        "window_end": edges.get("stacks_end"), **stack_names}
    raw["provenance"] = hosts.provenance(spec, trial_changes)
    # As JSON from here on: the result is the same whether evaluated now or
    # re-evaluated from the stored file. Either kind of hosts gives one shape.
    raw = json.loads(json.dumps(raw))
    check_raw(raw)
    return raw


class LiveWatch:
    """Hands each new sample interval of a running trial to ``live``, asking
    the sampler twice an interval (on an inventory's host: an agent request)."""

    def __init__(self, sampler: SamplerHandle | None, live: Callable[[LiveSample], None] | None,
                 interval_s: float | None):
        self.sampler, self.live = (sampler, live) if sampler and live and interval_s else (None, None)
        self.every_s = (interval_s or 1.0) / 2
        self.next_s, self.last_t = 0.0, None

    def poll(self, elapsed_s: float) -> None:
        if self.sampler is None or self.live is None or time.monotonic() < self.next_s:
            return
        self.next_s = time.monotonic() + self.every_s
        tail = self.sampler.recent()
        if tail.t_s and tail.t_s[-1] != self.last_t:
            self.last_t = tail.t_s[-1]
            if (sample := live_sample(tail, elapsed_s)) is not None:
                self.live(sample)


def trial(hosts: TrialHosts, spec: TrialSpec, progress: Callable[[float], None] | None = None,
          keep_raw: bool = False, path: dict | None = None, exact_pkts: int = 0,
          live: Callable[[LiveSample], None] | None = None, together: Together | None = None,
          interleave: dict | None = None) -> dict:
    """measure + evaluate; the result as a dict (``keep_raw``: with the raw
    trial under "raw_trial", which the store saves as the raw file; ``path``:
    which sides of the SUT a campaign cell uses, kept with the trial;
    ``together`` and ``interleave``: a trial taking turns with others, how
    it keeps time with them and what it records of them)."""
    raw = measure(hosts, spec, progress, exact_pkts, live, together)
    if path is not None:
        raw["path"] = path
    if interleave is not None:
        raw["interleave"] = interleave
    result = evaluate(raw, spec).to_dict()
    if keep_raw:
        result["raw_trial"] = raw
    return result


def run_trial(tb: LocalTestbed, ep, spec: TrialSpec, changes: HostChanges,
              progress: Callable[[float], None] | None = None, keep_raw: bool = False,
              path: dict | None = None, exact_pkts: int = 0) -> dict:
    """A trial on this host's built testbed (whose changes are in ``changes``)."""
    return trial(ThisHost(tb, ep, changes), spec, progress, keep_raw, path, exact_pkts)
