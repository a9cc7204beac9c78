"""A trial's spec, its raw reads and its typed result.

A trial is ``measure`` (softnet.campaign.trial: I/O, gives a raw trial) then
``evaluate`` (softnet.analysis.trial_eval: pure, gives a TrialResult). The raw
trial is a JSON document of what was read (tool reports, counters, samples,
observed placement, host facts); re-evaluating it reproduces the result.
Every number carries its unit in its name.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from softnet.errors import InputError
from softnet.results.series import INTERVAL_RANGE_S

# 1: results before typed trials (same fields, no schema_version key); 2: typed, with a raw trial;
# 3: latency percentiles from the log-linear histogram (latency_p99_ns...) instead of log2 upper bounds;
# 4: loss in time, host stalls and their share of the loss (sut_lost_pkts, host_interference).
SCHEMA_VERSION = 4
KNOWN_SCHEMA_VERSIONS = (1, 2, 3, 4)
# 1: the sink's log2 histogram (evaluates to a schema 2 result); 2: its log-linear histogram (schema 3);
# 3: with the sink's timeline and the stall probe's events (schema 4).
RAW_SCHEMA_VERSION = 3
KNOWN_RAW_SCHEMA_VERSIONS = (1, 2, 3)
RESULT_SCHEMA_OF_RAW = {1: 2, 2: 3, 3: 4}

# A bitmap of one bit per expected packet lives in the sink: 2^33 bits = 1 GiB.
MAX_TRIAL_PKTS = 1 << 33
MTU_FRAME_BYTES = 1518  # 1500 B MTU + 14 B Ethernet header + 4 B FCS
PAYLOAD_BYTES = 16  # sequence number + send timestamp
DURATION_RANGE_S = (0.1, 3600.0)
WARMUP_RANGE_S = (0.0, 60.0)
INJECT_BUSY_RANGE_MS = (0.1, 100.0)  # softnet-inject's own bounds
STALL_PERIOD_RANGE_US = (100, 1_000_000)
SRC_IPS_RANGE = (1, 65536)  # source addresses in turn (IPv6: within the last 16 bits)
MAX_GEN_STREAMS = 21  # generator processes of one trial (softnet.traffic.native: one idle anchor each)


def min_frame_bytes(ip_version: int) -> int:
    """64 B (the Ethernet minimum), or more when IPv6 + UDP + payload need it."""
    return max(64, 14 + (20 if ip_version == 4 else 40) + 8 + PAYLOAD_BYTES + 4)


@dataclass
class TrialSpec:
    rate_pps: float
    duration_s: float = 5.0
    warmup_s: float = 1.0
    frame_bytes: int = 64
    flows: int = 1
    sample_interval_s: float | None = 1.0  # kernel statistics sampler; None: off
    profile: bool = False  # eBPF packet-path profiler (softnet-profile) and the CPU accounting audit
    profile_per_packet: bool = True  # its once-per-packet tracepoints (stages, drop reasons); off: cheaper
    profile_duty: float = 0.02  # share of time the stage events are attached (1: every packet)
    # share of time the other programs (softirq, irq, switch, poll) are attached, at least profile_duty;
    # below 1 their figures are estimates scaled from that time
    profile_base_duty: float = 0.2
    # with the profiler: the SUT CPUs' kernel stacks sampled this often per CPU (softnet-stacks), time by
    # kernel function; 0: not sampled
    profile_stack_hz: int = 499
    stall_probe: bool = True  # softnet-stalls watches the data path's CPUs (host stalls, loss attribution)
    # its clock on a busy CPU: gaps from period + 0.2 ms are seen; each tick costs 5-10 us here
    # (2 ms: about 1% of a busy CPU, docs/explanation/host-stalls.md)
    stall_period_us: int = 2000
    inject_busy_ms: float | None = None  # stall injector: take a CPU away this long...
    inject_every_ms: float = 500.0  # ...this often (SCHED_FIFO busy loop, softnet-inject)
    inject_cpu: int | None = None  # None: the first SUT CPU
    # RSS spread: source addresses used in turn, from the testbed's first source up (with `flows` UDP source
    # ports: flows x src_ips distinct flows)
    src_ips: int = 1
    # one generator process per CPU, streams of one schedule (each sends rate / N); None: the placement's gen_cpu
    gen_cpus: list[int] | None = None
    # traffic shapes (docs/how-to/traffic.md): destination addresses and UDP destination ports used in turn (flow f =
    # seq % (flows x src_ips x dst_ips x dst_ports), source port fastest); a frame mix ("64:7,570:4,1518:1",
    # "imix", percentages; None: frame_bytes); arrivals "const", "poisson" (seeded) or "onoff" (burst_pkts per
    # on period, on for a share on_duty of the time), all at the same mean rate
    dst_ips: int = 1
    dst_ports: int = 1
    mix: str | None = None
    arrivals: str = "const"
    burst_pkts: int = 32
    on_duty: float = 0.5
    seed: int = 1
    # the generator sleeps through gaps in its schedule longer than this (onoff): its CPU is shared with
    # another trial's generator whose bursts fill the gaps (an interleaved comparison); None: it spins
    sleep_gaps_us: float | None = None
    # both directions at once: the sink's side sends to the generator's too; rate_pps is the aggregate
    # (each direction rate_pps / 2, as CSIT and TRex count bidirectional loads)
    bidirectional: bool = False
    # reset benchmark (RFC 2544 26.6, RFC 6201): the SUT personality's reset, this long after the window starts
    reset_at_s: float | None = None
    # back-to-back benchmark (RFC 2544 26.4, RFC 9004): each onoff burst is sent at this frame rate
    burst_rate_pps: float | None = None
    # system recovery (RFC 2544 26.5): step_at_s into the window the rate drops to step_rate_pps
    step_at_s: float | None = None
    step_rate_pps: float | None = None
    # the host's idle power: the sampler runs this long before any traffic (RAPL energy over that time)
    idle_s: float = 0.0
    # the profiler's cross-check: a CPU-bound victim ("python" or "c") pinned to the first SUT CPU
    victim: str | None = None
    # the host's pace: a fixed loop on the first SUT CPU for PACE_S before and after the traffic
    pace_probe: bool = False

    def one_direction(self) -> "TrialSpec":
        """What each direction of a bidirectional trial sends: half the rate."""
        return replace(self, rate_pps=self.rate_pps / 2, bidirectional=False) if self.bidirectional else self

    def validate(self, ip_version: int) -> None:
        lo = min_frame_bytes(ip_version)
        if self.mix is None and not (lo <= self.frame_bytes <= MTU_FRAME_BYTES):  # a mix has its own sizes
            raise InputError("--size", f"{self.frame_bytes} B is outside [{lo}, {MTU_FRAME_BYTES}] B accepted "
                             f"for IPv{ip_version} (frame incl. FCS; the maximum is the 1500 B MTU)")
        if not (DURATION_RANGE_S[0] <= self.duration_s <= DURATION_RANGE_S[1]):
            raise InputError("--duration", f"{self.duration_s} s is outside [{DURATION_RANGE_S[0]}, "
                             f"{DURATION_RANGE_S[1]:.0f}] s")
        if not (WARMUP_RANGE_S[0] <= self.warmup_s <= WARMUP_RANGE_S[1]):
            raise InputError("--warmup", f"{self.warmup_s} s is outside [0, {WARMUP_RANGE_S[1]:.0f}] s")
        if not (1 <= self.flows <= 64511):
            raise InputError("--flows", f"{self.flows} is outside [1, 64511] (UDP source ports 1024..65534)")
        lo, hi = SRC_IPS_RANGE
        if isinstance(self.src_ips, bool) or not isinstance(self.src_ips, int) or not lo <= self.src_ips <= hi:
            raise InputError("src_ips", f"{self.src_ips!r}: expected a whole number in [{lo}, {hi}] (source "
                             "addresses the generator uses in turn; 1: one address)")
        self.validate_shape(ip_version)
        if self.gen_cpus is not None:
            cpus = self.gen_cpus
            if (not isinstance(cpus, list) or not cpus
                    or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in cpus)):
                raise InputError("gen_cpus", f"{cpus!r}: expected a list of one or more CPU numbers "
                                 "(None: the placement's gen_cpu)")
            if len(set(cpus)) != len(cpus):
                raise InputError("gen_cpus", f"{cpus}: a CPU appears twice (one generator per CPU)")
            if len(cpus) > MAX_GEN_STREAMS:
                raise InputError("gen_cpus", f"{len(cpus)} CPUs: at most {MAX_GEN_STREAMS} generators per trial")
        lo, hi = INTERVAL_RANGE_S
        if not 0.01 <= self.profile_duty <= 1:
            raise InputError("--duty", f"{self.profile_duty} is not a share between 0.01 and 1")
        if not 0.01 <= self.profile_base_duty <= 1:
            raise InputError("--base-duty", f"{self.profile_base_duty} is not a share between 0.01 and 1")
        hz = self.profile_stack_hz
        if isinstance(hz, bool) or not isinstance(hz, int) or not (hz == 0 or 10 <= hz <= 20000):
            raise InputError("--stack-hz", f"{hz!r}: expected 0 (no stack sampling) or a whole number of samples "
                             "per second in [10, 20000]")
        if self.sample_interval_s is not None and not lo <= self.sample_interval_s <= hi:
            raise InputError("--sample-interval", f"{self.sample_interval_s} s is outside [{lo}, {hi:.0f}] s")
        if not STALL_PERIOD_RANGE_US[0] <= self.stall_period_us <= STALL_PERIOD_RANGE_US[1]:
            raise InputError("--stall-period-us", f"{self.stall_period_us} us is outside "
                             f"[{STALL_PERIOD_RANGE_US[0]}, {STALL_PERIOD_RANGE_US[1]}] us")
        if self.inject_busy_ms is not None:
            if not INJECT_BUSY_RANGE_MS[0] <= self.inject_busy_ms <= INJECT_BUSY_RANGE_MS[1]:
                raise InputError("--inject-stall", f"{self.inject_busy_ms} ms per stall is outside "
                                 f"[{INJECT_BUSY_RANGE_MS[0]}, {INJECT_BUSY_RANGE_MS[1]:.0f}] ms")
            if not 2 * self.inject_busy_ms <= self.inject_every_ms <= 60000:
                raise InputError("--inject-stall", f"every {self.inject_every_ms} ms: stalls of "
                                 f"{self.inject_busy_ms} ms need a period of at least twice that, at most 60000 ms")
        if self.victim is not None and (self.victim not in ("python", "c") or not self.profile):
            raise InputError("--victim", f"{self.victim!r}: expected python or c, with the profiler on (the "
                             "victim's lost CPU share is checked against the profiler's time)")
        if not 0 <= self.idle_s <= 60 or (self.idle_s and self.sample_interval_s is None):
            raise InputError("idle_power_s", f"{self.idle_s} s: expected 0 to 60 s, with the sampler on (the "
                             "idle time before the traffic over which the host's idle power is taken)")
        if not (self.rate_pps > 0 and math.isfinite(self.rate_pps)):
            raise InputError("--rate", f"{self.rate_pps} pps: a positive rate is needed")
        if self.reset_at_s is not None and not 0 < self.reset_at_s < self.duration_s:
            raise InputError("--reset-at", f"{self.reset_at_s} s: the reset must fall inside the window, "
                             f"after its start and before its end ({self.duration_s} s)")
        total = self.warmup_pkts + self.window_pkts
        if self.window_pkts < 1:
            raise InputError("--duration", f"{self.duration_s} s at {self.rate_pps:.0f} pps sends no packet")
        if total > MAX_TRIAL_PKTS:
            raise InputError("--duration", f"rate x (warm-up + duration) = {total} packets; at most "
                             f"{MAX_TRIAL_PKTS} per trial (the sink keeps one bit per packet)")

    def validate_shape(self, ip_version: int) -> None:
        """The traffic shape's fields (docs/how-to/traffic.md); the destination
        range itself is the testbed's (softnet.testbed.local.first_destination)."""
        from softnet.results import shapes

        if not isinstance(self.bidirectional, bool):
            raise InputError("bidirectional", f"{self.bidirectional!r}: expected true or false")
        if self.bidirectional and self.dst_ips != 1:
            raise InputError("dst_ips", f"{self.dst_ips} with bidirectional traffic: the testbed routes a "
                             "destination range towards the sink only; use src_ips, flows or dst_ports")

        def whole(field: str, value, lo: int, hi: int, what: str) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise InputError(field, f"{value!r}: expected a whole number in [{lo}, {hi}] ({what})")

        whole("dst_ips", self.dst_ips, 1, 65536, "destination addresses used in turn; 1: the sink's own")
        whole("dst_ports", self.dst_ports, 1, shapes.MAX_DST_PORTS, "UDP destination ports from 7 up")
        if self.dst_ips * self.dst_ports > 1:
            n = shapes.total_flows(self.flows, self.src_ips, self.dst_ips, self.dst_ports)
            if n > shapes.MAX_FLOWS:
                raise InputError("dst_ips" if self.dst_ips > 1 else "dst_ports",
                                 f"flows x src_ips x dst_ips x dst_ports = {self.flows} x {self.src_ips} x "
                                 f"{self.dst_ips} x {self.dst_ports} = {n} flows: the generator addresses at "
                                 f"most {shapes.MAX_FLOWS}")
        if self.mix is not None:
            shapes.parse_mix(self.mix, min_frame_bytes(ip_version), MTU_FRAME_BYTES)
        if self.arrivals not in shapes.ARRIVALS:
            raise InputError("arrivals", f"{self.arrivals!r}: accepted: {', '.join(shapes.ARRIVALS)}")
        whole("burst_pkts", self.burst_pkts, 1, shapes.ARRIVALS_MAX, "onoff: packets per on period")
        if (isinstance(self.on_duty, bool) or not isinstance(self.on_duty, (int, float))
                or not 0 < self.on_duty <= 1):
            raise InputError("on_duty", f"{self.on_duty!r}: expected a share in (0, 1] (onoff: time on)")
        whole("seed", self.seed, 0, 2**64 - 1, "poisson: the gaps' random seed")
        if (self.step_at_s is None) != (self.step_rate_pps is None):
            raise InputError("step_at_s", "a rate step needs both its time and its rate (step_rate_pps)")
        if self.step_at_s is not None:
            if self.arrivals != "const" or self.bidirectional:
                raise InputError("step_at_s", "a rate step is one direction's constant arrivals")
            if not 0 < self.step_at_s < self.duration_s:
                raise InputError("step_at_s", f"{self.step_at_s} s: the step must fall inside the window "
                                 f"({self.duration_s} s)")
            if not (self.step_rate_pps > 0 and math.isfinite(self.step_rate_pps)):
                raise InputError("step_rate_pps", f"{self.step_rate_pps} pps: a positive rate is needed")
        if self.sleep_gaps_us is not None and (self.arrivals != "onoff" or not 200 <= self.sleep_gaps_us <= 1e6):
            raise InputError("sleep_gaps_us", f"{self.sleep_gaps_us!r}: expected 200-1000000 us with onoff arrivals "
                             "(the generator sleeps through its schedule's off periods)")
        if self.burst_rate_pps is not None and (self.arrivals != "onoff" or self.bidirectional):
            raise InputError("burst_rate_pps", "back-to-back bursts are one direction's onoff arrivals")

    def mix_sizes(self) -> list[tuple[int, int]] | None:
        """The frame mix as [(size, weight)] (None: one size, frame_bytes)."""
        from softnet.results import shapes

        return None if self.mix is None else shapes.parse_mix(self.mix, 0, MTU_FRAME_BYTES)

    @property
    def warmup_pkts(self) -> int:
        return round(self.rate_pps * self.warmup_s)

    @property
    def mean_rate_pps(self) -> float:
        """The window's mean intended rate: rate_pps, or with a rate step the two rates' mean."""
        return self.rate_pps if self.step_at_s is None else self.window_pkts / self.duration_s

    @property
    def step_seq(self) -> int | None:
        """The first packet sent at step_rate_pps."""
        return None if self.step_at_s is None else self.warmup_pkts + round(self.rate_pps * self.step_at_s)

    @property
    def window_pkts(self) -> int:
        if self.step_at_s is not None:
            return self.step_seq - self.warmup_pkts + round(self.step_rate_pps * (self.duration_s - self.step_at_s))
        return round(self.rate_pps * self.duration_s)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "spec") -> "TrialSpec":
        try:
            return cls(**d)
        except TypeError as exc:
            raise InputError(where, f"not a trial spec: {exc}") from None


