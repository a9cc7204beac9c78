"""The AF_XDP latency lab on an inventory's hosts: A on the testbed's traffic
host (its gen_out NIC), B on the SUT host (sut_in towards A, sut_out towards
C), C on the sink host (sink_in: the traffic host unless the testbed names a
`sink` host). One, two or three hosts: each agent plays the lab hosts whose
NICs it has (softnet.hosts.agent_xsk), with the local lab's code.

Round trips are taken on A alone, so they need no synchronised clocks. Hop
stamps are taken only when one host plays all three (one clock): across
hosts a hop's delay would subtract two hosts' clocks.
"""
from __future__ import annotations

import base64
from dataclasses import asdict
from pathlib import Path

import numpy as np

from softnet.errors import HostNotRestored
from softnet.hosts.inventory import Inventory
from softnet.hosts.session import AgentSession, open_sessions, reserve
from softnet.results.latency import (SIDE_STAMP_DTYPE, LatencyPlacementFacts, Observed, PingSummary,
                                     RawKernelBaseline, RawLatencyTestbed, RemoteLab, XskCounters, XskHello,
                                     read_records)
from softnet.testbed.latency import Host, LatencyKnobs, LatencyPlacement
from softnet.traffic.xsk import XskKnobs

# lab interface role -> the inventory role of the NIC that plays it
LAB_ROLES = {"a": "gen_out", "b_a": "sut_in", "b_c": "sut_out", "c": "sink_in"}
LAB_HOST_OF = {"a": "a", "b_a": "b", "b_c": "b", "c": "c"}
PING_MARGIN_S = 60.0


