"""The raw trial, typed: what one trial read, as the one measure procedure
(softnet.campaign.trial.measure) writes it on this host or on an
inventory's hosts, and as evaluate() and the store read it back.

Both kinds of testbed must give the same shape: measure validates every raw
trial against this model before it returns one, and tests validate every raw
trial kept under tests/data (all raw schema versions). The native tools'
own reports (generator, sink, stall probe, injector, sink timeline) keep the
keys a tool version adds (extra allowed); the parts softnet writes itself
are exact.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from softnet.results.trial import Exact, InterfaceFacts, Number, Provenance, RemoteHost, TrialPath


class _ToolReport(BaseModel):
    """A native tool's JSON report: the keys softnet reads, typed; others kept."""

    model_config = ConfigDict(extra="allow")


class RawPlacement(Exact):
    gen_cpu: int
    sut_cpus: list[int]
    sink_cpu: int | None = None
    steering: str
    gen_cpus: list[int] | None = None  # several generators


class RemoteRef(Exact):
    testbed: str
    inventory: str
    hosts: dict[str, str]  # role -> inventory host


class NicApplied(Exact):
    """A NIC knob's settings on one interface, as set and read back."""

    ifname: str
    driver: str
    set: dict[str, dict[str, str]]  # ethtool flag -> parameter -> value
    read_back: dict[str, dict[str, str]]
    irq_cpus: list[int] | None = None
    irqs: list[int] = []


class RawTestbed(Exact):
    sut: str
    ip_version: int
    run_id: str
    placement: RawPlacement
    src_ip_first: str | None = None  # raw trials before several sources lack it
    dst_ip_first: str | None = None
    sink_ifname: str
    napi_thread_cpus: dict[str, dict[str, int | None]]  # device -> kthread pid -> CPU it last ran on
    interface_ids: list[list[int | str]]  # [netns inode, ifindex, "role (ns/ifname)"] (profiled trials)
    remote: RemoteRef | None = None
    nic: dict[str, NicApplied] | None = None
    sink_hop: str | None = None  # set by evaluate for a bidirectional trial's reverse way only


class RawHost(Exact):
    cpu_freq_hz: Number | None = None
    sysctls: dict[str, int | str | None]


class HostReads(Exact):
    """Counters read before and after a trial, from the host that has each."""

    links: dict[str, dict[str, int]]  # role -> stats64
    ethtool_gen: dict[str, int]
    qdisc_drops: int
    procfs: dict[str, Any]  # softnet.collect.procfs.snapshot(): per-CPU tables keyed by the host's CPUs
    path_counters: dict[str, int] | None = None
    sut_thread_runtime_ns: dict[str, int | None] | None = None
    sut_netns_inode: int | None = None  # an inventory's SUT host: how its kernel names the SUT's devices
    sut_ifindex: dict[str, int] | None = None


class Window(Exact):
    """/proc snapshots at the window's edges (None: not taken)."""

    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None


class GeneratorReport(_ToolReport):
    sent_pkts: int
    cpu: int | None = None
    calls: int
    batch: int


class SinkReport(_ToolReport):
    rx_window_pkts: int
    rx_warmup_pkts: int
    reordered_pkts: int
    duplicate_pkts: int
    out_of_range_pkts: int


class SinkTimeline(_ToolReport):
    bin_pkts: int
    runs_total: int
    runs_truncated: bool


class ProfileReads(Exact):
    start: dict[str, Any] | None = None
    window_start: dict[str, Any] | None = None
    window_end: dict[str, Any] | None = None


class RawProfile(Exact):
    """The eBPF profiler's reads at the trial's start and window edges, and its plan."""

    reads: ProfileReads
    plan: str
    events: list[Any]
    drop_reasons: dict[str, Any]
    duty: Number
    period_ms: Number


class ReverseReads(Exact):
    """A bidirectional trial's other direction."""

    generator: GeneratorReport
    sink: SinkReport
    drain_s: Number
    sink_timeline: SinkTimeline | None = None
    sink_ifname: str
    src_ip_first: str | None = None  # raw trials before several sources lack it


class RawTrial(Exact):
    raw_schema_version: int
    spec: dict[str, Any]  # the TrialSpec as it was (an older one has fewer fields: TrialSpec.from_dict reads it)
    testbed: RawTestbed
    host: RawHost
    started_unix_s: Number
    generator: GeneratorReport
    sink: SinkReport
    drain_s: Number
    sink_timeline: SinkTimeline | None = None
    stalls: dict[str, Any] | None = None  # the stall probe's report, or {"missing": why}
    injected_stalls: _ToolReport | None = None
    before: HostReads
    after: HostReads
    window: Window
    other_runs: list[str] = []
    series: dict[str, Any] | None = None  # softnet.results.series.Series.to_json()
    profile: RawProfile | None = None
    reverse: ReverseReads | None = None
    window_skew_ms: Number | None = None
    hosts: dict[str, RemoteHost] | None = None
    provenance: Provenance
    path: TrialPath | None = None


def check_raw(raw: dict, where: str = "raw trial") -> RawTrial:
    """The raw trial, typed; a shape this softnet does not write is an
    InputError naming the first wrong field."""
    from pydantic import ValidationError

    from softnet.errors import InputError

    try:
        return RawTrial.model_validate(raw)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise InputError(f"{where}: {'.'.join(str(p) for p in e['loc'])}", e["msg"]) from None


__all__ = ["InterfaceFacts", "RawTrial", "check_raw"]
