"""Network namespaces joined by veth, built through the change registry: the
primitives every softnet testbed shares (namespaces, veth pairs, addresses,
static neighbours, sysctls, sysfs files, threaded NAPI), each change recorded
before it is made, so any exit undoes it.

Names carry the `sn-` prefix and a run id; a live run claims its namespaces
in /run/softnet/<run id>.owner so that `softnet clean` spares them.
"""
from __future__ import annotations

import os
import secrets
import signal
import time
from contextlib import nullcontext
from pathlib import Path

from pyroute2 import IPRoute, netns

from softnet.errors import TestbedError
from softnet.testbed.lock import testbed_lock
from softnet.tools import hostcmd
from softnet.tools.changes import HostChanges, deferred_signals

OWNERS_DIR = Path("/run/softnet")  # <run_id>.owner: pid of the live run (see cleanup.py)
IFA_F_NODAD = 0x02
NUD_PERMANENT = 0x80


def cpu_mask(cpus: list[int]) -> str:
    return format(sum(1 << c for c in cpus), "x")


class NetnsLab:
    """Base of the testbeds: ``ns`` and ``ifs`` map roles to names, ``addr``
    maps interface roles to (IPv4, IPv6, MAC)."""

    addr: dict[str, tuple[str, str, str]] = {}

    def __init__(self, changes: HostChanges):
        self.changes = changes
        self.run_id = secrets.token_hex(3)
        self.ns: dict[str, str] = {}
        self.ifs: dict[str, str] = {}
        self.napi_threads: dict[str, list[int]] = {}
        # One netlink socket per namespace for the testbed's life: opening one forks a
        # helper into the namespace (18-40 ms here); a build made 21 and a trial 8.
        self._netlink: dict[str, IPRoute] = {}

    def build(self):
        raise NotImplementedError

    def _ipr(self, ns: str):
        """This testbed's netlink socket in ``ns``, for a ``with`` block. It is
        closed just before the namespace is removed (``_add_netns``)."""
        if ns not in self._netlink:
            self._netlink[ns] = IPRoute(netns=ns)
        return nullcontext(self._netlink[ns])

    def _close_netlink(self, ns: str) -> None:
        sock = self._netlink.pop(ns, None)
        if sock is not None:
            sock.close()

    def _lock(self) -> None:
        """One measuring run per host: a library user (bench, tests) takes the
        testbed lock here; under a softnet command, which holds it, this is free."""
        lock = testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 0))
        lock.__enter__()
        self.changes.record("testbed lock", lambda: lock.__exit__(None, None, None))

    def _claim(self) -> None:
        """Mark this run's namespaces as owned by a live process, so that
        `softnet clean` leaves them alone while we run."""
        OWNERS_DIR.mkdir(parents=True, exist_ok=True)
        owner = OWNERS_DIR / f"{self.run_id}.owner"
        self.changes.record(f"owner file {owner}", lambda: owner.unlink(missing_ok=True))
        owner.write_text(str(os.getpid()))

    def _add_netns(self, name: str) -> None:
        if Path("/run/netns", name).exists():
            raise TestbedError(f"namespace {name} already exists")
        # Recorded before it is made, so a signal in between cannot leak it.
        self.changes.record(f"netns {name}", lambda: (self._close_netlink(name), remove_netns(name)))
        with deferred_signals():  # pyroute2 makes it in a forked helper: a signal must not outrun it
            netns.create(name)

    def _add_veth(self, ns_role, if_role, peer_ns_role, peer_if_role, up=True, role=None, peer_role=None,
                  rx_queues: tuple[int, int] = (1, 1)):
        ns, peer_ns = self.ns[ns_role], self.ns[peer_ns_role]
        name, peer = self.ifs[if_role], self.ifs[peer_if_role]
        self.changes.record(f"veth {ns}/{name} <-> {peer_ns}/{peer}", lambda: self._del_link(ns, name))
        # One queue per end by default: veth otherwise makes one per CPU and
        # picks the rx queue by sending CPU, and the sink's sequence tracking
        # relies on a single NAPI instance (never two CPUs at once). More rx
        # queues (one tx: XDP on the peer needs rx >= this end's tx) give a
        # channels knob something to change.
        ra, rb = rx_queues
        with self._ipr(ns) as ipr:
            ipr.link("add", ifname=name, kind="veth", num_tx_queues=1, num_rx_queues=ra,
                     peer={"ifname": peer, "net_ns_fd": peer_ns, "num_tx_queues": 1, "num_rx_queues": rb})
        for n, i, r in ((ns, name, role or if_role), (peer_ns, peer, peer_role)):
            self._configure_if(n, i, r, up)

    @staticmethod
    def _del_link(ns: str, name: str) -> None:
        if not Path("/run/netns", ns).exists():
            return
        with IPRoute(netns=ns) as ipr:
            idx = ipr.link_lookup(ifname=name)
            if idx:
                ipr.link("del", index=idx[0])

    def _configure_if(self, ns: str, name: str, role: str | None, up: bool) -> None:
        with self._ipr(ns) as ipr:
            idx = ipr.link_lookup(ifname=name)[0]
            if role in self.addr:
                v4, v6, mac = self.addr[role]
                ipr.link("set", index=idx, address=mac)
                ipr.addr("add", index=idx, address=v4, prefixlen=24)
                ipr.addr("add", index=idx, address=v6, prefixlen=64, flags=IFA_F_NODAD)
            if up:
                ipr.link("set", index=idx, state="up")
            lo = ipr.link_lookup(ifname="lo")[0]
            ipr.link("set", index=lo, state="up")

    def _neigh(self, ns_role: str, if_role: str, ip: str, mac: str) -> None:
        ns, name = self.ns[ns_role], self.ifs[if_role]
        with self._ipr(ns) as ipr:
            idx = ipr.link_lookup(ifname=name)[0]
            ipr.neigh("replace", dst=ip, lladdr=mac, ifindex=idx, state=NUD_PERMANENT)
        self.changes.record(f"neighbour {ns}/{name} {ip} lladdr {mac} permanent",
                            lambda: None)  # removed with its interface

    def add_route(self, ns_role: str, dst: str, via: str, if_role: str) -> None:
        ns = self.ns[ns_role]
        with self._ipr(ns) as ipr:
            ipr.route("replace", dst=dst, gateway=via, oif=ipr.link_lookup(ifname=self.ifs[if_role])[0])
        self.changes.record(f"route {ns} {dst} via {via}", lambda: None)  # removed with its namespace

    def _steer(self, ns_role: str, if_role: str, cpus: list[int]) -> None:
        """Move the receive processing of an interface onto `cpus`."""
        ns, dev = self.ns[ns_role], self.ifs[if_role]
        # GRO on enables veth NAPI, which XDP redirects into a veth require.
        hostcmd.in_netns(ns, ["ethtool", "-K", dev, "gro", "on"])
        self.changes.record(f"{ns}/{dev}: gro on", lambda: None)  # dies with the veth
        if self.placement.steering == "rps":
            self.set_ns_file(ns, f"/sys/class/net/{dev}/queues/rx-0/rps_cpus", cpu_mask(cpus))
        else:
            self.pin_napi(ns, dev, cpus)

    def set_sysctl(self, ns: str, key: str, value: str) -> None:
        old = hostcmd.sysctl_get(ns, key)
        hostcmd.sysctl_set(ns, key, value)
        self.changes.record(f"sysctl {ns} {key}={value} (was {old})",
                            lambda: Path("/run/netns", ns).exists() and hostcmd.sysctl_set(ns, key, old))

    def set_ns_file(self, ns: str, path: str, value: str) -> None:
        old = hostcmd.read_ns_file(ns, path)
        hostcmd.write_ns_file(ns, path, value)

        def undo() -> None:
            if not Path("/run/netns", ns).exists():
                return
            try:
                hostcmd.write_ns_file(ns, path, old)
            except TestbedError:
                # A file of one of the lab's own devices, which go with its
                # namespace: a value the device no longer takes (threaded NAPI
                # once GRO is off removed it) leaves nothing behind.
                if not path.startswith("/sys/class/net/"):
                    raise
        self.changes.record(f"{ns}:{path} = {value} (was {old})", undo)

    def pin_napi(self, ns: str, dev: str, cpus: list[int]) -> list[int]:
        """Threaded NAPI for dev, its kthreads pinned to cpus; returns their pids."""
        self.set_ns_file(ns, f"/sys/class/net/{dev}/threaded", "1")
        pids = napi_thread_pids(dev)
        if not pids:
            raise TestbedError(f"no NAPI kthread appeared for {ns}/{dev} after enabling threaded NAPI")
        for pid in pids:
            old = os.sched_getaffinity(pid)
            os.sched_setaffinity(pid, cpus)
            self.changes.record(f"affinity of napi kthread {pid} ({dev}) -> {cpus}",
                                lambda pid=pid, old=old: _restore_affinity(pid, old))
        self.napi_threads[dev] = pids
        return pids