# A number as measured: an int stays an int (its JSON is unchanged).
Number = int | float


class Exact(BaseModel):
    """A part of a trial result: exactly these fields (a key evaluate does
    not write is an error, not a silent extra)."""

    model_config = ConfigDict(extra="forbid")


class GeneratorSummary(Exact):
    """What the generator says of its pacing over the window."""

    calls: int  # BPF_PROG_RUN live-frames calls the generator made (all streams)
    batch: int  # frames per flush to the peer, the run's page pool size (several streams: the largest)
    # mean of the window packets' send time less their due time on the schedule, ns
    window_lag_mean_ns: Number | None = None
    window_lag_max_ns: Number | None = None  # largest lag of a window packet behind its due time, ns
    window_late_pkts: int | None = None  # window packets sent more than 10 us after they were due
    # the CPU the generator reported it ran on (several streams: -1 when one ran elsewhere than asked)
    cpu: int | None = None


class LatencyHistogram(Exact):
    sub_bucket_bits: int  # each power of two of delay is cut into 2^sub_bucket_bits buckets
    range_log2_ns: int  # delays below 2^range_log2_ns ns are bucketed; longer ones only counted
    buckets: list[list[int]]  # [index, count], sparse
    over_range_pkts: int  # window packets whose delay was beyond the histogram's range


