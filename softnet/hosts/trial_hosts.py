"""What one trial needs of its hosts: the small interface the one measure
procedure (softnet.campaign.trial.measure) is written against.

Two implementations: this host's namespaces (softnet.hosts.this_host) and
an inventory's hosts through their agents (softnet.hosts.remote_trial). The
procedure starts each piece through it and drives the pieces through the
handles it returns; a piece it starts is stopped through the trial's own
HostChanges, so every piece ends with the trial however the trial ends.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from softnet.collect import procfs
from softnet.results.series import Series
from softnet.tools.changes import HostChanges
from softnet.traffic.native import Shape


@dataclass
class SinkShape:
    """What the sink needs to know of the traffic's shape."""

    flows: int = 1  # per-flow counts kept for this many flows (1: none)
    mix: str | None = None
    dst_ports: int = 1


@dataclass
class GenPlan:
    """One direction's generators: their load, frames, CPUs and shape."""

    rate_pps: float
    count: int
    warmup: int
    frame_bytes: int
    flows: int
    cpus: list[int]
    src_ips: int = 1
    src_ip: str | None = None  # the first of several source addresses (None: the endpoint's own)
    shape: Shape = field(default_factory=Shape)
    t0_ns: int | None = None  # the schedule's origin on the generator host's CLOCK_MONOTONIC (None: its own)


class SinkHandle(Protocol):
    def drain(self) -> tuple[dict, float]: ...
    def timeline(self, sent: int) -> dict: ...


class GenHandle(Protocol):
    started_unix_s: float  # when sending began, on the controller's clock

    def running(self) -> bool: ...
    def interrupt(self) -> None: ...
    def wait(self, timeout: float) -> dict: ...


class ReadHandle(Protocol):
    def read(self) -> dict: ...


class ProfilerHandle(ReadHandle, Protocol):
    plan: Any
    events: Any
    drop_reasons: Any
    duty: float
    period_ms: float


class StacksHandle(ReadHandle, Protocol):
    freq_hz: int
    period_ns: int
    cpus: list[int]

    def symbols(self) -> dict: ...  # every stack seen, named from the SUT host's kallsyms


class SamplerHandle(Protocol):
    def recent(self) -> Series: ...  # the last two samples so far (a running trial's live figures)
    def finish(self) -> dict: ...  # stop sampling; the series as JSON


class TrialHosts(Protocol):
    sut: str
    ip_version: int
    poll_s: float  # how often the procedure asks whether the generators still run

    def check(self, spec) -> None: ...
    def generator_cpus(self, spec) -> list[int]: ...
    def data_path_cpus(self, gen_cpus: list[int]) -> list[int]: ...  # the CPUs the stall probe watches
    def endpoints(self, reverse: bool) -> tuple[str, str]: ...  # (src_ip, dst_ip) of a direction
    def begin(self, expected_s: float) -> None: ...
    def sink(self, changes: HostChanges, reverse: bool, count: int, warmup: int, exact: int, bin_pkts: int,
             streams: int, shape: SinkShape) -> SinkHandle: ...
    def generators(self, changes: HostChanges, reverse: bool, plan: GenPlan) -> GenHandle: ...
    def sampler(self, changes: HostChanges, interval_s: float, profiler: ProfilerHandle | None) -> SamplerHandle: ...
    def stall_probe(self, changes: HostChanges, cpus: list[int], period_us: int) -> ReadHandle: ...
    def injector(self, changes: HostChanges, cpu: int | None, busy_ms: float, every_ms: float) -> ReadHandle: ...
    def profiler(self, changes: HostChanges, per_packet: bool, duty: float, base_duty: float) -> ProfilerHandle: ...
    def stack_sampler(self, changes: HostChanges, freq_hz: int) -> StacksHandle: ...  # on the SUT's CPUs
    def reset(self, changes: HostChanges, at_unix_s: float) -> ReadHandle: ...  # the SUT's reset, at that time
    def victim(self, changes: HostChanges, kind: str, seconds: float) -> ReadHandle: ...  # on the first SUT CPU
    def host_reads(self) -> dict: ...
    def window(self, at_unix_s: tuple[float, float], sampler: SamplerHandle | None,
               profiler: ProfilerHandle | None, stacks: StacksHandle | None = None) -> None: ...
    def tick(self, past_window: bool) -> None: ...
    def window_reads(self) -> dict: ...
    def describe(self, spec, gen_cpus: list[int], src_ip: str, dst_ip: str | None, profiled: bool,
                 edges: dict) -> dict: ...
    def sink_ifname(self, reverse: bool) -> str: ...
    def provenance(self, spec, trial_changes: HostChanges) -> dict: ...


class EdgeSchedule:
    """The window's edge reads (/proc, the profiler, a sample of the
    sampler's) taken at set times of this host's clock: each runs once, when
    ``run_due`` is called at or after its time (the agent's loop, or the
    trial's poll loop on this host), and ``collect`` takes any left."""

    def __init__(self) -> None:
        self.due: list[tuple[float, str, Callable[[], None]]] = []
        self.taken: dict = {}
        self.late_ms: dict[str, float] = {}

    def arm(self, at_unix_s, sampler=None, profiler=None, threads: list[int] = (), stacks=None) -> None:
        """``sampler``: has sample_now(name); ``profiler`` and ``stacks``:
        have read(); ``threads``: the SUT's kthreads, whose run time each edge reads."""
        self.taken, self.late_ms = {"scheduled_unix_s": list(at_unix_s)}, {}

        def edge(name: str) -> Callable[[], None]:
            def take():
                self.taken[name] = procfs.snapshot(threads=threads)
                self.taken[f"{name}_unix_s"] = time.time()
                if profiler is not None:
                    self.taken[f"profile_{name}"] = profiler.read()
                if stacks is not None:
                    self.taken[f"stacks_{name}"] = stacks.read()
                if sampler is not None:
                    sampler.sample_now(f"window_{name}")
            return take

        self.due = sorted([(at_unix_s[0], "start", edge("start")), (at_unix_s[1], "end", edge("end"))],
                          key=lambda e: e[0])

    def next_at(self) -> float | None:
        return self.due[0][0] if self.due else None

    def run_due(self, all_left: bool = False) -> None:
        """``all_left``: the ones not yet due too (the generators ended early)."""
        while self.due and (all_left or self.due[0][0] <= time.time()):
            at, name, action = self.due.pop(0)
            self.late_ms[name] = (time.time() - at) * 1e3  # the /proc read comes first
            action()

    def collect(self) -> dict:
        self.run_due(all_left=True)
        return {**self.taken, "late_ms": dict(self.late_ms)}