def remove_netns(name: str) -> None:
    """Stop every process still in the namespace (a SUT's daemon, a command
    of a setup that hung), then remove it: a process would keep the
    namespace alive, unnamed, where `softnet clean` no longer sees it."""
    if Path("/run/netns", name).exists():
        stop_pids([pid for pid in processes_in([name]) if pid != os.getpid()])
        netns.remove(name)


def processes_in(namespaces: list[str]) -> dict[int, str]:
    """pid -> namespace, for processes whose network namespace is one of ours."""
    inodes = {}
    for name in namespaces:
        try:
            inodes[os.stat(Path("/run/netns", name)).st_ino] = name
        except OSError:
            continue
    found = {}
    for ns_link in Path("/proc").glob("[0-9]*/ns/net"):
        try:
            ino = os.stat(ns_link).st_ino
        except OSError:
            continue
        if ino in inodes:
            found[int(ns_link.parts[2])] = inodes[ino]
    return found


def stop_pids(pids: list[int], grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL to what is left after ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)




def napi_thread_pids(dev: str) -> list[int]:
    """Kernel threads named napi/<dev>-<id>."""
    pids = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip().startswith(f"napi/{dev}-"):
                pids.append(int(comm.parent.name))
        except OSError:
            continue
    return sorted(pids)


def _restore_affinity(pid: int, cpus: set[int]) -> None:
    try:
        os.sched_setaffinity(pid, cpus)
    except ProcessLookupError:
        pass  # the kthread went away with its device
