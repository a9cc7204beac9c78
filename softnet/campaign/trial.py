"""One trial on the local testbed: measure (warm-up, a measurement window of
T seconds, drain, read) then evaluate.

``measure`` does the I/O and returns the raw trial (a JSON document: tool
reports, counters before/after and at the window edges, samples, observed
placement, host facts); softnet.analysis.trial_eval.evaluate turns it into
the typed result. Each piece (sink, generator, sampler, profiler) is a tool
process driven through softnet.tools, so it can later run on another host.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from softnet.analysis.kernel_stats import cpu_freq_hz, host_sysctls
from softnet.analysis.loss_time import cpu_roles
from softnet.analysis.trial_eval import evaluate
from softnet.collect import procfs
from softnet.collect.profiler import Profiler
from softnet.collect.sampler import KernelSampler
from softnet.collect.stalls import StallProbe
from softnet.errors import InputError, TestbedError
from softnet.provenance import provenance
from softnet.results.trial import (MTU_FRAME_BYTES, PAYLOAD_BYTES, RAW_SCHEMA_VERSION, TrialSpec,  # noqa: F401
                                   min_frame_bytes)
from softnet.testbed.local import LocalTestbed, first_destination, first_source
from softnet.testbed.stall_inject import StallInjector
from softnet.tools.changes import NAME_PREFIX, HostChanges
from softnet.results import shapes
from softnet.traffic.native import GeneratorGroup, Shape, Sink, timeline_bin_pkts

OVERTIME_FACTOR, OVERTIME_S = 1.5, 10.0  # a generator this far behind schedule is stopped
NETNS_DIR = Path("/run/netns")


def drain_sink(sink: Sink) -> tuple[dict, float]:
    return sink.drain()


def other_runs(tb: LocalTestbed) -> set[str]:
    """Run ids of other softnet testbeds on this host (their namespaces): a
    trial that overlaps one shares the CPUs with it."""
    if not NETNS_DIR.is_dir():
        return set()
    ids = {p.name[len(NAME_PREFIX):].split("-")[0] for p in NETNS_DIR.iterdir() if p.name.startswith(NAME_PREFIX)}
    return ids - {tb.run_id}


def _host_reads(tb: LocalTestbed) -> dict:
    return {"links": tb.link_stats(), "ethtool_gen": tb.ethtool_stats("gen"), "qdisc_drops": tb.qdisc_drops(),
            "procfs": procfs.snapshot(), "path_counters": tb.personality.counters(tb),
            "sut_thread_runtime_ns": {str(pid): procfs.thread_runtime_ns(pid) for pid in tb.sut_threads()}}


def _sampler(tb: LocalTestbed, spec: TrialSpec):
    """The kernel statistics sampler, pinned away from the SUT's CPUs (or a no-op)."""
    if spec.sample_interval_s is None:
        return contextlib.nullcontext()
    return KernelSampler(spec.sample_interval_s, avoid_cpus=tb.placement.sut_cpus, links=tb.sample_links())


def data_path_cpus(tb: LocalTestbed, gen_cpus: list[int] | None = None) -> list[int]:
    """The CPUs the data path needs: the stall probe watches them."""
    return sorted(cpu_roles({**asdict(tb.placement), "gen_cpus": gen_cpus or []}))


def generator_cpus(tb: LocalTestbed, spec: TrialSpec) -> list[int]:
    """One generator per CPU: spec.gen_cpus, else the placement's gen_cpu;
    CPUs this host does not have are refused."""
    if spec.gen_cpus is None:
        return [tb.placement.gen_cpu]
    online = sorted(os.sched_getaffinity(0))
    bad = [c for c in spec.gen_cpus if c not in online]
    if bad:
        raise InputError("gen_cpus", f"CPU {bad[0]} does not exist or is not usable; accepted: {online}")
    return list(spec.gen_cpus)


def _stall_probe(tb: LocalTestbed, spec: TrialSpec, changes: HostChanges) -> tuple[StallProbe | None, str | None]:
    """The stall probe for this trial, or why there is none (a host without
    the perf events it needs still measures, its stalls unknown)."""
    if not spec.stall_probe:
        return None, "off (--no-stall-probe)"
    try:
        return StallProbe(changes, data_path_cpus(tb, spec.gen_cpus), period_us=spec.stall_period_us,
                          avoid_cpus=tb.placement.sut_cpus), None
    except TestbedError as exc:
        return None, str(exc)


