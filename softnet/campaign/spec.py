"""Campaign specs: TOML validated with pydantic.

    name = "ipv4-split-vs-single"
    [testbed]
    sut = "ipv4-fwd"            # ipv4-fwd | ipv6-fwd | none | synthetic
    placement = "single"        # or "split": egress-side processing on its own CPU
    direction = "a_to_b"        # or "b_to_a"; per-side steering, gro, xdp in [testbed.side_a], [testbed.side_b]
    [traffic]
    frame_bytes = 64
    flows = 1
    [method]
    kind = "sweep"
    loads = ["100kpps", "200kpps"]          # or start/stop/step, or relative; "max": the probed maximum
    runs = 5
    duration_s = 2.0
    warmup_s = 0.5
    # or: kind = "search" with goals = ["ndr", "pdr0.5"], width = 0.005,
    # min_load / max_load, duration_s (final trials), runs (repeated searches),
    # latency_fractions = [0.1, 0.5, 0.9] (latency under load at fractions of the PDR)
    # or: kind = "latency" (the AF_XDP latency lab): runs x duration_s per
    # configuration, knobs in [latency] (see LatencySpec), matrix over latency.*
    [collect]
    sample_interval_s = 1.0                 # kernel statistics during trials (0.1 .. 10 s); sample = false: off
    [analysis]
    pdr_loss_ratio = 0.005
    eta = 0.1
    [matrix]                                # full factorial over these knobs
    "testbed.sut_cpus" = [[0], [1]]
    "traffic.frame_bytes" = [64, 512]

Errors name the field path (`method.runs`) and what is accepted.
"""
from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from softnet.errors import InputError
from softnet.specfile import read_toml, spec_error  # noqa: F401 (spec_error: for the CLI)
from softnet.results.shapes import ARRIVALS_MAX
from softnet.units import parse_rate

MAX_LATENCY_FRACTIONS = 10
# A full factorial grows as the product of its knobs' value counts; beyond this
# a matrix is a typo (or days of measuring), not a plan.
MAX_CELLS = 10_000


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class SpecFile:
    """The validation context of a spec read from a file (load_spec): the
    relative paths in it (inventory, custom:file=, custom.workdir) are read
    as the file's neighbours, as a user reads them."""

    folder: Path


def spec_folder(info: ValidationInfo) -> Path | None:
    return info.context.folder if isinstance(info.context, SpecFile) else None


def interleavable(c: CompareSpec, cells: list[CampaignSpec]) -> None:
    """Interleaved pairing shares one host's clock and its generator CPU
    between the variants' bursts: refused where a variant cannot keep to a slot."""
    from softnet.campaign.interleave import Turns

    Turns(len(cells), c.interleave_ms / 1e3).check("compare.interleave_ms")
    for i, cell in enumerate(cells):
        t, c = cell.traffic, cell.collect
        # the profiler, the victim, the pace probe and the stall injector each take the whole CPU's view or
        # time: run twice at once they would see both variants' packets, or take each other's CPU
        shared = [n for n, on in (("collect.profile", c.profile), ("collect.victim", c.victim),
                                  ("collect.pace_probe", c.pace_probe), ("collect.inject_busy_ms", c.inject_busy_ms))
                  if on]
        why = ("on an inventory's hosts (each host has its own clock)" if cell.testbed.inventory else
               f"with traffic.arrivals = \"{t.arrivals}\" (its bursts are the turns)" if t.arrivals != "const" else
               "with bidirectional traffic" if t.bidirectional else
               "with rps steering (its packets are handled in the CPU's softirq, not in its testbed's own NAPI "
               "kthreads: CPU per packet could not be told apart)"
               if cell.testbed.sut != "synthetic" and cell.testbed.ingress_steering() == "rps" else
               f"with {shared[0]} (it watches or takes the CPU for the whole host, so two at once would mix the "
               "variants)" if shared else "")
        if why:
            raise InputError("compare.pairing", f"\"interleaved\" cannot run variant {i} {why}: use "
                             "pairing = \"sequential\"")


def _knob_beside_the_spec(path: str, value: Any, folder: Path) -> Any:
    """A knob's value as a spec file gives it: a personality's file= relative to the spec."""
    return _file_param_from(value, folder) if path == "testbed.sut" and isinstance(value, str) else value


QDISC_KINDS = ("pfifo", "bfifo", "pfifo_fast", "fq_codel", "fq", "cake", "tbf", "htb", "sfq", "red", "codel")


class SideSpec(Strict):
    """Settings of one side of the SUT (the interface facing network A or B).
    steering: how packets received on this side reach the SUT's CPUs (None:
    testbed.steering); gro; xdp = "pass": an XDP program that passes every
    packet. On veth, one-way traffic meets the receiving side's steering, GRO
    and XDP; the sending side's act on what it receives (the reverse way)."""

    # how packets received on this side reach the SUT's CPUs (None: testbed.steering)
    steering: Literal["threaded", "rps"] | None = None
    # GRO on this side's interface
    gro: bool = True
    # "pass": an XDP program that passes every packet
    xdp: Literal["none", "pass"] = "none"
    # the root qdisc of the SUT's interface on this side, what it sends through: a kind and its
    # tc parameters ("fq_codel", "pfifo limit 100", "tbf rate 1gbit burst 32kbit latency 50ms");
    # None: veth's noqueue, where packets bypass any queue
    qdisc: str | None = None

    @field_validator("qdisc")
    @classmethod
    def known_qdisc(cls, v: str | None) -> str | None:
        if v is not None and (not v.split() or v.split()[0] not in QDISC_KINDS):
            raise ValueError(f"'{v}': expected one of {', '.join(QDISC_KINDS)}, then its tc parameters")
        return v


