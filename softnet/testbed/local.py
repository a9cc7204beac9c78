"""The local testbed: generator, SUT and sink namespaces joined by veth pairs.

    [sn-ID-gen] snIDg ==veth== snIDi [sn-ID-sut] snIDo ==veth== snIDk [sn-ID-snk]

Addresses are RFC 2544 benchmark space (198.18.0.0/15, 2001:2::/48). The SUT
has static neighbour entries: the sink drops everything in XDP, ARP included,
so dynamic resolution would stop forwarding. With `sut="none"` the generator
veth is paired straight with the sink (used to benchmark the generator).

Where the SUT's packet processing runs is the whole point of the placement
knob. veth delivers on the sender's CPU unless the receiving veth hands its
work to a NAPI kthread (threaded NAPI, which we pin) or to RPS.
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import IPRoute

from softnet import interrupts
from softnet.tools.links import LinkRef
from softnet.errors import InputError, TestbedError
from softnet.testbed.netns import NetnsLab, cpu_mask
from softnet.testbed.personalities import Personality, parse_sut
from softnet.tools import hostcmd, link_counters, nic
from softnet.tools.changes import NAME_PREFIX, HostChanges
from softnet.tools.process import bpf_object

STEERINGS = ("threaded", "rps")
# NIC knobs (softnet.tools.nic) veth takes: its queues (ethtool -L); it has
# no rings, coalescing or IRQs (tests/test_nic.py probes a real veth)
VETH_NIC_KNOBS = ("rx_channels", "tx_channels")


def veth_refuses(knobs: dict) -> tuple[str, str] | None:
    """(knob, why) for the first NIC knob this host's veth testbed does not take."""
    refused = sorted(k for k, v in knobs.items() if v is not None and k not in VETH_NIC_KNOBS
                     and not (k == "irq_affinity" and v == "unpinned"))
    if not refused:
        return None
    return refused[0], (f"veth (this host's testbed) does not take {refused[0]}; it takes "
                        f"{', '.join(VETH_NIC_KNOBS)} (the others need a NIC: an inventory's hosts)")
BENCHMARK_V4 = ipaddress.ip_network("198.18.0.0/15")  # RFC 2544's
# Several destination addresses (dst_ips > 1) come from these ranges, which
# every personality routes towards the sink (its address is the next hop):
# clear of the SUT's and sink's own addresses, so none is delivered locally.
DST_RANGE = {4: ipaddress.ip_network("198.19.128.0/17"), 6: ipaddress.ip_network("2001:2:0:8000::/64")}

# role -> (IPv4 address, IPv6 address, MAC). 198.18/24 and 2001:2::/64 on the
# generator side, 198.19/24 and 2001:2:0:1::/64 on the sink side.
ADDR = {
    "gen": ("198.18.0.1", "2001:2::1", "02:53:4e:00:00:01"),
    "sut_in": ("198.18.0.2", "2001:2::2", "02:53:4e:00:00:02"),
    "sut_out": ("198.19.0.2", "2001:2:0:1::2", "02:53:4e:00:00:03"),
    "sink": ("198.19.0.1", "2001:2:0:1::1", "02:53:4e:00:00:04"),
}


def first_source(ip_version: int, src_ip: str, n: int) -> str:
    """The first of the ``n`` consecutive source addresses of a trial: the
    testbed's generator address for one; for more, the first run of n from it
    upwards that holds none of the SUT's own addresses (to the SUT's kernel a
    packet from its own address is a martian, and dropped), within the
    benchmark range (IPv4) or the address's last 16 bits (IPv6: softnet-gen
    varies only those)."""
    if n == 1:
        return src_ip
    v = 0 if ip_version == 4 else 1
    start = ipaddress.ip_address(src_ip)
    for a in sorted(ipaddress.ip_address(ADDR[role][v]) for role in ("sut_in", "sut_out")):
        if start <= a < start + n:
            start = a + 1
    last = start + (n - 1)
    if ip_version == 4 and last not in BENCHMARK_V4:
        raise InputError("src_ips", f"{n} source addresses from {start} (the first after the SUT's own) end at "
                         f"{last}, outside the benchmark range {BENCHMARK_V4}")
    if ip_version == 6 and (int(start) & 0xffff) + n - 1 > 0xffff:
        raise InputError("src_ips", f"{n} IPv6 source addresses from {start} (the first after the SUT's own) "
                         f"overflow its last 16 bits: at most {0x10000 - (int(start) & 0xffff)}")
    return str(start)


