"""Source NAT: kernel IPv4 forwarding with nftables masquerade (or `snat
to`) to sut_out's address, connection tracking engaged: the first packet of
each flow creates a conntrack entry and a NAT binding, every later one is
translated from it."""
from __future__ import annotations

from typing import TYPE_CHECKING

from softnet.testbed.personalities import register
from softnet.testbed.personalities.base import Param, Requirement
from softnet.testbed.personalities.kernel_fwd import L3Forwarding
from softnet.testbed.personalities.nsread import (conntrack_count, forw_datagrams, nft_counters,
                                                  nft_delete_table, nft_load)

if TYPE_CHECKING:
    from softnet.testbed.local import LocalTestbed

TABLE = ("ip", "softnet_nat")
FWD_COUNTER = "softnet_forwarded"  # every forwarded packet (forward hook)
NAT_COUNTER = "softnet_nat_new"  # the nat rule: the first packet of each connection only


def ruleset(oifname: str, mode: str, to_addr: str) -> str:
    fam, table = TABLE
    action = "masquerade" if mode == "masquerade" else f"snat to {to_addr}"
    return "\n".join([
        f"table {fam} {table} {{",
        f"  counter {FWD_COUNTER} {{ }}",
        f"  counter {NAT_COUNTER} {{ }}",
        "  chain forward {",
        "    type filter hook forward priority filter; policy accept;",
        f"    oifname \"{oifname}\" counter name {FWD_COUNTER}",
        "  }",
        "  chain postrouting {",
        "    type nat hook postrouting priority srcnat; policy accept;",
        f"    oifname \"{oifname}\" counter name {NAT_COUNTER} {action}",
        "  }",
        "}",
    ]) + "\n"


@register
class Nat(L3Forwarding):
    name = "nat"
    summary = "IPv4 forwarding with nftables source NAT to sut_out's address (conntrack)"
    params = {"mode": Param(str, "masquerade", "masquerade, or snat (`snat to` sut_out's address)",
                            choices=("masquerade", "snat"))}
    requires = (Requirement("CONFIG_NF_TABLES", "nftables", "nft_do_chain"),
                Requirement("CONFIG_NF_CONNTRACK", "connection tracking", "nf_conntrack_in"),
                Requirement("CONFIG_NF_NAT", "network address translation", "nf_nat_setup_info"),
                Requirement("CONFIG_NFT_NAT", "the nft snat statement", "nft_nat_eval"),
                Requirement("CONFIG_NFT_MASQ", "the nft masquerade statement", "nft_masq_ipv4_eval"),
                Requirement("tool:nft", "loads the ruleset, reads its counters"))

    def configure(self, tb: "LocalTestbed") -> None:
        super().configure(tb)
        ns, (fam, table) = tb.ns["sut"], TABLE
        tb.changes.record(f"nft table {fam} {table} in {ns} ({self.values['mode']})",
                          lambda: nft_delete_table(ns, fam, table))
        nft_load(ns, ruleset(tb.ifs["sut_out"], self.values["mode"], tb.addr["sut_out"][0]))

    def counters(self, tb: "LocalTestbed") -> dict[str, int]:
        ns = tb.ns["sut"]
        c = nft_counters(ns, *TABLE)
        return {"nft_forwarded_packets": c.get(FWD_COUNTER, 0),
                "nft_nat_first_packets": c.get(NAT_COUNTER, 0),
                "conntrack_entries": conntrack_count(ns),
                "ip_forw_datagrams": forw_datagrams(ns)}