class NicSpec(Strict):
    """NIC knobs of the SUT's interfaces (softnet.tools.nic), each None when
    left as the driver has it: rings (ethtool -G), channels (-L),
    interrupt coalescing (-C), IRQ affinity (PASTRAMI's unpinned,
    pin-1cpu: both directions' interrupts on the first SUT CPU, pin-2cpu:
    receive on the first, transmit on the second) and RSS (-X)."""

    # receive ring entries (ethtool -G rx)
    rx_ring: int | None = Field(None, ge=1, le=65536)
    # transmit ring entries (ethtool -G tx)
    tx_ring: int | None = Field(None, ge=1, le=65536)
    # combined channels (ethtool -L combined)
    channels: int | None = Field(None, ge=1, le=1024)
    # receive channels (ethtool -L rx)
    rx_channels: int | None = Field(None, ge=1, le=1024)
    # transmit channels (ethtool -L tx)
    tx_channels: int | None = Field(None, ge=1, le=1024)
    # receive interrupt coalescing, us (ethtool -C)
    rx_usecs: int | None = Field(None, ge=0, le=100_000)
    # transmit interrupt coalescing, us
    tx_usecs: int | None = Field(None, ge=0, le=100_000)
    # receive coalescing, frames
    rx_frames: int | None = Field(None, ge=0, le=65536)
    # transmit coalescing, frames
    tx_frames: int | None = Field(None, ge=0, le=65536)
    # adaptive receive coalescing
    adaptive_rx: bool | None = None
    # adaptive transmit coalescing
    adaptive_tx: bool | None = None
    # PASTRAMI's IRQ pinning: unpinned, pin-1cpu or pin-2cpu (see the section's text)
    irq_affinity: Literal["unpinned", "pin-1cpu", "pin-2cpu"] | None = None
    # RSS: the receive queues the flows are spread over (the first N, in equal shares)
    rss_queues: int | None = Field(None, ge=1, le=1024)

    def knobs(self) -> dict:
        """The knobs set (knob -> value)."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class TestbedSpec(Strict):
    __test__ = False
    # a SUT personality's spec string (softnet.testbed.personalities), e.g.
    # "nft-fw:rules=100,conntrack=on", or "synthetic" (simulated, no root)
    sut: str = "ipv4-fwd"
    # the custom personality's commands (softnet.testbed.personalities.custom)
    custom: dict[str, Any] | None = None
    # the generator's CPU (default: the first)
    gen_cpu: int | None = None
    # the SUT's CPUs (default: the last)
    sut_cpus: list[int] | None = None
    # the sink's CPU (default: the SUT's; placement = "split" picks one)
    sink_cpu: int | None = None
    # how the SUT's ingress reaches its CPUs: threaded NAPI or RPS
    steering: Literal["threaded", "rps"] = "threaded"
    # The WiFi-AP study's single- vs dual-core placement: "single" keeps the
    # SUT's ingress and egress-side processing on its CPU(s); "split" moves the
    # egress side (the receive processing its transmit triggers) to a CPU of
    # its own. None: as sink_cpu says.
    placement: Literal["single", "split"] | None = None
    # The path's direction: generator on side A and sink on side B, or the
    # reverse (the WiFi-AP study's E2W and W2E), with per-side settings.
    direction: Literal["a_to_b", "b_to_a"] = "a_to_b"
    side_a: SideSpec = SideSpec()
    side_b: SideSpec = SideSpec()
    nic: NicSpec = NicSpec()  # the SUT's interfaces; matrix knobs as "testbed.nic.rx_ring"
    # Real hosts: an inventory (docs/how-to/remote-hosts.md) and the testbed of it to
    # run on; `testbeds = [...]` runs the campaign on each (a matrix knob over
    # `name`). gen_cpu is then the traffic host's CPU, sut_cpus the SUT host's.
    inventory: str | None = None
    # with inventory: the testbed of it to run on
    name: str | None = None
    # with inventory: run on each of these (a matrix knob over name)
    testbeds: list[str] | None = None

    def sides(self) -> tuple[str, str]:
        """(ingress side, egress side) of the SUT for this direction."""
        return ("a", "b") if self.direction == "a_to_b" else ("b", "a")

    def side(self, name: str) -> SideSpec:
        return self.side_a if name == "a" else self.side_b

    def ingress_steering(self) -> str:
        return self.side(self.sides()[0]).steering or self.steering

    @field_validator("inventory", mode="before")
    @classmethod
    def inventory_beside_the_spec(cls, v, info: ValidationInfo):
        folder = spec_folder(info)
        return str((folder / v).resolve()) if folder is not None and isinstance(v, str) else v

    @field_validator("sut", mode="before")
    @classmethod
    def sut_file_beside_the_spec(cls, v, info: ValidationInfo):
        folder = spec_folder(info)
        return _file_param_from(v, folder) if folder is not None and isinstance(v, str) else v

    @field_validator("custom", mode="before")
    @classmethod
    def custom_workdir_beside_the_spec(cls, v, info: ValidationInfo):
        """The custom SUT's commands run in the spec's folder (workdir: relative to it)."""
        folder = spec_folder(info)
        if folder is None or not isinstance(v, dict):
            return v
        workdir = v.get("workdir", ".")
        return {**v, "workdir": str((folder / workdir).resolve())} if isinstance(workdir, str) else v

    @field_validator("sut")
    @classmethod
    def known_personality(cls, v: str) -> str:
        if v == "synthetic":
            return v
        from softnet.testbed.personalities import parse_sut
        try:
            return parse_sut(v, "testbed.sut").spec
        except InputError as exc:
            raise ValueError(exc.message) from None

    def personality(self):
        """The SUT personality (not for "synthetic")."""
        from softnet.testbed.personalities import parse_sut
        return parse_sut(self.sut, "testbed.sut", self.custom)

    @model_validator(mode="after")
    def receiving_side_has_napi(self):
        ingress = self.side(self.sides()[0])
        if not ingress.gro and ingress.xdp == "none":
            raise ValueError(f"side_{self.sides()[0]} receives ({self.direction}): gro = false needs xdp = \"pass\" "
                             "(veth delivers the generator's XDP frames only through NAPI: GRO on or an XDP program)")
        return self

    @model_validator(mode="after")
    def nic_on_veth(self):
        """This host's testbed is veth: a knob it does not take is refused at load."""
        from softnet.testbed.local import veth_refuses

        if self.inventory is None and (refused := veth_refuses(self.nic.knobs())):
            raise ValueError(f"nic.{refused[0]}: {refused[1]}")
        for name in ("a", "b"):
            if self.inventory is not None and self.side(name).qdisc:
                raise ValueError(f"side_{name}.qdisc: set on this host's testbed only (an inventory's interfaces "
                                 "keep their qdiscs)")
        return self

    @model_validator(mode="after")
    def remote_testbed(self):
        if self.inventory is None:
            if self.name is not None or self.testbeds is not None:
                raise ValueError("name / testbeds choose a testbed of an inventory: give inventory = FILE too")
            return self
        if self.sut != "synthetic" and not (p := self.personality()).remote:
            raise ValueError(f"sut = \"{self.sut}\" on an inventory's hosts: {p.name} runs on the local testbed "
                             f"only ({p.remote_why})")
        if self.placement is not None or self.sink_cpu is not None or self.direction != "a_to_b":
            raise ValueError("placement, sink_cpu and direction are for the local testbed; on real hosts the "
                             "cabling of the inventory decides")
        if self.name is None and not self.testbeds:
            raise ValueError("inventory given: name the testbed (name = \"tb1\") or testbeds = [...]")
        return self

    @model_validator(mode="after")
    def placement_or_sink_cpu(self):
        if self.placement is not None and self.sink_cpu is not None:
            raise ValueError("give placement (single | split) or sink_cpu, not both")
        return self


class SyntheticSpec(Strict):
    """The load-loss model of PASTRAMI Eq. 3-5 (used when testbed.sut = "synthetic")."""

    # the model's saturation load (PASTRAMI's O_sat)
    o_sat_pps: float = Field(500_000, gt=0)
    # loss ratio at saturation
    plr_at_sat: float = Field(0.0, ge=0, lt=1)
    # the load where throughput starts to fall (None: never)
    o_trash_pps: float | None = None
    # the model's maximum offered rate
    m_pps: float = Field(1e6, gt=0)
    # the loss below saturation: plr_at_sat x (O / o_sat) ** pre_sat_exponent (softnet's addition to Eq. 3)
    pre_sat_exponent: float = Field(8.0, gt=0, le=100)
    # binomial noise per trial
    noise: bool = True
    # the noise's seed
    seed: int = 1
    # each trial takes this long on the wall (a simulated testbed: the fleet's scale bench)
    trial_wall_s: float = Field(0.0, ge=0, le=3600)
    # a capacity step, the known truth a soak's change point must find: from this trial on (the
    # soak's trial index; a sweep's load index) the model saturates at o_sat_after_pps instead
    step_at_trial: int | None = Field(None, ge=1)
    o_sat_after_pps: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def step_whole(self):
        if (self.step_at_trial is None) != (self.o_sat_after_pps is None):
            raise ValueError("step_at_trial and o_sat_after_pps go together (the trial and the capacity after)")
        return self


