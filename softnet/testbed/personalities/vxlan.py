"""``vxlan``: the SUT as a VXLAN encapsulation gateway.

The generator's plain IPv4 test frames arrive on sut_in; the SUT routes them
into an overlay reached through a VXLAN device and sends them encapsulated
out of sut_out towards the sink::

    gen --plain--> sut_in [route -> snIDv (vxlan, VNI)] sut_out --VXLAN/UDP 4789--> sink

What it sets up in the SUT namespace (every change through tb.changes):

- kernel forwarding on, static neighbours on sut_in (the generator) and on
  sut_out (the sink's underlay address 198.19.0.1: the sink drops ARP);
- MTU 1600 on sut_out and on the sink's veth, so that a 1518 B test frame
  (a 1500 B IP packet) still fits after the 50 B of outer headers;
- ``ip link add snIDv type vxlan id VNI local 198.19.0.2 remote 198.19.0.1
  dstport 4789 dev sut_out nolearning`` (MTU 1500, a fixed MAC), up, with the
  overlay subnet 198.19.64.0/24 on it (198.19.64.2) and the overlay next hop
  198.19.64.1 as a static neighbour (its MAC is the inner destination MAC);
- the test frames' destination (``dst_ip``) is 198.19.64.1, and the
  destination range several dst_ips come from (DST_RANGE) is routed via it.

Param ``vni`` (default 42). Needs CONFIG_VXLAN.

Each test frame leaves sut_out as outer Ethernet (14) + IPv4 (20) + UDP (8)
+ VXLAN (8) = 50 B more than the inner frame. The sink recognises such frames
(outer UDP to 4789, VXLAN header, inner test frame) and counts them in
``rx_vxlan_pkts`` as well as its usual counts.

Counters (``counters``): the VXLAN device's ``vxlan_tx_packets`` (frames
encapsulated) and ``vxlan_tx_bytes`` (what the kernel counts there: the inner
IP packet, frame - 18 B, see iptunnel_xmit: the bytes on the wire are
vxlan_tx_bytes + 64 B a packet, 14 B inner Ethernet + 50 B outer headers),
``vxlan_tx_dropped``, ``underlay_tx_packets`` (sut_out's: the encapsulated
frames, plus the veth's own few) and ``ip_forw_datagrams`` (the SUT
namespace's Ip: ForwDatagrams: the inner packets went through the kernel's
forwarding path).

The reverse direction (decapsulation, sink -> generator) is not built: it
needs bidirectional traffic. It would need a sender on the sink side that
emits VXLAN frames to 198.19.0.2:4789 with the same VNI, inner destination
MAC = the VXLAN device's MAC and an inner destination in the generator's
range (198.18.0.0/24); the SUT's VXLAN device (its UDP socket on 4789 is
already bound by this setup) decapsulates, the inner packet is routed out of
sut_in with the generator's static neighbour; the inner source must route
back through the VXLAN device (the overlay subnet or DST_RANGE do) or
rp_filter drops it; and a receiver in the generator's namespace counts them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict

from softnet.errors import TestbedError
from softnet.testbed.personalities import register
from softnet.testbed.personalities.base import Param, Personality, Requirement
from softnet.testbed.personalities.nsread import forw_datagrams
from softnet.testbed.personalities.tool_json import ip_links
from softnet.tools import hostcmd

if TYPE_CHECKING:
    from softnet.testbed.local import LocalTestbed

VXLAN_PORT = 4789
OVERHEAD_BYTES = 14 + 20 + 8 + 8  # outer Ethernet, IPv4, UDP, VXLAN header
UNDERLAY_MTU = 1600


@dataclass(frozen=True)
class Overlay:
    """The overlay subnet behind the VXLAN device."""

    net: str
    sut: str  # the VXLAN device's address
    next_hop: str  # the test frames' destination
    next_hop_mac: str  # the inner destination MAC
    vxlan_mac: str  # the VXLAN device's MAC (the inner source MAC)


OVERLAY = Overlay(net="198.19.64.0/24", sut="198.19.64.2", next_hop="198.19.64.1",
                  next_hop_mac="02:53:4e:00:00:06", vxlan_mac="02:53:4e:00:00:05")


class Stats64(BaseModel):
    """What the counters read of an interface's stats64."""

    model_config = ConfigDict(extra="ignore")

    tx_packets: int
    tx_bytes: int
    tx_dropped: int