class LatencyExact(Exact):
    """The sink's exact delays (--exact): true percentiles and the histogram's error."""

    kept_pkts: int  # window delays the sink kept one by one (up to collect.exact_delays)
    complete: bool  # every window packet's delay was kept: only then is max_rel_error measured
    latency_p50_ns: Number | None = None  # exact nearest-rank median of the kept delays, ns
    latency_p90_ns: Number | None = None  # exact nearest-rank 90th percentile of the kept delays, ns
    latency_p99_ns: Number | None = None  # exact nearest-rank 99th percentile of the kept delays, ns
    latency_p99_9_ns: Number | None = None  # exact nearest-rank 99.9th percentile of the kept delays, ns
    max_rel_error: Number | None = None  # largest relative error of the histogram's percentiles against these (ratio)


class Rfc8219Latency(Exact):
    """A trial's delays as RFC 8219 reports them: typical latency (7.2: the
    median), worst-case latency (7.2: the 99.9th percentile), packet delay
    variation (7.3.1: the 99.9th percentile less the minimum) and inter-packet
    delay variation (7.3.2: D(i) - D(i-1) of consecutive frames; its minimum,
    median and maximum). One-way delays of every window frame, where the RFC
    tags 500: the same statistics on more frames."""

    typical_ns: Number | None  # typical latency: the median one-way delay of the window, ns
    worst_case_ns: Number | None  # worst-case latency: the 99.9th percentile one-way delay, ns
    pdv_ns: Number | None  # packet delay variation: the 99.9th percentile less the minimum delay, ns
    ipdv_min_ns: Number | None = None  # smallest difference between consecutive frames' delays (arrival order), ns
    ipdv_median_ns: Number | None = None  # median difference between consecutive frames' delays, ns
    ipdv_max_ns: Number | None = None  # largest difference between consecutive frames' delays, ns
    ipdv_pkts: int = 0  # consecutive pairs the IPDV figures rest on
    ipdv_missing: str | None = None  # why there are none


class Diagnosis(Exact):
    """Where packets were dropped on the path, by the kernel's counters over the trial."""

    ingress_ring_of: str  # "SUT", or "sink" without a SUT
    qdisc_dropped_pkts: int  # packets the qdiscs of the SUT's interfaces dropped over the trial
    ingress_ring_full_pkts: int  # frames the generator's XDP transmit could not put into the peer veth's ring
    softnet_dropped_pkts: int  # packets dropped with the backlog full (softnet_stat dropped) over the trial, all CPUs
    softnet_time_squeeze: int  # NET_RX runs that ended with work left (softnet_stat time_squeeze), all CPUs
    interface_deltas: dict[str, dict[str, int]]  # role -> stats64 deltas
    interface_rx_dropped_pkts: int  # rx_dropped of the testbed's interfaces over the trial, summed
    interface_tx_dropped_pkts: int  # tx_dropped of the testbed's interfaces over the trial, summed


class PlacementObserved(Exact):
    gen_cpu: int | None  # the CPU the generator reported it ran on (-1: a stream ran elsewhere than asked)
    sink_cpus: list[int]  # the CPUs the sink counted test packets on
    # share of the sink's test packets counted on the SUT's or the sink's CPUs (0..1)
    sink_share_on_requested_cpus: Number
    sink_rx_pkts_per_cpu: list[int]  # the sink's test packets per CPU over the trial (index: CPU number)
    napi_thread_cpus: dict[str, dict[str, int | None]]  # device -> kthread pid -> the CPU it last ran on
    net_rx_softirqs_per_cpu: dict[str, int]  # NET_RX softirqs per CPU over the window (/proc/softirqs)
    # each CPU's non-idle share of its /proc/stat ticks over the window (0..1)
    cpu_busy_ratio_per_cpu: dict[str, Number | None]


class PlacementRequested(Exact):
    gen_cpu: int  # the generator's CPU asked for
    sut_cpus: list[int]  # the SUT's CPUs asked for
    sink_cpu: int | None = None  # the sink's CPU asked for (none: wherever the SUT's transmit runs it)
    steering: str  # how the SUT's ingress reaches its CPUs: "threaded" NAPI or "rps"
    gen_cpus: list[int] | None = None  # several generators


class TrialPlacement(Exact):
    requested: PlacementRequested
    observed: PlacementObserved
    # placement as asked: the generator, 99% of the sink's packets and the NAPI threads on their CPUs
    as_requested: bool


class StallLoss(Exact):
    pkts: int  # lost window packets host stalls explain (set apart from the SUT's loss)
    share: Number | None = None  # those over all lost window packets (0..1)


