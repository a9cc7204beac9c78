"""A testbed on an inventory's hosts: the generators and sinks on the traffic
host, the SUT on another, each driven by its agent over SSH. It gives a
trial its pieces (softnet.hosts.trial_hosts), so the one measure procedure
(softnet.campaign.trial.measure) runs here as on this host, and
softnet.analysis.trial_eval.evaluate turns its raw trial into the same
result, on the controller. What differs is recorded: which host each piece
ran on (`hosts`, with their provenance), and how well the window edges taken
on the SUT host line up with the generator's clock (`window_skew_ms`).

No SSH traffic crosses the SUT host while the window runs: its window-edge
reads are scheduled on its own clock during the warm-up, its lease is
extended over the trial, and its samples are collected afterwards.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from softnet.errors import HostNotRestored, InputError
from softnet.hosts.agent_protocol import (Applied, DrainReply, DriftReply, GenStarted, ProfilerStarted, ReadReply,
                                          Reads, Running, SeriesReply, StacksStarted, Started, StopReply,
                                          TimelineReply, Undone, WaitReply, WindowReply)
from softnet.hosts.inventory import Inventory, Port
from softnet.hosts.session import AgentSession, open_sessions, reserve
from softnet.hosts.trial_hosts import GenPlan, SinkShape
from softnet.provenance import provenance
from softnet.results.series import Series
from softnet.testbed.local import ADDR
from softnet.testbed.personalities import parse_sut
from softnet.tools.changes import HostChanges

def no_remote_reset() -> InputError:
    return InputError("--reset-at", "the reset benchmark runs on the local testbed only for now (on an "
                      "inventory's hosts the SUT host's agent would have to run the reset)")


POLL_S = 0.25  # the traffic host is asked how the generator does (the SUT host only past the window)
LEASE_MARGIN_S = 5.0  # the SUT's lease beyond the generator's expected run (tools start before it)
RENEW_S = 1.0  # past the window, the SUT's lease is renewed this often while the generator runs late


@dataclass
class RemotePlacement:
    gen_cpu: int = 0  # on the traffic host
    sut_cpus: list[int] = field(default_factory=lambda: [1])  # on the SUT host
    steering: str = "threaded"


class _Tool:
    """A tool an agent runs, by its handle; stopped once (by the trial's
    registry, or by the procedure when it is done with it)."""

    def __init__(self, session: AgentSession, handle: str, changes: HostChanges, what: str):
        self.session, self.handle, self.stopped = session, handle, False
        changes.record(f"{what} on {session.name}", self.stop)

    def stop(self) -> StopReply:
        if self.stopped:
            return StopReply()
        self.stopped = True
        return self.session.ask(StopReply, "stop", handle=self.handle)

    def read(self) -> dict:
        return self.session.ask(ReadReply, "read", handle=self.handle).read


class _Sink(_Tool):
    def drain(self) -> tuple[dict, float]:
        d = self.session.ask(DrainReply, "drain", handle=self.handle)
        return d.counts, d.drain_s

    def timeline(self, sent: int) -> dict:
        return self.session.ask(TimelineReply, "timeline", handle=self.handle, sent=sent, timeout=60).timeline


class _Generators(_Tool):
    started_unix_s = 0.0

    def running(self) -> bool:
        return self.session.ask(Running, "poll", handle=self.handle).running

    def interrupt(self) -> None:
        self.session.call("interrupt", handle=self.handle)

    def wait(self, timeout: float) -> dict:
        return self.session.ask(WaitReply, "wait", handle=self.handle, wait_s=timeout).report


class _Profiler(_Tool):
    def __init__(self, session, started: ProfilerStarted, changes):
        super().__init__(session, started.handle, changes, "profiler")
        self.plan, self.events, self.drop_reasons = started.plan, started.events, started.drop_reasons
        self.duty, self.base_duty, self.period_ms = started.duty, started.base_duty, started.period_ms


class _Stacks(_Tool):
    def __init__(self, session, started: StacksStarted, changes):
        super().__init__(session, started.handle, changes, "stack sampler")
        self.cpus, self.freq_hz, self.period_ns = started.cpus, started.freq_hz, started.period_ns

    def symbols(self) -> dict:
        return self.session.ask(ReadReply, "read", handle=self.handle, symbols=True, timeout=60).read


class _Sampler(_Tool):
    def recent(self) -> Series:
        return Series.from_json(self.session.ask(SeriesReply, "read", handle=self.handle, last=2).series)

    def finish(self) -> dict:
        return self.stop().series


class RemoteTestbed:
    """``with RemoteTestbed(inv, "tb1") as tb: raw = tb.measure(spec)``; the
    hosts are configured on enter and restored on exit (and by their agents
    alone if this process dies)."""

    def __init__(self, inv: Inventory, testbed: str, sut: str = "ipv4-fwd",
                 placement: RemotePlacement | None = None, wait_s: float = 0.0, bidirectional: bool = False,
                 nic: dict | None = None, custom: dict | None = None, field: str = "--sut"):
        """``sut``: a personality's spec string (``custom``: its table), set
        up by the SUT host's agent in a namespace of its own there
        (softnet.testbed.sut_lab); ``bidirectional``: the SUT also ready
        for traffic from the sink's side; ``nic``: NIC knobs of the SUT's
        interfaces (softnet.tools.nic), refused by the SUT host's agent
        before it changes anything if an interface does not take one."""
        self.personality = parse_sut(sut, field, custom)
        self.personality.require_remote(field)
        if bidirectional and not self.personality.bidirectional:
            raise InputError("bidirectional", f"{self.personality.name} forwards one way only: "
                             f"{self.personality.one_way_why}")
        self.inv, self.name, self.sut, self.custom = inv, testbed, self.personality.spec, custom
        table = getattr(self.personality, "table", None)
        if table is not None:  # a custom SUT: its commands travel as a table, run in the same folder there
            self.sut = self.personality.name
            self.custom = {**table.model_dump(exclude_none=True), "workdir": str(self.personality.workdir)}
        self.ports: dict[str, Port] = inv.ports(testbed)
        tb = inv.testbeds[testbed]
        if tb.sink not in (None, tb.traffic):
            raise InputError(f"testbeds.{testbed}.sink", f"the sink on host '{tb.sink}', the generators on "
                             f"'{tb.traffic}': a trial's one-way delays need one clock for both (a testbed "
                             "with a sink host of its own runs the AF_XDP latency lab)")
        self.host_of = {"traffic": tb.traffic, "sut": tb.sut}
        self.placement = placement or RemotePlacement()
        self.ip_version = self.personality.ip_version
        self.wait_s, self.bidirectional = wait_s, bidirectional
        self.nic = {k: v for k, v in (nic or {}).items() if v is not None}
        self.sessions: dict[str, AgentSession] = {}
        self.applied: dict[str, Applied] = {}
        self.undone: dict[str, Undone] = {}

    @property
    def traffic_agent(self) -> AgentSession:
        return self.sessions["traffic"]

    @property
    def sut_agent(self) -> AgentSession:
        return self.sessions["sut"]

    # ---- setup and teardown --------------------------------------------------
    def _port(self, role: str) -> dict:
        p = self.ports[role]
        return {"field": p.field, **p.iface.model_dump()}

    def __enter__(self) -> "RemoteTestbed":
        if self.host_of["traffic"] == self.host_of["sut"]:
            raise InputError(f"testbeds.{self.name}", "traffic and sut are one host; a remote testbed needs two")
        # Sessions named by inventory host, so that an error names the host
        # ("host dut: ..."), not its role; kept here by role.
        by_name = open_sessions({name: self.inv.hosts[name] for name in self.host_of.values()})
        self.sessions = {role: by_name[name] for role, name in self.host_of.items()}
        try:
            reserve(list(self.sessions.values()), f"softnet testbed {self.name}", self.wait_s)
            t, u = self.traffic_agent, self.sut_agent
            self.applied["traffic"] = t.ask(Applied, "apply", role="traffic",
                                             ports={r: self._port(r) for r in ("gen_out", "sink_in")},
                                             sink_mtu=self.personality.sink_mtu)
            self.applied["sut"] = u.ask(
                Applied, "apply", role="sut", ports={r: self._port(r) for r in ("sut_in", "sut_out")}, sut=self.sut,
                gen_mac=self.ports["gen_out"].iface.mac, sink_mac=self.ports["sink_in"].iface.mac,
                sut_cpus=self.placement.sut_cpus, steering=self.placement.steering,
                bidirectional=self.bidirectional, nic=self.nic, custom=self.custom)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type=None, exc=None, tb=None) -> None:
        for role, s in self.sessions.items():
            self.undone[role] = s.close()
        self.sessions = {}
        errors = [f"host {self.host_of[role]}: {e}" for role, u in self.undone.items() for e in u.errors]
        if errors and exc_type is None:  # an agent could not undo a change: never silent
            raise HostNotRestored(errors)

    # ---- a trial's pieces (softnet.hosts.trial_hosts.TrialHosts) ----------------------
    poll_s = POLL_S

    def check(self, spec) -> None:
        if spec.bidirectional and not self.bidirectional:
            raise InputError("bidirectional", "this testbed was built for one direction (build it bidirectional)")
        if spec.reset_at_s is not None:
            raise no_remote_reset()

    def generator_cpus(self, spec) -> list[int]:
        return list(spec.gen_cpus or [self.placement.gen_cpu])  # the traffic host's agent checks them

    def data_path_cpus(self, gen_cpus: list[int]) -> list[int]:
        return sorted(self.placement.sut_cpus)  # the stall probe runs on the SUT host

    addr = ADDR  # the addresses (personality.dst_ip reads them); the MACs are the inventory's

    def endpoints(self, reverse: bool) -> tuple[str, str]:
        v = 0 if self.ip_version == 4 else 1
        if reverse:
            return ADDR["sink"][v], ADDR["gen"][v]
        return ADDR["gen"][v], self.personality.dst_ip(self)  # vxlan: its overlay's next hop

    def sink_ifname(self, reverse: bool) -> str:
        return self.ports["gen_out" if reverse else "sink_in"].iface.name

    def begin(self, expected_s: float) -> None:
        # No request needs to reach the SUT while the window runs, so its
        # lease is extended over the generator's expected run, and no
        # further: a cut management link must still restore it within about
        # its lease after the window. Should the generator run late, tick
        # renews it once the window is over. The traffic host is polled all
        # along and needs no extension.
        self.sut_agent.call("lease", seconds=expected_s + LEASE_MARGIN_S)
        self.renewed = time.time()

    def sink(self, changes, reverse, count, warmup, exact, bin_pkts, streams, shape: SinkShape) -> _Sink:
        t, name = self.traffic_agent, self.sink_ifname(reverse)
        handle = t.ask(Started, "start", tool="sink", ifname=name, count=count, warmup=warmup, exact=exact,
                       bin_pkts=bin_pkts, streams=streams, **asdict(shape)).handle
        return _Sink(t, handle, changes, f"sink on {name}")

    def generators(self, changes, reverse, plan: GenPlan) -> _Generators:
        t = self.traffic_agent
        # the next hop: the SUT's port (an L3 hop), or the far end's (a bridge switches to it)
        l2 = self.personality.next_hop_role == "sink"
        if reverse:
            out, nxt = "sink_in", "gen_out" if l2 else "sut_out"
        else:
            out, nxt = "gen_out", "sink_in" if l2 else "sut_in"
        src, dst = self.endpoints(reverse)
        started = t.ask(GenStarted, "start", tool="gen", ifname=self.ports[out].iface.name,
                        src_mac=self.ports[out].iface.mac, dst_mac=self.ports[nxt].iface.mac, src_ip=src, dst_ip=dst,
                        rate_pps=plan.rate_pps, count=plan.count, warmup=plan.warmup, frame_bytes=plan.frame_bytes,
                        flows=plan.flows, cpus=plan.cpus, src_ips=plan.src_ips, src_ip_first=plan.src_ip,
                        shape=asdict(plan.shape))
        gens = _Generators(t, started.handle, changes, f"generators on {self.ports[out].iface.name}")
        gens.started_unix_s = started.started_unix_s - t.clock.offset_s  # on the controller's clock
        return gens

    def reset(self, changes, at_unix_s):
        raise no_remote_reset()

    def victim(self, changes, kind, seconds) -> _Tool:
        u = self.sut_agent  # on the first SUT CPU, as on this host: the profiler's clock is the SUT host's too
        handle = u.ask(Started, "start", tool="victim", kind=kind, cpu=self.placement.sut_cpus[0],
                       seconds=seconds).handle
        return _Tool(u, handle, changes, "victim")

    def sampler(self, changes, interval_s, profiler) -> _Sampler:
        u, names = self.sut_agent, [self.ports[r].iface.name for r in ("sut_in", "sut_out")]
        handle = u.ask(Started, "start", tool="sampler", interval_s=interval_s, avoid_cpus=self.placement.sut_cpus,
                       links=[["sut_in", names[0]], ["sut_out", names[1]]],
                       profiler=profiler.handle if profiler else None).handle
        return _Sampler(u, handle, changes, "kernel sampler")

    def stall_probe(self, changes, cpus, period_us) -> _Tool:
        u = self.sut_agent
        handle = u.ask(Started, "start", tool="stalls", cpus=cpus, period_us=period_us,
                       avoid_cpus=self.placement.sut_cpus).handle
        return _Tool(u, handle, changes, "stall probe")

    def injector(self, changes, cpu, busy_ms, every_ms) -> _Tool:
        u = self.sut_agent
        cpu = cpu if cpu is not None else self.placement.sut_cpus[0]
        handle = u.ask(Started, "start", tool="injector", cpu=cpu, busy_ms=busy_ms, every_ms=every_ms).handle
        return _Tool(u, handle, changes, f"stall injector on CPU {cpu}")

    def profiler(self, changes, per_packet, duty, base_duty) -> _Profiler:
        u = self.sut_agent
        return _Profiler(u, u.ask(ProfilerStarted, "start", tool="profiler", per_packet=per_packet, duty=duty,
                                  base_duty=base_duty,
                                  avoid_cpus=self.placement.sut_cpus, timeout=120), changes)

    def stack_sampler(self, changes, freq_hz) -> _Stacks:
        u = self.sut_agent
        return _Stacks(u, u.ask(StacksStarted, "start", tool="stacks", cpus=self.placement.sut_cpus,
                                freq_hz=freq_hz), changes)

    # ---- reads -------------------------------------------------------------------
    def _reads(self, role: str, procfs_snapshot: bool = False) -> Reads:
        if role == "traffic":
            names = [self.ports["gen_out"].iface.name, self.ports["sink_in"].iface.name]
            return self.sessions[role].ask(Reads, "reads", ifnames=names, ethtool=names[:1])
        names = [self.ports["sut_in"].iface.name, self.ports["sut_out"].iface.name]
        return self.sessions[role].ask(Reads, "reads", ifnames=names, qdiscs=names, procfs_snapshot=procfs_snapshot,
                                       napi=names, counters=True)

    def drift_levels(self) -> dict:
        """The SUT host's resources now, read by its agent (softnet.collect.drift)."""
        r = self.sessions["sut"].ask(DriftReply, "drift")
        return {"t_unix_s": r.t_unix_s, "levels": r.levels, "missing": r.missing}

    def host_reads(self) -> dict:
        """This host's trial reads, from the host that has each."""
        t, u = self._reads("traffic"), self._reads("sut", procfs_snapshot=True)
        gen, sink, sut_in, sut_out = (self.ports[r].iface.name for r in ("gen_out", "sink_in", "sut_in", "sut_out"))
        links = {"gen": t.links[gen], "sut_in": u.links[sut_in], "sut_out": u.links[sut_out], "sink": t.links[sink]}
        return {"links": links, "ethtool_gen": t.ethtool[gen], "qdisc_drops": u.qdisc_drops,
                "procfs": u.procfs, "path_counters": u.path_counters, "sut_netns_inode": u.netns_inode,
                "sut_ifindex": u.ifindex, "sut_thread_runtime_ns": u.napi_runtime_ns or {},
                "sut_thread_runs": u.napi_runs or {}}

    def window(self, at_unix_s, sampler, profiler, stacks=None) -> None:
        """The SUT's window edges on its own clock, sent during the warm-up:
        the agent takes them there and keeps them until `collect`."""
        u = self.sut_agent
        u.call("window", at_unix_s=[at + u.clock.offset_s for at in at_unix_s],
               sampler=sampler.handle if sampler else None, profiler=profiler.handle if profiler else None,
               stacks=stacks.handle if stacks else None,
               napi=[self.ports["sut_in"].iface.name, self.ports["sut_out"].iface.name])

    def tick(self, past_window: bool) -> None:
        if past_window and time.time() - self.renewed > RENEW_S:
            self.sut_agent.call("lease", seconds=0)
            self.renewed = time.time()

    def window_reads(self) -> dict:
        return self.sut_agent.ask(WindowReply, "collect").window

    # ---- what the raw trial records ----------------------------------------------
    def _hosts(self) -> dict:
        return {role: self._host(role) for role in ("traffic", "sut")}

    def _host(self, role: str) -> dict:
        s, applied, name = self.sessions[role], self.applied[role], self.host_of[role]
        return {"name": name, "address": self.inv.hosts[name].address, **s.hello.host.provenance(),
                "clock_offset_s": s.clock.offset_s, "clock_uncertainty_s": s.clock.uncertainty_s,
                "interfaces": applied.facts, "host_changes_applied": applied.applied}

    def describe(self, spec, gen_cpus, src_ip, dst_ip, profiled, edges) -> dict:
        p, t, u = self.placement, self.traffic_agent, self.sut_agent
        ids = []
        if profiled:  # how the profiler's kernel records name the SUT's interfaces
            r = self._reads("sut")
            ids = [[r.netns_inode, r.ifindex[self.ports[role].iface.name],
                    f"{role} ({self.host_of['sut']}/{self.ports[role].iface.name})"] for role in ("sut_in", "sut_out")]
        late = edges.get("late_ms", {})
        skew_ms = (t.clock.uncertainty_s + u.clock.uncertainty_s) * 1e3 + max(late.values(), default=0.0)
        testbed = {"sut": self.sut, "ip_version": self.ip_version, "run_id": self.name,
                   "placement": {"gen_cpu": gen_cpus[0], "sut_cpus": p.sut_cpus, "sink_cpu": None,
                                 "steering": p.steering, **({"gen_cpus": gen_cpus} if len(gen_cpus) > 1 else {})},
                   "src_ip_first": src_ip, **({"dst_ip_first": dst_ip} if dst_ip else {}),
                   "sink_ifname": self.sink_ifname(False), "napi_thread_cpus": {}, "interface_ids": ids,
                   **({"nic": self.applied["sut"].nic} if self.applied["sut"].nic else {}),
                   "remote": {"testbed": self.name, "inventory": self.inv.source,
                              "hosts": {r: self.host_of[r] for r in ("traffic", "sut")}}}
        sut_host = u.hello.host
        return {"testbed": testbed, "host": {"cpu_freq_hz": sut_host.cpu_freq_hz, "sysctls": sut_host.sysctls},
                "other_runs": [], "window_skew_ms": skew_ms, "hosts": self._hosts()}

    def provenance(self, spec, trial_changes: HostChanges) -> dict:
        prov = provenance(None, spec=asdict(spec), sut=self.sut, testbed=self.name)
        prov["host_changes_applied"] = list(trial_changes.applied)  # the trial's own pieces, on their hosts
        prov["hosts"] = self._hosts()
        return prov
