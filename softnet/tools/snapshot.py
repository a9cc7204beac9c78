"""A snapshot of the host state softnet may change, to prove that a run gave
the host back as it found it: compare `host_snapshot()` before and after with
`snapshot_diff()`.

Only what is volatile on an idle host is left out (counters, address and
route lifetimes, dynamic neighbours), so two snapshots of an idle host are
equal. Link state (operstate, LOWER_UP) is kept: a peer going away is a
change worth seeing. Kernel threads and processes are host-wide: a netns
does not own them.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from softnet.errors import TestbedError
from softnet.tools import hostcmd

DEFAULT_SYSCTLS = ("net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding", "net.core.netdev_max_backlog",
                   "net.core.busy_poll", "net.core.busy_read", "net.core.rps_sock_flow_entries")
ETHTOOL = {"features": "-k", "rings": "-g", "channels": "-l", "coalesce": "-c"}
VOLATILE = {"stats", "stats64", "valid_life_time", "preferred_life_time", "expires"}
FOREVER = 4294967295  # lifetime of a static address
PAIR_SEP = re.compile(r"\s{2,}(?=[A-Za-z][\w -]*:)")  # between two "key: value" pairs on one line


def host_snapshot(netns: str | None = None, sysctls=DEFAULT_SYSCTLS) -> dict:
    """State of the host (netns None) or of a namespace, as plain JSON data."""
    def run(argv: list[str], **kw) -> str:
        return hostcmd.run_in(netns, argv, **kw)

    links = json.loads(run(["ip", "-j", "link"]) or "[]")
    names = sorted(link["ifname"] for link in links)
    files = _read_files(run, [*(f"/proc/sys/{k.replace('.', '/')}" for k in sysctls),
                              *(f"/sys/class/net/{n}/threaded" for n in names)])
    return {
        "links": {link["ifname"]: _stable(link) for link in links},
        "addresses": {a["ifname"]: [_address(i) for i in a.get("addr_info", [])]
                      for a in json.loads(run(["ip", "-j", "addr"]) or "[]")},
        "routes4": _sorted(_stable(r) for r in json.loads(run(["ip", "-j", "-4", "route"]) or "[]")),
        "routes6": _sorted(_stable(r) for r in json.loads(run(["ip", "-j", "-6", "route"]) or "[]")),
        "neighbours_permanent": _sorted(
            _stable(n) for n in json.loads(run(["ip", "-j", "neigh", "show", "nud", "permanent"]) or "[]")),
        "ethtool": {n: {what: _ethtool(run, opt, n) for what, opt in ETHTOOL.items()} for n in names},
        # A key missing in a namespace (most net.core ones are host-wide) reads "absent".
        "sysctls": {k: files.get(f"/proc/sys/{k.replace('.', '/')}", "absent") for k in sysctls},
        "xdp": {link["ifname"]: _stable(link["xdp"]) for link in links if "xdp" in link},
        "threaded": {n: files.get(f"/sys/class/net/{n}/threaded", "absent") for n in names},
        "napi_threads": _napi_affinity(),
        "softnet_processes": sorted(comm for _, comm in _comms() if comm.startswith("softnet-")),
    }


def snapshot_diff(a: dict, b: dict, path: str = "") -> list[str]:
    """Readable differences, one per line: "path: before -> after"."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a:
                out.append(f"{sub}: (absent) -> {_show(b[key])}")
            elif key not in b:
                out.append(f"{sub}: {_show(a[key])} -> (absent)")
            else:
                out += snapshot_diff(a[key], b[key], sub)
        return out
    if a == b:
        return []
    if isinstance(a, list) and isinstance(b, list) and all(isinstance(x, dict) for x in a + b):
        # Routes, addresses: name what went and what came, not the whole list.
        return ([f"{path}: {_show(x)} -> (absent)" for x in a if x not in b]
                + [f"{path}: (absent) -> {_show(x)}" for x in b if x not in a])
    return [f"{path}: {_show(a)} -> {_show(b)}"]


def _show(value) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def _stable(obj):
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def _address(info: dict) -> dict:
    out = _stable(info)
    if info.get("valid_life_time", FOREVER) != FOREVER:  # its countdown is volatile, being dynamic is not
        out["dynamic"] = True
    return out


def _sorted(items) -> list:
    return sorted(items, key=lambda x: json.dumps(x, sort_keys=True))


def _read_files(run, paths: list[str]) -> dict[str, str]:
    """path -> content (first line) of the readable ones, in one process: grep
    -H prefixes each line with its file, -s skips the missing ones."""
    out = run(["grep", "-sH", "^", *paths], check=False) if paths else ""
    files: dict[str, str] = {}
    for line in out.splitlines():
        path, _, value = line.partition(":")
        files.setdefault(path, value.strip())
    return files


def _ethtool(run, option: str, dev: str) -> dict | str:
    try:
        text = run(["ethtool", option, dev])
    except TestbedError as exc:  # carries ethtool's stderr
        return "unsupported" if "not supported" in str(exc).lower() else f"error: {str(exc).splitlines()[-1]}"
    return parse_ethtool(text)


def parse_ethtool(text: str) -> dict:
    """ethtool's "key: value" text (first line is the title) as a dict; a
    line "Section:" opens a nested dict (rings and channels have "Pre-set
    maximums" and "Current hardware settings"); "Adaptive RX: on  TX: on"
    holds two pairs."""
    top: dict = {}
    section = top
    for line in text.splitlines()[1:]:
        if not line.strip():
            continue
        if line.rstrip().endswith(":") and ":" not in line.rstrip()[:-1]:
            section = top.setdefault(line.strip()[:-1], {})
            continue
        first, *more = PAIR_SEP.split(line.strip())
        key, _, value = first.partition(":")
        section[key.strip()] = value.strip()
        qualifier = key.strip().rpartition(" ")[0]
        for part in more:  # "Adaptive RX: on  TX: on": the second is "Adaptive TX"
            k, _, v = part.partition(":")
            section[f"{qualifier} {k.strip()}".strip()] = v.strip()
    return top


def _comms():
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            yield int(comm.parent.name), comm.read_text().strip()
        except OSError:
            continue  # exited while we looked


def _napi_affinity() -> list[list]:
    """[comm, CPUs] of every NAPI kthread, sorted. Comm is cut to 15
    characters, so two threads may share one; pids change, so they are left out."""
    out = []
    for pid, comm in _comms():
        if comm.startswith("napi/"):
            try:
                out.append([comm, sorted(os.sched_getaffinity(pid))])
            except OSError:
                continue
    return sorted(out)