class TrafficShape(Exact):
    arrivals: str  # "const", "poisson" or "onoff"
    seed: int | None = None  # poisson: the gaps' random seed
    burst_pkts: int | None = None  # onoff: packets per on period
    on_duty: Number | None = None  # onoff: the share of the time on (0..1)
    flows: int  # UDP source ports used in turn
    src_ips: int  # source addresses used in turn
    dst_ips: int  # destination addresses used in turn
    dst_ports: int  # UDP destination ports used in turn
    flows_total: int  # distinct flows: flows x src_ips x dst_ips x dst_ports


class FlowCounts(Exact):
    flows: int  # flows the sink counted apart (sequence number modulo flows)
    min_pkts: int  # window packets received of the flow that got the fewest
    max_pkts: int  # window packets received of the flow that got the most
    sum_pkts: int  # window packets received over all flows


class SizeLoss(Exact):
    sent_pkts: int
    received_pkts: int
    lost_pkts: int | None
    loss_ratio: Number | None


class SideSetting(Exact):
    steering: str | None = None  # how packets received on this side reach the SUT's CPUs (none: the testbed's steering)
    gro: bool = True  # GRO on this side's interface
    xdp: str = "none"  # "pass": an XDP program that passes every packet; "none": no program
    qdisc: str | None = None  # the interface's root qdisc, as set (None: the driver's default)


class TrialPath(Exact):
    """Which sides of the SUT a campaign cell uses."""

    direction: str  # "a_to_b" (generator on side A, sink on side B) or "b_to_a"
    sut_in_side: str  # the side of the SUT that receives the traffic ("a" or "b")
    sut_out_side: str  # the side of the SUT that sends it on
    sides: dict[str, SideSetting]
    placement: str | None = None  # "single" or "split" egress-side processing (none: as sink_cpu says)
    ingress_steering: str  # the receiving side's steering: "threaded" or "rps"


class Interleave(Exact):
    """A trial that took turns with other variants' trials in the same seconds
    (softnet.campaign.interleave): its bursts filled one slot of every period."""

    variants: int  # trials taking turns, this one included
    slot: int  # this trial's slot in each period (0: first)
    period_s: Number  # one turn of every variant
    duty: Number  # this trial's share of the time on: its slot less the guard
    partners: list[str]  # the other trials' testbed run ids


class ThreadCpu(Exact):
    """The SUT's NAPI kthreads' run time over the trial (schedstat)."""

    ns: int  # the NAPI kthreads' run time over the whole trial, ns
    forwarded_pkts: int  # packets the sink received, warm-up and window
    ns_per_pkt: Number | None  # ns / forwarded_pkts: kthread time per packet, ns
    threads: int  # NAPI kthreads counted
    window_ns: int | None = None  # the NAPI kthreads' run time between the window's edges (read there), ns
    window_ns_per_pkt: Number | None = None  # window_ns / the window's packets the sink received, ns
    runs: int | None = None  # the NAPI kthreads' wake-ups over the trial (times put on a CPU; each a batch)
    window_runs: int | None = None  # the same between the window's edges


class Direction(Exact):
    """One direction of a bidirectional trial."""

    intended_rate_pps: Number
    sent_pkts: int
    received_pkts: int
    lost_pkts: int | None = None
    loss_ratio: Number | None = None
    sut_lost_pkts: int | None = None
    sut_loss_ratio: Number | None = None
    achieved_rate_pps: Number
    achieved_ratio: Number
    throughput_bps: Number | None = None
    reordered_pkts: int
    duplicate_pkts: int
    latency_min_ns: Number | None = None
    latency_mean_ns: Number | None = None
    latency_max_ns: Number | None = None
    latency_p50_ns: Number | None = None
    latency_p90_ns: Number | None = None
    latency_p99_ns: Number | None = None
    latency_p99_9_ns: Number | None = None
    flow_counts: FlowCounts | None = None
    size_loss: dict[str, SizeLoss] | None = None
    flags: list[str]
    valid: bool


class LostRun(Exact):
    first_seq: int  # sequence number of the run's first lost packet
    pkts: int  # lost packets in the run
    due_s: Number  # when its first packet was due, s from the window's first due time


class LostRuns(Exact):
    total: int  # runs of lost sequence numbers in the window (all counted)
    truncated: bool | int  # the sink listed only some of the runs (more than 20,000)
    length_hist_log2: list[list[int]]  # [log2 of the run length, runs]
    longest_pkts: int  # the longest listed run, packets
    first: list[LostRun]


class LossSeries(Exact):
    t_s: list[Number]  # each point's start, s from the window's first due time
    step_s: Number  # seconds of the schedule per point
    lost_pkts: list[int]  # lost packets per point
    delay_max_ns: list[Number | None]  # the highest one-way delay per point, ns (0: no packet arrived in it)


class LossTimeline(Exact):
    """When packets were lost: runs of lost sequence numbers and a pooled series."""

    bin_pkts: int  # sequence numbers per bin of the sink's timeline
    lost_runs: LostRuns
    series: LossSeries


class RunsOfCause(Exact):
    runs: int  # lost runs of this cause
    pkts: int  # lost packets in them


class LossAttribution(Exact):
    """How much of the loss host stalls explain, and in words."""

    lost_pkts: int  # lost window packets by the sink's timeline
    explained_pkts: int  # loss in stall windows beyond the baseline loss ratio
    explained_share: Number  # explained_pkts over lost_pkts (0..1; 0 without loss)
    baseline_loss_ratio: Number | None  # the loss ratio outside the stall windows (0..1)
    stall_windows: int  # influence windows of the stalls long enough to overflow a ring (overlapping ones joined)
    stall_windows_with_loss: int  # those with loss beyond the baseline
    rest_cause: str  # the cause of the loss stalls do not explain: "overload" or "unexplained"
    sut_busy_ratio: Number | None  # the SUT's CPUs' mean non-idle share of /proc/stat ticks over the window (0..1)
    loss_spread: Number | None  # share of the sink's bins outside stall windows that lost packets (0..1)
    runs_by_cause: dict[str, RunsOfCause]
    runs_counted: int  # lost runs the sink listed, each given a cause
    unseen_stall_pkts: int  # the rest's packets lost after the queue went undrained: a stall too short for the probe
    words: str  # the attribution in one sentence


class StallProbeInfo(Exact):
    period_ns: int | None = None  # the probe's clock period on a busy CPU, ns
    threshold_ns: int | None = None  # the shortest wait or clock gap counted as a stall, ns
    lost_events: int | None = None  # events the probe's ring buffer dropped
    events_truncated: bool | int | None = None  # the probe saw more events than it listed


class CpuStalls(Exact):
    role: str
    count: int
    total_ms: Number
    max_ms: Number
    by: list[str]
    probe_samples: int | None = None
    steal_ms: Number | None = None


class Stall(Exact):
    cpu: int
    role: str
    kind: str
    by: str | None = None
    start_s: Number
    duration_ms: Number


class InjectedFound(Exact):
    cpu: int  # the CPU the stall injector took
    busy_ms: Number  # each injected stall's length, ms
    every_ms: Number  # the injector's period, ms
    injected: int  # stalls injected while the generator was sending
    found: int  # of them, the ones a detected stall of that CPU overlaps
    outside_traffic: int  # stalls injected before the first or after the last send (not checked)
    missed_at_ns: list[int] = []  # start times of the injected stalls not found (CLOCK_MONOTONIC ns)
    # the truth delivered: the run time the spinner got against busy_ms x stalls made, and stalls it skipped
    delivered_pct: Number | None = None
    skipped: int | None = None  # set when the injector skipped any
    disturbed: str | None = None  # the delivered truth fell short of the planted one, with the figures