@register
class Vxlan(Personality):
    name = "vxlan"
    summary = "VXLAN encapsulation gateway: plain IPv4 in, VXLAN (UDP 4789) out to the sink"
    sink_mtu: ClassVar[int] = UNDERLAY_MTU  # the sink's port carries the outer headers too
    params: ClassVar[dict[str, Param]] = {
        "vni": Param(int, 42, "VXLAN network identifier", lo=0, hi=(1 << 24) - 1),
    }
    requires: ClassVar[tuple[Requirement, ...]] = (
        Requirement("CONFIG_VXLAN", "the VXLAN device", symbol="vxlan_xmit"),
    )
    bidirectional: ClassVar[bool] = False
    one_way_why: ClassVar[str] = ("the reverse way needs VXLAN-encapsulated frames from the sink's side to "
                                  "decapsulate, which the generator does not build")

    @staticmethod
    def device(tb: "LocalTestbed") -> str:
        """The VXLAN device's name: the testbed's interface prefix (so `softnet
        clean` recognises a leftover) + "v"."""
        return f"sn{tb.run_id}v"

    def dst_ip(self, tb: "LocalTestbed") -> str:
        return OVERLAY.next_hop

    def configure(self, tb: "LocalTestbed") -> None:
        from softnet.testbed.local import DST_RANGE

        addr = tb.addr  # this testbed's addresses and MACs (an inventory's hosts have their own MACs)
        ns = tb.ns["sut"]
        tb.set_sysctl(ns, "net.ipv4.ip_forward", "1")
        tb._neigh("sut", "sut_in", addr["gen"][0], addr["gen"][2])
        tb._neigh("sut", "sut_out", addr["sink"][0], addr["sink"][2])  # the underlay next hop
        # the sink's MTU: here, in its namespace; on an inventory, its host's agent sets it (sink_mtu)
        for ns_role, if_role in (("sut", "sut_out"), ("sink", "sink")):
            if tb.ns.get(ns_role) is not None:
                self._set_mtu(tb, tb.ns[ns_role], tb.ifs[if_role], UNDERLAY_MTU)
        vx = self.device(tb)
        tb.ifs["vxlan"] = vx  # a role of this testbed from now on (tb._neigh, tb.add_route)

        def gone() -> bool:
            return not Path("/run/netns", ns).exists()

        tb.changes.record(f"{ns}/{vx}: vxlan vni {self.values['vni']}",
                          lambda: gone() or hostcmd.in_netns(ns, ["ip", "link", "del", "dev", vx], check=False))
        hostcmd.in_netns(ns, ["ip", "link", "add", vx, "address", OVERLAY.vxlan_mac, "mtu", "1500",
                              "type", "vxlan", "id", str(self.values["vni"]), "local", addr["sut_out"][0],
                              "remote", addr["sink"][0], "dstport", str(VXLAN_PORT), "dev", tb.ifs["sut_out"],
                              "nolearning"])
        tb.changes.record(f"{ns}/{vx}: no IPv6, {OVERLAY.sut}/24, up", lambda: None)  # dies with the device
        # no IPv6 on the overlay: its neighbour discovery would add frames to the tunnel's counts
        hostcmd.sysctl_set(ns, f"net.ipv6.conf.{vx}.disable_ipv6", "1")
        hostcmd.in_netns(ns, ["ip", "addr", "add", f"{OVERLAY.sut}/24", "dev", vx])
        hostcmd.in_netns(ns, ["ip", "link", "set", "dev", vx, "up"])
        tb._neigh("sut", "vxlan", OVERLAY.next_hop, OVERLAY.next_hop_mac)
        tb.add_route("sut", str(DST_RANGE[4]), OVERLAY.next_hop, "vxlan")

    @staticmethod
    def _set_mtu(tb: "LocalTestbed", ns: str, dev: str, mtu: int) -> None:
        old = link_mtu(ns, dev)
        tb.changes.record(f"{ns}/{dev}: mtu {mtu} (was {old})",
                          lambda: Path("/run/netns", ns).exists() and hostcmd.in_netns(
                              ns, ["ip", "link", "set", "dev", dev, "mtu", str(old)], check=False))
        hostcmd.in_netns(ns, ["ip", "link", "set", "dev", dev, "mtu", str(mtu)])

    def counters(self, tb: "LocalTestbed") -> dict[str, int]:
        ns = tb.ns["sut"]
        vx = stats64(ns, self.device(tb))
        under = stats64(ns, tb.ifs["sut_out"])
        return {"vxlan_tx_packets": vx.tx_packets, "vxlan_tx_bytes": vx.tx_bytes,
                "vxlan_tx_dropped": vx.tx_dropped,
                "underlay_tx_packets": under.tx_packets,
                "ip_forw_datagrams": forw_datagrams(ns)}


def link_mtu(ns: str, dev: str) -> int:
    return int(ip_links(hostcmd.in_netns(ns, ["ip", "-j", "link", "show", "dev", dev]))[0].mtu)


def stats64(ns: str, dev: str) -> Stats64:
    """An interface's stats64, bytes included (link_counters.link_stats keeps packets only)."""
    from pyroute2 import IPRoute  # not at import: the CLI loads every personality when it starts

    with IPRoute(netns=ns) as ipr:
        links = ipr.get_links(ifname=dev)
    if not links:
        raise TestbedError(f"no interface {dev} in {ns}")
    return Stats64.model_validate({k: int(v) for k, v in (links[0].get("stats64") or {}).items()
                                   if isinstance(v, int)})