def first_destination(ip_version: int, dst_ip: str, n: int) -> str:
    """The first of the ``n`` consecutive destination addresses of a trial:
    the sink's own address for one; for more, DST_RANGE's first host up
    (IPv6: softnet-gen varies the last 16 bits only)."""
    if n == 1:
        return dst_ip
    net = DST_RANGE[ip_version]
    first = net.network_address + 1
    limit = min(net.num_addresses - 2, 0xffff - 1)
    if n > limit:
        raise InputError("dst_ips", f"{n} destination addresses: at most {limit} (from {first} in {net})")
    return str(first)


@dataclass
class Placement:
    """CPU placement: where the generator runs and where SUT (and sink) processing runs."""

    gen_cpu: int = 0
    sut_cpus: list[int] = field(default_factory=lambda: [1])
    sink_cpu: int | None = None  # None: wherever the SUT's transmit schedules it
    steering: str = "threaded"

    def validate(self) -> None:
        online = sorted(os.sched_getaffinity(0))
        for name, cpus in (("--gen-cpu", [self.gen_cpu]), ("--sut-cpus", self.sut_cpus),
                           ("--sink-cpu", [] if self.sink_cpu is None else [self.sink_cpu])):
            bad = [c for c in cpus if c not in online]
            if bad:
                raise InputError(name, f"CPU {bad[0]} does not exist or is not usable; accepted: {online}")
        if not self.sut_cpus:
            raise InputError("--sut-cpus", f"at least one CPU is needed; accepted: {online}")
        if self.steering not in STEERINGS:
            raise InputError("--steering", f"'{self.steering}' unknown; accepted: {', '.join(STEERINGS)}")

    @classmethod
    def default(cls) -> "Placement":
        """Split: generator on the first CPU, SUT on the others (on one CPU: shared)."""
        cpus = sorted(os.sched_getaffinity(0))
        return cls(gen_cpu=cpus[0], sut_cpus=cpus[1:] or cpus[:1])


@dataclass
class SideSettings:
    """Settings of one SUT interface. gro: GRO on the interface; xdp: "pass"
    attaches an XDP program that passes every packet (what XDP alone costs).
    The receiving interface needs veth NAPI for the generator's XDP frames:
    GRO on, or an XDP program."""

    gro: bool = True
    xdp: str = "none"  # none | pass
    qdisc: str | None = None  # root qdisc and its tc parameters (None: veth's noqueue)

    def validate(self, field: str, receiving: bool) -> None:
        if self.xdp not in ("none", "pass"):
            raise InputError(f"{field}.xdp", f"'{self.xdp}' unknown; accepted: none, pass")
        if receiving and not self.gro and self.xdp == "none":
            raise InputError(f"{field}.gro", "false on the receiving side needs xdp = \"pass\": veth delivers "
                             "the generator's XDP frames only through NAPI (GRO on or an XDP program)")


@dataclass
class Endpoints:
    """What the generator and the sink need to know about the testbed."""

    gen_ns: str | None  # None: the current namespace (a remote host's own)
    gen_if: str
    anchor_if: str
    gen_mac: str
    next_hop_mac: str
    src_ip: str
    dst_ip: str
    sink_ns: str | None
    sink_if: str | None


