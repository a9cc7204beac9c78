"""The changes the agent makes to its host, each journalled as undo data
(fsync'ed) before it is made, in the host's own network namespace.

The journal (softnet/tools/journal.py) is the single record: a normal stop,
a lapsed lease, a closed stdin, the reaper after a kill -9 and `softnet
clean` all undo by replaying it. What it cannot hold is a process's pid before
the process exists: a started tool is journalled right after fork, and its
bpf_link programs die with it anyway.
"""
from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

from pyroute2 import IPRoute, netns

from softnet.errors import TestbedError
from softnet.testbed.netns import IFA_F_NODAD, NUD_PERMANENT, napi_thread_pids
from softnet.tools import hostcmd, nic
from softnet.tools.journal import Journal, pid_start
from softnet.tools.undo_ops import DeviceState


class HostOps:
    def __init__(self, journal: Journal):
        self.journal = journal
        self.applied: list[str] = []  # provenance: every change made, in order

    def _record(self, what: str, op: str, **args) -> None:
        self.journal.record(what, op, **args)  # fsync'ed when it returns: then the change is made
        self.applied.append(what)

    # ---- links and addresses ---------------------------------------------
    def link_up(self, ifname: str) -> None:
        with IPRoute() as ipr:
            idx = _index(ipr, ifname)
            link = ipr.get_links(idx)[0]
            if link["flags"] & 1:  # IFF_UP already
                return
            self._record(f"{ifname} up", "link_state", ifname=ifname, up=False, qdisc=link.get_attr("IFLA_QDISC"))
            ipr.link("set", index=idx, state="up")

    def add_address(self, ifname: str, address: str, prefixlen: int) -> None:
        with IPRoute() as ipr:
            idx = _index(ipr, ifname)
            if any(a.get_attr("IFA_ADDRESS") == address for a in ipr.get_addr(index=idx)):
                return  # already there: not ours to remove
            self._record(f"address {address}/{prefixlen} on {ifname}", "addr_del",
                                ifname=ifname, address=address, prefixlen=prefixlen)
            ipr.addr("add", index=idx, address=address, prefixlen=prefixlen,
                     **({"flags": IFA_F_NODAD} if ":" in address else {}))

    def static_neighbour(self, ifname: str, dst: str, mac: str) -> None:
        self._record(f"neighbour {dst} lladdr {mac} on {ifname}", "neigh_del", ifname=ifname, dst=dst)
        with IPRoute() as ipr:
            ipr.neigh("replace", dst=dst, lladdr=mac, ifindex=_index(ipr, ifname), state=NUD_PERMANENT)

    def veth_pair(self, name: str, peer: str) -> None:
        """A pair of softnet's own (the generator's idle anchor), left down."""
        self._record(f"veth {name} <-> {peer}", "link_del", ifname=name)
        with IPRoute() as ipr:
            ipr.link("add", ifname=name, kind="veth", peer={"ifname": peer})

    # ---- kernel knobs -----------------------------------------------------
    def sysctl(self, key: str, value: str) -> None:
        path = Path("/proc/sys", key.replace(".", "/"))
        old = path.read_text().strip()
        if old == value:
            return
        self._record(f"sysctl {key}={value} (was {old})", "sysctl", key=key, old=old)
        path.write_text(value + "\n")

    def write_file(self, path: str, value: str) -> None:
        old = Path(path).read_text().strip()
        if old == value:
            return
        self._record(f"{path} = {value} (was {old})", "file", path=path, old=old)
        Path(path).write_text(value + "\n")

    def ethtool_feature(self, ifname: str, feature: str, value: str) -> None:
        old = _feature(ifname, feature)
        if old == value:
            return
        if old is None:
            raise TestbedError(f"ethtool -k {ifname}: no feature {feature}")
        self._record(f"{ifname}: {feature} {value} (was {old})", "ethtool_features",
                            ifname=ifname, features={feature: old})
        hostcmd.run(["ethtool", "-K", ifname, feature, value])

    def ethtool_set(self, ifname: str, flag: str, params: dict[str, str], old: dict[str, str]) -> None:
        """ethtool -G/-L/-C: the parameters that change, journalled with their old values."""
        params = {p: v for p, v in params.items() if p in old}
        if not params:
            return
        self._record(f"{ifname}: ethtool {flag} {' '.join(f'{p} {v}' for p, v in sorted(params.items()))} (was "
                     f"{' '.join(f'{p} {old[p]}' for p in sorted(params))})", "ethtool_set", ifname=ifname, flag=flag,
                     old={p: old[p] for p in params})
        hostcmd.run(nic.ethtool_argv(ifname, flag, params))

    def device_state(self, ifname: str) -> None:
        """Journal what a NIC's use by a SUT namespace may change and its
        removal does not restore: XDP, GRO, threaded NAPI, RPS masks, MTU,
        up/down and qdisc (softnet.tools.undo_ops.DeviceStateEntry)."""
        with IPRoute() as ipr:
            link = ipr.get_links(_index(ipr, ifname))[0]
        base = Path(f"/sys/class/net/{ifname}")
        gro = _feature(ifname, "gro")
        threaded = (base / "threaded").read_text().strip() if (base / "threaded").exists() else None
        rps = {q.name: (q / "rps_cpus").read_text().strip() for q in sorted((base / "queues").glob("rx-*"))
               if (q / "rps_cpus").exists()}
        xdp = link.get_attr("IFLA_XDP")
        state = DeviceState(up=bool(link["flags"] & 1), qdisc=link.get_attr("IFLA_QDISC"),
                            mtu=link.get_attr("IFLA_MTU"), gro=gro, threaded=threaded, rps=rps,
                            xdp=bool(xdp and xdp.get_attr("IFLA_XDP_ATTACHED")))
        self._record(f"{ifname}: device state kept (mtu {state.mtu}, gro {gro}, threaded {threaded}, "
                     f"{'up' if state.up else 'down'})", "device_state", ifname=ifname, state=state)

    def lab_netns(self, ns: str, ifnames: list[str]) -> None:
        """A namespace of softnet's own holding these NICs (a SUT namespace:
        softnet.testbed.sut_lab), journalled first: its undo moves them back
        and removes it."""
        self._record(f"netns {ns} holding {', '.join(ifnames)}", "lab_netns", ns=ns, ifnames=list(ifnames))
        netns.create(ns)
        with IPRoute() as ipr:
            for name in ifnames:
                ipr.link("set", index=_index(ipr, name), net_ns_fd=ns)

    def pin_napi(self, ifname: str, cpus: list[int]) -> list[int]:
        """Threaded NAPI for ifname, its kthreads pinned to cpus."""
        self.write_file(f"/sys/class/net/{ifname}/threaded", "1")
        pids = napi_thread_pids(ifname)
        if not pids:
            raise TestbedError(f"no NAPI kthread appeared for {ifname} after enabling threaded NAPI")
        for pid in pids:
            old = sorted(os.sched_getaffinity(pid))
            self._record(f"affinity of napi kthread {pid} ({ifname}) -> {cpus}", "affinity",
                                pid=pid, pid_start=pid_start(pid), old=old)
            os.sched_setaffinity(pid, cpus)
        return pids

    # ---- processes ----------------------------------------------------------
    def started(self, proc: subprocess.Popen, what: str) -> None:
        """Journal a tool process just started: the reaper stops it if we die."""
        self._record(f"{what} (pid {proc.pid})", "kill", pid=proc.pid, pid_start=pid_start(proc.pid))


def anchor_names() -> tuple[str, str]:
    """Names for softnet's own veth pair on this host (cleanup.py's pattern)."""
    i = f"sn{secrets.token_hex(3)}"
    return f"{i}a", f"{i}b"


def _index(ipr: IPRoute, ifname: str) -> int:
    idx = ipr.link_lookup(ifname=ifname)
    if not idx:
        raise TestbedError(f"no interface {ifname} on this host")
    return idx[0]


_LONG = {"gro": "generic-receive-offload", "gso": "generic-segmentation-offload", "tso": "tcp-segmentation-offload",
         "lro": "large-receive-offload", "rx": "rx-checksumming", "tx": "tx-checksumming"}


def _feature(ifname: str, short: str) -> str | None:
    """An offload's state ("on"/"off") as ethtool -k reports it; None if the driver has no such feature."""
    return next((line.split(":", 1)[1].split()[0] for line in hostcmd.run(["ethtool", "-k", ifname]).splitlines()
                 if line.strip().startswith(f"{_long_feature(short)}:")), None)


def _long_feature(short: str) -> str:
    """ethtool -K takes short names, ethtool -k prints long ones."""
    return _LONG.get(short, short)
