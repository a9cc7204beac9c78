"""This host's testbed (network namespaces and veth) as a trial's pieces
(softnet.hosts.trial_hosts): the tools run here, in-process or as child
processes, and the window edges are read by the trial's poll loop."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from softnet.collect.procfs import cpu_freq_hz, host_sysctls
from softnet.analysis.loss_time import cpu_roles
from softnet.collect import procfs
from softnet.collect.profiler import Profiler
from softnet.collect.sampler import KernelSampler
from softnet.collect.stacks import StackSampler
from softnet.collect.stalls import StallProbe
from softnet.collect.victim import Victim
from softnet.errors import InputError
from softnet.hosts.trial_hosts import EdgeSchedule, GenPlan, SinkShape
from softnet.provenance import provenance
from softnet.results.raw import RawPlacement, RawReset
from softnet.results.series import Series
from softnet.testbed.local import Endpoints, LocalTestbed
from softnet.testbed.stall_inject import StallInjector
from softnet.tools.changes import NAME_PREFIX, HostChanges
from softnet.traffic.native import GeneratorGroup, Sink

NETNS_DIR = Path("/run/netns")


def other_runs(run_id: str) -> set[str]:
    """Run ids of other softnet testbeds on this host (their namespaces): a
    trial that overlaps one shares the CPUs with it."""
    if not NETNS_DIR.is_dir():
        return set()
    ids = {p.name[len(NAME_PREFIX):].split("-")[0] for p in NETNS_DIR.iterdir() if p.name.startswith(NAME_PREFIX)}
    return ids - {run_id}


class _Generators:
    """A generator group and when it began sending (several generators
    start together at their common t0, a little after they are started)."""

    def __init__(self, group: GeneratorGroup, started_unix_s: float):
        self.group, self.started_unix_s = group, started_unix_s

    def running(self) -> bool:
        return self.group.running()

    def interrupt(self) -> None:
        self.group.interrupt()

    def wait(self, timeout: float) -> dict:
        return self.group.wait(timeout)


class _Sampler:
    def __init__(self, sampler: KernelSampler):
        self.sampler, self.done = sampler, False

    def sample_now(self, name: str) -> None:
        self.sampler.sample_now(name)

    def recent(self) -> Series:
        return self.sampler.tail(2)

    def stop(self) -> None:
        if not self.done:
            self.done = True
            self.sampler.__exit__(None, None, None)

    def finish(self) -> dict:
        self.stop()
        return self.sampler.series.to_json()


class _Reset:
    """The SUT's reset at a set time of this host's clock, in a thread of its
    own (the trial's poll loop goes on); joined when the trial ends."""

    def __init__(self, changes: HostChanges, at_unix_s: float, action: Callable[[], str]):
        self.at, self.action, self.cancel = at_unix_s, action, threading.Event()
        self.record = RawReset(what="", at_unix_s=at_unix_s)
        self.thread = threading.Thread(target=self._run, name="softnet-reset", daemon=True)
        changes.record("the SUT's reset (called off if not begun, else waited for)", self._end)
        self.thread.start()

    def _end(self) -> None:
        self.cancel.set()  # a trial ended early (Ctrl-C) resets nothing after it
        self.thread.join(timeout=120)

    def _run(self) -> None:
        if self.cancel.wait(max(0.0, self.at - time.time())):
            self.record.error = "called off: the trial ended before the reset was due"
            return
        self.record.started_unix_s, self.record.started_mono_ns = time.time(), time.monotonic_ns()
        try:
            self.record.what = self.action()
        except Exception as exc:  # noqa: BLE001 - recorded: the trial then says its reset failed
            self.record.error = str(exc)
        self.record.ended_unix_s, self.record.ended_mono_ns = time.time(), time.monotonic_ns()

    def read(self) -> dict:
        self.thread.join(timeout=120)
        return self.record.model_dump(exclude_none=True)


class ThisHost:
    """A built LocalTestbed and its endpoints; ``changes``: the testbed's
    registry (the trial's own pieces go to the trial's)."""

    poll_s = 0.05

    def __init__(self, tb: LocalTestbed, ep: Endpoints, changes: HostChanges, partners: frozenset[str] = frozenset()):
        """``partners``: the run ids of testbeds whose trials take turns with
        this one's (softnet.campaign.interleave): no other run to flag."""
        self.tb, self.ep, self.changes = tb, ep, changes
        self.sut, self.ip_version = tb.sut, tb.ip_version
        self.edges = EdgeSchedule()
        self.others: set[str] = set()
        self.partners = partners

    # ---- before the trial ----------------------------------------------------
    def check(self, spec) -> None:
        if spec.bidirectional and self.tb.reverse_ep is None:
            raise InputError("bidirectional", "this testbed was built for one direction (build it bidirectional)")
        if spec.reset_at_s is not None:
            self.tb.personality.check_reset()
        most = self.tb.personality.max_dst_ports
        if most is not None and spec.dst_ports > most:
            raise InputError("dst_ports", f"{spec.dst_ports}: {self.tb.personality.name} takes at most {most} "
                             "destination port(s)")

    def generator_cpus(self, spec) -> list[int]:
        """One generator per CPU: spec.gen_cpus, else the placement's gen_cpu;
        CPUs this host does not have are refused."""
        if spec.gen_cpus is None:
            return [self.tb.placement.gen_cpu]
        online = sorted(os.sched_getaffinity(0))
        bad = [c for c in spec.gen_cpus if c not in online]
        if bad:
            raise InputError("gen_cpus", f"CPU {bad[0]} does not exist or is not usable; accepted: {online}")
        return list(spec.gen_cpus)

    def _ep(self, reverse: bool) -> Endpoints:
        return self.tb.reverse_ep if reverse else self.ep

    def endpoints(self, reverse: bool) -> tuple[str, str]:
        ep = self._ep(reverse)
        return ep.src_ip, ep.dst_ip

    def begin(self, expected_s: float) -> None:
        self.others = other_runs(self.tb.run_id) - self.partners

    # ---- the pieces ----------------------------------------------------------------
    def sink(self, changes, reverse, count, warmup, exact, bin_pkts, streams, shape: SinkShape) -> Sink:
        ep = self._ep(reverse)
        return Sink(changes, ep.sink_ns, ep.sink_if, count, warmup, exact, bin_pkts=bin_pkts, streams=streams,
                    flows=shape.flows, mix=shape.mix, dst_ports=shape.dst_ports)

    def generators(self, changes, reverse, plan: GenPlan) -> _Generators:
        started = time.time()
        group = GeneratorGroup.start(changes, self._ep(reverse), plan.rate_pps, plan.count, plan.warmup,
                                     plan.frame_bytes, plan.flows, plan.cpus, src_ips=plan.src_ips,
                                     src_ip=plan.src_ip, shape=plan.shape, t0_ns=plan.t0_ns)
        if group.t0_ns:
            started = time.time() + max((group.t0_ns - time.monotonic_ns()) / 1e9, 0.0)
        return _Generators(group, started)

    def sampler(self, changes, interval_s, profiler) -> _Sampler:
        """The kernel statistics sampler, pinned away from the SUT's CPUs."""
        s = _Sampler(KernelSampler(interval_s, avoid_cpus=self.tb.placement.sut_cpus,
                                   links=self.tb.sample_links()).__enter__())
        changes.record("kernel sampler", s.stop)
        if profiler is not None:
            s.sampler.add_source("ebpf", profiler.series_values)  # the profiler's times at every sample too
        return s

    def data_path_cpus(self, gen_cpus: list[int]) -> list[int]:
        pl = self.tb.placement
        return sorted(cpu_roles(RawPlacement(gen_cpu=pl.gen_cpu, sut_cpus=pl.sut_cpus, sink_cpu=pl.sink_cpu,
                                             steering=pl.steering, gen_cpus=gen_cpus)))

    def stall_probe(self, changes, cpus, period_us) -> StallProbe:
        return StallProbe(changes, cpus, period_us=period_us, avoid_cpus=self.tb.placement.sut_cpus)

    def injector(self, changes, cpu, busy_ms, every_ms) -> StallInjector:
        return StallInjector(changes, cpu if cpu is not None else self.tb.placement.sut_cpus[0], busy_ms, every_ms)

    def victim(self, changes, kind: str, seconds: float) -> Victim:
        return Victim(changes, self.tb.placement.sut_cpus[0], seconds, kind)

    def reset(self, changes, at_unix_s: float) -> "_Reset":
        return _Reset(changes, at_unix_s, lambda: self.tb.personality.reset(self.tb))

    def profiler(self, changes, per_packet, duty, base_duty) -> Profiler:
        return Profiler(changes, per_packet, duty, base_duty, avoid_cpus=self.tb.placement.sut_cpus)

    def stack_sampler(self, changes, freq_hz) -> StackSampler:
        return StackSampler(changes, self.tb.placement.sut_cpus, freq_hz)

    # ---- reads ---------------------------------------------------------------------
    def host_reads(self) -> dict:
        tb = self.tb
        runtime, runs = procfs.thread_times(tb.sut_threads())
        return {"links": tb.link_stats(), "ethtool_gen": tb.ethtool_stats("gen"), "qdisc_drops": tb.qdisc_drops(),
                "procfs": procfs.snapshot(), "path_counters": tb.personality.counters(tb),
                "sut_thread_runtime_ns": runtime, "sut_thread_runs": runs}

    def window(self, at_unix_s, sampler, profiler, stacks=None) -> None:
        self.edges.arm(at_unix_s, sampler, profiler, self.tb.sut_threads(), stacks)

    def tick(self, past_window: bool) -> None:
        self.edges.run_due()

    def window_reads(self) -> dict:
        return self.edges.collect()

    # ---- what the raw trial records ---------------------------------------------
    def describe(self, spec, gen_cpus, src_ip, dst_ip, profiled, edges) -> dict:
        tb, p = self.tb, self.tb.placement
        self.others |= other_runs(tb.run_id) - self.partners
        testbed = {"sut": tb.sut, "ip_version": tb.ip_version, "run_id": tb.run_id,
                   # several generators: gen_cpu is the first stream's (the merged report's "cpu")
                   "placement": {"gen_cpu": gen_cpus[0], "sut_cpus": p.sut_cpus, "sink_cpu": p.sink_cpu,
                                 "steering": p.steering, **({"gen_cpus": gen_cpus} if len(gen_cpus) > 1 else {})},
                   "src_ip_first": src_ip, **({"dst_ip_first": dst_ip} if dst_ip else {}),
                   "sink_ifname": tb.ifs["sink"],
                   # observed after the trial: the CPU each NAPI kthread last ran on
                   "napi_thread_cpus": {dev: {str(pid): procfs.thread_cpu(pid) for pid in pids}
                                        for dev, pids in tb.napi_threads.items()},
                   "interface_ids": [[ino, idx, name] for (ino, idx), name in tb.interface_ids().items()]
                   if profiled else [],
                   **({"nic": tb.nic_applied} if tb.nic_applied else {})}
        return {"testbed": testbed, "host": {"cpu_freq_hz": cpu_freq_hz(), "sysctls": host_sysctls()},
                "other_runs": sorted(self.others)}

    def sink_ifname(self, reverse: bool) -> str:
        return self._ep(reverse).sink_if

    def provenance(self, spec, trial_changes: HostChanges) -> dict:
        prov = provenance(self.changes, spec=asdict(spec), sut=self.tb.sut)
        prov["host_changes_applied"] += trial_changes.applied
        return prov
