"""`softnet agent --stdio`: softnet's hands on one host, driven over SSH.

One JSON object per line each way, no listening port. A request is
{"id": n, "op": ..., ...}; the answer {"id": n, "ok": true, ...} or
{"id": n, "ok": false, "error": "...", "field": "hosts.dut.interfaces.0.mac"}.
Ops (docs/how-to/remote-hosts.md): hello, check, reserve, apply, start, poll, wait,
interrupt, drain, timeline, read, stop, reads, window, collect, lease, undo,
bye.

The host is always restored: every change is journalled (fsync) before it is
made; the agent undoes everything on `undo`/`bye`, when its stdin closes
(the controller or its SSH connection died), when the lease lapses (no
request for lease_s: a cut management link) and on SIGTERM/SIGHUP/SIGINT. A
reaper process replays the journal if the agent itself is killed.
"""
from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError, validate_call
from pyroute2 import IPRoute

from softnet import __version__, interrupts
from softnet.collect.procfs import cpu_freq_hz, host_sysctls
from softnet.collect import drift, procfs
from softnet.collect.profiler import Profiler
from softnet.collect.sampler import KernelSampler
from softnet.collect.stacks import StackSampler
from softnet.collect.stalls import StallProbe
from softnet.collect.victim import Victim
from softnet.errors import InputError, SoftnetError
from softnet.hosts import safety
from softnet.hosts.agent_protocol import (GenStart, InjectorStart, ProfilerStart, Request, SamplerStart, SinkStart,
                                          StacksStart,
                                          StallsStart, ToolStart, VictimStart)
from softnet.hosts.safety import PortSpec
from softnet.hosts.host_ops import HostOps, anchor_names
from softnet.provenance import cpu_model, provenance
from softnet.hosts.trial_hosts import EdgeSchedule
from softnet.hosts.agent_xsk import XSK_OPS, XskLabOps
from softnet.testbed.local import Endpoints
from softnet.testbed.personalities import parse_sut
from softnet.testbed.sut_lab import SutLab, SutPlacement
from softnet.testbed.stall_inject import StallInjector
from softnet.testbed.netns import napi_thread_pids
from softnet.testbed.lock import Holder, TestbedBusy, describe, testbed_lock
from softnet.tools.changes import HostChanges, Terminated
from softnet.tools import hostcmd, link_counters, nic
from softnet.tools.journal import (Header, Journal, default_state_dir, netns_cookie, netns_ino, read_journal, replay,
                                   replay_here, stale_journals)
from softnet.tools.links import LinkRef
from softnet.tools.reaper import spawn_reaper
from softnet.tools.undo_ops import Affinity, Kill, UndoEntry, running
from softnet.traffic.native import GeneratorGroup, Shape, Sink

PROTOCOL_VERSION = 2
CAPABILITIES = ("check", "reserve", "apply:traffic", "apply:sut", "tool:sink", "tool:gen", "tool:sampler",
                "tool:stalls", "tool:profiler", "tool:injector", "shapes", "bidirectional", "window", "lease",
                "journal", "reaper")
log = logging.getLogger("softnet.agent")


class AgentError(SoftnetError):
    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