class ResetResult(Exact):
    """The SUT's reset during the window and the interruption it caused
    (RFC 6201's two methods; times from the window's start, by the
    generator's schedule: the sink counts lost sequence numbers)."""

    what: str  # what the personality did
    at_s: Number  # when the reset was asked for
    started_s: Number  # when its action ran, on the controller's clock
    ended_s: Number  # when its action ended, on the same clock as started_s
    interruption_ms: Number | None  # timestamp method: from the last packet forwarded before to the first after
    frame_loss_ms: Number | None  # frame-loss method: lost packets / offered rate
    lost_pkts: int | None  # window packets lost in the trial (what the frame-loss method counts)
    error: str | None = None  # the action failed: the trial's figures say nothing of a reset
    spoilt: str | None = None  # a data-path stall at the interruption's start or end: its length is the host's too


class VictimCheck(Exact):
    """The pinned victim's lost CPU share against the profiler's time on its
    CPU (softnet.analysis.victim_check)."""

    kind: str  # python | c
    cpu: int  # the CPU the victim was pinned to
    baseline_rate: Number | None = None  # iterations per second before the traffic
    baseline_lost_pct: Number | None = None  # the rest's shortfall against its median 50 ms pace
    rest_on_cpu_pct: Number | None = None  # the victim's run time over the rest's wall time (the kernel's)
    # the truth a stall injector on the victim's CPU delivered over the rest (its own spans), if one ran
    injected_rest_pct: Number | None = None
    rest_after_rate: Number | None = None  # iterations per second at rest after the traffic
    rest_drift_pct: Number | None = None  # the pace at rest after the traffic against before it
    window_rate: Number | None = None  # over the measurement window
    stolen_victim_pct: Number | None = None  # the victim's pace lost over the window against its baseline_rate, %
    stolen_ebpf_pct: Number | None = None  # softirq + hardirq + system vectors, eBPF-measured
    gap_pct: Number | None = None  # stolen_victim_pct less stolen_ebpf_pct: CPU time the profiler did not see, points
    # interrupts per second on the victim's CPU (eBPF: device IRQs + system vectors)
    interrupts_per_s: Number | None = None
    gap_us_per_interrupt: Number | None = None  # gap_pct per interrupt, us
    missing: str | None = None  # why there are no figures (too few samples, no schedule or profiler window)
    spoilt: str | None = None  # why its rest is no baseline; left out of the summaries


class HostPace(Exact):
    """The host's pace around the trial: a fixed loop's iterations per second
    of its own run time on the first SUT CPU, before and after the traffic.
    A host that gives the vCPU a slower core (a busy sibling, another guest)
    slows it and the data path alike."""

    cpu: int  # the CPU it ran on
    before_ips: Number | None = None  # iterations per second of its run time, before the traffic
    after_ips: Number | None = None  # the same, after the traffic
    ips: Number | None = None  # the two's geometric mean: the trial's covariate
    drift_pct: Number | None = None  # after against before, %


class BurstRead(Exact):
    """One burst of a back-to-back trial: how many of its frames went
    through before the first one lost (all of them: none lost)."""

    first_seq: int  # sequence number of the burst's first frame
    lossless_pkts: int  # frames before the first lost one; a shorter burst is their prefix
    lost_pkts: int  # the burst's frames lost
    spoilt: str | None = None  # why the burst says nothing of the SUT (a host stall, the generator late)


class BackToBackResult(Exact):
    """A back-to-back trial (RFC 2544 26.4): bursts of burst_pkts frames at
    burst_rate_pps. Each frame of a burst is due at the same time whatever
    the burst's length, so the frames ahead of the first loss are a burst
    the SUT forwards whole: a burst's lossless length is read off once."""

    burst_rate_pps: Number  # the frame rate inside a burst, pps
    burst_pkts: int  # frames per burst
    bursts: list[BurstRead]
    unknown: int = 0  # bursts the sink's kept lost runs do not cover (truncated)


class RecoveryResult(Exact):
    """A system recovery trial (RFC 2544 26.5): overload until the step (A),
    then the recovery load. Times in ms from A, on the generator's schedule."""

    overload_pps: Number  # the load until the step, pps
    recovery_pps: Number  # the load after the step, pps
    step_s: Number  # A, from the window's start
    recovery_ms: Number | None  # the last frame lost after A (B) less A; 0: none lost after A
    # packets lost from the step on (none: the sink's listed runs do not reach back to it)
    lost_after_step_pkts: int | None
    drain_ms: Number | None  # until the delay is back to the recovery load's (the queue the overload left drained)
    stall_lost_pkts: int = 0  # lost after B in host stalls' windows: the host's, set apart from the figure
    drain_spoilt: str | None = None  # a host stall while the queue drained: the drain time is not the SUT's
    # a host stall at the step (A) or the last loss (B) moves that end either way: the recovery is the host's too
    recovery_spoilt: str | None = None
    missing: str | None = None  # why there are no figures


class HostStalls(Exact):
    """The data path's CPUs' stalls the probe saw (or why there is no probe)."""

    missing: str | None = None  # why there is no probe, or no attribution (no sink timeline, loss unknown)
    probe: StallProbeInfo | None = None
    ring_fill_ms: Number | None = None  # time the veth ring (256 packets) takes to fill at the intended rate, ms
    qualifying_min_ms: Number | None = None  # the shortest stall that can explain loss (a quarter of ring_fill_ms), ms
    # per CPU of the data path: its role, stalls, their total and longest ms, who held it
    per_cpu: dict[str, CpuStalls] | None = None
    stalls: list[Stall] | None = None  # the stalls one by one (the first 200; start_s from the window's first due time)
    injected: InjectedFound | None = None


class KernelSamples(Exact):
    """The sampler's series as the raw trial keeps it (softnet.results.series.Series.to_json)."""

    interval_s: Number  # the sampler's interval, s
    t_s: list[Number]  # sample times, s since the sampler started (monotonic clock)
    marks: dict[str, int]  # named samples (start, window_start, window_end, end) -> sample index
    keys: list[list[str | int]]  # [source, item, cpu]
    values: list[list[Number | None]]  # per key, the raw counter at each sample (none: not read then)
    irq_names: dict[str, str]  # IRQ -> its name (/proc/interrupts)
    qdiscs: dict[str, str]  # role -> its root qdisc's kind
    missing: dict[str, str]  # sources the sampler lacked -> why
    sampler: dict[str, Number | str | bool | list[int] | None]  # the sampler's own cost and pinning
    power_zones: dict[str, str] = {}  # RAPL zone directory -> its name (package-0, core, dram...)


class PowerRead(Exact):
    """RAPL power over the window (softnet.analysis.power): the host's total
    counts its packages and DRAM once each; every zone is also shown alone."""

    watts: Number | None  # the host's RAPL power over the window (packages + DRAM), W; none without such a zone
    zones_w: dict[str, Number]  # each RAPL zone's power over the window, W, by "zone (name)"
    idle_watts: Number | None = None  # the same total before the traffic (collect.idle_power_s)
    idle_s: Number | None = None  # the span the idle power was taken over, s
    traffic_watts: Number | None = None  # watts - idle_watts: what the traffic cost


class KernelCpu(Exact):
    """One CPU's kernel rates over the window (softnet.analysis.kernel_stats)."""

    utilization_pct: Number | None
    cpu_time_pct: Number
    softirq_tick_pct: Number | None
    irqs_per_s: Number
    net_rx_softirqs_per_s: Number
    net_tx_softirqs_per_s: Number
    softirqs_per_s: dict[str, Number]  # vector -> per s (vectors that ran)
    softnet_processed_per_s: Number
    pkts_per_rx_softirq: Number | None
    time_squeeze_per_s: Number
    softnet_dropped: int
    context_switches_per_s: Number | None
    cycles_per_s: Number | None = None  # with a cycle counter only
    cache_misses_per_s: Number | None = None  # with a hardware cache counter only