class FleetSpec(Strict):
    """Where a cell may run when the campaign runs on a fleet of testbeds
    (softnet run --scheduler; docs/how-to/fleet.md). Matrix knobs like the others."""

    testbed: str | None = None  # this testbed only (default: testbed.name, when an inventory's testbed is named)
    driver: str | None = None  # a testbed whose SUT host's NICs have this driver (the inventory check's)
    kernel: str | None = None  # a testbed whose SUT host runs this kernel release


class TrafficSpec(Strict):
    # frame size with the 4 B FCS (RFC 2544)
    frame_bytes: int = Field(64, ge=64, le=1518)
    # UDP flows (source ports)
    flows: int = Field(1, ge=1, le=64511)
    # loads in bit/s counted on L1 (with preamble and gap) or L2 frames
    rate_layer: Literal["l1", "l2"] = "l1"
    # traffic shapes (docs/how-to/traffic.md; TrialSpec's fields of the same names): matrix knobs like the others
    src_ips: int = Field(1, ge=1, le=65536)
    # destination addresses the flows spread over
    dst_ips: int = Field(1, ge=1, le=65536)
    # destination ports
    dst_ports: int = Field(1, ge=1, le=1024)
    mix: str | None = None  # "64:7,570:4,1518:1", "imix", "64:58.33%,..."; None: frame_bytes
    # constant rate, Poisson, or on/off bursts at the same mean rate
    arrivals: Literal["const", "poisson", "onoff"] = "const"
    # with onoff: frames per burst
    burst_pkts: int = Field(32, ge=1, le=1 << 20)
    # with onoff: share of the time bursts are sent
    on_duty: float = Field(0.5, gt=0, le=1)
    # the random arrivals' and mixes' seed
    seed: int = Field(1, ge=0)
    # both directions at once; a load is their sum (each direction half)
    bidirectional: bool = False

    @field_validator("mix")
    @classmethod
    def _mix(cls, v: str | None) -> str | None:
        if v is not None:
            from softnet.results.shapes import parse_mix

            try:
                parse_mix(v, 64)
            except InputError as exc:
                raise ValueError(exc.message) from None
        return v


class LatencySpec(Strict):
    """The AF_XDP latency lab (method kind = "latency"): the study's knobs, one
    configuration per matrix cell. poll_*: the application calls poll() before
    reading (else it busy-spins on its rings); busy_poll: SO_BUSY_POLL with
    SO_PREFER_BUSY_POLL on every socket and the host's busy-poll sysctls."""

    # AF_XDP bind mode (veth: copy only)
    bind_mode: Literal["copy", "zero-copy"] = "copy"
    # XDP_USE_NEED_WAKEUP
    need_wakeup: bool = True
    # SO_BUSY_POLL + SO_PREFER_BUSY_POLL and the busy-poll sysctls
    busy_poll: bool = False
    # busy-poll time
    busy_poll_us: int = Field(20, ge=1, le=10**6)
    # packets per busy poll
    busy_poll_budget: int = Field(64, ge=1, le=1024)
    # A calls poll() before reading
    poll_sender: bool = False
    # B calls poll() before reading
    poll_forwarder: bool = False
    # C calls poll() before reading
    poll_receiver: bool = False
    # Beyond the study's poll()-or-spin: a receive mode per role overrides poll_* (None: from poll_*)
    rx_mode_sender: Literal["busy", "poll", "recvfrom", "epoll"] | None = None
    # see rx_mode_sender
    rx_mode_forwarder: Literal["busy", "poll", "recvfrom", "epoll"] | None = None
    # see rx_mode_sender
    rx_mode_receiver: Literal["busy", "poll", "recvfrom", "epoll"] | None = None
    # CPU of each host's application (a, b, c) and of its receive NAPI context when
    # threaded (default: B alone on the last CPU, A and C on the first; NAPI with its application)
    app_cpus: dict[Literal["a", "b", "c"], int] = Field(default_factory=dict)
    # see app_cpus
    napi_cpus: dict[Literal["a", "b", "c"], int] = Field(default_factory=dict)
    # packets per send burst / ring batch
    batch: int = Field(1, ge=1, le=256)
    # AF_XDP ring entries
    ring_size: int = Field(2048, ge=64, le=32768)
    # native or generic (skb) XDP
    xdp_mode: Literal["native", "skb"] = "native"
    # threaded NAPI on every receiving veth
    threaded_napi: bool = False
    # net.core napi_defer_hard_irqs of the interfaces
    napi_defer_hard_irqs: int | None = Field(None, ge=0)
    # the interfaces' gro_flush_timeout
    gro_flush_timeout_ns: int | None = Field(None, ge=0, le=10**9)
    cstate_limit_us: int | None = Field(None, ge=0)  # None: the host's C-states; 0: shallowest only
    coalesce_rx_usecs: int | None = Field(None, ge=0)  # NIC coalescing (veth: unsupported)
    # see coalesce_rx_usecs
    coalesce_tx_usecs: int | None = Field(None, ge=0)
    irq_suspend_timeout_ns: int | None = Field(None, ge=0, le=10**10)  # napi-set, with prefer_busy_poll
    # between batches (the study: 1 s; `softnet latency` sends every 10 ms, for percentiles with meaning)
    interval_s: float = Field(1.0, gt=0, le=60)
    # between batches: periodic or Poisson
    arrivals: Literal["periodic", "poisson"] = "periodic"
    baseline_count: int = Field(0, ge=0, le=100_000)  # kernel ping replies per configuration (0: none)
    # the study's second phase: per cluster this many configurations re-run at
    # the rate of their minimum RTT and as a flood (0: none), rerun_count packets each
    rerun_per_cluster: int = Field(0, ge=0, le=8)
    # see rerun_per_cluster
    rerun_count: int = Field(10_000, ge=100, le=10_000_000)
    # k-means over the configurations: a fixed k (the study uses 4 and 6); None: k by silhouette over 2..8
    clusters: int | None = Field(None, ge=1, le=64)


def is_knob(path: str) -> bool:
    """A matrix or variant knob: "section.field" of a spec section that varies
    (or "section.table.field" of a table in it: "testbed.nic.rx_ring")."""
    section, *keys = path.split(".")
    model = {"testbed": TestbedSpec, "traffic": TrafficSpec, "synthetic": SyntheticSpec,
             "latency": LatencySpec, "fleet": FleetSpec}.get(section)
    for i, key in enumerate(keys):
        if model is None or key not in model.model_fields:
            return False
        inner = model.model_fields[key].annotation
        model = inner if isinstance(inner, type) and issubclass(inner, BaseModel) and i < len(keys) - 1 else None
    return bool(keys)


def with_knobs(base: dict, knobs: dict[str, Any], where: str) -> "CampaignSpec":
    """The spec ``base`` (a model_dump) with the knobs set; errors prefixed ``where``."""
    data = copy.deepcopy(base)
    for path, value in knobs.items():
        *tables, key = path.split(".")
        target = data
        for t in tables:
            target = target.setdefault(t, {})
        target[key] = value
    try:
        return CampaignSpec.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, prefix=where) from None


COMPARE_METRICS = ("capacity", "cpu", "loss", "latency")
CompareMetric = Literal["capacity", "cpu", "loss", "latency", "search"]


