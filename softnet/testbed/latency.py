"""The AF_XDP latency lab's testbed (the AF_XDP delay study's Fig. 2): host A
sends and receives, B forwards with an AF_XDP application, C reflects.

    [sn-ID-a] snIDa ==veth== snIDb [sn-ID-b] snIDc ==veth== snIDd [sn-ID-c]
     ping (A)                 forward (B)                  reflect (C)

Round trips are measured on A, so no clock needs synchronising. B also
forwards in the kernel (static routes and neighbours), so `ping` from A to C
takes the same path as the kernel baseline. Host-side knobs (NAPI, busy-poll
sysctls, C-state limit, coalescing) are applied here through the change
registry; what this kernel or device refuses is recorded as unsupported,
never an error. Socket-side knobs (bind mode, need_wakeup, receive mode,
SO_BUSY_POLL...) belong to the AF_XDP tool (native/xsk).
"""
from __future__ import annotations

import os
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable


from softnet.errors import InputError, TestbedError
from softnet.testbed.netns import NetnsLab
from softnet.tools import hostcmd, netdev
from softnet.tools.changes import NAME_PREFIX, HostChanges

# interface role -> (IPv4, IPv6, MAC); A's side 198.18/24, C's side 198.19/24.
ADDR = {
    "a": ("198.18.0.1", "2001:2::1", "02:53:4e:00:01:01"),
    "b_a": ("198.18.0.2", "2001:2::2", "02:53:4e:00:01:02"),
    "b_c": ("198.19.0.2", "2001:2:0:1::2", "02:53:4e:00:01:03"),
    "c": ("198.19.0.1", "2001:2:0:1::1", "02:53:4e:00:01:04"),
}
HOSTS = ("a", "b", "c")


@dataclass(frozen=True)
class HostPath:
    """A lab host's part of the path: (its interface role, the next hop's) per
    neighbour, the first towards A's side; its routes (prefix, via role);
    the far end its application talks to; whether it forwards."""

    neighbours: tuple[tuple[str, str], ...]
    routes: tuple[tuple[str, str], ...]
    far_end: str
    forwards: bool = False


PATHS = {
    "a": HostPath((("a", "b_a"),), (("198.19.0.0/24", "b_a"),), far_end="c"),
    "b": HostPath((("b_a", "a"), ("b_c", "c")), (), far_end="a", forwards=True),
    "c": HostPath((("c", "b_c"),), (("198.18.0.0/24", "b_c"),), far_end="a"),
}
RX_DEVS = {"a": ("a",), "b": ("b_a", "b_c"), "c": ("c",)}  # where each host receives
CPU_DMA_LATENCY = Path("/dev/cpu_dma_latency")


@dataclass
class LatencyKnobs:
    """Host-side knobs of one configuration. None: left as the host has it."""

    threaded_napi: bool = False
    napi_defer_hard_irqs: int | None = None
    gro_flush_timeout_ns: int | None = None
    busy_poll_us: int | None = None  # net.core.busy_poll and busy_read (host-wide sysctls)
    cstate_limit_us: int | None = None  # held in /dev/cpu_dma_latency for the run; 0: shallowest state only
    coalesce_rx_usecs: int | None = None  # ethtool -C rx-usecs (veth: unsupported)
    coalesce_tx_usecs: int | None = None  # ethtool -C tx-usecs
    irq_suspend_timeout_ns: int | None = None  # netdev napi-set irq-suspend-timeout (kernel 6.13+)

    def validate(self, where: str = "knobs") -> None:
        for name, lo, hi in (("napi_defer_hard_irqs", 0, 2**31 - 1), ("gro_flush_timeout_ns", 0, 10**9),
                             ("busy_poll_us", 0, 10**6), ("cstate_limit_us", 0, 2**31 - 1),
                             ("coalesce_rx_usecs", 0, 10**6), ("coalesce_tx_usecs", 0, 10**6),
                             ("irq_suspend_timeout_ns", 0, 10**10)):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi):
                raise InputError(f"{where}.{name}", f"{v!r}: expected an integer in [{lo}, {hi}]")


