"""Kernel IP forwarding (IPv4, IPv6) and "none" (generator paired with the sink)."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from softnet.testbed.personalities.base import Personality
from softnet.tools import hostcmd

if TYPE_CHECKING:
    from softnet.testbed.local import LocalTestbed


class L3Forwarding(Personality):
    """The routed SUT every L3 personality starts from: forwarding on, static
    neighbours (the sink drops ARP/ND in XDP, so dynamic resolution would stop
    forwarding), and the destination range several dst_ips come from routed
    towards the sink."""

    def configure(self, tb: "LocalTestbed") -> None:
        from softnet.testbed.local import DST_RANGE

        addr = tb.addr  # this testbed's addresses and MACs (an inventory's hosts have their own MACs)
        ns, v = tb.ns["sut"], 0 if self.ip_version == 4 else 1
        key = "net.ipv4.ip_forward" if self.ip_version == 4 else "net.ipv6.conf.all.forwarding"
        tb.set_sysctl(ns, key, "1")
        tb._neigh("sut", "sut_out", addr["sink"][v], addr["sink"][2])
        tb._neigh("sut", "sut_in", addr["gen"][v], addr["gen"][2])
        tb._neigh("sink", "sink", addr["sut_out"][v], addr["sut_out"][2])
        tb.add_route("sut", str(DST_RANGE[self.ip_version]), addr["sink"][v], "sut_out")

    def counters(self, tb: "LocalTestbed") -> dict[str, int]:
        return forwarded(self.ip_version, tb.ns["sut"])

    def check_reset(self) -> None:
        pass

    def reset(self, tb: "LocalTestbed") -> str:
        """Kernel forwarding has no process to restart: forwarding is switched
        off and on again (the sysctl the personality set)."""
        key = "net.ipv4.ip_forward" if self.ip_version == 4 else "net.ipv6.conf.all.forwarding"
        path = "/proc/sys/" + key.replace(".", "/")
        hostcmd.in_netns(tb.ns["sut"], ["sh", "-c", f"echo 0 > {path} && echo 1 > {path}"])
        return f"{key} 0, then 1"


def forwarded(ip_version: int, ns: str | None) -> dict[str, int]:
    """What the kernel's IP stack routed onwards (every packet, when the path
    is the stack's), in namespace ns (None: this process's own, a real host's)."""
    from softnet.testbed.personalities.nsread import forw_datagrams, forw_datagrams6

    if ip_version == 6:
        return {"ip6_out_forw_datagrams": forw_datagrams6(ns)}
    return {"ip_forw_datagrams": forw_datagrams(ns)}


class Ipv4Fwd(L3Forwarding):
    name = "ipv4-fwd"
    summary = "kernel IPv4 forwarding"


class Ipv6Fwd(L3Forwarding):
    name = "ipv6-fwd"
    summary = "kernel IPv6 forwarding"
    ip_version = 6


class NoSut(Personality):
    name = "none"
    summary = "no SUT: generator veth paired straight with the sink"
    next_hop_role = "sink"
    remote: ClassVar[bool] = False
    remote_why: ClassVar[str] = "no SUT: an inventory's generator port is cabled to the SUT host, not to the sink"