class SoakSpec(Strict):
    """A soak (method kind = "soak", softnet.campaign.soak): trials back to
    back for wall_s, their loads drawn from the critical load's posterior
    (the PLRsearch model, softnet.analysis.plr_model) between method.min_load
    and method.max_load; the first trial lasts method.duration_s."""

    # how long the soak runs, trials and what lies between them
    wall_s: float = Field(600.0, ge=1, le=7 * 86400)
    # the critical load is where the SUT's average loss ratio is this
    target_loss_ratio: float = Field(1e-7, gt=0, lt=0.5)
    # each trial lasts this much longer than the one before (PLRsearch's growth: early trials
    # find the region fast, late ones add evidence where the estimate is)
    duration_step_s: float = Field(0.1, ge=0, le=60)
    # no trial lasts longer
    max_trial_s: float = Field(60.0, ge=0.1, le=3600)
    # the interval of the estimate and of the drift slopes
    confidence: float = Field(0.95, gt=0.5, lt=1)
    # the next load's draw (a resumed soak draws the same)
    seed: int = 0
    # read the SUT host's resources after every trial and fit their drift (softnet.collect.drift)
    drift: bool = True


class CompareSpec(Strict):
    """A paired comparison (method kind = "compare", softnet.campaign.compare):
    the variants measured in alternating rounds on the same host, the first
    being the baseline. A variant sets knobs as a matrix does ("testbed.sut",
    "testbed.placement", "traffic.mix", ...) and may have a name."""

    # the variants, each a table of knobs (and a name); the first is the baseline
    variants: list[dict[str, Any]] = Field(default_factory=list)
    # capacity: the forwarded rate at this load, far beyond what the SUT forwards ("none": not measured)
    overload: str | float = "3Mpps"
    # "search": one NDR/PDR search per variant and round (method.goals, width, min_load, max_load,
    # max_trial_seconds), its goals' conditional throughputs (RFC 9971) compared as pairs
    metrics: list[CompareMetric] = Field(default_factory=lambda: list(COMPARE_METRICS))
    # the experiment stops when every one of these metrics has a verdict (or the budget is spent)
    decide_on: list[CompareMetric] = Field(default_factory=lambda: ["capacity", "cpu"])
    margin: float = Field(0.02, gt=0, lt=1)  # equivalence margin of rates, costs and latencies (relative)
    loss_margin: float = Field(0.001, gt=0, lt=1)  # ... of loss ratios (absolute)
    confidence: float = Field(0.95, gt=0.5, lt=1)  # over all the looks of a sequential experiment
    budget_s: float = Field(120.0, gt=0, le=10 * 86400)  # trial-seconds (measurement windows) at most
    # first look after this many rounds
    min_rounds: int = Field(4, ge=2, le=10_000)
    # at most this many rounds (None: the budget decides)
    max_rounds: int | None = Field(None, ge=2, le=10_000)
    # "sequential": at each load each variant's trial in turn (A B, B A, ...); "interleaved": all variants'
    # testbeds up at once, their bursts taking turns every interleave_ms, so each pair shares the host's
    # seconds (this host's testbeds; the overload then goes in bursts too: give one the generator can pace)
    pairing: Literal["sequential", "interleaved"] = "sequential"
    interleave_ms: float = Field(20.0, ge=2, le=1000)  # one turn of every variant

    @field_validator("variants", mode="before")
    @classmethod
    def variants_beside_the_spec(cls, v, info: ValidationInfo):
        folder = spec_folder(info)
        if folder is None or not isinstance(v, list):
            return v
        return [{k: _knob_beside_the_spec(k, x, folder) for k, x in var.items()} if isinstance(var, dict) else var
                for var in v]

    @field_validator("variants")
    @classmethod
    def variants_are_knobs(cls, variants):
        if len(variants) < 2:
            raise ValueError(f"{len(variants)} variant(s): a comparison needs a baseline and at least one "
                             "candidate, e.g. [{\"testbed.sut\" = \"nft-fw:rules=10\"}, "
                             "{\"testbed.sut\" = \"nft-fw:rules=14\"}]")
        for i, v in enumerate(variants):
            if not isinstance(v, dict):
                raise ValueError(f"variant {i}: expected a table of knobs, got {v!r}")
            for path in v:
                if path != "name" and not is_knob(path):
                    raise ValueError(f"variant {i}: unknown knob '{path}': knobs are testbed.*, traffic.* or "
                                     "synthetic.* fields (and name)")
        names = [n for v in variants if (n := given_name(v))]  # unnamed twins: refused by variants()
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise ValueError(f"two variants are named '{dup}': give each its own name")
        return variants

    @model_validator(mode="after")
    def decide_on_measured(self):
        missing = [m for m in self.decide_on if m not in self.metrics]
        if missing:
            raise ValueError(f"decide_on names {missing}, which metrics does not measure")
        if not self.metrics:
            raise ValueError("metrics: give at least one of " + ", ".join(COMPARE_METRICS))
        return self


class _VariantName(BaseModel):
    """A variant table's name (name = "..."), read apart from its knobs."""

    name: Any = None


def given_name(variant: dict) -> str | None:
    """The name a variant's table gives it (None: none, or empty)."""
    name = _VariantName.model_validate(variant).name
    return str(name) if name else None


def variant_name(variant: dict, index: int) -> str:
    """A variant's name: its own, else what it sets (sut, placement, ...)."""
    if name := given_name(variant):
        return name
    parts = [f"{v}" if k == "testbed.sut" else f"{k.partition('.')[2]}={v}" for k, v in variant.items()]
    return ",".join(parts) or f"variant{index}"


class GoalEntry(Strict):
    """One search goal with its own MLRsearch attributes (RFC 9971); what it
    leaves out comes from the method's keys."""

    # ndr or pdr<percent>: the goal loss ratio
    name: str
    # the goal exceed ratio: the share of the duration sum that may be high-loss trials
    exceed_ratio: float | None = Field(None, ge=0, lt=1)
    # the goal final trial duration
    duration_s: float | None = Field(None, ge=0.1, le=3600)
    # the goal duration sum (>= duration_s)
    duration_sum_s: float | None = Field(None, gt=0)
    # the goal initial trial duration
    initial_duration_s: float | None = Field(None, ge=0.05, le=3600)
    # the goal width
    width: float | None = Field(None, gt=0, lt=1)

    @field_validator("name")
    @classmethod
    def name_parses(cls, name):
        parse_goals([name])
        return name