class IrqRate(Exact):
    name: str
    per_s: Number
    per_cpu_per_s: dict[int, Number]


class NormalizedCost(Exact):
    """The WiFi-AP paper's normalized costs over the SUT's CPUs (none without throughput)."""

    cpus: list[int]  # the SUT's CPUs the costs are summed over
    throughput_mbps: Number  # window packets received x frame_bytes x 8 over the sampler's window, Mbit/s
    utilization_per_mbps: Number | None = None  # sum of the SUT CPUs' utilization_pct per Mbps
    cpu_time_per_mbps: Number | None = None  # sum of the SUT CPUs' cpu_time_pct per Mbps
    # sum of the SUT CPUs' cycles as % of one core's frequency per Mbps; without a cycle counter, cpu_time_per_mbps
    cycles_per_mbps: Number | None = None
    cost_basis: str | None = None  # "cycles" | "cpu_time"
    cost_basis_why: str | None = None  # why cycles_per_mbps is CPU time (no cycle counter)
    power_mw_per_mbps: Number | None = None  # the host's RAPL power over the window, mW per Mbps
    traffic_power_mw_per_mbps: Number | None = None  # above the idle power
    cache_misses_per_mbps: Number | None = None  # per s, over the SUT's CPUs (the study's Table IV)


class NicCounters(Exact):
    """One interface's ethtool -S counters that moved over the window
    (softnet.analysis.nic_counters)."""

    changed: dict[str, Number]
    losses: dict[str, Number]  # drops, discards, misses, errors, buffer shortages
    queues: dict[str, dict[str, Number]]  # "rx0" -> counter -> change


class KernelStats(Exact):
    """The kernel sampler's figures over the window; without window marks only
    why (missing) and how it sampled."""

    window_s: Number | None = None  # the window between the sampler's edge samples, s
    interval_s: Number | None = None  # the sampler's interval, s
    samples: int | None = None  # samples taken over the trial
    per_cpu: dict[int, KernelCpu] | None = None  # per CPU: its kernel rates over the window
    irqs: dict[str, IrqRate] | None = None  # per IRQ that fired: its name and rates over the window
    dev_weight: int | None = None  # the net.core.dev_weight sysctl (none: unknown)
    netdev_budget: int | None = None  # the net.core.netdev_budget sysctl (none: unknown)
    context_switches_per_s: Number | None = None  # host-wide context switches per second (/proc/stat ctxt)
    normalized: NormalizedCost | None = None
    # none: counters cannot tell enqueued from bypassing packets (the profiler's stages can)
    qdisc_enqueued_share: Number | None = None
    qdisc: dict[str, Number] | None = None  # root qdisc statistics' change over the window, by "<role>.<field>"
    power: PowerRead | None = None
    nic: dict[str, NicCounters] | None = None  # role -> its driver counters that moved
    missing: dict[str, str]  # sources the sampler lacked -> why
    # the sampler's own cost and pinning (CPU seconds, share of one CPU, pinned CPUs)
    sampler: dict[str, Number | str | bool | list[int] | None]


class CpuProfile(Exact):
    """One CPU's eBPF-measured times as % of the window (softnet.analysis.cpu_audit)."""

    softirq_pct: Number  # time in softirqs, all vectors, % of the window
    net_softirq_pct: Number  # time in NET_RX and NET_TX softirqs, % of the window
    hardirq_pct: Number  # time in device interrupt handlers, % of the window
    sysvec_pct: Number  # time in x86 system vectors (IPIs, local timer, irq work), % of the window
    interrupts_per_s: Number  # device interrupts and system vectors per second
    busy_pct: Number  # time a task other than idle ran, plus irq and softirq time inside idle, % of the window
    softirq_in_idle_pct: Number  # softirq time run inside the idle task, % of the window
    # softirq time by the task it ran on (idle, ksoftirqd, napi_thread, other_task), %
    softirq_pct_by_context: dict[str, Number]
    net_rx_pct_by_context: dict[str, Number]  # NET_RX softirq time by the task it ran on, % of the window
    napi_polls_per_s: Number  # NAPI polls per second
    napi_work_per_poll: Number | None  # packets per NAPI poll, mean
    napi_budget_exhausted_share: Number | None  # share of the polls that used their whole budget (0..1)
    napi_work_hist: list[int]  # polls by packets done: 0, 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64-127, 128+
    context_switches_per_s: Number  # context switches per second
    unmatched_exits: int  # exits seen without their entry (attached mid-event): their time is not counted
    # switches the profiler did not see: the span after one is no NAPI-thread time (none: not counted then)
    unseen_switches: int | None = None


class CpuAudit(Exact):
    """Measured against /proc/stat's ticks of one CPU; only the verdict when it had no ticks."""

    reported_busy_pct: Number | None = None  # /proc/stat's non-idle ticks over the window, % of the ticks
    reported_softirq_pct: Number | None = None  # /proc/stat's softirq ticks, %
    reported_system_pct: Number | None = None  # /proc/stat's system ticks, %
    reported_idle_pct: Number | None = None  # /proc/stat's idle and iowait ticks, %
    reported_steal_pct: Number | None = None  # /proc/stat's steal ticks (the hypervisor ran something else), %
    measured_busy_pct: Number | None = None  # the profiler's busy_pct
    measured_softirq_pct: Number | None = None  # the profiler's softirq_pct
    misaccounted_pct: Number | None = None  # measured less reported busy, percentage points
    verdict: str  # the audit in words


class DropRow(Exact):
    reason: str  # the kernel's skb drop reason
    device: str  # the device the skb was on (its testbed role where it is one)
    skbs: int  # drops counted while kfree_skb was attached
    estimated_skbs: int  # drops estimated over the window (scaled by the packets polled)


class StageRow(Exact):
    stage: str  # the stage's name
    exactness: str  # exact | approximate | unavailable
    why: str  # what the stage spans, and why it is as exact as it is
    ns: Number  # the stage's time over the window, ns (sampled_ns scaled to the window)
    sampled_ns: int  # its time measured while the stage events were attached, ns
    sampled_intervals: int  # intervals counted in it while attached
    pct_of_cpu: Number | None  # ns as % of the window's wall time
    ns_per_packet: Number | None  # ns per window packet the sink received


class CpuStages(Exact):
    """One CPU's packet-path stages over the window (softnet.analysis.stages)."""

    wifi_ap: list[StageRow]
    ebpf_profile: list[StageRow]
    sampled_share: Number | None  # share of the window the stage events were attached (0..1)
    scale: Number | None  # packet-processing time over the window against over the sampled periods: the stages' scale
    unattributed_ns: Number  # sampled time between events no stage explains, ns
    unattributed: dict[str, Number]  # "from->to" -> ns, the largest
    unsampled_ns: Number  # sampled time in intervals that crossed an attach or detach (left out), ns
    transmits_enqueued: int  # transmits through a qdisc (sampled)
    transmits_direct: int  # transmits straight to the driver, no qdisc (sampled)
    qdisc_enqueued_share: Number | None  # transmits_enqueued over all transmits (0..1)
    packet_time_ns: Number  # packet-processing time over the window by the profiler's softirq and kthread counters, ns
    packet_time_pct: Number | None  # packet_time_ns as % of the window
    coverage: Number | None  # named stage time over packet_time_ns in the sampled periods (ratio; 1: all of it named)


