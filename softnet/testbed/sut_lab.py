"""The SUT's side of a testbed whose generators and sinks run on another
host: a namespace of softnet's own on the SUT host holding its two NICs,
configured by the same personality code as the local testbed's SUT.

The namespace keeps a personality's state (nft tables, bridges, routes,
XDP programs, a custom SUT's processes) off the host's own namespace: when
the testbed ends, or a journal replays after a kill -9, the NICs are moved
back and the namespace, with all that is in it, is removed. The remote agent
(softnet.hosts.agent) journals the namespace and the NICs' device state
before it builds one of these.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from softnet.testbed.local import ADDR, DST_RANGE, SideSettings  # noqa: F401 (DST_RANGE: personalities route it)
from softnet.testbed.netns import NetnsLab
from softnet.testbed.personalities import Personality
from softnet.tools import link_counters
from softnet.tools.changes import NAME_PREFIX, HostChanges


@dataclass
class SutPlacement:
    sut_cpus: list[int] = field(default_factory=lambda: [1])
    steering: str = "threaded"


class SutLab(NetnsLab):
    """``ifs``: sut_in and sut_out's interface names; ``macs``: the MAC of
    each role (gen, sut_in, sut_out, sink) as the inventory gives them. The
    namespace is ns["sut"] (named after run_id, as `softnet clean` expects):
    the agent makes it and moves the NICs into it before build()."""

    def __init__(self, changes: HostChanges, personality: Personality, ifs: dict[str, str],
                 macs: dict[str, str], placement: SutPlacement, bidirectional: bool = False):
        super().__init__(changes)
        personality.require_remote("testbed.sut")
        self.personality, self.sut, self.ip_version = personality, personality.spec, personality.ip_version
        # gen and sink are the traffic host's: nothing of them is on this host
        self.ns = {"sut": f"{NAME_PREFIX}{self.run_id}-sut", "gen": None, "sink": None}
        self.ifs = {"sut_in": ifs["sut_in"], "sut_out": ifs["sut_out"]}
        self.addr = {role: (v4, v6, macs[role]) for role, (v4, v6, _) in ADDR.items()}
        self.placement, self.bidirectional = placement, bidirectional
        self.sides = {"sut_in": SideSettings(), "sut_out": SideSettings()}

    def build(self) -> None:
        """Addresses on the NICs, receive work steered to the SUT's CPUs, the
        personality configured (the namespace and the NICs are the agent's)."""
        self._claim()
        ns = self.ns["sut"]
        for role in ("sut_in", "sut_out"):  # the MAC set is the NIC's own (the inventory's)
            self._configure_if(ns, self.ifs[role], role, up=True)
        self._steer("sut", "sut_in", self.placement.sut_cpus)
        self.personality.configure(self)
        if self.bidirectional:  # the reverse way's receive work on the SUT's CPUs too
            self._steer("sut", "sut_out", self.placement.sut_cpus)

    def _neigh(self, ns_role: str, if_role: str, ip: str, mac: str) -> None:
        if self.ns.get(ns_role) is None:
            return  # the traffic host's: its generators and sinks name MACs themselves
        super()._neigh(ns_role, if_role, ip, mac)

    def add_route(self, ns_role: str, dst: str, via: str, if_role: str) -> None:
        if self.ns.get(ns_role) is not None:
            super().add_route(ns_role, dst, via, if_role)

    def link_stats(self) -> dict[str, dict[str, int]]:
        ns = self.ns["sut"]
        with self._ipr(ns) as ipr:
            return {role: link_counters.link_stats(ns, self.ifs[role], ipr) for role in ("sut_in", "sut_out")}

    def counters(self) -> dict[str, int]:
        """The personality's path counters (what proves the packets took its path)."""
        return self.personality.counters(self)