@dataclass
class LatencyPlacement:
    """CPU of each host's application, and of its receive NAPI context when
    threaded (default: with its application)."""

    app_cpus: dict[str, int] = field(default_factory=dict)
    napi_cpus: dict[str, int] = field(default_factory=dict)

    def validate(self, cpus: list[int] | None = None) -> None:
        """``cpus``: the host's usable CPUs (None: this process's)."""
        online = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        for what, cpus in (("app_cpus", self.app_cpus), ("napi_cpus", self.napi_cpus)):
            for host, cpu in cpus.items():
                if host not in HOSTS:
                    raise InputError(f"latency.{what}", f"host '{host}' unknown; accepted: a, b, c")
                if cpu not in online:
                    raise InputError(f"latency.{what}.{host}", f"CPU {cpu} is not usable; accepted: {online}")

    @classmethod
    def default(cls, cpus: list[int] | None = None) -> "LatencyPlacement":
        """B (the system under study) alone on the last CPU; A and C share the first."""
        cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        return cls(app_cpus={"a": cpus[0], "b": cpus[-1], "c": cpus[0]})

    def napi_cpu(self, host: str) -> int:
        return self.napi_cpus.get(host, self.app_cpus[host])


@dataclass
class Host:
    ns: str
    ifname: str  # towards A for B, its only interface for A and C
    mac: str
    ip: str
    peer_mac: str  # the next hop's MAC
    peer_ip: str
    ifname2: str | None = None  # B's interface towards C
    mac2: str | None = None
    peer_mac2: str | None = None
    cpu: int = 0


