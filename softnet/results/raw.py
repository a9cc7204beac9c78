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

from softnet.results.trial import (Exact, InterfaceFacts, Interleave, KernelSamples, Number, Provenance, RemoteHost,
                                   TrialPath)


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


class ProcSnapshot(Exact):
    """softnet.collect.procfs.snapshot(): per-CPU tables keyed by the host's
    CPU numbers (strings in JSON, ints here)."""

    softirqs: dict[str, dict[int, int]]  # vector -> CPU -> count
    cpu_ticks: dict[int, dict[str, int]]  # CPU -> /proc/stat column -> ticks
    softnet: dict[int, dict[str, int]]  # CPU -> softnet_stat column -> value
    # the SUT's kthreads' run time (schedstat), ns, at a window edge (pid -> ns; none: not read)
    thread_runtime_ns: dict[str, int | None] | None = None
    thread_runs: dict[str, int | None] | None = None  # their times put on a CPU (wake-ups), at that edge


class HostReads(Exact):
    """Counters read before and after a trial, from the host that has each."""

    links: dict[str, dict[str, int]]  # role -> stats64
    ethtool_gen: dict[str, int]
    qdisc_drops: int
    procfs: ProcSnapshot
    path_counters: dict[str, int] | None = None
    sut_thread_runtime_ns: dict[str, int | None] | None = None
    sut_thread_runs: dict[str, int | None] | None = None  # the same kthreads' times put on a CPU (schedstat)
    sut_netns_inode: int | None = None  # an inventory's SUT host: how its kernel names the SUT's devices
    sut_ifindex: dict[str, int] | None = None


class Window(Exact):
    """/proc snapshots at the window's edges (None: not taken)."""

    start: ProcSnapshot | None = None
    end: ProcSnapshot | None = None


class GeneratorReport(_ToolReport):
    """softnet-gen's report (or several streams' merged: softnet.traffic.native.merge_reports)."""

    sent_pkts: int
    warmup_pkts: int | None = None
    intended_rate_pps: Number | None = None
    schedule_start_ns: int | None = None
    first_send_ns: int | None = None
    window_start_ns: int
    last_send_ns: int
    calls: int
    batch: int
    window_lag_mean_ns: Number | None = None
    window_lag_max_ns: Number | None = None
    window_late_pkts: int | None = None
    late_episodes: list[list[int]] = []  # [first seq, last seq, largest lag ns]
    cpu: int | None = None
    # one generator's: how many streams the schedule has; a merged report's: the streams' own reports
    streams: int | list[GeneratorReport] | None = None
    window_due_start_ns: int | None = None  # traffic shapes: the schedule's span over the window
    last_due_ns: int | None = None
    # a rate step (the recovery benchmark): seq step_seq on is due at step_rate_pps from its own due time
    step_seq: int | None = None
    step_rate_pps: Number | None = None
    interrupted: bool = False


class SinkLatencyHist(_ToolReport):
    sub_bucket_bits: int
    range_log2_ns: int
    buckets: list[list[int]]  # [index, count], sparse


class SinkReport(_ToolReport):
    """softnet-sink's report."""

    rx_test_pkts_per_cpu: list[int]
    rx_window_pkts: int
    rx_warmup_pkts: int
    reordered_pkts: int
    duplicate_pkts: int
    out_of_range_pkts: int
    latency_sum_ns: int
    latency_min_ns: int
    latency_max_ns: int
    latency_pkts: int | None = None  # raw schema 2 on: the log-linear histogram
    latency_negative_pkts: int | None = None
    latency_over_range_pkts: int | None = None
    latency_hist: SinkLatencyHist | None = None
    latency_log2_hist: list[int] | None = None  # raw schema 1
    latency_exact_ns: list[int] | None = None  # --exact: the delays one by one
    latency_exact_seen_pkts: int | None = None
    flow_pkts: list[int] | None = None  # window packets per flow
    size_pkts: dict[str, int] | None = None  # frame mix: window packets per frame size
    window_frame_bytes: int | None = None


class SinkTimeline(_ToolReport):
    """softnet-sink's loss in time: lost seqs per bin of bin_pkts and their runs."""

    first_seq: int
    end_seq: int
    bin_pkts: int
    runs_total: int
    runs: list[list[int]]  # [first seq, packets]
    runs_truncated: bool
    # truncated: runs[:runs_head] are the window's first runs, the rest its last (an older sink: all the first)
    runs_head: int | None = None
    run_length_hist: list[list[int]]
    lost_per_bin: list[list[int]]  # [bin, lost packets], sparse
    delay_max_ns_per_bin: list[int]


class StallEvent(_ToolReport):
    """One event of softnet-stalls: a task kept waiting ("runq") or a busy CPU's clock gap ("gap")."""

    cpu: int
    kind: str
    start_ns: int
    end_ns: int
    task: str = ""
    by: str = ""  # the task that held the CPU
    by_pid: int | None = None
    by_policy: int | None = None


class StallReport(_ToolReport):
    """softnet-stalls' report, or {"missing": why} when there was no probe."""

    missing: str | None = None
    period_ns: int | None = None
    threshold_ns: int | None = None
    samples_per_cpu: dict[int, int] = {}
    lost_events: int | None = None
    events_truncated: bool | int | None = None
    stalls: list[StallEvent] = []