def traffic_shape(spec: TrialSpec, ip_version: int, dst_ip: str) -> tuple[Shape, dict]:
    """The generator's shape options and the sink's (flows, mix, dst_ports)
    for a spec; ``dst_ip``: the testbed's sink address."""
    mix = spec.mix_sizes()
    shape = Shape(dst_ips=spec.dst_ips, dst_ports=spec.dst_ports,
                  dst_ip=first_destination(ip_version, dst_ip, spec.dst_ips) if spec.dst_ips > 1 else None,
                  mix=shapes.mix_text(mix) if mix else None, arrivals=spec.arrivals, seed=spec.seed,
                  burst_pkts=spec.burst_pkts, on_duty=spec.on_duty)
    n = shapes.total_flows(spec.flows, spec.src_ips, spec.dst_ips, spec.dst_ports)
    # per-flow counts when the sink can hold them (--flows and --src-ips alone may address more)
    sink = {"flows": n if 1 < n <= shapes.MAX_FLOWS else 1, "mix": shape.mix, "dst_ports": spec.dst_ports}
    return shape, sink


class _Reverse:
    """The other direction of a bidirectional trial: a sink on the
    generator's veth, then a generator on the sink's veth (tb.reverse_ep),
    on the forward generator's CPUs, with the same shape and schedule."""

    def __init__(self, tb: LocalTestbed, one: TrialSpec, changes: HostChanges, gen_cpus: list[int],
                 sink_shape: dict, exact_pkts: int):
        self.tb, self.one, self.changes, self.cpus, self.ep = tb, one, changes, gen_cpus, tb.reverse_ep
        self.total = one.warmup_pkts + one.window_pkts
        self.src_ip = first_source(tb.ip_version, self.ep.src_ip, one.src_ips)
        self.sink = Sink(changes, self.ep.sink_ns, self.ep.sink_if, self.total, one.warmup_pkts, exact_pkts,
                         bin_pkts=timeline_bin_pkts(one.rate_pps, self.total), streams=len(gen_cpus), **sink_shape)
        self.job = None

    def start(self, shape) -> None:
        o = self.one
        self.job = GeneratorGroup.start(self.changes, self.ep, o.rate_pps, self.total, o.warmup_pkts, o.frame_bytes,
                                        o.flows, self.cpus, src_ips=o.src_ips,
                                        src_ip=self.src_ip if o.src_ips > 1 else None, shape=shape)

    def finish(self) -> dict:
        """Its reads, as the raw trial's "reverse"."""
        gen = self.job.wait(timeout=5)
        counts, drain_s = drain_sink(self.sink)
        return {"generator": gen, "sink": counts, "drain_s": drain_s, "sink_timeline": self.sink.timeline(
                gen["sent_pkts"]), "sink_ifname": self.ep.sink_if, "src_ip_first": self.src_ip}