class LatencyTestbed(NetnsLab):
    """The whole lab on this host (veth pairs between three namespaces), or,
    with ``nics``, the hosts of it that an inventory host plays: its NICs,
    moved by the agent into namespaces named as these, configured by the
    same code (addresses, neighbours, routes, knobs)."""

    def __init__(self, changes: HostChanges, knobs: LatencyKnobs | None = None,
                 placement: LatencyPlacement | None = None, nics: dict[str, tuple[str | None, str]] | None = None,
                 host_write: Callable[[str, str], None] | None = None, cpus: list[int] | None = None):
        """``nics``: interface role (a, b_a, b_c, c) -> (name, MAC) of the
        inventory's NICs, name None for a NIC of another host (its MAC is
        the next hop's); the hosts here are those whose NICs are named.
        None: all three here, on veth pairs of our own. ``host_write(path,
        value)``: how a host-wide file is changed (an agent's journal);
        None: this process's journal. ``cpus``: the host's usable CPUs
        (None: this process's; an agent keeps itself off the data path's)."""
        super().__init__(changes)
        self.knobs = knobs or LatencyKnobs()
        self.knobs.validate()
        self.placement = placement or LatencyPlacement.default(cpus)
        for host in HOSTS:
            self.placement.app_cpus.setdefault(host, LatencyPlacement.default(cpus).app_cpus[host])
        self.placement.validate(cpus)
        p, i = f"{NAME_PREFIX}{self.run_id}", f"sn{self.run_id}"
        self.nics = nics
        self.here = HOSTS if nics is None else tuple(h for h in HOSTS if all(nics[r][0] for r in RX_DEVS[h]))
        self.ns = {h: f"{p}-{h}" for h in self.here}
        self.ifs = {"a": f"{i}a", "b_a": f"{i}b", "b_c": f"{i}c", "c": f"{i}d"} if nics is None else \
            {role: name for role, (name, _mac) in nics.items() if name}
        # the inventory's NICs keep their own MACs (set to what they are)
        self.addr = dict(ADDR) if nics is None else \
            {role: (v4, v6, nics[role][1]) for role, (v4, v6, _mac) in ADDR.items()}
        self.applied: dict[str, object] = {}  # knob -> value applied, or {"unsupported": why}
        self._dma_fd: int | None = None
        self._host_write = host_write

    def build(self) -> dict[str, Host]:
        """The hosts here, configured; an inventory's NICs must already be in
        their namespaces (the agent journals and moves them)."""
        if self.nics is None:
            self._lock()
        self._claim()
        if self.nics is None:
            for h in HOSTS:
                self._add_netns(self.ns[h])
            self._add_veth("a", "a", "b", "b_a", role="a", peer_role="b_a")
            self._add_veth("b", "b_c", "c", "c", role="b_c", peer_role="c")
        else:
            for h in self.here:
                for role in RX_DEVS[h]:
                    self._configure_if(self.ns[h], self.ifs[role], role, up=True)
        ip = {role: v4 for role, (v4, _v6, _m) in self.addr.items()}
        mac = {role: m for role, (_v4, _v6, m) in self.addr.items()}
        out = {}
        for h in self.here:
            ns, path = self.ns[h], PATHS[h]
            for if_role, peer in path.neighbours:
                self._neigh(h, if_role, ip[peer], mac[peer])
            for dst, via in path.routes:
                self._route(h, dst, ip[via])
            if path.forwards:
                self.set_sysctl(ns, "net.ipv4.ip_forward", "1")  # the kernel baseline's path
            (if_role, next_hop), *second = path.neighbours
            out[h] = Host(ns, self.ifs[if_role], mac[if_role], ip[if_role], mac[next_hop], ip[path.far_end],
                          cpu=self.placement.app_cpus[h])
            for if2, next2 in second:  # B's interface towards C
                out[h].ifname2, out[h].mac2, out[h].peer_mac2 = self.ifs[if2], mac[if2], mac[next2]
        self._apply_knobs()
        return out

    def _route(self, host: str, dst: str, gateway: str) -> None:
        with self._ipr(self.ns[host]) as ipr:
            ipr.route("add", dst=dst, gateway=gateway)
        self.changes.record(f"route {self.ns[host]} {dst} via {gateway}", lambda: None)  # dies with the netns

    # ---- knobs ----------------------------------------------------------
    def _apply_knobs(self) -> None:
        k = self.knobs
        for host in self.here:
            for role in RX_DEVS[host]:
                ns, dev = self.ns[host], self.ifs[role]
                # veth runs NAPI (what XDP and busy polling need) with GRO on
                hostcmd.in_netns(ns, ["ethtool", "-K", dev, "gro", "on"])
                if k.threaded_napi:
                    self.pin_napi(ns, dev, [self.placement.napi_cpu(host)])
                for knob, path in (("napi_defer_hard_irqs", "napi_defer_hard_irqs"),
                                   ("gro_flush_timeout_ns", "gro_flush_timeout")):
                    value = getattr(k, knob)
                    if value is not None:
                        self._try(f"{knob}.{role}", lambda ns=ns, dev=dev, path=path, value=value:
                                  self.set_ns_file(ns, f"/sys/class/net/{dev}/{path}", str(value)), value)
                if k.irq_suspend_timeout_ns is not None:
                    self._try(f"irq_suspend_timeout_ns.{role}", lambda ns=ns, dev=dev: self._irq_suspend(ns, dev),
                              k.irq_suspend_timeout_ns)
                for knob, param in (("coalesce_rx_usecs", "rx-usecs"), ("coalesce_tx_usecs", "tx-usecs")):
                    value = getattr(k, knob)
                    if value is not None:
                        self._try(f"{knob}.{role}", lambda ns=ns, dev=dev, param=param, value=value: hostcmd.in_netns(
                            ns, ["ethtool", "-C", dev, param, str(value)]), value)
        self.applied["threaded_napi"] = k.threaded_napi
        if k.busy_poll_us is not None:
            for key in ("net.core.busy_poll", "net.core.busy_read"):
                self._try(key, lambda key=key: self._host_sysctl(key, str(k.busy_poll_us)), k.busy_poll_us)
        if k.cstate_limit_us is not None:
            self._try("cstate_limit_us", self._hold_cstate_limit, k.cstate_limit_us)

    def _try(self, knob: str, apply, value) -> None:
        try:
            apply()
            self.applied[knob] = value
        except Exception as exc:  # noqa: BLE001 -- any refusal is recorded, the run goes on
            self.applied[knob] = {"unsupported": str(exc).strip().splitlines()[-1] if str(exc).strip() else
                                  type(exc).__name__}

    def _irq_suspend(self, ns: str, dev: str) -> None:
        """Every NAPI of dev (they exist once GRO is on); the value dies with the device."""
        napis = netdev.in_netns(ns, "view", dev)["napis"]
        if not napis:
            raise TestbedError(f"{ns}/{dev} has no NAPI instance to configure")
        for n in napis:
            netdev.in_netns(ns, "set_irq_suspend_timeout", n["id"], self.knobs.irq_suspend_timeout_ns)
            self.changes.record(f"{ns}/{dev} napi {n['id']} irq-suspend-timeout {self.knobs.irq_suspend_timeout_ns} ns "
                                f"(was {n['irq_suspend_timeout_ns']})", lambda: None)

    def napi_view(self, host: str) -> dict:
        """What the kernel says of each receiving interface of a host now: its
        NAPIs (ids, irq-suspend-timeout) and RX queue 0's NAPI link."""
        return {role: netdev.in_netns(self.ns[host], "view", self.ifs[role]) for role in RX_DEVS[host]}

    def _host_sysctl(self, key: str, value: str) -> None:
        """A host-wide sysctl (these are not per network namespace)."""
        path = Path("/proc/sys") / key.replace(".", "/")
        if self._host_write is not None:
            self._host_write(str(path), value)
            return
        old = path.read_text().strip()
        self.changes.journalled(f"sysctl {key}={value} (was {old}, host-wide)", "sysctl",
                                lambda: path.write_text(old), key=key, old=old)
        path.write_text(value)

    def _hold_cstate_limit(self) -> None:
        """PM QoS: the limit holds while the file stays open (closing restores)."""
        fd = os.open(CPU_DMA_LATENCY, os.O_WRONLY)
        self.changes.record(f"{CPU_DMA_LATENCY} = {self.knobs.cstate_limit_us} us (held open)", lambda: os.close(fd))
        os.write(fd, struct.pack("=i", self.knobs.cstate_limit_us))
        self._dma_fd = fd

    # ---- observation ------------------------------------------------------
    def netstat(self, host: str) -> dict[str, int]:
        """TcpExt/... counters of a host's namespace (BusyPollRxPackets among them)."""
        return parse_netstat(hostcmd.read_ns_file(self.ns[host], "/proc/net/netstat"))

    def describe(self) -> dict:
        return {"run_id": self.run_id, "namespaces": dict(self.ns), "interfaces": dict(self.ifs),
                "knobs": asdict(self.knobs), "applied": dict(self.applied),
                "placement": {"app_cpus": dict(self.placement.app_cpus) if self.nics is None else
                              {h: self.placement.app_cpus[h] for h in self.here},
                              "napi_cpus": {h: self.placement.napi_cpu(h) for h in self.here}},
                "napi_threads": {dev: list(p) for dev, p in self.napi_threads.items()}}


def parse_netstat(text: str) -> dict[str, int]:
    """/proc/net/netstat: pairs of lines, a header of names and a line of values."""
    out: dict[str, int] = {}
    lines = text.splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        prefix, *keys = names.split()
        _, *vals = values.split()
        prefix = prefix.rstrip(":")
        if len(keys) != len(vals):
            raise ValueError(f"/proc/net/netstat: {prefix} has {len(keys)} names and {len(vals)} values")
        out.update({f"{prefix}.{k}": int(v) for k, v in zip(keys, vals)})
    return out
