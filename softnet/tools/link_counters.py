"""An interface's counters as a trial reads them: stats64, ethtool -S and
its qdisc's drops, in a namespace (``ns``) or, for None, where we run (a
remote host's agent reads its own)."""
from __future__ import annotations

import json

from softnet.errors import TestbedError
from softnet.tools import hostcmd

LINK_FIELDS = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped", "rx_errors", "tx_errors")


def link_stats(ns: str | None, ifname: str, ipr=None) -> dict[str, int]:
    """``ipr``: an open netlink socket in ``ns`` (a testbed's); else one is opened."""
    if ipr is None:
        from pyroute2 import IPRoute  # 0.25 s to import: not on every command's start (the CLI imports this)

        with IPRoute(netns=ns) as sock:
            return link_stats(ns, ifname, sock)
    links = ipr.get_links(ifname=ifname)
    if not links:
        raise TestbedError(f"no interface {ifname}" + (f" in {ns}" if ns else " on this host"))
    stats = links[0].get("stats64") or {}
    return {k: int(stats.get(k, 0)) for k in LINK_FIELDS}


def ethtool_stats(ns: str | None, ifname: str, check: bool = True) -> dict[str, int]:
    """ethtool -S: the numeric counters (the driver names them); ``check``
    false: {} for a driver without them."""
    stats = {}
    for line in hostcmd.run_in(ns, ["ethtool", "-S", ifname], check=check).splitlines()[1:]:
        key, _, val = line.strip().partition(":")
        if val.strip().isdigit():
            stats[key.strip()] = int(val)
    return stats


def qdisc_drops(ns: str | None, ifname: str) -> int:
    out = hostcmd.run_in(ns, ["tc", "-s", "-j", "qdisc", "show", "dev", ifname])
    return sum(int(q.get("drops", 0)) for q in json.loads(out or "[]"))
