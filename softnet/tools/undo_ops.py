"""The undo operations of the change journal (softnet.tools.journal): each
restores one kind of host change from the undo data recorded before it was
made. All are idempotent (an already restored or vanished object is success),
act on the current network namespace, and never go through a shell.
"""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from softnet.tools import ip_json, nic

NETNS_GONE = "network namespace gone"
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


# ---- helpers of the undo ops ------------------------------------------------
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


def _stop(pid: int, start: int | None) -> None:
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


def _netlink(ifname: str, action) -> None:
    """action(ipr, index) on the link if it still exists; 'not there'
    answers (ENODEV, EADDRNOTAVAIL, ENOENT, ESRCH) mean already undone."""
    from pyroute2 import IPRoute  # only when replaying: the reaper stays light
    from pyroute2.netlink.exceptions import NetlinkError

    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=ifname)
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


def _ip_link(ifname: str) -> ip_json.IpLink:
    return ip_json.links(_run(["ip", "-j", "link", "show", "dev", ifname]))[0]


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


# ---- the journal's entries, one model per undo op -------------------------
class UndoEntry(BaseModel):
    """One journal line of undo data: {"i": n, "op": ..., "what": ..., **args}.
    Fields a newer writer adds are kept (extra="allow"), so that a line read
    back and written again is the same."""
    model_config = ConfigDict(frozen=True, extra="allow", coerce_numbers_to_str=True)  # an old value as read

    i: int
    op: str
    what: str = ""

    def undo(self) -> None:
        raise NotImplementedError

    def netns_bound(self) -> bool:
        """Undone by the namespace's end (links, and sysctls and files of its devices)."""
        return False

    def line(self) -> dict:
        """The journal line: the fields it was made with, in the model's order."""
        return self.model_dump(exclude_unset=True)


class _NetnsEntry(UndoEntry):
    """A change of the namespace's own links: its end undoes it."""

    def netns_bound(self) -> bool:
        return True


class Sysctl(UndoEntry):
    key: str
    old: str

    def undo(self) -> None:
        _write_back(_sysctl_path(self.key), self.old)

    def netns_bound(self) -> bool:  # net.* sysctls belong to the namespace
        return self.key.startswith(("net.", "net/"))


class File(UndoEntry):
    path: str
    old: str

    def undo(self) -> None:
        _write_back(Path(self.path), self.old)

    def netns_bound(self) -> bool:  # a namespace's devices' files go with it
        return self.path.startswith(NETNS_PATHS)


class Affinity(UndoEntry):
    pid: int
    pid_start: int | None = None
    old: list[int]

    def undo(self) -> None:
        if running(self.pid, self.pid_start):
            try:
                os.sched_setaffinity(self.pid, self.old)
            except ProcessLookupError:
                pass


class Kill(UndoEntry):
    pid: int
    pid_start: int | None = None

    def undo(self) -> None:
        _stop(self.pid, self.pid_start)


class LinkDel(_NetnsEntry):
    ifname: str

    def undo(self) -> None:
        _netlink(self.ifname, lambda ipr, i: ipr.link("del", index=i))


class LinkState(_NetnsEntry):
    ifname: str
    up: bool
    qdisc: str | None = None

    def undo(self) -> None:
        """The link back up or down; a link that had never been up (root qdisc
        "noop") gets noop back: its first activation attached the default qdisc,
        which outlives the link going down, and grafting one and deleting it on
        a down link leaves noop."""
        _netlink(self.ifname, lambda ipr, i: ipr.link("set", index=i, state="up" if self.up else "down"))
        if not self.up and self.qdisc == "noop" and _link_exists(self.ifname):
            _run(["tc", "qdisc", "replace", "dev", self.ifname, "root", "pfifo"])
            _run(["tc", "qdisc", "del", "dev", self.ifname, "root"])


class AddrDel(_NetnsEntry):
    ifname: str
    address: str
    prefixlen: int

    def undo(self) -> None:
        _netlink(self.ifname, lambda ipr, i: ipr.addr("del", index=i, address=self.address,
                                                      prefixlen=self.prefixlen))


class NeighDel(_NetnsEntry):
    ifname: str
    dst: str

    def undo(self) -> None:
        _netlink(self.ifname, lambda ipr, i: ipr.neigh("del", ifindex=i, dst=self.dst))


class EthtoolFeatures(_NetnsEntry):
    ifname: str
    features: dict[str, str | bool]  # short name -> "on"/"off" (or a bool)

    def undo(self) -> None:
        if _link_exists(self.ifname):
            args = [x for name, v in self.features.items()
                    for x in (name, v if isinstance(v, str) else ("on" if v else "off"))]
            _run(["ethtool", "-K", self.ifname, *args])


class EthtoolSet(_NetnsEntry):
    """Rings (-G), channels (-L), coalescing (-C) or the RSS table's weights
    (-X) back to their old values."""
    ifname: str
    flag: str
    old: dict[str, str | int]

    def undo(self) -> None:
        if _link_exists(self.ifname) and self.old:
            _run(nic.ethtool_argv(self.ifname, self.flag, {p: str(v) for p, v in self.old.items()}))


class XdpOff(_NetnsEntry):
    """Detach only the program we attached (prog_id; None: whatever is there,
    for an interface that had none), in the mode it is attached in."""
    ifname: str
    prog_id: int | None = None

    def undo(self) -> None:
        if not _link_exists(self.ifname):
            return
        xdp = _ip_link(self.ifname).xdp
        for att in xdp.programs() if xdp is not None else []:
            if self.prog_id is None or (att.prog is not None and att.prog.id == self.prog_id):
                _run(["ip", "link", "set", "dev", self.ifname, att.keyword, "off"])