class FunctionRow(Exact):
    """One kernel function's share of the sampled CPUs' busy time (softnet.analysis.kernel_functions)."""

    function: str  # its symbol (a module's or a BPF program's too: bpf_prog_<tag>_<name>)
    self_samples: int  # samples whose innermost frame it was
    incl_samples: int  # samples with it anywhere on the stack (once per sample, recursion or not)
    self_ns_per_pkt: Number | None  # self_samples x period over the window's forwarded packets, ns
    incl_ns_per_pkt: Number | None  # with what it calls, ns per forwarded packet


class FunctionProfile(Exact):
    """The SUT CPUs' kernel stacks over the window, sampled on a fixed-period
    CPU clock (each sample is period_ns of its CPU's time), by function."""

    freq_hz: int  # samples per second per CPU
    period_ns: int  # the time each sample stands for, ns
    cpus: list[int]  # the CPUs sampled (the SUT's)
    window_s: Number  # between the two edge reads, s
    samples: int  # samples taken in the window on those CPUs
    idle_samples: int  # in the idle loop with no interrupt or softirq on the stack
    user_samples: int  # in user space (no kernel stack)
    lost_samples: int  # without a stack: the stack map full or two stacks in one slot, or not counted
    busy_samples: int  # samples - idle_samples: the CPU time the data path and anything else took
    forwarded_pkts: int  # window packets the sink received
    busy_ns_per_pkt: Number | None  # busy_samples x period over forwarded_pkts, ns
    functions: list[FunctionRow]  # every function seen in a busy kernel stack, largest inclusive time first
    unknown_frames: int  # frames no kernel symbol covered when the stacks were named
    # only these threads' samples count (the trial's own SUT kthreads: other trials' SUTs took turns on
    # the same CPUs); None: every sample of the CPUs
    threads: list[int] | None = None


class ProfileResult(Exact):
    """The eBPF profiler's figures over the window, per CPU of the host."""

    plan: str  # what the profiler attached (its tracepoints, and what it left out)
    window_s: Number  # the window between the profiler's edge reads, s
    window_monotonic_ns: list[int]  # the window's edge reads, CLOCK_MONOTONIC ns
    per_cpu: dict[int, CpuProfile]
    drops: list[DropRow]
    sampled_time_share: Number | None  # share of the window the per-packet events were attached (0..1)
    sampled_packet_share: Number | None  # share of the packets NAPI polled while they were attached (0..1)
    # the share of the window the per-CPU times and counts were measured in (none: all of it), scaled from it
    base_time_share: Number | None = None
    drop_keys_full: int  # drops not itemized by reason and device (the profiler's map was full)
    audit: dict[int, CpuAudit]
    transitions: dict[int, list[list[str | int]]]  # CPU -> [from event, to event, ns, count]
    duty: Number  # share of the time the stage events were attached (TrialSpec.profile_duty; 0: never)
    stages: dict[int, CpuStages]
    stages_missing: str | None  # why there are no stages
    # the SUT CPUs' time by kernel function (profile_stack_hz > 0); None: not sampled (functions_missing says why)
    functions: FunctionProfile | None = None
    functions_missing: str | None = None  # why stacks were sampled but give no functions (no window-end read)


class _StoredView(BaseModel):
    """A stored result's part as the summaries over many trials read it: the
    fields they need, whatever else a result (or a test's) carries."""

    model_config = ConfigDict(extra="ignore")


class StoredKernelCpu(_StoredView):
    model_config = ConfigDict(extra="allow")  # every per-CPU rate is averaged, by name

    cpu_time_pct: Number | None = None


class StoredNormalized(_StoredView):
    cpus: list[int] = []
    throughput_mbps: Number | None = None
    utilization_per_mbps: Number | None = None
    cycles_per_mbps: Number | None = None
    cpu_time_per_mbps: Number | None = None
    power_mw_per_mbps: Number | None = None
    traffic_power_mw_per_mbps: Number | None = None
    cache_misses_per_mbps: Number | None = None
    cost_basis: str | None = None
    cost_basis_why: str | None = None


class StoredNic(_StoredView):
    losses: dict[str, Number] = {}


class StoredKernel(_StoredView):
    window_s: Number | None = None
    per_cpu: dict[int, StoredKernelCpu] = {}
    normalized: StoredNormalized | None = None
    nic: dict[str, StoredNic] | None = None
    dev_weight: int | None = None
    missing: dict[str, str] = {}


class StoredCpuProfile(_StoredView):
    busy_pct: Number | None = None
    softirq_pct: Number | None = None
    napi_work_per_poll: Number | None = None
    net_rx_pct_by_context: dict[str, Number | None] = {}


class StoredAudit(_StoredView):
    reported_busy_pct: Number | None = None
    reported_softirq_pct: Number | None = None
    misaccounted_pct: Number | None = None


class StoredStageRow(_StoredView):
    stage: str
    pct_of_cpu: Number | None = None
    ns_per_packet: Number | None = None


class StoredStages(_StoredView):
    wifi_ap: list[StoredStageRow] = []
    ebpf_profile: list[StoredStageRow] = []
    coverage: Number | None = None
    packet_time_pct: Number | None = None


class StoredProfile(_StoredView):
    per_cpu: dict[int, StoredCpuProfile] = {}
    audit: dict[int, StoredAudit] = {}
    stages: dict[int, StoredStages] = {}
    duty: Number | None = None


class StoredRequested(_StoredView):
    sut_cpus: list[int] = []


class StoredPlacement(_StoredView):
    requested: StoredRequested = StoredRequested()


class ProfiledTrial(_StoredView):
    """A stored trial as the kernel, audit and stage summaries read it."""

    valid: bool | None = None
    intended_rate_pps: Number
    duration_s: Number | None = None
    received_pkts: int | None = None
    loss_ratio: Number | None = None
    placement: StoredPlacement = StoredPlacement()
    kernel: StoredKernel | None = None
    profile: StoredProfile | None = None


class Provenance(BaseModel):
    """Where and how a figure was measured. Extra keys allowed: a remote
    trial adds its hosts and testbed, a simulated SUT its model."""

    model_config = ConfigDict(extra="allow")

    softnet_version: str  # the softnet version that measured
    kernel: str  # the host's kernel release
    hostname: str  # the host's name
    cpu_model: str | None = None  # the host's CPU model (/proc/cpuinfo)
    cpus_online: int | None = None  # the host's logical CPUs
    recorded_unix_s: Number  # when the provenance was recorded, unix s
    # JSON on purpose: what was asked (the trial spec and its SUT, or a campaign cell's), as given, so
    # that its hash (spec_hash) stays the one it was recorded with
    spec: dict[str, Any]
    spec_hash: str  # the spec's hash (sha256 of its sorted JSON, first 16 hex digits)
    host_changes_applied: list[str]  # every change softnet made to the host for the testbed and the trial, in words


class NicFacts(Exact):
    """What a host says of an interface (its agent reads them; a raw trial records them as is)."""

    name: str
    mac: str
    pci: str
    driver: str
    driver_version: str
    firmware: str
    operstate: str
    mtu: int | None = None


class InterfaceFacts(NicFacts):
    """An inventory host's interface as its agent found it, with the NIC knobs it takes."""

    nic_knobs: list[str] = []


class RemoteHost(Exact):
    """One inventory host a trial ran on, and how its clock and changes stood."""

    name: str
    address: str
    softnet_version: str
    kernel: str
    hostname: str
    cpu_model: str | None = None
    cpus_online: int | None = None
    netns_inode: int
    cpus_usable: list[int]
    cpu_freq_hz: Number | None = None
    clock_offset_s: Number
    clock_uncertainty_s: Number
    interfaces: dict[str, InterfaceFacts | None]
    host_changes_applied: list[str]


