"""Reads inside the SUT namespace that several personalities' path-proof
counters share (no personality here: this module registers nothing)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from softnet.errors import TestbedError
from softnet.testbed.personalities.tool_json import NftListing
from softnet.tools import hostcmd


def snmp(ns: str | None, group: str = "Ip") -> dict[str, int]:
    """One group of /proc/net/snmp as the namespace sees it (``ip netns exec``
    gives cat the namespace's /proc/net)."""
    lines = [l.split() for l in hostcmd.read_ns_file(ns, "/proc/net/snmp").splitlines() if l.startswith(group + ":")]
    if len(lines) < 2:
        raise TestbedError(f"{ns}: no {group} lines in /proc/net/snmp")
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:])}


def forw_datagrams(ns: str | None) -> int:
    """Ip ForwDatagrams: packets the namespace's IPv4 stack routed onwards."""
    return snmp(ns)["ForwDatagrams"]


def forw_datagrams6(ns: str | None) -> int:
    """Ip6OutForwDatagrams: packets the namespace's IPv6 stack routed onwards."""
    for line in hostcmd.read_ns_file(ns, "/proc/net/snmp6").splitlines():
        key, _, val = line.partition(" ")
        if key == "Ip6OutForwDatagrams":
            return int(val.strip())
    raise TestbedError(f"{ns}: no Ip6OutForwDatagrams in /proc/net/snmp6")


def conntrack_count(ns: str) -> int:
    """Connection-tracking entries in the namespace (0 when conntrack never
    engaged there)."""
    path = "/proc/sys/net/netfilter/nf_conntrack_count"
    out = hostcmd.in_netns(ns, ["cat", path], check=False).strip()
    return int(out) if out.isdigit() else 0


def nft_load(ns: str, text: str) -> None:
    """Load an nftables ruleset into the namespace with one ``nft -f`` of a
    temporary file (one transaction: all of it or nothing)."""
    fd, name = tempfile.mkstemp(prefix="sn-nft-", suffix=".nft")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        hostcmd.in_netns(ns, ["nft", "-f", name], timeout=300)
    finally:
        Path(name).unlink(missing_ok=True)


def nft_delete_table(ns: str, family: str, table: str) -> None:
    """Undo of nft_load's table: gone with its namespace anyway."""
    if Path("/run/netns", ns).exists():
        hostcmd.in_netns(ns, ["nft", "delete", "table", family, table], check=False)


def nft_counters(ns: str, family: str, table: str) -> dict[str, int]:
    """Packets of every named counter of the table (``counter name X`` in a
    rule counts what that rule matched), keyed by name: one short listing,
    however many rules the table holds."""
    out = NftListing.model_validate_json(hostcmd.in_netns(ns, ["nft", "-j", "list", "counters", "table", family,
                                                               table]))
    return {c.name: c.packets for c in out.counters()}
