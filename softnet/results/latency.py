"""Per-packet round-trip records of the AF_XDP latency lab (native/xsk, role
ping), as the tool writes them: one fixed-size little-endian record per packet
sent, in sequence order. All times are CLOCK_MONOTONIC ns (bpf_ktime_get_ns
in the XDP programs: the same clock), 0 where a stamp is absent.

Topology: A (ping) -> B (forward) -> C (reflect) -> B (forward) -> A.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, PrivateAttr, model_serializer, model_validator

from softnet.results.trial import Exact, Number, Provenance

# Where each hop stamp was taken, in path order (index into hop_ns).
HOPS = (
    "b_xdp_rx_fwd",   # B's XDP hook, packet from A (metadata)
    "b_user_rx_fwd",  # B's application read it from its RX ring
    "b_user_tx_fwd",  # B's application put it on the TX ring towards C
    "c_xdp_rx",       # C's XDP hook
    "c_user_rx",      # C's application read it
    "c_user_tx",      # C's application put the reply on its TX ring
    "b_xdp_rx_ret",   # B's XDP hook, reply from C
    "b_user_rx_ret",
    "b_user_tx_ret",  # B's application put the reply on the TX ring towards A
    "a_xdp_rx",       # A's XDP hook, the reply
)
FLAG_RECEIVED = 1      # a reply came back (t3_ns set)
FLAG_DUPLICATE = 2     # more than one reply for this sequence number
FLAG_REORDERED = 4     # its reply came after a later sequence number's
FLAG_IMPOSSIBLE = 8    # a stamp earlier than the one before it on the path: never reported as a delay

RECORD_DTYPE = np.dtype([
    ("seq", "<u8"),
    ("t0_ns", "<u8"),      # A's application wrote the packet to its TX ring
    ("t3_ns", "<u8"),      # A's application read the reply from its RX ring (0: lost)
    ("hop_ns", "<u8", (len(HOPS),)),
    ("flags", "<u4"),
    ("_pad", "<u4"),
])
assert RECORD_DTYPE.itemsize == 112


# Frames too short for their hop slots (64 B carry the sequence number only): B and C keep
# those stamps beside the frames, by sequence number, and give them on request (softnet-xsk
# "stamps PATH"); the run merges them into the ping's records.
SIDE_STAMP_DTYPE = np.dtype([("seq", "<u8"), ("hop", "<u4"), ("_pad", "<u4"), ("ns", "<u8")])
assert SIDE_STAMP_DTYPE.itemsize == 24
# the smallest frame that carries T0 and every hop slot, FCS included (native/xsk/xsk.h): 146 B
FULL_FRAME_BYTES = 14 + 20 + 8 + 4 + 8 + 8 + 8 * len(HOPS) + 4


def merge_side_stamps(records: np.ndarray, stamps: np.ndarray) -> int:
    """Hop stamps kept beside the frames into the records' empty hop slots
    (a slot the frame carried wins; of two for one slot, the first). Returns
    how many were merged."""
    if not len(records) or not len(stamps):
        return 0
    seqs = records["seq"]
    pos = np.searchsorted(seqs, stamps["seq"])
    ok = (pos < len(seqs)) & (stamps["hop"] < len(HOPS))
    ok[ok] &= seqs[pos[ok]] == stamps["seq"][ok]
    pos, hop, ns = pos[ok], stamps["hop"][ok].astype(np.intp), stamps["ns"][ok]
    _, first = np.unique(pos * len(HOPS) + hop, return_index=True)
    pos, hop, ns = pos[first], hop[first], ns[first]
    empty = records["hop_ns"][pos, hop] == 0
    records["hop_ns"][pos[empty], hop[empty]] = ns[empty]
    return int(empty.sum())


def read_records(path: str | Path) -> np.ndarray:
    """The records of one run; a file that is not a whole number of records is an error."""
    path = Path(path)
    size = path.stat().st_size
    if size % RECORD_DTYPE.itemsize:
        raise ValueError(f"{path}: {size} B is not a whole number of {RECORD_DTYPE.itemsize} B records")
    return np.fromfile(path, dtype=RECORD_DTYPE)


@dataclass(frozen=True, eq=False)
class RecordColumns:
    """A run's records (RECORD_DTYPE) as one array per field, in sequence order of the file."""

    seq: np.ndarray
    t0_ns: np.ndarray
    t3_ns: np.ndarray
    hop_ns: np.ndarray  # (n, len(HOPS)): a stamp per hop, 0 where absent
    flags: np.ndarray

    @classmethod
    def of(cls, records: np.ndarray) -> "RecordColumns":
        return cls(seq=records["seq"], t0_ns=records["t0_ns"], t3_ns=records["t3_ns"], hop_ns=records["hop_ns"],
                   flags=records["flags"])

    def __len__(self) -> int:
        return len(self.seq)