class DeviceState(BaseModel):
    """What a NIC's use by a SUT namespace may change and its removal does
    not restore (softnet.hosts.host_ops.HostOps.device_state)."""
    model_config = ConfigDict(frozen=True, extra="allow")

    up: bool = False
    qdisc: str | None = None
    mtu: int | None = None
    gro: str | None = None
    threaded: str | None = None
    rps: dict[str, str] = Field(default_factory=dict)  # rx queue -> rps_cpus mask
    xdp: bool = False


class DeviceStateEntry(_NetnsEntry):
    ifname: str
    state: DeviceState

    def undo(self) -> None:
        """A NIC's own state back as it was before softnet used it: no XDP
        program of ours, GRO, threaded NAPI, RPS masks, MTU, then up or down
        (down with qdisc noop if it had never been up)."""
        name, st = self.ifname, self.state
        if not _link_exists(name):
            return
        # threaded first. A veth has NAPI instances only while up with GRO (or XDP),
        # and one without them refuses the write (EOPNOTSUPP): it is lent both for
        # the write; GRO and the link state are put back below.
        if st.threaded is not None:
            try:
                _write_back(Path(f"/sys/class/net/{name}/threaded"), st.threaded)
            except OSError:
                _run(["ip", "link", "set", "dev", name, "up"])
                _run(["ethtool", "-K", name, "gro", "on"])
                _write_back(Path(f"/sys/class/net/{name}/threaded"), st.threaded)
        for queue, mask in st.rps.items():
            _write_back(Path(f"/sys/class/net/{name}/queues/{queue}/rps_cpus"), mask)
        if not st.xdp and _ip_link(name).xdp is not None:
            XdpOff(i=self.i, op="xdp_off", ifname=name).undo()
        if st.gro is not None:
            _run(["ethtool", "-K", name, "gro", st.gro])
        if st.mtu is not None:
            _run(["ip", "link", "set", "dev", name, "mtu", str(st.mtu)])
        LinkState(i=self.i, op="link_state", ifname=name, up=st.up, qdisc=st.qdisc).undo()


class LabNetns(_NetnsEntry):
    """A SUT namespace on this host (softnet.testbed.sut_lab): every process
    in it stopped, the NICs moved back here (the namespace this undo runs
    in), then the namespace removed with everything a personality left in it."""
    ns: str
    ifnames: list[str]

    def undo(self) -> None:
        path = Path("/run/netns", self.ns)
        if not path.exists():
            return
        for pid in _pids_in_netns(path):
            _stop(pid, pid_start(pid))
        for ifname in self.ifnames:
            if subprocess.run(["ip", "-n", self.ns, "link", "show", "dev", ifname],
                              capture_output=True).returncode == 0:
                _run(["ip", "-n", self.ns, "link", "set", "dev", ifname, "netns", str(os.getpid())])
        _run(["ip", "netns", "delete", self.ns])


class Unreadable(UndoEntry):
    """A numbered entry no model reads (an unknown op, a missing argument):
    kept pending, its undo fails with why, so that it is reported, never lost."""
    op: Any = None
    error: str = Field(default="", exclude=True)

    def undo(self) -> None:
        raise ValueError(self.error)


OPS: dict[str, type[UndoEntry]] = {  # op name -> its model (the entry's "op" picks it)
    "sysctl": Sysctl, "file": File, "affinity": Affinity, "kill": Kill, "link_del": LinkDel,
    "link_state": LinkState, "addr_del": AddrDel, "neigh_del": NeighDel, "ethtool_features": EthtoolFeatures,
    "ethtool_set": EthtoolSet, "xdp_off": XdpOff, "device_state": DeviceStateEntry, "lab_netns": LabNetns,
}


class _Numbered(BaseModel):
    i: int
    op: Any = None
    what: str = ""


def parse_entry(obj: Any) -> UndoEntry:
    """A journal line of undo data as its op's model; one that no model reads
    is Unreadable (ValidationError if it has no entry number at all)."""
    n = _Numbered.model_validate(obj)
    model = OPS.get(n.op) if isinstance(n.op, str) else None
    if model is None:
        return Unreadable(i=n.i, op=n.op, what=n.what, error=f"unknown op {n.op!r}")
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        missing = _missing(model, obj)
        why = (f"journal op {n.op} needs {', '.join(missing)}" if missing
               else f"journal op {n.op}: {' '.join(str(exc).split())}")
        return Unreadable(i=n.i, op=n.op, what=n.what, error=why)


def _missing(model: type[BaseModel], args: dict) -> list[str]:
    return [name for name, f in model.model_fields.items() if f.is_required() and name not in args]


def new_entry(i: int, what: str, op: str, args: dict[str, Any]) -> UndoEntry:
    """The entry record() writes; ValueError naming what is wrong with it, so
    that a journal never holds an entry it cannot undo."""
    if op not in OPS:
        raise ValueError(f"unknown journal op {op!r} (known: {', '.join(OPS)})")
    if reserved := sorted({"i", "op", "what"} & set(args)):
        raise ValueError(f"{', '.join(reserved)}: the entry's own fields, not arguments")
    line = {"i": i, "op": op, "what": what, **args}
    if missing := _missing(OPS[op], line):
        raise ValueError(f"journal op {op} needs {', '.join(missing)}")
    try:
        return OPS[op].model_validate(line)
    except ValidationError as exc:
        raise ValueError(f"journal op {op}: {' '.join(str(exc).split())}") from None


def undo_entry(e: UndoEntry, netns_gone: bool = False) -> str | None:
    """Undo one entry; returns why it was skipped, if it was."""
    if netns_gone and e.netns_bound():
        return NETNS_GONE
    e.undo()
    return None
