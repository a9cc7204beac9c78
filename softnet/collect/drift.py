"""The SUT host's resources at one instant, for the drift watch of a soak
(softnet.analysis.drift fits them over time): what grows when a data path
leaks. Levels, not rates: memory in slab caches, connection-tracking
entries, nftables set elements, BPF maps' memory, socket buffer pages.
Read at each trial's edges, on this host or by an inventory host's agent
(the same function), in the SUT's namespace where a figure is per
namespace. A source the host lacks is left out, not zero."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from softnet.tools import hostcmd

PAGE = os.sysconf("SC_PAGE_SIZE")

# slab caches a data path grows: connection tracking, socket buffers, nftables' and BPF's own
SLAB_PREFIXES = ("nf_conntrack", "skbuff_", "nft_", "bpf", "xfrm", "ip_dst_cache", "ip6_dst_cache", "fib6_nodes")
MEMINFO = {"Slab": "mem.slab_bytes", "SUnreclaim": "mem.slab_unreclaimable_bytes",
           "MemAvailable": "mem.available_bytes", "Percpu": "mem.percpu_bytes"}


def parse_meminfo(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in MEMINFO:
            out[MEMINFO[key]] = float(rest.split()[0]) * 1024
    return out


def parse_slabinfo(text: str) -> dict[str, float]:
    """Bytes in use (active objects x object size) of the caches in SLAB_PREFIXES."""
    out = {}
    for line in text.splitlines()[2:]:
        f = line.split()
        if len(f) > 3 and f[0].startswith(SLAB_PREFIXES):
            out[f"slab.{f[0]}_bytes"] = float(int(f[1]) * int(f[3]))
    return out


def parse_sockstat(text: str) -> dict[str, float]:
    """Sockets in use per protocol (the namespace's) and the bytes in their
    buffers (the kernel counts those pages host-wide), from /proc/net/sockstat."""
    out = {}
    for line in text.splitlines():
        proto, _, rest = line.partition(":")
        f = rest.split()
        pairs = dict(zip(f[::2], f[1::2]))
        if proto in ("TCP", "UDP", "FRAG"):
            if "inuse" in pairs:
                out[f"sock.{proto.lower()}_inuse"] = float(pairs["inuse"])
            if "mem" in pairs:
                out[f"sock.{proto.lower()}_mem_bytes"] = float(pairs["mem"]) * PAGE
    return out


def nft_set_elements(listing: dict) -> dict[str, float]:
    """Elements per nftables set, from ``nft -j list ruleset``."""
    out = {}
    for item in listing.get("nftables", []):
        s = item.get("set")
        if s:
            out[f"nft.{s.get('family')}.{s.get('table')}.{s.get('name')}_elements"] = float(len(s.get("elem", [])))
    return out


def bpf_maps(listing: list) -> dict[str, float]:
    """Memory of the BPF maps of each name, from ``bpftool -j map show``
    (bytes_memlock: the kernel's usage estimate since 6.4, which follows a
    hash map's entries). By name, not id: a program loaded again makes its
    maps anew, and the series goes on."""
    out: dict[str, float] = {}
    for m in listing:
        if "bytes_memlock" in m:
            key = f"bpf.{m.get('name') or 'unnamed'}_bytes"
            out[key] = out.get(key, 0.0) + float(m["bytes_memlock"])
    return out


def read_levels(ns: str | None) -> dict:
    """{"t_unix_s", "levels": {series: value}, "missing": {source: why}} for
    the host, with the namespace ``ns``'s own figures (None: this process's)."""
    levels, missing = {}, {}
    t = time.time()
    for source, read in (("meminfo", lambda: parse_meminfo(Path("/proc/meminfo").read_text())),
                         ("slabinfo", lambda: parse_slabinfo(Path("/proc/slabinfo").read_text())),
                         ("sockstat", lambda: parse_sockstat(hostcmd.read_ns_file(ns, "/proc/net/sockstat"))),
                         ("conntrack", lambda: _conntrack(ns)),
                         ("nft", lambda: nft_set_elements(json.loads(hostcmd.run_in(ns, ["nft", "-j", "list",
                                                                                          "ruleset"])))),
                         ("bpf", lambda: bpf_maps(json.loads(hostcmd.run(["bpftool", "-j", "map", "show"]) or "[]")))):
        try:
            levels |= read()
        except Exception as exc:  # noqa: BLE001 - a source this host lacks is left out, with why
            missing[source] = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return {"t_unix_s": t, "levels": levels, "missing": missing}


def _conntrack(ns: str | None) -> dict[str, float]:
    count = hostcmd.run_in(ns, ["cat", "/proc/sys/net/netfilter/nf_conntrack_count"], check=False).strip()
    if not count.isdigit():
        return {}  # conntrack never engaged there
    size = hostcmd.run_in(ns, ["cat", "/proc/sys/net/netfilter/nf_conntrack_max"], check=False).strip()
    return {"conntrack.entries": float(count), **({"conntrack.max": float(size)} if size.isdigit() else {})}