@dataclass
class Agent(XskLabOps):
    state_dir: Path
    lease_s: float = 10.0
    out: Any = field(default_factory=lambda: sys.stdout)
    journal: Journal | None = None
    ops: HostOps | None = None
    closers: HostChanges = field(default_factory=HostChanges)  # graceful stops of this agent's tools
    tools: dict[str, Any] = field(default_factory=dict)
    anchors: list[str] = field(default_factory=list)  # generators' idle anchors not in use (journalled)
    anchors_of: dict[str, list[str]] = field(default_factory=dict)  # a generator's handle -> its anchors
    edges: EdgeSchedule = field(default_factory=EdgeSchedule)
    lab: SutLab | None = None  # the SUT's namespace (the SUT host's agent)
    lab_changes: HostChanges = field(default_factory=HostChanges)  # the personality's own undo steps
    lock: Any = None
    holder: Holder | None = None  # the testbed lock's, once reserved
    controller: str = ""  # who drives this agent (hello), named in its journal
    deadline: float = 0.0
    next_handle: int = 0

    # ---- the loop --------------------------------------------------------
    def serve(self, fd: int = 0) -> int:
        """Answer requests until bye, EOF, a lapsed lease or a signal; undo
        everything before returning. The exit code says why it ended."""
        self.deadline = time.monotonic() + self.lease_s
        buf, code, why = b"", 0, "bye"
        with self.closers:  # SIGINT/SIGTERM become exceptions here
            old_hup = signal.signal(signal.SIGHUP, _hangup)
            try:
                while True:
                    now = time.monotonic()
                    if now >= self.deadline:
                        code, why = 3, f"lease of {self.lease_s:g} s lapsed"
                        break
                    self.edges.run_due()
                    wait = self.deadline - now
                    if self.edges.next_at() is not None:
                        wait = min(wait, max(0.0, self.edges.next_at() - time.time()))
                    ready, _, _ = select.select([fd], [], [], min(wait, 1.0))
                    if not ready:
                        continue
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        code, why = 0 if self.journal is None else 4, "stdin closed"
                        break
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        if line.strip() and self._handle(line) == "bye":
                            return self._finish(0, "bye")
            except (KeyboardInterrupt, Terminated):
                code, why = 5, "signal"
                self.closers.signalled = None  # handled here: the undo below is the answer to it
                interrupts.handled()
            except BrokenPipeError:
                code, why = 4, "controller gone (broken pipe)"
            finally:
                signal.signal(signal.SIGHUP, old_hup)
        return self._finish(code, why)

    def _finish(self, code: int, why: str) -> int:
        n = len(self.ops.applied) if self.ops else 0
        errors = self.undo()
        log.info("agent ends: %s; %d change(s) undone%s", why, n,
                 f"; undo errors: {errors}" if errors else "")
        return code

    def _handle(self, line: bytes) -> str | None:
        rid, op, ok = None, None, False
        try:
            parsed = json.loads(line)
            if not isinstance(parsed, dict):
                raise AgentError('a request is one JSON object per line: {"id": N, "op": "..."}')
            req = Request.model_validate(parsed)
            rid, op = req.id, req.op
            fn = OPS.get(op) if isinstance(op, str) else None
            if fn is None:
                raise AgentError(f"unknown op {op!r}; accepted: {', '.join(self.op_names())}")
            # Any request renews the lease, but never cuts short one that
            # `lease` extended over a window: the SUT's window-edge and
            # sampler requests came right after it, and a window longer than
            # lease_s lapsed mid-trial (seen in bench/restore_bench.py).
            self.deadline = max(self.deadline, time.monotonic() + self.lease_s)
            reply = {"id": rid, "ok": True, **(fn(self, **req.args()) or {})}
            ok = True
        except AgentError as exc:
            reply = {"id": rid, "ok": False, "error": str(exc), "field": exc.field}
        except ValidationError as exc:  # the request's arguments are not what the op takes
            reply = {"id": rid, "ok": False, "error": f"{op}: {_why(exc)}"}
        except Exception as exc:  # an op that failed; the controller decides (and undoes through bye)
            reply = {"id": rid, "ok": False, "error": str(exc) if isinstance(exc, SoftnetError)
                     else f"{type(exc).__name__}: {exc}"}
        self.deadline = max(self.deadline, time.monotonic() + self.lease_s)  # a long op does not eat the lease
        self.out.write(json.dumps(reply) + "\n")
        self.out.flush()
        return "bye" if ok and op == "bye" else None

    @staticmethod
    def op_names() -> list[str]:
        return sorted(OPS)

    # ---- hello, check, reserve, lease --------------------------------------
    def op_hello(self, version: int, controller: str = "", housekeeping_cpus: list[int] | None = None) -> dict:
        if version != PROTOCOL_VERSION:
            raise AgentError(f"protocol version {version} from the controller; this agent speaks "
                             f"{PROTOCOL_VERSION} (softnet {__version__}): install the same softnet on both")
        self.controller = controller
        if housekeeping_cpus:  # the agent and its sampler stay off the data path's CPUs
            usable = sorted(os.sched_getaffinity(0))
            bad = [c for c in housekeeping_cpus if c not in usable]
            if bad:
                raise AgentError(f"CPU {bad[0]} is not usable here; this host has {usable}", "housekeeping_cpus")
            os.sched_setaffinity(0, housekeeping_cpus)
        return {"version": PROTOCOL_VERSION, "softnet_version": __version__, "capabilities": list(CAPABILITIES),
                "ops": self.op_names(), "time_unix_s": time.time(), "host": host_facts(),
                "state_dir": str(self.state_dir), "lease_s": self.lease_s}

    def op_time(self) -> dict:
        return {"time_unix_s": time.time()}

    def op_lease(self, seconds: float) -> dict:
        """Hold the lease this long from now (a trial's window: no request,
        so no SSH traffic, needs to cross the SUT while it runs)."""
        self.deadline = time.monotonic() + max(float(seconds), self.lease_s)
        return {"lease_until_s": float(seconds)}

    def op_check(self, ports: dict[str, PortSpec], doctor: bool = False) -> dict:
        """Facts of the listed interfaces and why each must not be used; no change."""
        mgmt = safety.management_interfaces()
        facts, problems = {}, []
        for role, port in ports.items():
            f = safety.interface_facts(port.name)
            facts[role] = None if f is None else {  # with the NIC knobs (softnet.tools.nic) it takes
                **f.model_dump(), "nic_knobs": nic.capabilities(port.name, hostcmd.run, f.driver,
                                                                nic.device_irqs(port.name)).takes()}
            problems += safety.refusals(port, f, mgmt)
        out = {"facts": facts, "refusals": [p.model_dump() for p in problems], "management": mgmt,
               "time_unix_s": time.time()}
        if doctor:
            from softnet import doctor as doc

            out |= {"doctor": [c.to_dict() for c in doc.run_probes()]}
        return out

    def op_reserve(self, holder: dict, wait_s: float = 0.0) -> dict:
        """This host's testbed lock for the controller's run; a second user is
        told who holds it."""
        if self.lock is None:
            lock = testbed_lock(wait_s=wait_s, lock_dir=self.state_dir, on_behalf=holder)
            try:
                self.holder = lock.__enter__()
            except TestbedBusy as exc:
                raise AgentError(f"reserved by {describe(exc.holder)}; one run per testbed at a time") from None
            self.lock = lock
        return {"holder": self.holder.line()}

    # ---- apply --------------------------------------------------------------
    def _changes(self) -> HostOps:
        if self.journal is None:
            self.journal = Journal.open(self.state_dir, {"controller": self.controller, "agent_pid": os.getpid()},
                                        replay_stale=True)
            spawn_reaper(os.getpid(), self.journal.path)
            self.ops = HostOps(self.journal)
        return self.ops

    def _verify(self, ports: dict[str, PortSpec]) -> None:
        mgmt = safety.management_interfaces()
        problems = [p for port in ports.values()
                    for p in safety.refusals(port, safety.interface_facts(port.name), mgmt)]
        if problems:
            raise AgentError("; ".join(p.error for p in problems), problems[0].field)

    def op_apply(self, role: str, ports: dict[str, PortSpec], sink_mtu: int | None = None, sut: str | None = None,
                 gen_mac: str = "", sink_mac: str = "", sut_cpus: list[int] | None = None,
                 steering: str = "threaded", bidirectional: bool = False, nic: dict | None = None,
                 custom: dict | None = None) -> dict:
        """Configure this host for its role in the testbed, after the safety
        checks; every change journalled first. ``sink_mtu``: the traffic
        host's; the rest the SUT host's (``nic``: its NIC knobs)."""
        if role not in ("traffic", "sut"):
            raise AgentError(f"role {role!r}; accepted: traffic, sut", "role")
        need = ("gen_out", "sink_in") if role == "traffic" else ("sut_in", "sut_out")
        missing = [r for r in need if r not in ports]
        if missing:
            raise AgentError(f"apply {role}: no port for {', '.join(missing)}", "ports")
        if role == "sut" and sut is None:
            raise AgentError("apply sut: no SUT personality", "sut")
        self._verify(ports)
        ops = self._changes()
        # the interfaces' facts before they are used (a SUT's NICs move to its namespace)
        facts = {r: _facts_json(safety.interface_facts(port.name)) for r, port in ports.items()}
        sut_side: dict = {}
        if role == "traffic":
            for r in need:
                ops.link_up(ports[r].name)
            if sink_mtu:  # the SUT's underlay reaches the sink (vxlan's outer headers)
                sink = ports[need[1]].name
                ops.device_state(sink)
                hostcmd.run(["ip", "link", "set", "dev", sink, "mtu", str(int(sink_mtu))])
            anchor, peer = anchor_names()
            ops.veth_pair(anchor, peer)
            self.anchors.append(anchor)
        else:
            cpus = list(sut_cpus or [])
            plans = self._nic_plans(ports, nic, cpus) if nic else {}  # refused: nothing changed
            set_nic = self._apply_nic(plans)  # in this namespace, before the NICs move to the SUT's
            threads = self._apply_sut(ports[need[0]], ports[need[1]], sut, gen_mac, sink_mac, cpus, steering,
                                      bidirectional, custom)
            # sut_netns: where its NICs are while the testbed lives
            sut_side = {"nic": set_nic, "napi_threads": threads, "sut_netns": _sut_ns(self.lab)}
        # applied: the journal's, then the personality's
        return {"facts": facts, **sut_side, "applied": [*ops.applied, *self.lab_changes.applied]}

    def _nic_plans(self, ports: dict[str, PortSpec], knobs: dict, sut_cpus: list[int]) -> dict:
        """role -> (capabilities, plan) of the SUT's interfaces; a knob one
        refuses raises, naming it, the interface and its driver."""
        plans = {}
        for role in ("sut_in", "sut_out"):
            name = ports[role].name
            caps = nic.capabilities(name, hostcmd.run, safety.interface_facts(name).driver, nic.device_irqs(name))
            try:
                plans[role] = (caps, nic.plan(knobs, caps, role, sut_cpus, "testbed.nic"))
            except InputError as exc:
                raise AgentError(exc.message, exc.field) from None
        return plans

    def _apply_nic(self, plans: dict) -> dict:
        """Each interface's settings, journalled, then read back: what the
        driver did not take as asked is an error."""
        out = {}
        for role, (caps, p) in plans.items():
            old = nic.changed(p, caps)
            for flag, params in p.ethtool.items():
                self.ops.ethtool_set(p.ifname, flag, params, old[flag])
            for irq in caps.irqs if p.irq_cpus is not None else []:
                self.ops.write_file(nic.irq_affinity_path(irq), ",".join(map(str, p.irq_cpus)))
            after = nic.capabilities(p.ifname, hostcmd.run, caps.driver, caps.irqs)
            if bad := nic.readback(after, p):
                raise AgentError("; ".join(bad), "testbed.nic")
            out[role] = {"ifname": p.ifname, "driver": caps.driver, "set": p.ethtool, "irq_cpus": p.irq_cpus,
                         "irqs": caps.irqs if p.irq_cpus is not None else [], "read_back": after.current}
        return out

    def _apply_sut(self, i: PortSpec, o: PortSpec, sut: str, gen_mac: str, sink_mac: str, sut_cpus: list[int],
                   steering: str, bidirectional: bool, custom: dict | None) -> dict:
        """The SUT's personality in a namespace of softnet's own holding the
        two NICs (softnet.testbed.sut_lab), the same code as the local
        testbed's SUT; the namespace and the NICs' own state journalled first."""
        try:
            personality = parse_sut(sut, "testbed.sut", custom)
            lab = SutLab(self.lab_changes, personality, {"sut_in": i.name, "sut_out": o.name},
                         {"gen": gen_mac, "sink": sink_mac, "sut_in": i.mac, "sut_out": o.mac},
                         SutPlacement(list(sut_cpus), steering), bidirectional)
        except InputError as exc:
            raise AgentError(exc.message, exc.field) from None
        ns = _sut_ns(lab)
        for name in (i.name, o.name):
            self.ops.device_state(name)
        self.ops.lab_netns(ns, [i.name, o.name])
        self.lab = lab
        self.lab_changes.record(f"netlink sockets in {ns}", lambda: lab._close_netlink(ns))
        lab.build()
        return lab.napi_threads

    def _ns_of(self, ifname: str) -> str | None:
        """The namespace an interface is in now: the SUT's for its NICs, else this host's own."""
        return _sut_ns(self.lab) if self.lab is not None and ifname in self.lab.ifs.values() else None

    # ---- tools ----------------------------------------------------------------
    def _add_tool(self, obj, proc, what: str) -> str:
        self.ops.started(proc, what)
        self.next_handle += 1
        handle = f"{what.split()[0]}-{self.next_handle}"
        self.tools[handle] = obj
        return handle

    def _tool(self, handle: str, kind: type | tuple = object):
        obj = self.tools.get(handle)
        if obj is None or not isinstance(obj, kind):
            raise AgentError(f"no running tool {handle!r}", "handle")
        return obj

    def op_start(self, tool: str, **args) -> dict:
        """Start one of this host's tools; its arguments are its model's
        (softnet.hosts.agent_protocol)."""
        kind = START.get(tool)
        if kind is None:
            raise AgentError(f"tool {tool!r}; accepted: {', '.join(START)}", "tool")
        model, start = kind
        return start(self, model.model_validate(args))

    def _start_sink(self, a: SinkStart) -> dict:
        self._changes()
        sink = Sink(self.closers, None, a.ifname, a.count, a.warmup, a.exact, a.bin_pkts, streams=a.streams,
                    flows=a.flows, mix=a.mix, dst_ports=a.dst_ports)
        return {"handle": self._add_tool(sink, sink.proc, f"sink on {a.ifname}"), "prog_id": sink.prog_id}

    def _start_gen(self, a: GenStart) -> dict:
        ops = self._changes()
        cpus = list(a.cpus or ([a.cpu] if a.cpu is not None else []))
        if not cpus:
            raise AgentError("start gen: no CPU for the generator (cpus or cpu)", "cpus")
        while len(self.anchors) < len(cpus):  # one idle anchor per generator, journalled
            name, peer = anchor_names()
            ops.veth_pair(name, peer)
            self.anchors.append(name)
        anchors, self.anchors = self.anchors[:len(cpus)], self.anchors[len(cpus):]
        ep = Endpoints(None, a.ifname, anchors[0], a.src_mac, a.dst_mac, a.src_ip, a.dst_ip,
                       None, None)  # no namespaces: the host's own
        started = time.time()
        try:
            group = GeneratorGroup.start(self.closers, ep, a.rate_pps, a.count, a.warmup, a.frame_bytes, a.flows,
                                         cpus, src_ips=a.src_ips, src_ip=a.src_ip_first, anchors=anchors,
                                         shape=a.shape or Shape())
        except BaseException:
            self.anchors += anchors
            raise
        for job in group.jobs[1:]:
            ops.started(job.proc, f"generator stream on {a.ifname}")
        if group.t0_ns:  # several generators start sending together at t0, a little later
            started = time.time() + max((group.t0_ns - time.monotonic_ns()) / 1e9, 0.0)
        handle = self._add_tool(group, group.proc, f"generator on {a.ifname}")
        self.anchors_of[handle] = anchors
        return {"handle": handle, "started_unix_s": started}

    def _start_injector(self, a: InjectorStart) -> dict:
        self._changes()
        inj = StallInjector(self.closers, a.cpu, a.busy_ms, a.every_ms)
        return {"handle": self._add_tool(inj, inj.proc, f"stall injector on CPU {a.cpu}")}

    def _start_stalls(self, a: StallsStart) -> dict:
        self._changes()
        probe = StallProbe(self.closers, a.cpus, period_us=a.period_us, avoid_cpus=a.avoid_cpus)
        return {"handle": self._add_tool(probe, probe.proc, "stall probe")}

    def _start_profiler(self, a: ProfilerStart) -> dict:
        self._changes()
        prof = Profiler(self.closers, a.per_packet, a.duty, a.base_duty, avoid_cpus=a.avoid_cpus)
        handle = self._add_tool(prof, prof.proc, "profiler")
        return {"handle": handle, "start": prof.read(), "plan": prof.plan, "events": prof.events,
                "drop_reasons": prof.drop_reasons, "duty": prof.duty, "base_duty": prof.base_duty,
                "period_ms": prof.period_ms}

    def _start_stacks(self, a: StacksStart) -> dict:
        self._changes()
        s = StackSampler(self.closers, a.cpus, a.freq_hz)
        return {"handle": self._add_tool(s, s.proc, "stack sampler"), "cpus": s.cpus, "freq_hz": s.freq_hz,
                "period_ns": s.period_ns}

    def _start_victim(self, a: VictimStart) -> dict:
        self._changes()
        v = Victim(self.closers, a.cpu, a.seconds, a.kind)
        return {"handle": self._add_tool(v, v.proc, f"victim on CPU {a.cpu}")}

    def _start_sampler(self, a: SamplerStart) -> dict:
        self._changes()
        links = [LinkRef(role, self._ns_of(ifname), ifname) for role, ifname in a.links]
        sampler = KernelSampler(a.interval_s, avoid_cpus=a.avoid_cpus, links=links).__enter__()
        if a.profiler:  # the profiler's times at every sample too, as a local trial has them
            sampler.add_source("ebpf", self._tool(a.profiler, Profiler).series_values)
        self.closers.record("kernel sampler", lambda: sampler.__exit__(None, None, None))
        self.next_handle += 1
        handle = f"sampler-{self.next_handle}"
        self.tools[handle] = sampler
        return {"handle": handle}

    def op_poll(self, handle: str) -> dict:
        return {"running": self._tool(handle, GeneratorGroup).running()}

    def op_interrupt(self, handle: str) -> dict:
        self._tool(handle, GeneratorGroup).interrupt()
        return {}

    def op_wait(self, handle: str, wait_s: float = 5.0) -> dict:
        report = self._tool(handle, GeneratorGroup).wait(timeout=wait_s)
        return {"report": report}

    def op_drain(self, handle: str) -> dict:
        counts, drain_s = self._tool(handle, Sink).drain()
        return {"counts": counts, "drain_s": drain_s}

    def op_timeline(self, handle: str, sent: int) -> dict:
        return {"timeline": self._tool(handle, Sink).timeline(sent)}

    def op_read(self, handle: str, last: int | None = None, symbols: bool = False) -> dict:
        """A tool's read; a sampler's series so far (``last``: its last
        samples only); the stack sampler's stacks, named here (``symbols``)."""
        obj = self._tool(handle)
        if isinstance(obj, KernelSampler):
            return {"series": (obj.tail(last) if last else obj.series).to_json()}
        if symbols:
            return {"read": self._tool(handle, StackSampler).symbols()}
        return {"read": obj.read()}

    def op_stop(self, handle: str) -> dict:
        obj = self._tool(handle)
        out = {}
        if isinstance(obj, KernelSampler):
            obj.__exit__(None, None, None)
            out = {"series": obj.series.to_json()}
        elif isinstance(obj, GeneratorGroup):
            obj.stop()
            self.anchors += self.anchors_of.pop(handle, [])  # idle again: the next generator's
        else:
            obj.close() if hasattr(obj, "close") else None
        del self.tools[handle]
        return out

    def op_reads(self, ifnames: list[str], ethtool: list[str] = (), qdiscs: list[str] = (),
                 procfs_snapshot: bool = False, napi: list[str] = (), counters: bool = False) -> dict:
        """Counters of this host's interfaces (and /proc), as the local trial
        reads them, each in the namespace it is in now; ifindex and
        netns_inode: how the profiler's kernel records name them; ``napi``:
        interfaces whose NAPI kthreads' run time is read (the SUT's CPU
        time); ``counters``: the SUT personality's path counters."""
        def ifindex(name: str) -> int:
            ns = self._ns_of(name)
            if ns is None:
                return socket.if_nametoindex(name)
            with IPRoute(netns=ns) as ipr:
                return ipr.link_lookup(ifname=name)[0]

        ns = self._ns_of(ifnames[0]) if ifnames else None
        out = {"links": {i: link_counters.link_stats(self._ns_of(i), i) for i in ifnames},
               "ethtool": {i: link_counters.ethtool_stats(self._ns_of(i), i, check=False) for i in ethtool},
               "qdisc_drops": sum(link_counters.qdisc_drops(self._ns_of(i), i) for i in qdiscs),
               "time_unix_s": time.time(),
               "netns_inode": os.stat(f"/run/netns/{ns}" if ns else "/proc/self/ns/net").st_ino,
               "ifindex": {i: ifindex(i) for i in ifnames}}
        if procfs_snapshot:
            out |= {"procfs": procfs.snapshot()}
        if counters:
            out |= {"path_counters": self.lab.counters() if self.lab is not None else {}}
        if napi:
            runtime, runs = procfs.thread_times([pid for i in napi for pid in napi_thread_pids(i)])
            out |= {"napi_runtime_ns": runtime, "napi_runs": runs}
        return out

    def op_drift(self) -> dict:
        """The host's resources now, the SUT namespace's own where per namespace (the soak's drift watch)."""
        return drift.read_levels(_sut_ns(self.lab) if self.lab is not None else None)

    def op_window(self, at_unix_s: list[float], sampler: str | None = None, profiler: str | None = None,
                  napi: list[str] = (), stacks: str | None = None) -> dict:
        """Take the window-edge reads at these times of this host's clock, on
        the host, and keep them until `collect`: nothing crosses the link
        meanwhile. ``napi``: interfaces whose NAPI kthreads' run time each edge reads."""
        self.edges.arm(at_unix_s, self._tool(sampler, KernelSampler) if sampler else None,
                       self._tool(profiler, Profiler) if profiler else None,
                       [pid for i in napi for pid in napi_thread_pids(i)],
                       self._tool(stacks, StackSampler) if stacks else None)
        return {}

    def op_collect(self) -> dict:
        """The window's reads; an edge not yet due is taken now (the
        generators ended early), as on a local testbed."""
        return {"window": self.edges.collect()}

    def op_clean(self, check: bool = True) -> dict:
        """Journals of dead agents on this host (`softnet clean --check`),
        replayed unless ``check``."""
        found = []
        for path in stale_journals(self.state_dir.parent):
            if path.parent != self.state_dir:  # another host's (emulated hosts share a filesystem)
                continue
            header, pending = read_journal(path)
            if _of_a_gone_netns(header, pending):
                replay_here(path, netns_gone=True)  # every entry moot: skipped, nothing changes
                continue
            found.append((path, [e.what for e in reversed(pending)]))
        errors = [] if check else [err for path, _ in found for err in replay(path)]
        return {"journals": [{"journal": str(path), "pending": what} for path, what in found], "errors": errors}

    # ---- undo -------------------------------------------------------------------
    def undo(self) -> list[str]:
        errors: list[str] = []
        self.tools.clear()
        self.closers.undo_all()  # tools first, gracefully (the journal then finds them gone)
        errors += self.closers.undo_errors
        self.closers.undo_errors = []
        self.lab_changes.undo_all()  # the personality's teardown (a custom SUT's commands) while its namespace is
        errors += self.lab_changes.undo_errors
        self.lab_changes.undo_errors, self.lab = [], None
        if self.journal is not None:
            errors += self.journal.undo_all()
            self.journal, self.ops, self.anchors, self.anchors_of = None, None, [], {}
        if self.lock is not None:
            self.lock.__exit__(None, None, None)
            self.lock = None
        return errors

    def op_undo(self) -> dict:
        applied = list(self.ops.applied) if self.ops else []
        return {"undone": applied, "errors": self.undo()}

    def op_bye(self) -> dict:
        return self.op_undo()


