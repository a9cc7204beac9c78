"""Linux bridge: the SUT switches frames between sut_in and sut_out (L2, no
IP forwarding). The generator addresses the sink's MAC; a static FDB entry
sends that MAC out of sut_out (the sink never transmits, so the bridge could
not learn where it is, and would flood)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from softnet.testbed.personalities import register
from softnet.testbed.personalities.base import Personality, Requirement
from softnet.testbed.personalities.nsread import forw_datagrams
from softnet.testbed.personalities.tool_json import fdb_entries
from softnet.tools import hostcmd

if TYPE_CHECKING:
    from softnet.testbed.local import LocalTestbed

# br_netfilter (CONFIG_BRIDGE_NETFILTER) would hand bridged frames to the
# IP/IPv6/ARP netfilter hooks: a per-namespace switch, off for a plain bridge.
BR_NF_SYSCTLS = ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables",
                 "net.bridge.bridge-nf-call-arptables")


def bridge_name(tb: "LocalTestbed") -> str:
    return f"sn{tb.run_id}r"  # at most 15 characters, the testbed's interface prefix


@register
class Bridge(Personality):
    name = "bridge"
    summary = "Linux bridge: sut_in and sut_out switched at L2 (static FDB entry for the sink)"
    requires = (Requirement("CONFIG_BRIDGE", "the bridge device", "br_dev_xmit"),
                Requirement("tool:bridge", "the static FDB entry and the learned-entry counter"))
    next_hop_role = "sink"

    def configure(self, tb: "LocalTestbed") -> None:
        ns, br = tb.ns["sut"], bridge_name(tb)
        for key in BR_NF_SYSCTLS:
            if Path("/proc/sys", *key.split(".")).exists():  # the host's kernel has br_netfilter
                tb.set_sysctl(ns, key, "0")
        tb.changes.record(f"bridge {ns}/{br}",
                          lambda: Path("/run/netns", ns).exists() and hostcmd.in_netns(
                              ns, ["ip", "link", "del", "dev", br], check=False))
        hostcmd.in_netns(ns, ["ip", "link", "add", "name", br, "type", "bridge", "stp_state", "0",
                              "forward_delay", "0", "mcast_snooping", "0"])
        for role in ("sut_in", "sut_out"):
            hostcmd.in_netns(ns, ["ip", "link", "set", "dev", tb.ifs[role], "master", br])
            tb.changes.record(f"{ns}/{tb.ifs[role]}: port of {br}", lambda: None)  # goes with the bridge
        hostcmd.in_netns(ns, ["ip", "link", "set", "dev", br, "up"])
        sink_mac = tb.addr["sink"][2]
        hostcmd.in_netns(ns, ["bridge", "fdb", "replace", sink_mac, "dev", tb.ifs["sut_out"], "master", "static"])
        tb.changes.record(f"{ns}/{br}: fdb {sink_mac} dev {tb.ifs['sut_out']} static", lambda: None)

    def counters(self, tb: "LocalTestbed") -> dict[str, int]:
        ns = tb.ns["sut"]
        fdb = fdb_entries(hostcmd.in_netns(ns, ["bridge", "-j", "fdb", "show", "br", bridge_name(tb)]))
        gen_mac = tb.addr["gen"][2]
        learned = sum(1 for e in fdb if e.mac == gen_mac and e.ifname == tb.ifs["sut_in"]
                      and "permanent" not in e.state and "static" not in e.state)
        links = tb.link_stats()  # the testbed's open sockets: no helper forked per read
        return {
            "sut_in_rx_packets": links["sut_in"]["rx_packets"],
            "sut_out_tx_packets": links["sut_out"]["tx_packets"],
            "fdb_gen_mac_entries": learned,
            "ip_forw_datagrams": forw_datagrams(ns),
        }
