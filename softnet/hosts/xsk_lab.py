"""The AF_XDP latency lab's pieces (A pings, B forwards, C reflects), as one
run of the study needs them, whichever hosts play A, B and C.

`XskLabHere` plays the hosts it is given on this machine: all three on veth
pairs of its own (the local lab), or, inside an inventory host's agent, the
ones whose NICs that host has (softnet.hosts.agent_xsk).
`softnet.hosts.xsk_remote.XskLabRemote` gives the same pieces over the
agents of an inventory's hosts, so the campaign's run procedure
(softnet.campaign.latency) is written once.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Protocol

import numpy as np

from softnet.collect import procfs
from softnet.errors import TestbedError
from softnet.results.latency import (SIDE_STAMP_DTYPE, Observed, PingSummary, RawKernelBaseline, RawLatencyTestbed,
                                     XskCounters, XskHello)
from softnet.testbed.latency import Host, LatencyKnobs, LatencyPlacement, LatencyTestbed
from softnet.tools.changes import HostChanges
from softnet.traffic.ping import kernel_ping
from softnet.traffic.xsk import Forward, Ping, Reflect, XskKnobs

BASELINE_MIN_INTERVAL_S = 0.01


class XskLab(Protocol):
    """What one run reads and starts, by lab host (a, b, c)."""

    hosts: dict[str, Host]  # every host of the lab: what its tools need to know of the others
    hellos: dict[str, XskHello]  # forward, reflect -> the tool's hello, once started
    one_clock: bool  # every host of the lab on one machine (one CLOCK_MONOTONIC for hop stamps)

    def start(self, reflect: XskKnobs, forward: XskKnobs) -> dict[str, XskHello]: ...

    def ping(self, knobs: XskKnobs, count: int, interval_ns: int, arrivals: str, frame_bytes: int,
             records_path: Path) -> tuple[PingSummary, XskHello, np.ndarray]: ...  # summary, hello, records

    def read(self, role: str) -> XskCounters: ...  # forward | reflect

    def stamps(self, role: str, path: Path) -> np.ndarray: ...  # forward | reflect: SIDE_STAMP_DTYPE, then none kept

    def netstat(self, host: str) -> dict[str, int]: ...  # /proc/net/netstat of a host's namespace

    def observe(self) -> Observed: ...

    def kernel_ping(self, count: int, interval_s: float, frame_bytes: int) -> RawKernelBaseline: ...

    def describe(self) -> RawLatencyTestbed: ...

    def changes_applied(self) -> list[str]: ...


class XskLabHere:
    """The lab hosts this machine plays (``nics``: see LatencyTestbed)."""

    def __init__(self, changes: HostChanges, knobs: LatencyKnobs, placement: LatencyPlacement,
                 nics: dict[str, tuple[str | None, str]] | None = None,
                 host_write: Callable[[str, str], None] | None = None, cpus: list[int] | None = None):
        self.changes = changes
        self.tb = LatencyTestbed(changes, knobs, placement, nics, host_write, cpus)
        self.hosts: dict[str, Host] = {}
        self.reflect: Reflect | None = None
        self.forward: Forward | None = None
        self.hellos: dict[str, XskHello] = {}
        self.one_clock = True

    def build(self) -> dict[str, Host]:
        self.hosts = self.tb.build()
        return self.hosts

    def start(self, reflect: XskKnobs, forward: XskKnobs) -> dict[str, XskHello]:
        out = {}
        if c := self.hosts.get("c"):
            self.reflect = Reflect(self.changes, c.ns, c.ifname, reflect)
            out["reflect"] = XskHello.model_validate(self.reflect.hello)
        if b := self.hosts.get("b"):
            self.forward = Forward(self.changes, b.ns, b.ifname, b.ifname2, a_mac=b.peer_mac, c_mac=b.peer_mac2,
                                   knobs=forward)
            out["forward"] = XskHello.model_validate(self.forward.hello)
        self.hellos.update(out)
        return out

    def _tool(self, role: str) -> Forward | Reflect:
        tool = self.forward if role == "forward" else self.reflect if role == "reflect" else None
        if tool is None:
            raise TestbedError(f"no {role} tool runs on this machine")
        return tool

    def read(self, role: str) -> XskCounters:
        return XskCounters.model_validate(self._tool(role).read())

    def stamps(self, role: str, path: Path) -> np.ndarray:
        self._tool(role).stamps(path)
        try:
            return np.fromfile(path, dtype=SIDE_STAMP_DTYPE)
        finally:
            Path(path).unlink(missing_ok=True)

    def ping(self, knobs: XskKnobs, count: int, interval_ns: int, arrivals: str, frame_bytes: int,
             records_path: Path) -> tuple[PingSummary, XskHello, np.ndarray]:
        a = self._host("a")
        ping = Ping(self.changes, a.ns, a.ifname, a.mac, a.peer_mac, a.ip, a.peer_ip, frame_bytes, knobs)
        summary, records = ping.run(count, records_path, interval_ns=interval_ns, arrivals=arrivals)
        return PingSummary.model_validate(summary), XskHello.model_validate(ping.hello), records

    def netstat(self, host: str) -> dict[str, int]:
        self._host(host)
        return self.tb.netstat(host)

    def observe(self) -> Observed:
        """Where things ran, as the kernel last saw them: evidence over configuration;
        B's NAPIs as the kernel has them (ids, irq-suspend-timeout, links)."""
        return Observed(
            forward_cpu=None if self.forward is None else procfs.thread_cpu(self.forward.proc.pid),
            reflect_cpu=None if self.reflect is None else procfs.thread_cpu(self.reflect.proc.pid),
            napi_thread_cpus={dev: {str(p): procfs.thread_cpu(p) for p in pids}
                              for dev, pids in self.tb.napi_threads.items()},
            napi_b=self.tb.napi_view("b") if "b" in self.hosts else {})

    def kernel_ping(self, count: int, interval_s: float, frame_bytes: int) -> RawKernelBaseline:
        """``ping`` from A to C over the same path: the kernel's baseline."""
        a = self._host("a")
        b = kernel_ping(a.ns, a.peer_ip, count, max(interval_s, BASELINE_MIN_INTERVAL_S), frame_bytes)
        return RawKernelBaseline(sent=b["sent"], received=b["received"], rtt_ns=b["rtt_ns"].tolist())

    def describe(self) -> RawLatencyTestbed:
        return RawLatencyTestbed.model_validate(self.tb.describe())

    def changes_applied(self) -> list[str]:
        return list(self.changes.applied)

    def _host(self, host: str) -> Host:
        if host not in self.hosts:
            raise TestbedError(f"lab host {host} is not on this machine (here: {', '.join(self.hosts)})")
        return self.hosts[host]