def measure(tb: LocalTestbed, ep, spec: TrialSpec, changes: HostChanges,
            progress: Callable[[float], None] | None = None, exact_pkts: int = 0) -> dict:
    """Run one trial on a built testbed (whose changes are in `changes`) and
    return its raw reads; what the trial starts (sink, generator, profiler) is
    stopped when it returns. ``exact_pkts``: the sink also keeps that many
    window delays one by one (the raw's sink latency_exact_ns), to check its
    histogram against."""
    spec.validate(tb.ip_version)
    if spec.bidirectional and getattr(tb, "reverse_ep", None) is None:
        raise InputError("bidirectional", "this testbed was built for one direction (build it bidirectional)")
    one = spec.one_direction()  # what each direction sends (the whole spec when one-way)
    gen_cpus = generator_cpus(tb, spec)
    src_ip = first_source(tb.ip_version, ep.src_ip, spec.src_ips)
    shape, sink_shape = traffic_shape(spec, tb.ip_version, ep.dst_ip)
    warmup, window = one.warmup_pkts, one.window_pkts
    total = warmup + window
    others = other_runs(tb)
    # The sink and the generator live for this trial only: their own registry
    # stops them when it ends, however it ends.
    with HostChanges() as trial_changes, _sampler(tb, spec) as sampler:
        sink = Sink(trial_changes, ep.sink_ns, ep.sink_if, total, warmup, exact_pkts,
                    bin_pkts=timeline_bin_pkts(one.rate_pps, total), streams=len(gen_cpus), **sink_shape)
        back = _Reverse(tb, one, trial_changes, gen_cpus, sink_shape, exact_pkts) if spec.bidirectional else None
        probe, probe_missing = _stall_probe(tb, spec, trial_changes)
        injector = None
        if spec.inject_busy_ms:  # a host change like any other: recorded, undone when the trial ends
            injector = StallInjector(trial_changes, spec.inject_cpu if spec.inject_cpu is not None
                                     else tb.placement.sut_cpus[0], spec.inject_busy_ms, spec.inject_every_ms)
        profiler = Profiler(trial_changes, spec.profile_per_packet, spec.profile_duty,
                            avoid_cpus=tb.placement.sut_cpus) if spec.profile else None
        prof = {"start": profiler.read()} if profiler else {}
        if profiler and sampler:
            sampler.add_source("ebpf", profiler.series_values)  # the profiler's times at every sample too
        before = _host_reads(tb)
        started = time.time()
        # one generator per CPU of gen_cpus (streams of one schedule, started
        # GROUP_LEAD_S ahead); on one CPU the generator as it always was
        gen_job = GeneratorGroup.start(trial_changes, ep, one.rate_pps, total, warmup, spec.frame_bytes,
                                       spec.flows, gen_cpus, src_ips=spec.src_ips,
                                       src_ip=src_ip if spec.src_ips > 1 else None, shape=shape)
        if back:
            back.start(shape)
        lead_s = 0.0  # several generators start sending at their common t0, a little later
        if gen_job.t0_ns:
            lead_s = time.time() - started + max((gen_job.t0_ns - time.monotonic_ns()) / 1e9, 0.0)
        expected_s = lead_s + total / one.rate_pps
        # Kernel counters for the measurement window: sampled at its nominal edges.
        kw0 = None
        while gen_job.running() or (back and back.job.running()):
            elapsed = time.time() - started
            if kw0 is None and elapsed >= lead_s + spec.warmup_s:
                kw0 = procfs.snapshot()
                if profiler:
                    prof["window_start"] = profiler.read()
                if sampler:
                    sampler.sample_now("window_start")
            if progress:
                progress(min(elapsed / expected_s, 1.0))
            if elapsed > expected_s * OVERTIME_FACTOR + OVERTIME_S:
                # Far behind schedule (its CPU starved, e.g. by receive work
                # steered onto it): stop it; the trial is flagged, not lost.
                gen_job.interrupt()
                if back:
                    back.job.interrupt()
                break
            time.sleep(0.05)
        kw1 = procfs.snapshot()
        if profiler:
            prof["window_end"] = profiler.read()
        if sampler:
            sampler.sample_now("window_end")
        gen = gen_job.wait(timeout=5)
        counts, drain_s = drain_sink(sink)
        timeline = sink.timeline(gen["sent_pkts"])
        reverse = back.finish() if back else None
        stalls = probe.read() if probe else {"missing": probe_missing}
        injected = injector.read() if injector else None
        after = _host_reads(tb)
        others |= other_runs(tb)
    p = tb.placement
    raw = {
        "raw_schema_version": RAW_SCHEMA_VERSION,
        "spec": asdict(spec),
        "testbed": {"sut": tb.sut, "ip_version": tb.ip_version, "run_id": tb.run_id,
                    # several generators: gen_cpu is the first stream's (the merged report's "cpu")
                    "placement": {"gen_cpu": gen_cpus[0], "sut_cpus": p.sut_cpus, "sink_cpu": p.sink_cpu,
                                  "steering": p.steering,
                                  **({"gen_cpus": gen_cpus} if len(gen_cpus) > 1 else {})},
                    "src_ip_first": src_ip,
                    **({"dst_ip_first": shape.dst_ip} if shape.dst_ip else {}),
                    "sink_ifname": tb.ifs["sink"],
                    # observed after the trial: the CPU each NAPI kthread last ran on
                    "napi_thread_cpus": {dev: {str(pid): procfs.thread_cpu(pid) for pid in pids}
                                         for dev, pids in tb.napi_threads.items()},
                    "interface_ids": [[ino, idx, name] for (ino, idx), name in tb.interface_ids().items()]
                    if profiler else []},
        "host": {"cpu_freq_hz": cpu_freq_hz(), "sysctls": host_sysctls()},
        "started_unix_s": started,
        "generator": gen, "sink": counts, "drain_s": drain_s,
        "sink_timeline": timeline, "stalls": stalls, "injected_stalls": injected,
        "before": before, "after": after, "window": {"start": kw0, "end": kw1},
        "other_runs": sorted(others),
        "series": None, "profile": None,
    }
    if reverse:
        raw["reverse"] = reverse
    if sampler:
        raw["series"] = sampler.series.to_json()
    if profiler:
        raw["profile"] = {"reads": prof, "plan": profiler.plan, "events": profiler.events,
                          "drop_reasons": profiler.drop_reasons, "duty": profiler.duty,
                          "period_ms": profiler.period_ms}
    raw["provenance"] = provenance(changes, spec=asdict(spec), sut=tb.sut)
    raw["provenance"]["host_changes_applied"] += trial_changes.applied
    # As JSON from here on: the result is the same whether evaluated now or
    # re-evaluated from the stored file.
    return json.loads(json.dumps(raw))


def run_trial(tb: LocalTestbed, ep, spec: TrialSpec, changes: HostChanges,
              progress: Callable[[float], None] | None = None, keep_raw: bool = False,
              path: dict | None = None, exact_pkts: int = 0) -> dict:
    """measure + evaluate; the result as a dict (``keep_raw``: with the raw
    trial under "raw_trial", which the store saves as the raw file; ``path``:
    which sides of the SUT a campaign cell uses, kept with the trial)."""
    raw = measure(tb, ep, spec, changes, progress, exact_pkts)
    if path is not None:
        raw["path"] = path
    result = evaluate(raw, spec).to_dict()
    if keep_raw:
        result["raw_trial"] = raw
    return result
