"""The eBPF router (PASTRAMI's) against kernel forwarding: ``xdp-router`` and
``tc-router``.

Both are kernel IPv4 forwarding's setup (L3Forwarding: forwarding on, static
neighbours, DST_RANGE routed towards the sink) plus native/router's program on
the SUT's receiving interface. The program does one ``bpf_fib_lookup`` per
packet with the ingress ifindex; on a hit it decrements the TTL (checksum
fixed incrementally), rewrites the MACs from the lookup result and redirects
to the egress interface, so the packet never enters the kernel's IP stack.
Anything else (no route, no neighbour, TTL <= 1, not IP) goes to the stack.
The forwarding sysctl is still needed: bpf_fib_lookup refuses a lookup on a
device without forwarding (BPF_FIB_LKUP_RET_FWD_DISABLED), and the static
neighbours are what it resolves the next hop with (it never resolves one).

- ``xdp-router``: ``ip link set dev <sut_in> xdpdrv|xdpgeneric obj router.bpf.o
  sec xdp`` (param ``mode``: native, generic). A native XDP redirect into a
  veth needs its peer to run NAPI (an XDP program or GRO on it): the sink's
  veth has the sink's XDP program.
- ``tc-router``: a clsact qdisc on <sut_in> and ``tc filter add dev <sut_in>
  ingress bpf da obj router.bpf.o sec tc``: the same code on an skb.

Counters (``counters``): the program's per-CPU stats map summed over CPUs
(``router_redirected`` proves the path; ``router_pass_*`` by FIB return code
class, ``router_ttl_expired`` (which also counts the veths' own hop-limit-1
IPv6 neighbour discovery and MLD), ``router_non_ip``), and the SUT namespace's
``Ip: ForwDatagrams`` (``ip_forw_datagrams``), which stays ~0 while the
program forwards: the kernel stack is bypassed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from softnet.errors import InputError, TestbedError
from softnet.testbed.personalities import register
from softnet.testbed.personalities.base import Param, Personality, Requirement
from softnet.testbed.personalities.kernel_fwd import L3Forwarding
from softnet.testbed.personalities.nsread import forw_datagrams
from softnet.testbed.personalities.tool_json import BpfDumpEntry, BpfMap, BpfProg, ip_links, tc_filters
from softnet.tools import hostcmd
from softnet.tools.process import bpf_object

if TYPE_CHECKING:
    from softnet.testbed.local import LocalTestbed

# enum sn_router_stat of native/router/router.h, in its order
ROUTER_STATS = ("redirected", "pass_no_route", "pass_no_neigh", "pass_fwd_disabled", "pass_frag_needed",
                "pass_other", "ttl_expired", "non_ip")
STATS_MAP = "sn_router_stats"
BPF_REQUIREMENTS = (
    Requirement("tool:bpftool", "reads the router's counters"),
    Requirement("CONFIG_BPF_SYSCALL", "loads the eBPF router", symbol="__sys_bpf"),
)


def _map_value(v) -> int:
    """A map value as bpftool prints it: an int with BTF, else little-endian hex bytes."""
    if isinstance(v, int):
        return v
    if isinstance(v, list):
        return int.from_bytes(bytes(int(b, 16) for b in v), "little")
    raise TestbedError(f"bpftool map value {v!r}: not understood")


def router_stats(prog_id: int) -> dict[str, int]:
    """The router program's stats map, per-CPU values summed: ``router_<stat>``."""
    prog = BpfProg.model_validate_json(hostcmd.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)]))
    for map_id in prog.map_ids:
        info = BpfMap.model_validate_json(hostcmd.run(["bpftool", "-j", "map", "show", "id", str(map_id)]))
        if info.name != STATS_MAP:
            continue
        entries = json.loads(hostcmd.run(["bpftool", "-j", "map", "dump", "id", str(map_id)]))
        out = dict.fromkeys(ROUTER_STATS, 0)
        for e in (BpfDumpEntry.model_validate(x).readable() for x in entries):
            key = _map_value(e.key)
            if key < len(ROUTER_STATS):
                out[ROUTER_STATS[key]] = sum(_map_value(c.value) for c in e.values)
        return {f"router_{k}": v for k, v in out.items()}
    raise TestbedError(f"eBPF program {prog_id} has no {STATS_MAP} map: not the softnet router?")


class _EbpfRouter(L3Forwarding):
    """Kernel forwarding's setup, then the router program attached (attach)."""

    def configure(self, tb: "LocalTestbed") -> None:
        super().configure(tb)
        self.attach(tb, tb.ns["sut"], tb.ifs["sut_in"], str(bpf_object("router")))

    def attach(self, tb: "LocalTestbed", ns: str, dev: str, obj: str) -> None:
        raise NotImplementedError

    def prog_id(self, tb: "LocalTestbed") -> int:
        """The id of the router program attached to the SUT's receiving interface."""
        raise NotImplementedError

    def check_reset(self) -> None:
        """Not kernel forwarding's sysctl: a program of its own (XdpRouter replaces it)."""
        Personality.check_reset(self)

    def counters(self, tb: "LocalTestbed") -> dict[str, int]:
        return {**router_stats(self.prog_id(tb)),
                "ip_forw_datagrams": forw_datagrams(tb.ns["sut"])}