class LocalTestbed(NetnsLab):
    """Builds the namespaces on enter; every change goes through `changes`."""

    addr = ADDR

    def __init__(self, changes: HostChanges, sut: str | Personality = "ipv4-fwd", placement: Placement | None = None,
                 sides: dict[str, SideSettings] | None = None, bidirectional: bool = False,
                 nic: dict | None = None):
        """``sut``: a personality or its spec string (softnet.testbed.personalities);
        ``sides``: settings of the SUT's receiving ("sut_in") and sending
        ("sut_out") interfaces; defaults: GRO on, no XDP. ``bidirectional``:
        also ready for traffic from the sink's side (reverse_endpoints).
        ``nic``: NIC knobs of the SUT's interfaces (softnet.tools.nic), what
        veth takes applied, the rest refused here before anything changes."""
        self.personality = sut if isinstance(sut, Personality) else parse_sut(sut, "--sut")
        if bidirectional and not self.personality.bidirectional:
            raise InputError("bidirectional", f"{self.personality.name} forwards one way only: "
                             f"{self.personality.one_way_why}")
        self.bidirectional = bidirectional
        self.nic = {k: v for k, v in (nic or {}).items() if v is not None}
        if refused := veth_refuses(self.nic):
            raise InputError(f"testbed.nic.{refused[0]}", refused[1])
        self.nic_applied: dict = {}
        self.reverse_ep: Endpoints | None = None
        super().__init__(changes)
        self.sut = self.personality.spec
        self.placement = placement or Placement.default()
        self.placement.validate()
        self.sides = {"sut_in": SideSettings(), "sut_out": SideSettings(), **(sides or {})}
        for role, side in self.sides.items():
            side.validate(f"sides.{role}", receiving=role == "sut_in")
        self.ip_version = self.personality.ip_version
        p = f"{NAME_PREFIX}{self.run_id}"
        self.ns = {"gen": f"{p}-gen", "sut": f"{p}-sut", "sink": f"{p}-snk"}
        i = f"sn{self.run_id}"  # interface names: at most 15 characters
        self.ifs = {"gen": f"{i}g", "anchor": f"{i}a", "anchor_peer": f"{i}b",
                    "sut_in": f"{i}i", "sut_out": f"{i}o", "sink": f"{i}k",
                    # the reverse generator's anchor, in the sink's namespace (bidirectional)
                    "rev_anchor": f"{i}ra", "rev_anchor_peer": f"{i}rb"}

    # ---- building -------------------------------------------------------
    def build(self) -> Endpoints:
        self._lock()
        self._claim()
        roles = ("gen", "sink") if self.sut == "none" else ("gen", "sut", "sink")
        for role in roles:
            self._add_netns(self.ns[role])
        # The anchor pair stays down and idle: the generator keeps its XDP
        # program attached there (see native/gen/gen.c).
        self._add_veth("gen", "anchor", "gen", "anchor_peer", up=False)
        if self.sut == "none":
            self._add_veth("gen", "gen", "sink", "sink", peer_role="sink")
            next_hop = "sink"
        else:
            self._add_veth("gen", "gen", "sut", "sut_in", peer_role="sut_in")
            self._add_veth("sut", "sut_out", "sink", "sink", role="sut_out", peer_role="sink")
            next_hop = self.personality.next_hop_role
        v = 0 if self.ip_version == 4 else 1
        self._neigh("gen", "gen", ADDR[next_hop][v], ADDR[next_hop][2])
        # Without a SUT, the sink's receive processing takes the SUT's CPUs.
        rx_ns, rx_if = ("sink", "sink") if self.sut == "none" else ("sut", "sut_in")
        self._steer(rx_ns, rx_if, self.placement.sut_cpus)
        if self.sut != "none" and self.placement.sink_cpu is not None:
            self._steer("sink", "sink", [self.placement.sink_cpu])
        if self.sut != "none":
            for role, side in self.sides.items():
                self._apply_side(role, side)
            # after the sides: a personality may attach its own XDP program
            self.personality.configure(self)
            if self.nic:
                self._apply_nic()
        if self.bidirectional:
            self.reverse_ep = self._reverse(v)
        interrupts.checkpoint("testbed")
        return Endpoints(
            gen_ns=self.ns["gen"], gen_if=self.ifs["gen"], anchor_if=self.ifs["anchor"],
            gen_mac=ADDR["gen"][2], next_hop_mac=ADDR[next_hop][2],
            src_ip=ADDR["gen"][v], dst_ip=self.personality.dst_ip(self),
            sink_ns=self.ns["sink"], sink_if=self.ifs["sink"])

    def _reverse(self, v: int) -> Endpoints:
        """Traffic the other way: a generator on the sink's veth (its own idle
        anchor beside it) and a sink on the generator's veth. The SUT's
        receive processing of that direction goes to its CPUs too."""
        self._add_veth("sink", "rev_anchor", "sink", "rev_anchor_peer", up=False)
        # the reverse way's receive work on the SUT's CPUs too: the SUT's own,
        # or without a SUT the reverse sink's (as the forward sink's)
        self._steer(*(("gen", "gen") if self.sut == "none" else ("sut", "sut_out")), self.placement.sut_cpus)
        next_hop = "gen" if self.personality.next_hop_role == "sink" else "sut_out"
        return Endpoints(
            gen_ns=self.ns["sink"], gen_if=self.ifs["sink"], anchor_if=self.ifs["rev_anchor"],
            gen_mac=ADDR["sink"][2], next_hop_mac=ADDR[next_hop][2],
            src_ip=ADDR["sink"][v], dst_ip=ADDR["gen"][v],
            sink_ns=self.ns["gen"], sink_if=self.ifs["gen"])

    def _apply_side(self, role: str, side: SideSettings) -> None:
        ns, dev = self.ns["sut"], self.ifs[role]
        if side.xdp == "pass":
            obj = str(bpf_object("xdp_pass"))
            self.changes.record(f"{ns}/{dev}: xdp pass ({obj})",
                                lambda: Path("/run/netns", ns).exists() and hostcmd.in_netns(
                                    ns, ["ip", "link", "set", "dev", dev, "xdp", "off"], check=False))
            hostcmd.in_netns(ns, ["ip", "link", "set", "dev", dev, "xdpdrv", "obj", obj, "sec", "xdp"])
        state = "on" if side.gro else "off"
        hostcmd.in_netns(ns, ["ethtool", "-K", dev, "gro", state])
        self.changes.record(f"{ns}/{dev}: gro {state}", lambda: None)  # dies with the veth
        if side.qdisc:
            try:
                hostcmd.in_netns(ns, ["tc", "qdisc", "replace", "dev", dev, "root", *side.qdisc.split()])
            except TestbedError as exc:
                raise TestbedError(f"qdisc '{side.qdisc}' on the SUT's {role} interface: {exc} "
                                   "(softnet doctor lists the qdiscs this kernel has)") from None
            self.changes.record(f"{ns}/{dev}: root qdisc {side.qdisc}", lambda: None)  # dies with the veth

    def _apply_nic(self) -> None:
        """The NIC knobs on the SUT's interfaces, read back after."""
        ns = self.ns["sut"]

        def run(argv: list[str]) -> str:
            return hostcmd.in_netns(ns, argv)

        for role in ("sut_in", "sut_out"):
            dev = self.ifs[role]
            caps = nic.capabilities(dev, run, "veth")
            plan = nic.plan(self.nic, caps, role, self.placement.sut_cpus, "testbed.nic")
            old = nic.changed(plan, caps)
            for flag, params in plan.ethtool.items():
                if old[flag]:
                    self.changes.record(f"{ns}/{dev}: ethtool {flag} {params} (was {old[flag]})",
                                        lambda flag=flag, dev=dev, o=old[flag]: Path("/run/netns", ns).exists()
                                        and hostcmd.in_netns(ns, nic.ethtool_argv(dev, flag, o), check=False))
                    run(nic.ethtool_argv(dev, flag, params))
            after = nic.capabilities(dev, run, "veth")
            if bad := nic.readback(after, plan):
                raise TestbedError("; ".join(bad))
            self.nic_applied[role] = {"ifname": dev, "driver": "veth", "set": plan.ethtool, "read_back": after.current}

    # ---- diagnostics ----------------------------------------------------
    def link_stats(self) -> dict[str, dict[str, int]]:
        """stats64 of every testbed interface, keyed 'role'."""
        ns_of = {"gen": "gen", "sut_in": "sut", "sut_out": "sut", "sink": "sink"}
        out = {}
        for role, ns_role in ns_of.items():
            if not (ns_role == "sut" and self.sut == "none"):
                with self._ipr(self.ns[ns_role]) as ipr:
                    out[role] = link_counters.link_stats(self.ns[ns_role], self.ifs[role], ipr)
        return out

    def sut_threads(self) -> list[int]:
        """The NAPI kthreads of the SUT's interfaces (threaded steering): all of
        the SUT's packet work runs in them, so their run time is its CPU time."""
        if self.sut == "none":
            return []
        return sorted(pid for role in ("sut_in", "sut_out") for pid in self.napi_threads.get(self.ifs[role], []))

    def sample_links(self) -> list[LinkRef]:
        """The testbed's interfaces for the kernel statistics sampler."""
        roles = ("gen", "sink") if self.sut == "none" else ("gen", "sut_in", "sut_out", "sink")
        ns_of = {"gen": "gen", "sut_in": "sut", "sut_out": "sut", "sink": "sink"}
        return [LinkRef(role, self.ns[ns_of[role]], self.ifs[role]) for role in roles]

    def interface_ids(self) -> dict[tuple[int, int], str]:
        """(netns inode, ifindex) -> "role (ns/ifname)" of the testbed's
        interfaces: how kernel-side records name a device."""
        out = {}
        for link in self.sample_links():
            with IPRoute(netns=link.ns) as ipr:
                idx = ipr.link_lookup(ifname=link.ifname)
            if idx:
                out[(os.stat(f"/run/netns/{link.ns}").st_ino, idx[0])] = f"{link.role} ({link.ns}/{link.ifname})"
        return out

    def qdisc_drops(self) -> int:
        """Packets dropped by qdiscs on the SUT's interfaces (veth defaults to
        noqueue, so this moves only when a qdisc was configured)."""
        if self.sut == "none":
            return 0
        return sum(link_counters.qdisc_drops(self.ns["sut"], self.ifs[role]) for role in ("sut_in", "sut_out"))

    def ethtool_stats(self, role: str) -> dict[str, int]:
        ns_role = {"gen": "gen", "sut_in": "sut", "sut_out": "sut", "sink": "sink"}[role]
        return link_counters.ethtool_stats(self.ns[ns_role], self.ifs[role])
