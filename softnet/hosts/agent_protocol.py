"""The agent protocol's messages as models (softnet.hosts.agent serves them,
softnet.hosts.session and softnet.hosts.remote_trial send and read them).

The wire stays what it was: one JSON object per line; a request
{"id": n, "op": ..., **args}, an answer {"id": n, "ok": true, **reply} or
{"id": n, "ok": false, "error": ..., "field": ...}. The agent parses a
request's arguments into its op's parameters (and a `start` into its tool's
model); the controller parses the answers it reads into the replies below.
Replies keep the fields the controller does not read (extra="allow"), so
that what it records of them is what the agent sent.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from softnet.traffic.native import Shape


# ---- the envelope -------------------------------------------------------------
class Request(BaseModel):
    """{"id": n, "op": ..., **args}: the op's arguments are the rest."""
    model_config = ConfigDict(extra="allow")

    id: Any = None
    op: Any = None

    def args(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class Answer(BaseModel):
    """{"id": n, "ok": ..., **reply}, or with ok false its error (and the
    inventory field it is about)."""
    model_config = ConfigDict(extra="allow")

    id: Any = None
    ok: bool = False
    error: str | None = None
    field: str | None = None

    def body(self) -> dict[str, Any]:
        """The op's own reply: the answer without its envelope."""
        return dict(self.model_extra or {})


# ---- `start`: one model per tool ------------------------------------------------
class ToolStart(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SinkStart(ToolStart):
    ifname: str
    count: int
    warmup: int
    exact: int = 0
    bin_pkts: int = 0
    streams: int = 1
    flows: int = 1
    mix: str | None = None
    dst_ports: int = 1


class GenStart(ToolStart):
    ifname: str
    src_mac: str
    dst_mac: str
    src_ip: str
    dst_ip: str
    rate_pps: int | float
    count: int
    warmup: int
    frame_bytes: int
    flows: int
    cpus: list[int] | None = None
    cpu: int | None = None  # one generator (cpus: several)
    src_ips: int = 1
    src_ip_first: str | None = None
    shape: Shape | None = None


class InjectorStart(ToolStart):
    cpu: int
    busy_ms: int | float
    every_ms: int | float


class StallsStart(ToolStart):
    cpus: list[int]
    period_us: int | float
    avoid_cpus: list[int] | None = None


class ProfilerStart(ToolStart):
    per_packet: bool = True
    duty: float = 0.02
    base_duty: float = 1.0
    avoid_cpus: list[int] | None = None


class StacksStart(ToolStart):
    cpus: list[int]
    freq_hz: int


class VictimStart(ToolStart):
    kind: str
    cpu: int
    seconds: float


class SamplerStart(ToolStart):
    interval_s: float
    avoid_cpus: list[int] | None = None
    links: list[tuple[str, str]] = Field(default_factory=list)  # (role, ifname)
    profiler: str | None = None  # its handle: the profiler's times at every sample


# ---- replies the controller reads ----------------------------------------------
class Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class HostFacts(Reply):
    """hello's "host": the agent host's provenance (softnet.hosts.agent.host_facts),
    its fields in the order the agent sends them (a raw trial records them so)."""
    softnet_version: str = ""
    kernel: str = ""
    hostname: str = ""
    cpu_model: str = ""
    cpus_online: Any = None
    netns_inode: int = 0
    cpus_usable: list[int] = Field(default_factory=list)
    cpu_freq_hz: Any = None
    sysctls: dict[str, Any] = Field(default_factory=dict)

    def provenance(self) -> dict[str, Any]:
        """All of it but its sysctls, as a raw trial's "hosts" records it."""
        return self.model_dump(exclude={"sysctls"})


class Hello(Reply):
    version: int | None = None
    softnet_version: str = ""
    capabilities: list[str] = Field(default_factory=list)
    host: HostFacts = Field(default_factory=HostFacts)


class Clock(BaseModel):
    """The agent's clock against the controller's (softnet.hosts.session.AgentSession.measure_clock)."""
    model_config = ConfigDict(frozen=True)

    offset_s: float = 0.0
    uncertainty_s: float = 0.0


class TimeReply(Reply):
    time_unix_s: float


class Started(Reply):
    handle: str


class GenStarted(Started):
    started_unix_s: float


class ProfilerStarted(Started):
    plan: Any = None
    events: Any = None
    drop_reasons: Any = None
    duty: Any = None
    base_duty: Any = None
    period_ms: Any = None


class Running(Reply):
    running: bool


class WaitReply(Reply):
    report: Any = None


class DrainReply(Reply):
    counts: dict[str, Any]
    drain_s: float


class TimelineReply(Reply):
    timeline: Any = None


class StacksStarted(Started):
    cpus: list[int]
    freq_hz: int
    period_ns: int


class ReadReply(Reply):
    read: Any = None


class StopReply(Reply):
    series: Any = None


class SeriesReply(Reply):
    series: dict  # softnet.results.series.Series.to_json()


class WindowReply(Reply):
    window: Any = None


class Journals(Reply):
    journal: str
    pending: list[str]


class CleanReply(Reply):
    journals: list[Journals] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class Applied(Reply):
    """apply's reply: the interfaces' facts before use, the changes made in
    order, and for the SUT its NIC settings."""
    facts: dict[str, Any] = Field(default_factory=dict)
    applied: list[str] = Field(default_factory=list)
    nic: dict[str, Any] | None = None


class Undone(Reply):
    """bye's (and undo's) reply; "lost" when the agent could not be asked."""
    undone: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    lost: str | None = None


class Reads(Reply):
    """reads: an agent host's counters (softnet.hosts.agent.Agent.op_reads)."""
    links: dict[str, Any] = Field(default_factory=dict)  # ifname -> stats
    ethtool: dict[str, Any] = Field(default_factory=dict)
    qdisc_drops: int = 0
    netns_inode: int = 0
    ifindex: dict[str, int] = Field(default_factory=dict)
    procfs: Any = None
    path_counters: Any = None
    napi_runtime_ns: dict[str, Any] | None = None
    napi_runs: dict[str, Any] | None = None


class DriftReply(Reply):
    """drift: the SUT host's resources now (softnet.collect.drift.read_levels)."""
    t_unix_s: float
    levels: dict[str, float] = Field(default_factory=dict)
    missing: dict[str, str] = Field(default_factory=dict)


class DoctorCheck(Reply):
    """One `softnet doctor` probe's finding as the agent sends it (Check.to_dict)."""
    name: str
    ok: bool | None = None
    detail: str = ""


class CheckReply(Reply):
    facts: dict[str, Any] = Field(default_factory=dict)
    refusals: list[dict[str, str]] = Field(default_factory=list)
    management: dict[str, str] = Field(default_factory=dict)
    doctor: list[DoctorCheck] | None = None