@register
class XdpRouter(_EbpfRouter):
    name = "xdp-router"
    summary = "eBPF router at XDP: bpf_fib_lookup, redirect (kernel IP stack bypassed)"
    params: ClassVar[dict[str, Param]] = {
        "mode": Param(str, "native", "XDP attach mode: native (the veth driver's) or generic (skb)",
                      choices=("native", "generic")),
    }
    requires: ClassVar[tuple[Requirement, ...]] = BPF_REQUIREMENTS

    def configure(self, tb: "LocalTestbed") -> None:
        if tb.sides["sut_in"].xdp != "none":
            raise InputError("sides.sut_in.xdp", f"{self.name} attaches its own XDP program to the receiving "
                             "interface: leave its xdp setting at none")
        super().configure(tb)

    def attach(self, tb: "LocalTestbed", ns: str, dev: str, obj: str) -> None:
        flag = "xdpdrv" if self.values["mode"] == "native" else "xdpgeneric"
        tb.changes.record(f"{ns}/{dev}: {flag} router ({obj})",
                          lambda: Path("/run/netns", ns).exists() and hostcmd.in_netns(
                              ns, ["ip", "link", "set", "dev", dev, flag, "off"], check=False))
        hostcmd.in_netns(ns, ["ip", "link", "set", "dev", dev, flag, "obj", obj, "sec", "xdp"])

    def check_reset(self) -> None:
        pass

    def reset(self, tb: "LocalTestbed") -> str:
        """The router program replaced by a fresh load of it (an upgrade's
        path): the kernel swaps the attached program in one step."""
        flag = "xdpdrv" if self.values["mode"] == "native" else "xdpgeneric"
        ns, dev, obj = tb.ns["sut"], tb.ifs["sut_in"], str(bpf_object("router"))
        hostcmd.in_netns(ns, ["ip", "-force", "link", "set", "dev", dev, flag, "obj", obj, "sec", "xdp"])
        return f"{dev}: {flag} router program replaced by a new load of it (ip -force link set)"

    def prog_id(self, tb: "LocalTestbed") -> int:
        ns, dev = tb.ns["sut"], tb.ifs["sut_in"]
        prog = ip_links(hostcmd.in_netns(ns, ["ip", "-j", "link", "show", "dev", dev]))[0].xdp.first_prog()
        if prog is None or prog.id is None:
            raise TestbedError(f"no XDP program on {ns}/{dev}")
        return prog.id


@register
class TcRouter(_EbpfRouter):
    name = "tc-router"
    summary = "eBPF router at tc ingress (clsact): bpf_fib_lookup, redirect (kernel IP stack bypassed)"
    requires: ClassVar[tuple[Requirement, ...]] = BPF_REQUIREMENTS + (
        Requirement("CONFIG_NET_CLS_BPF", "the tc bpf filter", symbol="cls_bpf_classify"),
        Requirement("CONFIG_NET_SCH_INGRESS", "the clsact qdisc", symbol="clsact_init"),
    )

    def attach(self, tb: "LocalTestbed", ns: str, dev: str, obj: str) -> None:
        def gone() -> bool:
            return not Path("/run/netns", ns).exists()

        tb.changes.record(f"{ns}/{dev}: clsact qdisc",
                          lambda: gone() or hostcmd.in_netns(ns, ["tc", "qdisc", "del", "dev", dev, "clsact"],
                                                             check=False))
        hostcmd.in_netns(ns, ["tc", "qdisc", "add", "dev", dev, "clsact"])
        tb.changes.record(f"{ns}/{dev}: tc ingress bpf router ({obj})",
                          lambda: gone() or hostcmd.in_netns(ns, ["tc", "filter", "del", "dev", dev, "ingress"],
                                                             check=False))
        hostcmd.in_netns(ns, ["tc", "filter", "add", "dev", dev, "ingress", "bpf", "da", "obj", obj, "sec", "tc"])

    def prog_id(self, tb: "LocalTestbed") -> int:
        ns, dev = tb.ns["sut"], tb.ifs["sut_in"]
        for f in tc_filters(hostcmd.in_netns(ns, ["tc", "-j", "filter", "show", "dev", dev, "ingress"])):
            if f.options.prog.id is not None:
                return f.options.prog.id
        raise TestbedError(f"no tc bpf filter on {ns}/{dev} ingress")