def _why(exc: ValidationError) -> str:
    """A refused request's arguments, one "name: why" each (not their values)."""
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False))


def _sut_ns(lab: SutLab) -> str:
    """The SUT's namespace, where its NICs are while the testbed lives."""
    return lab.ns["sut"]


def _facts_json(facts: safety.NicFacts | None) -> dict | None:
    return None if facts is None else facts.model_dump()


Handler = Callable[..., "dict | None"]


def op(fn: Callable) -> Handler:
    """An op's handler, fn(agent, **args): the request's arguments are parsed
    into fn's annotated parameters (pydantic), a mismatch refused by name."""
    return validate_call(fn)


# op name -> handler(agent, **args). Another module adds its own ops here.
OPS: dict[str, Handler] = {
    "hello": op(Agent.op_hello), "time": op(Agent.op_time), "lease": op(Agent.op_lease),
    "check": op(Agent.op_check), "reserve": op(Agent.op_reserve), "apply": op(Agent.op_apply),
    "start": op(Agent.op_start), "poll": op(Agent.op_poll), "interrupt": op(Agent.op_interrupt),
    "wait": op(Agent.op_wait), "drain": op(Agent.op_drain), "timeline": op(Agent.op_timeline),
    "read": op(Agent.op_read), "stop": op(Agent.op_stop), "reads": op(Agent.op_reads),
    "drift": op(Agent.op_drift),
    "window": op(Agent.op_window), "collect": op(Agent.op_collect), "clean": op(Agent.op_clean),
    "undo": op(Agent.op_undo), "bye": op(Agent.op_bye),
    **{name: op(fn) for name, fn in XSK_OPS.items()},  # the AF_XDP latency lab's
}