class XskLabRemote:
    """``build()`` configures the hosts; ``close()`` restores them (and their
    agents do alone if this process dies)."""

    def __init__(self, inv: Inventory, testbed: str, knobs: LatencyKnobs, placement: LatencyPlacement,
                 wait_s: float = 0.0):
        knobs.validate()
        self.inv, self.name, self.knobs, self.placement, self.wait_s = inv, testbed, knobs, placement, wait_s
        self.ports = inv.ports(testbed)
        tb = inv.testbeds[testbed]
        # lab host -> inventory host
        self.host_of = {"a": tb.traffic, "b": tb.sut, "c": tb.host_of("sink_in")}
        self.one_clock = len(set(self.host_of.values())) == 1
        self.sessions: dict[str, AgentSession] = {}  # inventory host -> its agent
        self.hosts: dict[str, Host] = {}
        self.hellos: dict[str, dict] = {}
        self.applied: list[str] = []

    def _of(self, lab_host: str) -> AgentSession:
        return self.sessions[self.host_of[lab_host]]

    def build(self) -> dict[str, Host]:
        self.sessions = open_sessions({n: self.inv.hosts[n] for n in dict.fromkeys(self.host_of.values())})
        try:
            reserve(list(self.sessions.values()), f"softnet latency lab {self.name}", self.wait_s)
            macs = {r: self.ports[inv_role].iface.mac for r, inv_role in LAB_ROLES.items()}
            for name, s in self.sessions.items():
                mine = [h for h, n in self.host_of.items() if n == name]
                ports = {r: {"field": self.ports[inv_role].field, **self.ports[inv_role].iface.model_dump()}
                         for r, inv_role in LAB_ROLES.items() if LAB_HOST_OF[r] in mine}
                built = s.call("xsk_build", ports=ports, macs=macs, knobs=asdict(self.knobs),
                               app_cpus={h: c for h, c in self.placement.app_cpus.items() if h in mine},
                               napi_cpus={h: c for h, c in self.placement.napi_cpus.items() if h in mine},
                               timeout=120)
                self.hosts.update({h: Host(**v) for h, v in built["hosts"].items()})
                self.applied += [f"host {name}: {what}" for what in built["applied"]]
        except BaseException:
            self.close()
            raise
        return self.hosts

    def close(self) -> None:
        errors = []
        for name, s in self.sessions.items():
            errors += [f"host {name}: {e}" for e in s.close().errors]
        self.sessions = {}
        if errors:  # an agent could not undo a change: never silent
            raise HostNotRestored(errors)

    # ---- a run's pieces (softnet.hosts.xsk_lab.XskLab) ------------------------------
    def start(self, reflect: XskKnobs, forward: XskKnobs) -> dict[str, XskHello]:
        for lab_host, role in (("c", "reflect"), ("b", "forward")):
            if role not in self.hellos:  # B and C on one host: one call starts both
                hellos = self._of(lab_host).call("xsk_start", reflect=asdict(reflect), forward=asdict(forward),
                                                 timeout=60)["hellos"]
                self.hellos.update({r: XskHello.model_validate(h) for r, h in hellos.items()})
        return dict(self.hellos)

    def ping(self, knobs: XskKnobs, count: int, interval_ns: int, arrivals: str, frame_bytes: int,
             records_path: Path) -> tuple[PingSummary, XskHello, np.ndarray]:
        timeout = PING_MARGIN_S + count * interval_ns / 1e9 * (2 if arrivals == "poisson" else 1.2)
        out = self._of("a").call("xsk_ping", knobs=asdict(knobs), count=count, interval_ns=interval_ns,
                                 arrivals=arrivals, frame_bytes=frame_bytes, timeout=timeout)
        Path(records_path).write_bytes(base64.b64decode(out["records_b64"]))
        summary = PingSummary.model_validate(out["summary"])
        summary.records = str(records_path)  # where they are kept, not where the agent wrote them
        return summary, XskHello.model_validate(out["hello"]), read_records(records_path)

    def read(self, role: str) -> XskCounters:
        host = "b" if role == "forward" else "c"
        return XskCounters.model_validate(self._of(host).call("xsk_read", role=role)["read"])

    def stamps(self, role: str, path: Path) -> np.ndarray:
        host = "b" if role == "forward" else "c"
        data = base64.b64decode(self._of(host).call("xsk_stamps", role=role, timeout=60)["stamps_b64"])
        return np.frombuffer(data, dtype=SIDE_STAMP_DTYPE).copy()

    def netstat(self, host: str) -> dict[str, int]:
        return self._of(host).call("xsk_netstat", host=host)["netstat"]

    def observe(self) -> Observed:
        """Each host's part: B's forwarder and NAPIs, C's reflector, every host's NAPI threads."""
        parts = [Observed.model_validate(s.call("xsk_observe")["observed"]) for s in self.sessions.values()]
        return Observed(forward_cpu=next((p.forward_cpu for p in parts if p.forward_cpu is not None), None),
                        reflect_cpu=next((p.reflect_cpu for p in parts if p.reflect_cpu is not None), None),
                        napi_thread_cpus={d: c for p in parts for d, c in p.napi_thread_cpus.items()},
                        napi_b={r: v for p in parts for r, v in p.napi_b.items()})

    def kernel_ping(self, count: int, interval_s: float, frame_bytes: int) -> RawKernelBaseline:
        out = self._of("a").call("xsk_kernel_ping", count=count, interval_s=interval_s, frame_bytes=frame_bytes,
                                 timeout=PING_MARGIN_S + 2 * count * interval_s)
        return RawKernelBaseline.model_validate(out["baseline"])

    def describe(self) -> RawLatencyTestbed:
        """The hosts' testbeds as one: each namespace, interface, knob applied
        and placement with the lab host it belongs to, and which inventory
        host played each lab host."""
        parts = {name: RawLatencyTestbed.model_validate(s.call("xsk_describe")["testbed"])
                 for name, s in self.sessions.items()}
        merged = list(parts.values())
        return RawLatencyTestbed(
            run_id=parts[self.host_of["b"]].run_id,  # the forwarder's: the system under study
            namespaces={h: ns for p in merged for h, ns in p.namespaces.items()},
            interfaces={r: i for p in merged for r, i in p.interfaces.items()},
            knobs=merged[0].knobs, applied={k: v for p in merged for k, v in p.applied.items()},
            placement=LatencyPlacementFacts(
                app_cpus={h: c for p in merged if p.placement for h, c in p.placement.app_cpus.items()},
                napi_cpus={h: c for p in merged if p.placement for h, c in p.placement.napi_cpus.items()}),
            napi_threads={d: t for p in merged for d, t in p.napi_threads.items()},
            remote=RemoteLab(inventory=self.inv.source, testbed=self.name, hosts=dict(self.host_of),
                             run_ids={name: p.run_id for name, p in parts.items()}))

    def changes_applied(self) -> list[str]:
        return list(self.applied)