# ---- one run's reads and its evaluated result -----------------------------------

LATENCY_SCHEMA_VERSION = 1
RxMode = Literal["busy", "poll", "recvfrom", "epoll"]


class AsStored(BaseModel):
    """Written back with the keys it was read with, in their order: a run
    stored before a field existed reads that field's default, yet re-evaluates
    and re-dumps to the JSON it was stored as."""

    _given: tuple[str, ...] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_keys(cls, data: Any, handler):
        model = handler(data)
        if isinstance(data, dict):
            model._given = tuple(data)
        return model

    @model_serializer(mode="wrap")
    def _as_stored(self, handler) -> dict:
        out = handler(self)
        return out if self._given is None else {k: out[k] for k in self._given}


class LatencyConfigKnobs(AsStored):
    """A configuration's identity: every knob of the campaign spec's
    ``latency`` section (softnet.campaign.spec.LatencySpec, same fields and
    defaults; the layers keep results from importing it)."""

    model_config = ConfigDict(extra="forbid")

    bind_mode: Literal["copy", "zero-copy"] = "copy"
    need_wakeup: bool = True
    busy_poll: bool = False
    busy_poll_us: int = 20
    busy_poll_budget: int = 64
    poll_sender: bool = False
    poll_forwarder: bool = False
    poll_receiver: bool = False
    rx_mode_sender: RxMode | None = None
    rx_mode_forwarder: RxMode | None = None
    rx_mode_receiver: RxMode | None = None
    app_cpus: dict[str, int] = {}
    napi_cpus: dict[str, int] = {}
    batch: int = 1
    ring_size: int = 2048
    xdp_mode: Literal["native", "skb"] = "native"
    threaded_napi: bool = False
    napi_defer_hard_irqs: int | None = None
    gro_flush_timeout_ns: int | None = None
    cstate_limit_us: int | None = None
    coalesce_rx_usecs: int | None = None
    coalesce_tx_usecs: int | None = None
    irq_suspend_timeout_ns: int | None = None
    interval_s: float = 1.0
    arrivals: Literal["periodic", "poisson"] = "periodic"
    baseline_count: int = 0
    rerun_per_cluster: int = 0
    rerun_count: int = 10_000
    clusters: int | None = None

    def to_dict(self) -> dict:
        """knob -> value, as stored (the analysis's configuration identity and label)."""
        return self.model_dump()


class KnobUnsupported(Exact):
    """A knob this kernel or device refused: why, in its words."""

    unsupported: str


# knob (host-side, per interface role: "coalesce_rx_usecs.b_a") -> the value applied, or why not
Applied = dict[str, KnobUnsupported | bool | int | float | str | None]


class RawKernelBaseline(Exact):
    """Kernel ping over the same path (softnet.traffic.ping.kernel_ping): each reply's RTT."""

    sent: int
    received: int
    rtt_ns: list[int]


class KernelBaseline(Exact):
    sent: int
    received: int
    median_ns: float | None