class MethodSpec(Strict):
    # what the campaign measures: a sweep, a search, the AF_XDP lab, a comparison, an RFC benchmark
    kind: Literal["sweep", "search", "latency", "compare", "reset", "back-to-back", "recovery", "soak"] = "sweep"
    # the sweep's loads ("200kpps", "1Gbps", or pps numbers)
    loads: list[str | float] | None = None
    # a sweep from here ...
    start: str | float | None = None
    # ... to here ...
    stop: str | float | None = None
    # ... in these steps
    step: str | float | None = None
    relative: list[float] | None = Field(None, description="fractions of the probed maximum")
    # the flood probe's window (relative loads)
    probe_duration_s: float = Field(1.0, gt=0, le=60)
    # runs of every load (K; a search: how many searches)
    runs: int = Field(5, ge=1, le=1000)
    # each trial's measurement window
    duration_s: float = Field(2.0, ge=0.1, le=3600)
    # traffic before the window, not counted
    warmup_s: float = Field(0.5, ge=0, le=60)
    # kind = "search" (softnet.search): runs = how many independent searches
    # the goals: "ndr", "pdr0.5", or tables {name = "pdr0.5", exceed_ratio = 0.5, duration_sum_s = 3, ...}
    goals: list[str | GoalEntry] = Field(default_factory=lambda: ["ndr", "pdr0.5"])
    # search: mlrsearch (MLRsearch 1.2.1, the reference), softnet (its own) or bayes (posterior + knee model).
    # The default is the reference: on this VM's testbed softnet's own engine spent more trial-seconds
    # (docs/explanation/search.md), so a user gets the cheaper answer that holds.
    engine: Literal["softnet", "mlrsearch", "bayes"] = "mlrsearch"
    # search: the goal exceed ratio (RFC 9971): share of the duration sum that may be high-loss trials
    exceed_ratio: float = Field(0.5, ge=0, lt=1)
    # search: the goal duration sum, seconds (None: 3 x duration_s)
    duration_sum_s: float | None = Field(None, gt=0)
    # search: stop when (upper - lower) / upper is this
    width: float = Field(0.005, gt=0, lt=1)
    # search: the lowest load it tries
    min_load: str | float = "10kpps"
    # search: the highest
    max_load: str | float = "4Mpps"
    # search: shorter first trials (None: duration_s)
    initial_duration_s: float | None = Field(None, ge=0.05, le=3600)
    # search: posterior confidence to classify a load
    confidence: float = Field(0.9, gt=0.5, lt=1)
    # search: trials per search at most
    max_trials: int | None = Field(None, ge=1)
    # search: trial-seconds per search at most
    max_trial_seconds: float | None = Field(None, gt=0)
    # after each search, one trial at each of these fractions of every PDR
    # goal's lower bound (the NDR's when no goal is a PDR), as CSIT does
    latency_fractions: list[float] | None = None
    latency_duration_s: float | None = Field(None, ge=0.1, le=3600)  # default: duration_s
    # Loss that host stalls explain (softnet.analysis.loss_time): "set_apart" counts only the SUT's own
    # loss in the PASTRAMI statistics and the search; "count" counts all loss, as PASTRAMI and MLRsearch
    # do. Trials report both either way.
    host_stall_loss: Literal["set_apart", "count"] = "set_apart"
    # kind = "reset" (RFC 2544 26.6, RFC 6201): each trial resets the SUT this long into its window
    reset_at_s: float | None = Field(None, gt=0)
    # kind = "back-to-back" (RFC 2544 26.4, RFC 9004): loads are the frame rates inside the bursts; each
    # trial sends `bursts` bursts of burst_pkts frames, burst_gap_s apart, after one warm-up burst
    burst_pkts: int | None = Field(None, ge=2)
    # back-to-back: bursts per trial
    bursts: int = Field(10, ge=1, le=1000)
    burst_gap_s: float = Field(2.0, gt=0, le=60)  # RFC 9004 6.3: at least 2 s for the buffers to empty
    # the SUT's measured throughput (e.g. its NDR): RFC 9004's corrected buffer time; the recovery's reference
    throughput: str | float | None = None
    # kind = "recovery" (RFC 2544 26.5): overload x throughput for overload_s, then recovery_load x throughput
    # for recovery_s; the trial's window is both
    overload: float = Field(1.1, gt=0)
    # recovery: the load after, x throughput
    recovery_load: float = Field(0.5, gt=0)
    # recovery: how long the overload lasts
    overload_s: float = Field(60.0, gt=0, le=3600)
    # recovery: how long the window goes on after
    recovery_s: float = Field(10.0, gt=0, le=3600)

    @field_validator("loads")
    @classmethod
    def loads_not_empty(cls, loads):
        if loads is not None and not loads:
            raise ValueError("no loads given: list at least one, e.g. 100kpps")
        return loads

    @field_validator("goals")
    @classmethod
    def goals_parse(cls, goals):
        parse_goals([g.name if isinstance(g, GoalEntry) else g for g in goals])
        return goals

    def goal_entries(self) -> list[GoalEntry]:
        """Every goal with each attribute it leaves out taken from the method's keys."""
        out = []
        for g in self.goals:
            e = g if isinstance(g, GoalEntry) else GoalEntry(name=g)
            out.append(GoalEntry(
                name=e.name, exceed_ratio=self.exceed_ratio if e.exceed_ratio is None else e.exceed_ratio,
                duration_s=e.duration_s or self.duration_s, initial_duration_s=e.initial_duration_s
                or self.initial_duration_s, width=e.width or self.width,
                duration_sum_s=e.duration_sum_s or self.duration_sum_s))
        return out

    @field_validator("latency_fractions")
    @classmethod
    def fractions_of_the_pdr(cls, fractions):
        if fractions is None:
            return None
        if not fractions:
            raise ValueError("give at least one fraction of the PDR, e.g. [0.1, 0.5, 0.9], or leave it out")
        if len(fractions) > MAX_LATENCY_FRACTIONS:
            raise ValueError(f"{len(fractions)} fractions: at most {MAX_LATENCY_FRACTIONS}")
        bad = [f for f in fractions if not 0 < f <= 1]
        if bad:
            raise ValueError(f"{bad[0]:g}: each fraction must be in (0, 1] (1 = at the PDR's lower bound)")
        if any(b <= a for a, b in zip(fractions, fractions[1:])):
            raise ValueError(f"{list(fractions)}: give the fractions sorted and each once, e.g. [0.1, 0.5, 0.9]")
        return fractions

    @model_validator(mode="after")
    def one_way_of_giving_loads(self):
        given = [name for name, v in (("loads", self.loads), ("start/stop/step", self.start),
                                      ("relative", self.relative)) if v is not None]
        if self.kind != "search" and (self.latency_fractions is not None or self.latency_duration_s is not None):
            raise ValueError('latency_fractions, latency_duration_s: only a search (kind = "search") finds a PDR '
                             "to take fractions of")
        if (self.kind == "reset") != (self.reset_at_s is not None):
            raise ValueError('reset_at_s: a reset campaign (kind = "reset") needs it, and only one takes it')
        b2b = self.kind == "back-to-back"
        if b2b != (self.burst_pkts is not None):
            raise ValueError('burst_pkts: a back-to-back campaign (kind = "back-to-back") needs it (the longest '
                             'burst sent), and only one takes it')
        if self.kind not in ("back-to-back", "recovery") and self.throughput is not None:
            raise ValueError('throughput: only a back-to-back or recovery campaign takes it')
        if self.kind == "recovery":
            if self.throughput is None:
                raise ValueError('throughput: a recovery campaign overloads the SUT relative to its measured '
                                 'throughput: give it, e.g. throughput = "400kpps" (its NDR)')
            if self.overload <= 1:
                raise ValueError(f"overload = {self.overload:g}: not an overload; RFC 2544 sends 1.1 x the "
                                 "throughput")
            if self.recovery_load >= 1:
                raise ValueError(f"recovery_load = {self.recovery_load:g}: the SUT cannot recover at or above "
                                 "its throughput; RFC 2544 drops to 0.5")
            if given:
                raise ValueError(f"a recovery campaign's loads come from throughput x overload: remove {given}")
            return self
        if b2b and self.burst_pkts > ARRIVALS_MAX:
            raise ValueError(f"burst_pkts = {self.burst_pkts}: the generator builds bursts of at most "
                             f"{ARRIVALS_MAX} frames (one arrival table)")
        if self.reset_at_s is not None and self.reset_at_s >= self.duration_s:
            raise ValueError(f"reset_at_s = {self.reset_at_s:g} s: the reset must fall inside the window "
                             f"(duration_s = {self.duration_s:g} s)")
        if self.kind == "latency":
            if given:
                raise ValueError(f"a latency run sends at latency.interval_s: remove {given}")
            return self
        if self.kind == "compare":
            if self.start is not None or self.relative is not None:
                raise ValueError("a comparison measures at fixed loads: give loads = [...] (and compare.overload)")
            return self
        if self.kind == "soak":
            if given:
                raise ValueError(f"a soak chooses its own loads: remove {given} (use min_load / max_load)")
            return self
        if self.kind == "search":
            if given:
                raise ValueError(f"a search chooses its own loads: remove {given} (use min_load / max_load)")
            for i, e in enumerate(self.goal_entries()):
                where = "" if i == 0 and not isinstance(self.goals[0], GoalEntry) else f"goals[{i}] ({e.name}): "
                if e.initial_duration_s is not None and e.initial_duration_s > e.duration_s:
                    raise ValueError(f"{where}initial_duration_s must be <= duration_s (the final trial duration)")
                if e.duration_sum_s is not None and e.duration_sum_s < e.duration_s:
                    raise ValueError(f"{where}duration_sum_s = {e.duration_sum_s:g} s is shorter than the final "
                                     f"trial duration {e.duration_s:g} s: the goal duration sum must hold at least "
                                     "one full-length trial")
            if self.engine == "bayes" and any(e.exceed_ratio == 0 for e in self.goal_entries()):
                raise ValueError("exceed_ratio = 0: the bayes engine needs a share of bad trials above 0; use "
                                 "engine = \"softnet\" or \"mlrsearch\"")
            return self
        if len(given) != 1:
            raise ValueError("give exactly one of: loads = [...], start/stop/step, relative = [...]; "
                             f"got {given or 'none'}")
        if self.start is not None and (self.stop is None or self.step is None):
            raise ValueError("start needs stop and step too")
        if self.relative is not None and (not self.relative or min(self.relative) <= 0):
            raise ValueError("relative loads must be a non-empty list of positive fractions")
        return self


