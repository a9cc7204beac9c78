"""The undo operations of the change journal (softnet.tools.journal): each
restores one kind of host change from the undo data recorded before it was
made. All are idempotent (an already restored or vanished object is success),
act on the current network namespace, and never go through a shell.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
from pathlib import Path

NETNS_GONE = "network namespace gone"

# op -> the arguments its undo needs (checked by record, so that a journal
# never holds an entry it cannot undo)
OPS = {
    "sysctl": ("key", "old"), "file": ("path", "old"), "affinity": ("pid", "old"),
    "kill": ("pid",), "link_del": ("ifname",), "link_state": ("ifname", "up"),
    "addr_del": ("ifname", "address", "prefixlen"), "neigh_del": ("ifname", "dst"),
    "ethtool_features": ("ifname", "features"), "xdp_off": ("ifname",),
    "ethtool_set": ("ifname", "flag", "old"),
    "device_state": ("ifname", "state"), "lab_netns": ("ns", "ifnames"),
}
NETNS_OPS = {"link_del", "link_state", "addr_del", "neigh_del", "ethtool_features", "xdp_off",
             "ethtool_set", "device_state", "lab_netns"}
NETNS_PATHS = ("/proc/sys/net/", "/sys/class/net/", "/sys/devices/virtual/net/")


# ---- processes ----------------------------------------------------------
def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()  # comm may hold spaces and parentheses


def pid_start(pid: int) -> int | None:
    """Start time (field 22 of /proc/pid/stat) that tells a process from a later
    one reusing its pid; None if there is no such process."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def running(pid: int, start: int | None) -> bool:
    """That very process exists and has not exited (a zombie has)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] not in ("Z", "X") and (start is None or int(fields[19]) == start)


# ---- undo ops -------------------------------------------------------------
def _write_back(path: Path, old) -> None:
    old = str(old).strip()
    try:
        # Some files refuse a write of the value they hold (threaded on a
        # device without NAPI: EOPNOTSUPP), so a second replay must not write.
        if path.read_text().strip() == old:
            return
    except FileNotFoundError:
        return  # the object it belonged to is gone, and its setting with it
    except OSError:
        pass  # write-only file
    with open(path, "w") as f:
        f.write(old + "\n")


def _sysctl_path(key: str) -> Path:
    # "/"-separated keys allow interface names with dots (eth0.100)
    return Path("/proc/sys", key if "/" in key else key.replace(".", "/"))


def _kill(e: dict) -> None:
    pid, start = e["pid"], e.get("pid_start")
    for sig, wait_s in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 2.0)):
        if not running(pid, start):
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while running(pid, start) and time.monotonic() < deadline:
            time.sleep(0.02)
    if running(pid, start):
        raise RuntimeError(f"pid {pid} still running after SIGKILL")


def _affinity(e: dict) -> None:
    if running(e["pid"], e.get("pid_start")):
        try:
            os.sched_setaffinity(e["pid"], e["old"])
        except ProcessLookupError:
            pass


def _netlink(e: dict, action) -> None:
    """action(ipr, index) on the entry's link if it still exists; 'not there'
    answers (ENODEV, EADDRNOTAVAIL, ENOENT, ESRCH) mean already undone."""
    from pyroute2 import IPRoute  # only when replaying: the reaper stays light
    from pyroute2.netlink.exceptions import NetlinkError

    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=e["ifname"])
        if not index:
            return
        try:
            action(ipr, index[0])
        except NetlinkError as exc:
            if exc.code not in (errno.ENODEV, errno.EADDRNOTAVAIL, errno.ENOENT, errno.ESRCH):
                raise


def _run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def _link_exists(ifname: str) -> bool:
    # sysfs would show the namespace that mounted /sys, not ours: ask the kernel
    return subprocess.run(["ip", "link", "show", "dev", ifname], capture_output=True).returncode == 0


def _ethtool(e: dict) -> None:
    if _link_exists(e["ifname"]):
        args = [x for name, v in e["features"].items()
                for x in (name, v if isinstance(v, str) else ("on" if v else "off"))]
        _run(["ethtool", "-K", e["ifname"], *args])


def _ethtool_set(e: dict) -> None:
    """Rings (-G), channels (-L) or coalescing (-C) back to their old values."""
    if _link_exists(e["ifname"]) and e["old"]:
        _run(["ethtool", e["flag"], e["ifname"], *[x for p, v in sorted(e["old"].items()) for x in (p, str(v))]])


def _pids_in_netns(path: Path) -> list[int]:
    try:
        ino = os.stat(path).st_ino
    except OSError:
        return []
    out = []
    for link in Path("/proc").glob("[0-9]*/ns/net"):
        try:
            if os.stat(link).st_ino == ino and int(link.parts[2]) != os.getpid():
                out.append(int(link.parts[2]))
        except (OSError, ValueError):
            continue
    return out


def _lab_netns(e: dict) -> None:
    """A SUT namespace on this host (softnet.testbed.sut_lab): every process
    in it stopped, the NICs moved back here (the namespace this undo runs
    in), then the namespace removed with everything a personality left in it."""
    path = Path("/run/netns", e["ns"])
    if not path.exists():
        return
    for pid in _pids_in_netns(path):
        _kill({"pid": pid, "pid_start": pid_start(pid)})
    for ifname in e["ifnames"]:
        if subprocess.run(["ip", "-n", e["ns"], "link", "show", "dev", ifname], capture_output=True).returncode == 0:
            _run(["ip", "-n", e["ns"], "link", "set", "dev", ifname, "netns", str(os.getpid())])
    _run(["ip", "netns", "delete", e["ns"]])


def _device_state(e: dict) -> None:
    """A NIC's own state back as it was before softnet used it (what its
    namespace's removal does not undo): no XDP program of ours, GRO,
    threaded NAPI, RPS masks, MTU, then up or down (down with qdisc noop if
    it had never been up)."""
    name, st = e["ifname"], e["state"]
    if not _link_exists(name):
        return
    # threaded first. A veth has NAPI instances only while up with GRO (or XDP),
    # and one without them refuses the write (EOPNOTSUPP): it is lent both for
    # the write; GRO and the link state are put back below.
    if st.get("threaded") is not None:
        try:
            _write_back(Path(f"/sys/class/net/{name}/threaded"), st["threaded"])
        except OSError:
            _run(["ip", "link", "set", "dev", name, "up"])
            _run(["ethtool", "-K", name, "gro", "on"])
            _write_back(Path(f"/sys/class/net/{name}/threaded"), st["threaded"])
    for queue, mask in (st.get("rps") or {}).items():
        _write_back(Path(f"/sys/class/net/{name}/queues/{queue}/rps_cpus"), mask)
    if not st.get("xdp"):
        info = json.loads(_run(["ip", "-j", "link", "show", "dev", name]))[0]
        if info.get("xdp"):
            _xdp_off({"ifname": name, "prog_id": None})
    if st.get("gro") is not None:
        _run(["ethtool", "-K", name, "gro", st["gro"]])
    if st.get("mtu") is not None:
        _run(["ip", "link", "set", "dev", name, "mtu", str(st["mtu"])])
    _link_state({"ifname": name, "up": st.get("up", False), "qdisc": st.get("qdisc")})


XDP_MODES = {1: "xdpdrv", 2: "xdpgeneric", 3: "xdpoffload"}


def _xdp_off(e: dict) -> None:
    """Detach only the program we attached (prog_id; None: whatever is there,
    for an interface that had none), in the mode it is attached in."""
    if not _link_exists(e["ifname"]):
        return
    info = json.loads(_run(["ip", "-j", "link", "show", "dev", e["ifname"]]))[0]
    xdp = info.get("xdp") or {}
    for att in xdp.get("attached") or ([xdp] if "prog" in xdp else []):
        if e.get("prog_id") is None or att.get("prog", {}).get("id") == e["prog_id"]:
            _run(["ip", "link", "set", "dev", e["ifname"], XDP_MODES.get(att.get("mode"), "xdp"), "off"])


UNDO = {
    "sysctl": lambda e: _write_back(_sysctl_path(e["key"]), e["old"]),
    "file": lambda e: _write_back(Path(e["path"]), e["old"]),
    "affinity": _affinity,
    "kill": _kill,
    "link_del": lambda e: _netlink(e, lambda ipr, i: ipr.link("del", index=i)),
    "link_state": lambda e: _link_state(e),
    "addr_del": lambda e: _netlink(e, lambda ipr, i: ipr.addr("del", index=i, address=e["address"],
                                                               prefixlen=e["prefixlen"])),
    "neigh_del": lambda e: _netlink(e, lambda ipr, i: ipr.neigh("del", ifindex=i, dst=e["dst"])),
    "ethtool_features": _ethtool,
    "ethtool_set": _ethtool_set,
    "device_state": _device_state,
    "lab_netns": _lab_netns,
    "xdp_off": _xdp_off,
}


def _link_state(e: dict) -> None:
    """The link back up or down; a link that had never been up (root qdisc
    "noop") gets noop back: its first activation attached the default qdisc,
    which outlives the link going down, and grafting one and deleting it on
    a down link leaves noop."""
    _netlink(e, lambda ipr, i: ipr.link("set", index=i, state="up" if e["up"] else "down"))
    if not e["up"] and e.get("qdisc") == "noop" and _link_exists(e["ifname"]):
        _run(["tc", "qdisc", "replace", "dev", e["ifname"], "root", "pfifo"])
        _run(["tc", "qdisc", "del", "dev", e["ifname"], "root"])


def netns_bound(e: dict) -> bool:
    """Undone by the namespace's end: links, and sysctls and files of its devices."""
    return (e.get("op") in NETNS_OPS
            or (e.get("op") == "sysctl" and str(e.get("key", "")).startswith(("net.", "net/")))
            or (e.get("op") == "file" and str(e.get("path", "")).startswith(NETNS_PATHS)))


def undo_entry(e: dict, netns_gone: bool = False) -> str | None:
    """Undo one entry; returns why it was skipped, if it was."""
    undo = UNDO.get(e.get("op"))
    if undo is None:
        raise ValueError(f"unknown op {e.get('op')!r}")
    if netns_gone and netns_bound(e):
        return NETNS_GONE
    undo(e)
    return None