class RttFigures(Exact):
    """A run's round-trip statistics (ns; None where the sample is too small):
    softnet.analysis.latency_stats.RttSummary as stored."""

    n: Number
    mean_ns: Number | None
    median_ns: Number | None
    std_ns: Number | None
    q1_ns: Number | None
    q3_ns: Number | None
    min_ns: Number | None
    max_ns: Number | None
    p90_ns: Number | None
    p99_ns: Number | None
    p999_ns: Number | None


class ToolReport(AsStored):
    """A JSON line of softnet-xsk (docs/reference/xsk.md): the keys softnet reads or
    shows, typed; the others kept as the tool wrote them."""

    model_config = ConfigDict(extra="allow")


class XskRefusal(Exact):
    knob: str
    unsupported: str


class XskHello(ToolReport):
    """A role's first line, once bound: what it runs with."""

    role: str
    ifname: str
    bind_mode: str  # what the kernel reports: a refused zero-copy bind runs in copy mode
    need_wakeup: bool
    xdp_mode: str
    rx_mode: str
    unsupported: list[XskRefusal] = []


class XskHellos(AsStored):
    model_config = ConfigDict(extra="forbid")

    ping: XskHello | None = None
    forward: XskHello | None = None
    reflect: XskHello | None = None


class XskCounters(ToolReport):
    """forward's or reflect's answer to "read"."""

    role: str
    rx_pkts: int
    tx_pkts: int
    drop_pkts: int


class PingSummary(ToolReport):
    """The ping's last line."""

    role: str
    sent_pkts: int
    received_pkts: int
    lost_pkts: int
    interrupted: bool  # SIGINT/SIGTERM ended it early


class NapiInfo(Exact):
    id: int
    irq_suspend_timeout_ns: int | None


class NapiView(Exact):
    """An interface's NAPIs and RX queue 0's link, as the kernel has them (softnet.tools.netdev.view)."""

    napis: list[NapiInfo]
    rxq0_napi_id: int | None
    rxq0_xsk: bool


class Observed(AsStored):
    """Where things ran, as the kernel last saw them at the end of the run."""

    model_config = ConfigDict(extra="forbid")

    forward_cpu: int | None = None
    reflect_cpu: int | None = None
    napi_thread_cpus: dict[str, dict[str, int | None]] = {}  # device -> kthread pid -> CPU
    napi_b: dict[str, NapiView] = {}  # B's receiving interface role -> its NAPIs


class HostCpus(Exact):
    """A CPU per host of the lab (A pings, B forwards, C reflects)."""

    a: int
    b: int
    c: int


class LatencyHostKnobs(Exact):
    """The host-side knobs as the testbed took them (softnet.testbed.latency.LatencyKnobs)."""

    threaded_napi: bool
    napi_defer_hard_irqs: int | None
    gro_flush_timeout_ns: int | None
    busy_poll_us: int | None
    cstate_limit_us: int | None
    coalesce_rx_usecs: int | None
    irq_suspend_timeout_ns: int | None
    coalesce_tx_usecs: int | None = None


class LatencyPlacementFacts(Exact):
    app_cpus: dict[str, int]
    napi_cpus: dict[str, int]


class RemoteLab(Exact):
    """A lab on an inventory's hosts: which host played A, B and C."""

    inventory: str
    testbed: str
    hosts: dict[str, str]  # lab host (a, b, c) -> inventory host
    run_ids: dict[str, str]  # inventory host -> its agent's run id (its namespaces' names)


class RemoteLabRef(Exact):
    """A lab played by an inventory's hosts: which, and each one's testbed run id."""

    inventory: str
    testbed: str
    hosts: dict[str, str]  # lab host (a, b, c) -> inventory host
    run_ids: dict[str, str]  # inventory host -> its testbed's run id