def parse_goals(names: list[str]) -> list[float]:
    """["ndr", "pdr0.5"] -> loss ratios [0.0, 0.005] (pdrX: X percent)."""
    if not names:
        raise ValueError("goals: give at least one of ndr, pdr<percent> (e.g. pdr0.5)")
    ratios = []
    for name in names:
        key = str(name).strip().lower()
        try:
            ratio = 0.0 if key == "ndr" else float(key.removeprefix("pdr")) / 100 if key.startswith("pdr") else None
        except ValueError:
            ratio = None
        if ratio is None or not 0 <= ratio < 1:
            raise ValueError(f"goal '{name}': expected ndr or pdr<percent> such as pdr0.5 (0.5% loss)")
        ratios.append(ratio)
    return ratios


class CollectSpec(Strict):
    """Kernel statistics sampled during every trial (softnet.collect.sampler)."""

    sample_interval_s: float | None = Field(1.0, ge=0.1, le=10)  # None (omit with sample = false): off
    # false: no kernel statistics sampling
    sample: bool = True
    profile: bool = False  # eBPF packet-path profiler and CPU accounting audit (softnet-profile)
    profile_per_packet: bool = True  # its once-per-packet tracepoints (stages, drop reasons)
    profile_duty: float = Field(0.02, ge=0.01, le=1)  # share of time the stage clock's packet events are attached
    # ... and the other programs (softirq, irq, switch, poll: their times estimated from it below 1)
    profile_base_duty: float = Field(0.2, ge=0.01, le=1)
    # with the profiler: the SUT CPUs' kernel stacks sampled this often per CPU, time by kernel function; 0: off
    profile_stack_hz: int = Field(499, ge=0, le=20000)
    stall_probe: bool = True  # softnet-stalls: the data path's CPU stalls, to set host-stall loss apart
    stall_period_us: int = Field(2000, ge=100, le=1_000_000)  # its clock on a busy CPU (cost vs shortest gap)
    # the stall injector (softnet-inject): take inject_cpu (default: the first SUT CPU) away for
    # inject_busy_ms every inject_every_ms during every trial, to check the method on this host
    inject_busy_ms: float | None = Field(None, ge=0.1, le=100)
    # see inject_busy_ms
    inject_every_ms: float = Field(500.0, ge=0.2, le=60000)
    # see inject_busy_ms
    inject_cpu: int | None = Field(None, ge=0)
    # the sink keeps the window's first N delays one by one, in arrival order: RFC 8219's IPDV
    exact_delays: int = Field(0, ge=0, le=1 << 24)
    # before each trial's traffic the sampler runs this long: the host's idle power (RAPL), subtracted
    # to give the power the traffic costs; 0: none (power is then the host's whole draw)
    idle_power_s: float = Field(0.0, ge=0, le=60)
    # the eBPF profile study's cross-check: a CPU-bound victim pinned to the first SUT CPU, its lost
    # share against the profiler's softirq + irq time there (needs profile = true)
    victim: Literal["python", "c"] | None = None
    # the host's pace before and after each trial (a fixed loop on the first SUT CPU, 0.1 s each): a
    # covariate a comparison can take the host's drift out with
    pace_probe: bool = False

    @model_validator(mode="after")
    def victim_needs_the_profiler(self):
        if self.victim is not None and not self.profile:
            raise ValueError("victim: needs profile = true (its lost CPU share is checked against the profiler's)")
        return self

    @field_validator("profile_stack_hz")
    @classmethod
    def stack_rate(cls, v: int) -> int:
        if 0 < v < 10:
            raise ValueError(f"{v}: expected 0 (no stack sampling) or 10..20000 samples per second")
        return v

    @model_validator(mode="after")
    def injector_period(self):
        if self.inject_busy_ms is not None and self.inject_every_ms < 2 * self.inject_busy_ms:
            raise ValueError(f"inject_every_ms = {self.inject_every_ms:g}: stalls of {self.inject_busy_ms:g} ms "
                             "need a period of at least twice that")
        return self


class AnalysisSpec(Strict):
    # the PDR's loss threshold X (0.005: 0.5%)
    pdr_loss_ratio: float = Field(0.005, gt=0, lt=1)
    # TIR saturation threshold
    eta: float = Field(0.1, gt=0)
    # of the per-load intervals
    confidence: float = Field(0.95, gt=0, lt=1)


class _GivenSpec(BaseModel):
    """Tables of a spec as given, read before validation (which judges their types)."""

    testbed: Any = None
    matrix: Any = None


class _GivenTestbed(BaseModel):
    testbeds: Any = None