class InjectedReport(_ToolReport):
    """softnet-inject's record: the stalls it made, the truth to check detection by."""

    cpu: int
    busy_ns: int
    period_ns: int
    stalls: list[list[int]]  # [start ns, end ns]
    cpu_ns: list[int] | None = None  # the run time each stall got (older injectors did not say)
    missed: int = 0  # scheduled stalls skipped: the injector woke after the next was due


class ProfileCpu(_ToolReport):
    """softnet-profile's counters of one CPU (a read, or the delta of two)."""

    softirq_ns: dict[str, dict[str, list[int]]]  # vector -> context -> [ns, count]
    hardirq_ns: int
    hardirq_cnt: int
    sysvec_ns: int = 0
    sysvec_cnt: int = 0
    busy_ns: int
    idle_ns: int
    napi_thread_ns: int
    hardirq_in_idle_ns: int
    softirq_in_idle_ns: int
    ctx_switches: int
    napi_polls: int
    napi_work: int
    napi_budget_exhausted: int
    rx_skbs: int
    consumed_skbs: int
    dropped_skbs: int
    unmatched_exits: int
    drop_keys_full: int
    # switches out of a task the last switch seen had not switched in (its NAPI-thread time is not counted);
    # none in reads from before they were counted
    unseen_switches: int | None = None
    napi_work_hist: list[int]
    transitions: list[list[int]] | None = None  # [from event, to event, ns, count]; sampled ones have none


class ProfileRead(_ToolReport):
    """One read of softnet-profile's maps."""

    cpus: list[ProfileCpu]  # with base_ns: summed over the periods the other programs were attached
    sampled_ns: int
    base_ns: int | None = None  # the time those periods took (none: attached all along)
    sampled_cpus: list[ProfileCpu]  # the same counters over the periods the stage events were attached
    drops: list[list[int]]  # [reason, ifindex, netns inode, count]
    monotonic_ns: int


class ProfileReads(Exact):
    start: ProfileRead | None = None
    window_start: ProfileRead | None = None
    window_end: ProfileRead | None = None


class StacksRead(_ToolReport):
    """One read of softnet-stacks' counts (cumulative since it started)."""

    monotonic_ns: int
    samples_per_cpu: dict[int, int]
    missed: int  # samples not counted: its counts map was full
    counts: list[tuple[int, int, str, int, int]]  # [cpu, thread id, comm, stack id, samples]


class RawStacks(Exact):
    """softnet-stacks' reads at the window's edges and the stacks' names."""

    freq_hz: int
    period_ns: int  # each sample stands for this much of its CPU's time
    cpus: list[int]
    window_start: StacksRead | None = None
    window_end: StacksRead | None = None
    stacks: dict[int, str]  # stack id -> its frames, root first, ";"-joined (named from the SUT host's kallsyms)
    symbols: int  # kernel symbols known when they were named
    unknown_frames: int  # frames no symbol covered


class RawProfile(Exact):
    """The eBPF profiler's reads at the trial's start and window edges, and its plan."""

    reads: ProfileReads
    plan: str
    events: list[str]  # the stage clock's event names, by number
    drop_reasons: dict[int, str]  # the kernel's skb drop reason -> its name
    duty: Number
    period_ms: Number
    base_duty: Number = 1  # the other programs' share of time (older trials: attached all along)
    stacks: RawStacks | None = None  # the SUT CPUs' kernel stacks (older trials, --stack-hz 0: none)


class ReverseReads(Exact):
    """A bidirectional trial's other direction."""

    generator: GeneratorReport
    sink: SinkReport
    drain_s: Number
    sink_timeline: SinkTimeline | None = None
    sink_ifname: str
    src_ip_first: str | None = None  # raw trials before several sources lack it


class RawVictim(Exact):
    """The pinned victim's progress every 50 ms: [CLOCK_MONOTONIC s,
    iterations so far, its run time ns] (older trials lack the run time)."""

    kind: str
    cpu: int
    started_mono_s: Number
    series: list[list[Number]]


class RawPace(Exact):
    """The pace probe's two runs, before and after the traffic."""

    before: RawVictim
    after: RawVictim


class RawReset(Exact):
    """The SUT's reset as the trial ran it (unix times, the controller's clock)."""

    what: str
    at_unix_s: Number
    started_unix_s: Number | None = None
    ended_unix_s: Number | None = None
    # the same on CLOCK_MONOTONIC, the generator's schedule clock on this host
    started_mono_ns: int | None = None
    ended_mono_ns: int | None = None
    error: str | None = None


class RawTrial(Exact):
    raw_schema_version: int
    # JSON on purpose: the TrialSpec as it was, of whatever softnet version wrote it (older ones have fewer
    # fields, and which it had decides how evaluate reads the trial); TrialSpec.from_dict types it
    spec: dict[str, Any]
    testbed: RawTestbed
    host: RawHost
    started_unix_s: Number
    generator: GeneratorReport
    sink: SinkReport
    drain_s: Number
    sink_timeline: SinkTimeline | None = None
    stalls: StallReport | None = None
    injected_stalls: InjectedReport | None = None
    before: HostReads
    after: HostReads
    window: Window
    other_runs: list[str] = []
    series: KernelSamples | None = None  # softnet.results.series.Series.to_json()
    profile: RawProfile | None = None
    reverse: ReverseReads | None = None
    window_skew_ms: Number | None = None
    hosts: dict[str, RemoteHost] | None = None
    provenance: Provenance
    path: TrialPath | None = None
    interleave: Interleave | None = None
    reset: RawReset | None = None
    victim: RawVictim | None = None
    pace: RawPace | None = None


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