class RawLatencyTestbed(Exact):
    """What the testbed says of itself (softnet.testbed.latency.LatencyTestbed.describe)."""

    run_id: str
    namespaces: dict[str, str]  # host -> namespace
    interfaces: dict[str, str]  # interface role -> name
    knobs: LatencyHostKnobs
    applied: Applied
    placement: LatencyPlacementFacts | None = None
    napi_threads: dict[str, list[int]] = {}  # device -> its NAPI kthreads' pids
    remote: RemoteLabRef | None = None  # on an inventory's hosts
    remote: RemoteLab | None = None  # None: on this host


class RawLatencyRun(Exact):
    """What one run read (softnet.campaign.latency.measure_run, plus the run's
    name): evaluate_run's input, stored beside the result so that it
    re-evaluates to the same result. Runs stored before a part existed lack it."""

    knobs: LatencyConfigKnobs
    interval_s: Number
    phase: str = "base"
    count: int | None = None
    ping: PingSummary
    hello: XskHellos
    forward_counters: XskCounters | None = None
    reflect_counters: XskCounters | None = None
    netstat_before: dict[str, dict[str, int]]  # host (b, c) -> /proc/net/netstat counter -> value
    netstat_after: dict[str, dict[str, int]]
    kernel_baseline: RawKernelBaseline | None = None  # after a configuration's last base run
    observed: Observed | None = None
    requested_cpus: HostCpus | None = None
    applied: Applied
    testbed: RawLatencyTestbed | None = None
    started_unix_s: Number
    records_path: str | None = None
    provenance: Provenance
    run: str = "run"  # "cell <i> run <j>": names the run in accounting errors
    other_runs: list[str] = []  # other softnet runs seen during this one
    # frames too short for the hop slots: the hop stamps B and C kept beside them, merged into the records
    side_stamps: int | None = None


class ToolReports(AsStored):
    """What the AF_XDP tool reported: hello per role, the ping's summary, and
    where the roles ran."""

    model_config = ConfigDict(extra="forbid")

    hello: XskHellos
    ping: PingSummary
    observed: Observed | None = None


class LatencyRunResult(BaseModel):
    """One run of one configuration (softnet.analysis.latency_eval.evaluate_run)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = LATENCY_SCHEMA_VERSION
    knobs: LatencyConfigKnobs  # written back with the keys it was stored with
    interval_s: Number
    phase: str = "base"  # base | fast | flood (softnet.campaign.latency.Run)
    sent: int
    received: int
    lost: int
    impossible: int
    duplicates: int
    reordered: int
    rtt: RttFigures
    kernel_baseline: KernelBaseline | None  # kernel ping over the same path
    busy_poll_rx_pkts: dict[str, int]  # BusyPollRxPackets growth per host during the run
    applied: Applied  # every knob as applied, or why not
    tool: ToolReports
    flags: list[str]
    valid: bool
    started_unix_s: Number
    records_path: str | None = None
    provenance: Provenance

    @property
    def config_knobs(self) -> LatencyConfigKnobs:
        return self.knobs

    @property
    def rtt_stats(self) -> RttFigures:
        return self.rtt

    @property
    def baseline(self) -> KernelBaseline | None:
        return self.kernel_baseline

    def to_dict(self) -> dict:
        return self.model_dump()


class StoredLatencyRun(BaseModel):
    """A run as the store keeps it: its matrix cell, its index, its result."""

    model_config = ConfigDict(extra="forbid")

    cell_id: int
    run_index: int
    result: LatencyRunResult

    @classmethod
    def of(cls, row: dict) -> "StoredLatencyRun":
        """From a row of softnet.results.store.Store.latency_runs (the result's keys beside the two ids)."""
        match row:
            case {"cell_id": cell_id, "run_index": run_index, **result}:
                return cls(cell_id=cell_id, run_index=run_index, result=result)
        raise ValueError(f"a stored latency run without its cell_id and run_index: {sorted(row)}")

    def to_dict(self) -> dict:
        return {"cell_id": self.cell_id, "run_index": self.run_index, **self.result.to_dict()}