class CampaignSpec(Strict):
    # the campaign's name (its id is the name and a hash of the spec)
    name: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.-]+$")
    testbed: TestbedSpec = TestbedSpec()
    synthetic: SyntheticSpec = SyntheticSpec()
    traffic: TrafficSpec = TrafficSpec()
    fleet: FleetSpec = FleetSpec()
    method: MethodSpec
    analysis: AnalysisSpec = AnalysisSpec()
    collect: CollectSpec = CollectSpec()
    latency: LatencySpec = LatencySpec()
    soak: SoakSpec = SoakSpec()
    compare: CompareSpec | None = None
    # knobs ("section.key") and their values: one cell per combination
    matrix: dict[str, list[Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def compare_section(self):
        if (self.method.kind == "compare") != (self.compare is not None):
            raise ValueError('method.kind = "compare" and a [compare] section with its variants go together')
        if self.compare is not None and self.matrix:
            raise ValueError("a comparison varies its variants, not a matrix: move the knobs into "
                             "compare.variants (one table each)")
        if self.compare is not None and "search" in self.compare.metrics and self.method.max_trial_seconds is None:
            raise ValueError("compare.metrics has search: give method.max_trial_seconds, each search's budget "
                             "(the comparison's budget is counted from it)")
        return self

    @model_validator(mode="before")
    @classmethod
    def testbeds_knob(cls, data):
        """testbed.testbeds = [a, b] is the matrix knob testbed.name = [a, b]."""
        if not isinstance(data, dict):
            return data
        given = _GivenSpec.model_validate(data)
        tb = given.testbed
        testbeds = _GivenTestbed.model_validate(tb).testbeds if isinstance(tb, dict) else None
        if testbeds:
            matrix = given.matrix or {}
            if "testbed.name" in matrix:
                raise ValueError("testbed.testbeds and matrix.\"testbed.name\" say the same: give one")
            data = {**data, "testbed": {**tb, "testbeds": None, "name": testbeds[0]},
                    "matrix": {**matrix, "testbed.name": list(testbeds)}}
        return data

    @field_validator("matrix", mode="before")
    @classmethod
    def matrix_beside_the_spec(cls, v, info: ValidationInfo):
        folder = spec_folder(info)
        if folder is None or not isinstance(v, dict):
            return v
        return {k: [_knob_beside_the_spec(k, x, folder) for x in vals] if isinstance(vals, list) else vals
                for k, vals in v.items()}

    @field_validator("matrix")
    @classmethod
    def knobs_exist(cls, matrix):
        for path, values in matrix.items():
            if not is_knob(path):
                raise ValueError(f"unknown knob '{path}': knobs are testbed.*, traffic.*, synthetic.*, "
                                 "latency.* or fleet.* fields")
            if not values:
                raise ValueError(f"knob '{path}' has no values")
        n = math.prod(len(v) for v in matrix.values())
        if n > MAX_CELLS:
            sizes = " x ".join(f"{p} ({len(v)} values)" for p, v in sorted(matrix.items()))
            raise ValueError(f"{n:,} cells ({sizes}); at most {MAX_CELLS:,}: fewer knobs or values")
        return matrix

    def variants(self) -> list[tuple[str, dict[str, Any], "CampaignSpec"]]:
        """A comparison's variants: (name, knobs, the spec with them applied),
        the baseline first; variants that set the same thing are refused."""
        base = self.model_dump()
        base.update(matrix={}, compare=None, method={**self.method.model_dump(), "kind": "sweep", "loads": ["1pps"]})
        out: list[tuple[str, dict[str, Any], CampaignSpec]] = []
        dumps: list[dict] = []
        for i, variant in enumerate(self.compare.variants):
            knobs = {k: v for k, v in variant.items() if k != "name"}
            spec = with_knobs(base, knobs, f"compare.variants[{i}]: ")
            dump = spec.model_dump()
            for j, (name, _, _) in enumerate(out):
                named = given_name(variant) and given_name(self.compare.variants[j])
                if dumps[j] == dump and not named:
                    raise InputError(f"compare.variants[{i}]", f"differs in nothing from variant {j} ({name}): "
                                     "variants must differ (for an A/A check of the method, name both: "
                                     "name = \"A\" and name = \"A-again\")")
            dumps.append(dump)
            out.append((variant_name(variant, i), knobs, spec.model_copy(update={"method": self.method})))
        return out

    def compare_loads_pps(self) -> list[tuple[str, float]]:
        """A comparison's loads: (what is measured there, pps): the fixed
        loads (cost, loss, latency), then the overload (capacity)."""
        m, size, layer = self.method, self.traffic.frame_bytes, self.traffic.rate_layer
        out = [("fixed", parse_rate(str(v), size, layer, "method.loads")) for v in (m.loads or [])]
        out.sort(key=lambda x: x[1])
        c = self.compare
        if "capacity" in c.metrics:
            if str(c.overload).strip().lower() == "none":
                raise InputError("compare.overload", '"none" with the capacity metric: give a load beyond '
                                 "the SUT's capacity, or leave capacity out of compare.metrics")
            out.append(("overload", parse_rate(str(c.overload), size, layer, "compare.overload")))
        if not out and "search" not in c.metrics:
            raise InputError("method.loads", "no load to measure: give loads = [...] below capacity, or the "
                             "capacity or search metric")
        at_fixed = sorted(set(c.metrics) - {"capacity", "search"})
        if not any(k == "fixed" for k, _ in out) and at_fixed:
            raise InputError("method.loads", f"metrics {at_fixed} are measured at fixed loads: give loads = [...] "
                             "below capacity")
        if "search" in c.metrics:
            self.search_range_pps()
        return out

    def cells(self) -> "Cells":
        """Full-factorial expansion: (knob values, the spec with them applied) per cell, built on demand."""
        return Cells(self)

    def search_range_pps(self) -> tuple[float, float]:
        m, size, layer = self.method, self.traffic.frame_bytes, self.traffic.rate_layer
        lo = parse_rate(str(m.min_load), size, layer, "method.min_load")
        hi = parse_rate(str(m.max_load), size, layer, "method.max_load")
        if not lo < hi:
            raise InputError("method.max_load", f"must be above method.min_load ({lo:,.0f} pps)")
        return lo, hi

    def needs_probe(self) -> bool:
        """Loads relative to the SUT's probed maximum: relative = [...], or "max" in loads."""
        m = self.method
        return m.kind == "sweep" and (m.relative is not None or any(_is_max(v) for v in m.loads or []))

    def n_loads(self) -> int:
        m = self.method
        return len(m.relative) if m.relative is not None else len(self.loads_pps(-1.0))  # -1: a stand-in for max

    def loads_pps(self, probe_pps: float | None = None) -> list[float]:
        """The sweep's loads in pps; ``probe_pps`` (the probed maximum) is
        needed when ``needs_probe()``. "max" in loads is the probed maximum:
        the paper's "maximum throughput achievable" level (WiFi-AP study)."""
        m, size, layer = self.method, self.traffic.frame_bytes, self.traffic.rate_layer
        if m.kind in ("search", "soak"):
            raise ValueError(f"a {m.kind} chooses its own loads")
        if m.kind == "recovery":  # the overload: RFC 2544 26.5's 110% of the throughput
            return [parse_rate(str(m.throughput), size, layer, "method.throughput") * m.overload]
        if m.relative is not None:
            return [f * probe_pps for f in m.relative]
        if m.loads is not None:
            return sorted({probe_pps if _is_max(v) else parse_rate(str(v), size, layer, "method.loads")
                           for v in m.loads})
        start, stop, step = (parse_rate(str(v), size, layer, f"method.{n}")
                             for n, v in (("start", m.start), ("stop", m.stop), ("step", m.step)))
        if stop < start:
            raise InputError("method.stop", "must be >= method.start")
        n = int(round((stop - start) / step)) + 1
        if n > 1000:
            raise InputError("method.step", f"gives {n} loads; at most 1000")
        return [start + i * step for i in range(n)]


class Cells(Sequence):
    """The matrix cells of a spec, lazily: its length is a product, a cell is
    built when iterated or indexed (a listed full factorial can fill memory)."""

    def __init__(self, spec: CampaignSpec):
        self.spec, self.paths = spec, sorted(spec.matrix)
        self.values = [spec.matrix[p] for p in self.paths]
        self.base = {**spec.model_dump(), "matrix": {}}

    def __len__(self) -> int:
        return math.prod(len(v) for v in self.values)

    def __iter__(self) -> Iterator[tuple[dict[str, Any], CampaignSpec]]:
        return (self._cell(combo) for combo in itertools.product(*self.values))

    def __getitem__(self, index: int) -> tuple[dict[str, Any], CampaignSpec]:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(index)
        index %= n
        combo = []
        for values in reversed(self.values):  # the last knob varies fastest, as in itertools.product
            index, i = divmod(index, len(values))
            combo.append(values[i])
        return self._cell(tuple(reversed(combo)))

    def _cell(self, combo: tuple) -> tuple[dict[str, Any], CampaignSpec]:
        knobs = dict(zip(self.paths, combo))
        return knobs, with_knobs(self.base, knobs, f"matrix cell {knobs}: ")


def _is_max(v) -> bool:
    return isinstance(v, str) and v.strip().lower() == "max"


def _file_param_from(sut: str, base: Path) -> str:
    """A personality's relative ``file=`` param (custom:file=sut.toml) read
    as the spec's neighbour, as a user reads it."""
    name, sep, rest = sut.partition(":")
    if not sep:
        return sut
    items = []
    for item in rest.split(","):
        key, eq, val = item.partition("=")
        if key.strip() == "file" and eq and val and not Path(val).is_absolute():
            item = f"{key}={(base / val).resolve()}"
        items.append(item)
    return f"{name}:{','.join(items)}"


def load_spec(path: str | Path) -> CampaignSpec:
    path = Path(path)
    data = read_toml(path, "a campaign spec")
    try:
        spec = CampaignSpec.model_validate(data, context=SpecFile(path.parent))
    except ValidationError as exc:
        raise spec_error(exc, prefix=f"{path}: ") from None
    if spec.testbed.inventory:
        from softnet.hosts.inventory import load

        hosts = load(spec.testbed.inventory)
        for _, cell in spec.cells():
            try:
                hosts.ports(cell.testbed.name)
            except InputError as exc:
                raise InputError(f"{path}: testbed.name", exc.message) from None
    checked: set[str] = set()
    if spec.method.kind == "compare":
        try:
            targets = [(knobs, cell) for _, knobs, cell in spec.variants()]
            spec.compare_loads_pps()
            if spec.compare.pairing == "interleaved":
                interleavable(spec.compare, [cell for _, cell in targets])
        except InputError as exc:
            raise InputError(f"{path}: {exc.field}", exc.message) from None
    else:
        targets = list(spec.cells())
    for knobs, cell in targets:
        if cell.testbed.sut != "synthetic" and cell.testbed.sut not in checked:
            # what this host lacks, and the custom personality's table: refused now
            from softnet.doctor.personalities import require

            knob = "compare.variants" if spec.method.kind == "compare" else 'matrix."testbed.sut"'
            where = f"{path}: " + (knob if "testbed.sut" in knobs else "testbed.sut")
            require(cell.testbed.personality(), where)
            checked.add(cell.testbed.sut)
        if cell.testbed.sut != "synthetic":
            from softnet.results.trial import min_frame_bytes

            v = cell.testbed.personality().ip_version
            if cell.traffic.frame_bytes < min_frame_bytes(v):
                raise InputError(f"{path}: traffic.frame_bytes", f"{cell.traffic.frame_bytes} B with sut = "
                                 f"\"{cell.testbed.sut}\" (IPv{v}): at least {min_frame_bytes(v)} B"
                                 + (f" (matrix cell {knobs})" if knobs else ""))
        # Unit errors now, before anything runs.
        if cell.method.kind in ("search", "soak"):
            cell.search_range_pps()
        elif cell.method.kind == "compare":
            pass  # its loads: checked above
        elif cell.method.kind == "sweep":
            cell.n_loads()
        elif cell.method.kind == "reset":
            cell.n_loads()
            if cell.testbed.inventory:
                raise InputError(f"{path}: method.kind", "the reset benchmark runs on the local testbed only for "
                                 "now (on an inventory's hosts the SUT host's agent would have to run the reset)")
            if cell.testbed.sut != "synthetic":
                try:
                    cell.testbed.personality().check_reset()
                except InputError as exc:
                    raise InputError(f"{path}: testbed.sut", exc.message) from None
            else:
                raise InputError(f"{path}: testbed.sut", "the synthetic SUT has no data path to reset")
        elif cell.method.kind in ("back-to-back", "recovery"):
            check_burst_or_recovery(cell, path)
        elif not cell.testbed.inventory:  # latency: the CPUs must exist here (an inventory host's agent checks its own)
            from softnet.testbed.latency import LatencyPlacement

            LatencyPlacement(dict(cell.latency.app_cpus), dict(cell.latency.napi_cpus)).validate()
    return spec


def check_burst_or_recovery(cell: CampaignSpec, path) -> None:
    """A back-to-back campaign's burst rates against its throughput, or a
    recovery campaign's shape, on a testbed that has a data path, before
    anything runs."""
    m, t = cell.method, cell.traffic
    what = "back-to-back bursts" if m.kind == "back-to-back" else "a recovery from overload"
    if cell.testbed.sut == "synthetic":
        raise InputError(f"{path}: testbed.sut", f"the synthetic SUT has no buffer: {what} needs a real data path")
    if cell.testbed.inventory:
        raise InputError(f"{path}: method.kind", f"the {m.kind} benchmark runs on the local testbed only for now")
    if m.kind == "recovery":
        if t.bidirectional or t.arrivals != "const" or t.mix is not None:
            raise InputError(f"{path}: traffic", "a recovery campaign steps one direction's constant rate "
                             "(no arrivals shape, frame mix or bidirectional traffic)")
        cell.loads_pps()
        return
    if m.loads is None:
        raise InputError(f"{path}: method.loads", "give the frame rate inside the bursts, e.g. loads = [\"1Mpps\"] "
                         "(RFC 2544: the medium's maximum frame rate)")
    if t.mix is not None:
        raise InputError(f"{path}: traffic.mix", "back-to-back bursts are of one frame size (RFC 9004 6.1: mixed "
                         "sizes must not be used)")
    if t.bidirectional or t.arrivals != "const":
        raise InputError(f"{path}: traffic.arrivals" if t.arrivals != "const" else f"{path}: traffic.bidirectional",
                         "a back-to-back campaign shapes its own bursts, in one direction")
    rates = cell.loads_pps()
    if m.throughput is not None:
        tput = parse_rate(str(m.throughput), t.frame_bytes, t.rate_layer, "method.throughput")
        low = [r for r in rates if r <= tput]
        if low:
            raise InputError(f"{path}: method.throughput", f"{tput:,.0f} pps is not below the burst rate "
                             f"{low[0]:,.0f} pps: a burst at or under the throughput fills no buffer")