# `start`'s tools: name -> (its arguments' model, starter(agent, args))
START: dict[str, tuple[type[ToolStart], Callable[[Agent, Any], dict]]] = {
    "sink": (SinkStart, Agent._start_sink), "gen": (GenStart, Agent._start_gen),
    "stalls": (StallsStart, Agent._start_stalls), "injector": (InjectorStart, Agent._start_injector),
    "profiler": (ProfilerStart, Agent._start_profiler), "sampler": (SamplerStart, Agent._start_sampler),
    "victim": (VictimStart, Agent._start_victim), "stacks": (StacksStart, Agent._start_stacks),
}


def _hangup(signum, frame):
    raise Terminated()  # the session's terminal went away: undo as for SIGTERM


def _of_a_gone_netns(header: Header, pending: list[UndoEntry]) -> bool:
    """A dead agent's journal written in a namespace that is gone, whose inode
    (the state dir's key) ours now reuses, and nothing of it left anywhere:
    its namespace's changes went with it, its processes are dead. Emulated
    hosts only (a real host's root namespace never goes); it is no leftover
    of this host and must not block it (seen in bench/restore_bench.py: a
    test's deleted namespace blocked every later trial on a host reusing it)."""
    cookie = header.netns_cookie
    if cookie is None or header.netns_ino != netns_ino() or cookie == netns_cookie():
        return False
    return all(e.netns_bound() or (isinstance(e, (Kill, Affinity)) and not running(e.pid, e.pid_start))
               for e in pending)


def host_facts() -> dict:
    """Provenance of this host: kernel, CPU, softnet."""
    p = provenance(None)
    return {k: p[k] for k in ("softnet_version", "kernel", "hostname", "cpu_model", "cpus_online")} | {
        "cpu_model": cpu_model(), "netns_inode": os.stat("/proc/self/ns/net").st_ino,
        "cpus_usable": sorted(os.sched_getaffinity(0)), "cpu_freq_hz": cpu_freq_hz(), "sysctls": host_sysctls()}


def main(state_dir: str | None = None, lease_s: float = 10.0) -> int:
    """The `softnet agent --stdio` entry point: stdout carries the protocol
    only, logs go to stderr (the controller keeps them)."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="agent: %(message)s")
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # nothing a library prints may corrupt the protocol stream
    agent = Agent(Path(state_dir) if state_dir else default_state_dir(), lease_s, out)
    agent.state_dir.mkdir(parents=True, exist_ok=True)
    return agent.serve(0)
