"""nftables firewall: kernel IPv4 forwarding through a forward-hook filter
chain (policy drop) of N rules of which only the last matches the test
traffic, with or without connection tracking: what a rule list costs per
packet, and what conntrack adds."""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from softnet.testbed.personalities import register
from softnet.testbed.personalities.base import Param, Requirement
from softnet.testbed.personalities.kernel_fwd import L3Forwarding
from softnet.testbed.personalities.nsread import (conntrack_count, forw_datagrams, nft_counters,
                                                  nft_delete_table, nft_load)

if TYPE_CHECKING:
    from softnet.testbed.local import LocalTestbed

log = logging.getLogger("softnet.personalities")

TABLE = ("inet", "softnet_fw")
MATCH_COUNTER = "softnet_match"
LIMIT_COUNTER = "softnet_limit"  # packets the limit dropped
TEST_NET = "198.18.0.0/15"  # every address of the test traffic (RFC 2544 benchmark space)

NFT_BASE = (Requirement("CONFIG_NF_TABLES", "nftables", "nft_do_chain"),
            Requirement("CONFIG_NF_TABLES_INET", "the inet table family", "nft_chain_filter_inet_init"),
            Requirement("tool:nft", "loads the ruleset, reads its counters"))
CONNTRACK = (Requirement("CONFIG_NF_CONNTRACK", "connection tracking", "nf_conntrack_in"),
             Requirement("CONFIG_NFT_CT", "the ct state match", "nft_ct_get_eval"))


class per_instance:
    """A ``requires`` that depends on the params: on the class (the doctor's
    listing) every requirement any configuration has, on an instance what
    its params need."""

    def __init__(self, fn):
        self.fn = fn

    def __get__(self, obj: Any, cls: type) -> tuple[Requirement, ...]:
        return self.fn(cls, obj)


def filler_rule(i: int) -> str:
    """The i-th non-matching rule: a distinct 5-tuple-ish match outside the
    test traffic's addresses (10/8 -> 172.16/12, TCP and UDP services)."""
    proto = ("tcp", "udp")[i % 2]
    verdict = "drop" if i % 7 == 3 else "accept"
    return (f"ip saddr 10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255} "
            f"ip daddr 172.{16 + (i >> 16) % 16}.{(i >> 8) & 255}.{(i * 7) & 255} "
            f"{proto} dport {1 + (i * 37) % 65535} {verdict}")


# A limit's token bucket holds this many seconds of its rate: packets reach the rule in
# NAPI batches (up to 64) and after a vCPU stall as a backlog, which nft's default 5
# packets (and 2 ms, in CI) dropped below the rate; a bigger bucket lets a trial just
# above the rate through (it adds burst / (warm-up + window) to the truth).
LIMIT_BURST_S = 0.005


def limit_rule(limit_pps: int) -> str:
    """Drop the test traffic beyond ``limit_pps`` (a token bucket): a data path whose throughput is known."""
    burst = max(5, round(limit_pps * LIMIT_BURST_S))
    return (f"ip saddr {TEST_NET} ip daddr {TEST_NET} meta l4proto udp "
            f"limit rate over {limit_pps}/second burst {burst} packets counter name {LIMIT_COUNTER} drop")


def ruleset(rules: int, conntrack: bool, limit_pps: int = 0) -> str:
    """The table as one nft file: rules - 1 fillers, the limit (if any), then
    the rule that matches the test traffic (with a named counter)."""
    fam, table = TABLE
    last = (f"ip saddr {TEST_NET} ip daddr {TEST_NET} ct state new,established counter name {MATCH_COUNTER} accept"
            if conntrack else
            f"ip saddr {TEST_NET} ip daddr {TEST_NET} meta l4proto udp counter name {MATCH_COUNTER} accept")
    lines = [f"table {fam} {table} {{", f"  counter {MATCH_COUNTER} {{ }}", f"  counter {LIMIT_COUNTER} {{ }}",
             "  chain forward {", "    type filter hook forward priority filter; policy drop;"]
    lines += [f"    {filler_rule(i)}" for i in range(rules - 1)]
    if limit_pps:
        lines.append(f"    {limit_rule(limit_pps)}")
    lines += [f"    {last}", "  }", "}"]
    return "\n".join(lines) + "\n"


@register
class NftFw(L3Forwarding):
    name = "nft-fw"
    summary = "IPv4 forwarding through an nftables forward chain of N rules, the last matching"
    params = {
        "rules": Param(int, 100, "rules in the forward chain; only the last matches the test traffic",
                       lo=1, hi=100_000),
        "conntrack": Param(bool, False, "the matching rule is `ct state new,established` (conntrack engaged)"),
        "limit": Param(int, 0, "pps: drop the test traffic beyond this rate (nftables `limit rate over`, a "
                       "5 ms burst), a throughput known in advance; 0: no limit", lo=0, hi=100_000_000),
    }

    @per_instance
    def requires(cls, self) -> tuple[Requirement, ...]:
        return NFT_BASE + (CONNTRACK if self is None or self.values["conntrack"] else ())

    load_s: float | None = None  # how long `nft -f` took to load the table

    def configure(self, tb: "LocalTestbed") -> None:
        super().configure(tb)
        ns, (fam, table) = tb.ns["sut"], TABLE
        text = ruleset(self.values["rules"], self.values["conntrack"], self.values["limit"])
        tb.changes.record(f"nft table {fam} {table} in {ns} ({self.values['rules']} rules)",
                          lambda: nft_delete_table(ns, fam, table))
        t0 = time.monotonic()
        nft_load(ns, text)
        self.load_s = time.monotonic() - t0
        log.info("%s: %d rules loaded in %.2f s", self.spec, self.values["rules"], self.load_s)

    def reset(self, tb: "LocalTestbed") -> str:
        """The rule set reloaded: the table deleted and loaded again in one
        `nft -f` transaction (what a firewall's reload does). Its counters
        start again from 0."""
        fam, table = TABLE
        nft_load(tb.ns["sut"], f"delete table {fam} {table}\n" + ruleset(
            self.values["rules"], self.values["conntrack"], self.values["limit"]))
        return f"nft -f: table {fam} {table} deleted and loaded again ({self.values['rules']} rules), one transaction"

    def counters(self, tb: "LocalTestbed") -> dict[str, int]:
        ns = tb.ns["sut"]
        counted = nft_counters(ns, *TABLE)
        return {"nft_match_packets": counted.get(MATCH_COUNTER, 0), "nft_limit_dropped": counted.get(LIMIT_COUNTER, 0),
                "conntrack_entries": conntrack_count(ns),
                "ip_forw_datagrams": forw_datagrams(ns)}