class TrialResult(BaseModel):
    """One trial's evaluated result. Fields absent from a trial (no sampler,
    no profiler) stay unset and are left out of ``to_dict``."""

    model_config = ConfigDict(extra="forbid")

    # this result's schema version (a raw trial of an older raw schema evaluates to an older one)
    schema_version: int = SCHEMA_VERSION
    sut: str  # the SUT personality's spec string ("none": the generator's traffic goes straight to the sink)
    ip_version: int  # 4 or 6: the test traffic's IP version
    intended_rate_pps: Number  # the offered rate asked for, pps (bidirectional: both directions' sum)
    duration_s: Number  # the measurement window, s
    warmup_s: Number  # the warm-up sent before the window, s
    frame_bytes: int  # frame size incl. FCS, B (with a frame mix: see frame_mix)
    flows: int  # UDP source ports used in turn
    intended_pkts: int  # window packets the schedule asks for
    sent_pkts: int  # window packets the generator sent
    warmup_sent_pkts: int  # warm-up packets the generator sent
    # the window's achieved offered rate, pps: (sent_pkts - 1) / send_span_s at constant arrivals
    achieved_rate_pps: Number
    achieved_ratio: Number  # achieved_rate_pps over the window's mean intended rate (off by more than 0.5%: flagged)
    send_span_s: Number  # from the window's first send to the last, s (the generator's clock)
    received_pkts: int  # window packets the sink received (first copies)
    lost_pkts: int | None  # sent_pkts - received_pkts (none: more received than sent)
    loss_ratio: Number | None  # lost_pkts / sent_pkts (0..1)
    reordered_pkts: int  # window packets that arrived after a higher sequence number of their stream
    duplicate_pkts: int  # window copies of a sequence number already received
    out_of_range_pkts: int  # test frames with a sequence number beyond the trial's (corrupt or foreign), whole trial
    warmup_received_pkts: int  # warm-up packets the sink received (first copies)
    latency_min_ns: Number | None  # the smallest one-way delay of a window packet, ns (send stamp to the sink's XDP)
    latency_mean_ns: Number | None  # the mean one-way delay of the window packets, ns
    latency_max_ns: Number | None  # the largest one-way delay of a window packet, ns
    # schema 3 (raw schema 2): nearest-rank percentiles, each within latency_percentile_rel_error
    latency_pkts: int | None = None  # window packets with a delay (the histogram's count)
    # window packets stamped after they arrived (a corrupt stamp): no delay taken
    latency_negative_pkts: int | None = None
    latency_p50_ns: Number | None = None  # the median one-way delay, ns (nearest rank, from the histogram)
    latency_p90_ns: Number | None = None  # the 90th percentile one-way delay, ns
    latency_p99_ns: Number | None = None  # the 99th percentile one-way delay, ns
    latency_p99_9_ns: Number | None = None  # the 99.9th percentile one-way delay, ns
    # the bound on each percentile's relative error from the histogram's bucket width (ratio)
    latency_percentile_rel_error: float | None = None
    latency_hist: LatencyHistogram | None = None
    latency_exact: LatencyExact | None = None
    rfc8219: Rfc8219Latency | None = None
    # schema 2 (raw schema 1): upper edges of log2 buckets
    latency_p50_upper_ns: Number | None = None
    latency_p99_upper_ns: Number | None = None  # schema 2: the 99th percentile's log2 bucket's upper edge, ns
    latency_p99_9_upper_ns: Number | None = None  # schema 2: the 99.9th percentile's log2 bucket's upper edge, ns
    # schema 2: window packets per log2 delay bucket (bucket b: below 2^(b+1) ns)
    latency_log2_hist: list[int] | None = None
    drain_s: Number  # after the generator stopped, how long until the sink's counts stopped moving, s
    generator: GeneratorSummary
    diagnosis: Diagnosis
    placement: TrialPlacement
    other_runs: list[str] = []  # other softnet runs' namespaces seen during the trial
    flags: list[str]  # the validity rules the trial broke (generator_limited, sink_limited, ...)
    valid: bool  # no flag but the informational host_interference
    # schema 4: loss in time and host stalls (softnet.analysis.loss_time); sut_*: the loss with what host
    # stalls explain set apart (what the methods count by default)
    sut_lost_pkts: int | None = None
    sut_loss_ratio: Number | None = None  # sut_lost_pkts / sent_pkts (0..1)
    loss_explained_by_host_stalls: StallLoss | None = None
    loss_attribution: LossAttribution | None = None
    loss_timeline: LossTimeline | None = None
    host_stalls: HostStalls | None = None
    started_unix_s: Number  # when the generator started sending (warm-up included), unix s on the controller's clock
    kernel: KernelStats | None = None
    kernel_samples: KernelSamples | None = None
    profile: ProfileResult | None = None
    provenance: Provenance
    path: TrialPath | None = None
    interleave: Interleave | None = None  # took turns with other trials (a comparison's variants); None: alone
    # traffic shapes (docs/how-to/traffic.md); a result without them had one size, constant arrivals
    frame_mix: str | None = None  # the generator's --mix ("64:7,570:4,1518:1"); None: frame_bytes only
    mean_frame_bytes: Number | None = None  # of what was sent (frame_bytes, or the mix's mean)
    throughput_bps: Number | None = None  # received window frame bytes (incl. FCS) x 8 / send span
    arrivals: str | None = None  # "const" | "poisson" | "onoff"
    traffic_shape: TrafficShape | None = None
    flow_counts: FlowCounts | None = None  # per-flow window packets
    size_loss: dict[str, SizeLoss] | None = None  # per frame size
    # the SUT personality's counters proving the packets took its path (after - before the trial)
    path_counters: dict[str, int] | None = None
    # bidirectional trials: each direction's figures ("forward": generator -> sink, "reverse"); the counts,
    # rates and loss above are both directions' sums, the latency fields the forward direction's
    directions: dict[str, Direction] | None = None
    # the SUT's NAPI kthreads' run time over the trial (schedstat, exact): ns, forwarded_pkts, ns_per_pkt,
    # threads; absent with RPS steering (no kthread) or a raw trial from before it was read
    sut_thread_cpu: ThreadCpu | None = None
    # an inventory's trial: the hosts each piece ran on, and how far the SUT's window edges may sit from
    # the generator's clock
    hosts: dict[str, RemoteHost] | None = None
    window_skew_ms: Number | None = None  # how far the SUT host's window edges may sit from the generator's clock, ms
    reset: ResetResult | None = None  # a reset trial's (TrialSpec.reset_at_s)
    victim: VictimCheck | None = None  # with a pinned victim (TrialSpec.victim)
    host_pace: HostPace | None = None  # with the pace probe (TrialSpec.pace_probe)
    back_to_back: BackToBackResult | None = None  # a back-to-back trial's bursts (TrialSpec.burst_rate_pps)
    recovery: RecoveryResult | None = None  # a recovery trial's (TrialSpec.step_at_s)

    def to_dict(self) -> dict:
        return self.model_dump(exclude_unset=True)


def check_schema(result: dict, where: str) -> int:
    """The schema version of a stored trial result; an unknown one is an error
    naming it (never a guess)."""
    version = result.get("schema_version", 1)
    if version not in KNOWN_SCHEMA_VERSIONS:
        raise InputError(where, f"trial result schema version {version!r}: this softnet reads versions "
                         f"{', '.join(map(str, KNOWN_SCHEMA_VERSIONS))} (a newer softnet wrote it?)")
    return version
