"""Kernel statistics sampled during a trial, at a fixed interval (1 s default,
down to 100 ms), from a thread pinned away from the SUT's CPUs.

Each sample is a flat {key: value} of raw counters (never differences, so a
reader can re-derive anything), key = (source, item, cpu) with cpu -1 for
host-wide or per-interface values:

    stat       /proc/stat per CPU (ticks) and ctxt; idle is the nohz idle time
    irq        /proc/interrupts per IRQ per CPU (names in ``irq_names``)
    softirq    /proc/softirqs per vector per CPU
    softnet    /proc/net/softnet_stat, every column per CPU (u32 counters)
    link       /proc/net/dev of each testbed interface's namespace (a file
               opened inside it), item "<role>.<counter>"
    ethtool    ethtool -S of each testbed interface (ioctl), "<role>.<stat>"
    qdisc      root qdisc stats (netlink) of each interface that has a
               queueing root qdisc: packets, bytes, drops, requeues,
               overlimits, backlog, qlen, "<role>.<field>"; a noqueue root
               (veth's default) has nothing to count and is not polled
    perf       perf software (and hardware, where the host has a PMU) events per CPU
    power      RAPL energy counters (µJ) per powercap domain, where present

A source the host lacks is named once in ``missing`` with the reason and
never stops the trial. ``sample_now()`` takes an extra sample at a chosen
instant (the measurement window's edges), so per-trial aggregates do not
depend on where the interval ticks fall.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from pyroute2 import IPRoute
from pyroute2.ethtool.ioctl import IoctlEthtool

from softnet.collect import procfs
from softnet.collect.perf import PerfCounters
from softnet.results.series import INTERVAL_RANGE_S, Key, Series  # noqa: F401
from softnet.tools.links import LinkRef  # noqa: F401

CLONE_NEWNET = 0x40000000
POWERCAP = Path("/sys/class/powercap")
QDISC_FIELDS = ("packets", "bytes", "drops", "requeues", "overlimits", "backlog", "qlen")

def rapl_zones(root: Path = POWERCAP) -> dict[str, str]:
    """{zone directory: its name} of the RAPL zones whose energy counter reads
    (reading it needs root on kernels since 5.10)."""
    out = {}
    for f in sorted(root.glob("*/energy_uj")):
        try:
            int(f.read_text())
            out[f.parent.name] = (f.parent / "name").read_text().strip()
        except (OSError, ValueError):
            continue
    return out


@contextmanager
def in_netns(ns: str | None):
    """Run the block with this thread in network namespace ``ns`` (setns(2)
    is per thread); sockets opened inside stay bound to it. None: the
    current namespace (the remote agent samples its own host's)."""
    if ns is None:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/thread-self/ns/net") as home, open(f"/run/netns/{ns}") as target:
        if libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
        try:
            yield
        finally:
            libc.setns(home.fileno(), CLONE_NEWNET)


class KernelSampler:
    """``with KernelSampler(...) as s: ... s.sample_now('window_start') ...``;
    ``s.series`` afterwards."""

    def __init__(self, interval_s: float = 1.0, avoid_cpus: list[int] | None = None,
                 links: list[LinkRef] | None = None, perf: bool = True):
        lo, hi = INTERVAL_RANGE_S
        if not lo <= interval_s <= hi:
            raise ValueError(f"sample interval {interval_s} s: expected in [{lo}, {hi}] s")
        self.interval_s = interval_s
        self.online = sorted(os.sched_getaffinity(0))
        self.cpus = [c for c in self.online if c not in set(avoid_cpus or [])]
        self.links = links or []
        self.want_perf = perf
        self.series = Series(interval_s)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._iprs: dict[str, IPRoute] = {}
        self._net_dev: dict[str, object] = {}
        self._qdisc_links: list[tuple[LinkRef, int]] = []
        self._ethtool: dict[str, IoctlEthtool] = {}
        self._perf: PerfCounters | None = None
        self._sources: dict[str, Callable[[], dict[Key, float]]] = {}
        self._cpu_s = 0.0

    # ---- sources --------------------------------------------------------
    def _open(self) -> None:
        s = self.series
        if self.want_perf:
            self._perf = PerfCounters(self.online)
            s.missing.update({f"perf.{k}": v for k, v in self._perf.missing.items()})
        s.power_zones = rapl_zones()
        if not s.power_zones:
            s.missing["power"] = f"no RAPL energy counters ({POWERCAP}/*/energy_uj absent or unreadable)"
        for link in self.links:
            # Files and sockets opened inside a namespace stay bound to it: polling
            # them costs a read, far cheaper than a netlink query per interface.
            with in_netns(link.ns):
                if link.ns not in self._net_dev:
                    self._net_dev[link.ns] = open("/proc/thread-self/net/dev")
                try:
                    eth = IoctlEthtool(link.ifname)
                    eth.get_statistics()
                    self._ethtool[link.role] = eth
                except OSError as e:
                    s.missing[f"ethtool.{link.role}"] = f"ethtool -S {link.ifname}: {e.strerror or e}"
            with IPRoute(netns=link.ns) as ipr:
                idx = ipr.link_lookup(ifname=link.ifname)[0]
                roots = [q for q in ipr.get_qdiscs(index=idx) if q["parent"] == 0xFFFFFFFF]
            kind = roots[0].get_attr("TCA_KIND") if roots else None
            if kind in (None, "noqueue"):
                s.qdiscs[link.role] = kind or "none"
                continue
            s.qdiscs[link.role] = kind
            if link.ns not in self._iprs:
                self._iprs[link.ns] = IPRoute(netns=link.ns)
            self._qdisc_links.append((link, idx))

    def _close(self) -> None:
        for f in self._net_dev.values():
            f.close()
        for ipr in self._iprs.values():
            ipr.close()
        for eth in self._ethtool.values():
            eth.sock.close()
        if self._perf:
            self._perf.close()

    def _read(self) -> dict[Key, float]:
        out: dict[Key, float] = {}
        stat = procfs.parse_stat(Path("/proc/stat").read_text())
        for cpu, ticks in stat.cpus.items():
            for k, v in ticks.items():
                out[("stat", k, cpu)] = v
        out[("stat", "ctxt", -1)] = stat.ctxt if stat.ctxt is not None else 0
        for irq, rec in procfs.parse_interrupts(Path("/proc/interrupts").read_text()).items():
            if irq not in self.series.irq_names:
                self.series.irq_names[irq] = rec.name
            for cpu, v in (rec.cpus or {}).items():
                out[("irq", irq, cpu)] = v
            if rec.total is not None:
                out[("irq", irq, -1)] = rec.total
        for vec, per_cpu in procfs.parse_softirqs(Path("/proc/softirqs").read_text()).items():
            for cpu, v in per_cpu.items():
                out[("softirq", vec, cpu)] = v
        for cpu, rec in procfs.parse_softnet_stat(Path("/proc/net/softnet_stat").read_text()).items():
            for k, v in rec.items():
                out[("softnet", k, cpu)] = v
        self._read_links(out)
        if self._perf:
            for ev, per_cpu in self._perf.read().items():
                for cpu, v in per_cpu.items():
                    out[("perf", ev, cpu)] = v
        for zone in self.series.power_zones:
            try:
                out[("power", zone, -1)] = int((POWERCAP / zone / "energy_uj").read_text())
            except (OSError, ValueError):
                pass
        for name, read in list(self._sources.items()):
            try:
                out.update(read())
            except Exception as e:  # noqa: BLE001 - a source failing mid-trial is recorded, not fatal
                self.series.missing.setdefault(name, f"read failed: {e}")
                del self._sources[name]
        return out

    def add_source(self, name: str, read: Callable[[], dict[Key, float]]) -> None:
        """Another counter source read at every sample from now on (e.g. the
        eBPF profiler's per-CPU times): ``read()`` -> {(source, item, cpu): value}."""
        with self._lock:
            self._sources[name] = read

    def _read_links(self, out: dict[Key, float]) -> None:
        dev = {}
        for ns, f in self._net_dev.items():
            f.seek(0)
            dev[ns] = procfs.parse_net_dev(f.read())
        for link in self.links:
            counters = dev[link.ns].get(link.ifname)
            if counters is None:
                self.series.missing.setdefault(f"link.{link.role}", f"{link.ns}/{link.ifname} is gone")
                continue
            for k, v in counters.items():
                out[("link", f"{link.role}.{k}", -1)] = v
            eth = self._ethtool.get(link.role)
            if eth:
                try:
                    for k, v in eth.get_statistics():
                        out[("ethtool", f"{link.role}.{k}", -1)] = v
                except OSError as e:
                    self.series.missing.setdefault(f"ethtool.{link.role}", str(e))
        for link, idx in self._qdisc_links:
            try:
                roots = [q for q in self._iprs[link.ns].get_qdiscs(index=idx) if q["parent"] == 0xFFFFFFFF]
            except Exception as e:  # noqa: BLE001 - an interface gone mid-trial must not stop it
                self.series.missing.setdefault(f"qdisc.{link.role}", f"{link.ns}/{link.ifname}: {e}")
                continue
            stats = (roots[0].get_attr("TCA_STATS2") if roots else None)
            basic = (stats.get_attr("TCA_STATS_BASIC") or {}) if stats else {}
            queue = (stats.get_attr("TCA_STATS_QUEUE") or {}) if stats else {}
            for k in QDISC_FIELDS:
                v = basic.get(k, queue.get(k))
                if v is not None:
                    out[("qdisc", f"{link.role}.{k}", -1)] = v

    def tail(self, n: int = 2) -> Series:
        """The last ``n`` samples so far (a running trial's live figures), copied under the lock."""
        with self._lock:
            s = self.series
            return Series(s.interval_s, s.t_s[-n:], [dict(v) for v in s.samples[-n:]], irq_names=dict(s.irq_names))

    # ---- sampling ---------------------------------------------------------
    def sample_now(self, mark: str | None = None) -> None:
        t0 = time.thread_time()
        with self._lock:
            now = time.monotonic() - self._t0
            try:
                values = self._read()
            except Exception as e:  # noqa: BLE001 - the trial goes on without this sample
                self.series.missing.setdefault("sampler", f"sample '{mark}' at {now:.2f} s failed: {e}")
                return
            self.series.t_s.append(now)
            self.series.samples.append(values)
            if mark:
                self.series.marks[mark] = len(self.series.samples) - 1
        self._cpu_s += time.thread_time() - t0

    def _run(self) -> None:
        pinned = False
        if self.cpus and self.cpus != self.online:
            os.sched_setaffinity(0, self.cpus)  # this thread only
            pinned = True
        self.series.sampler.update({"pinned_cpus": self.cpus if pinned else None, "thread_id": threading.get_native_id()})
        t_cpu0 = time.thread_time()
        deadline = time.monotonic()
        while not self._stop.is_set():
            deadline += self.interval_s
            if self._stop.wait(max(0.0, deadline - time.monotonic())):
                break
            with self._lock:
                now = time.monotonic() - self._t0
                try:
                    values = self._read()
                except Exception as e:  # noqa: BLE001 - a sampler failure must not stop the trial
                    self.series.missing["sampler"] = f"sampling stopped at {now:.2f} s: {e}"
                    break
                self.series.t_s.append(now)
                self.series.samples.append(values)
        self.series.sampler["thread_cpu_s"] = time.thread_time() - t_cpu0

    def __enter__(self) -> "KernelSampler":
        c0 = time.thread_time()
        try:
            self._open()
        except BaseException:
            self._close()  # whatever was opened before the failure
            raise
        self.series.sampler["setup_cpu_s"] = time.thread_time() - c0
        self._t0 = time.monotonic()
        self.sample_now("start")
        self._thread = threading.Thread(target=self._run, name="softnet-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        # cpu_share_of_one_cpu: the steady cost (thread + window-edge samples); setup_cpu_s apart.
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        try:
            if exc[0] is None:
                self.sample_now("end")
        finally:
            self._close()
        s = self.series.sampler
        s["wall_s"] = time.monotonic() - self._t0
        s["main_thread_cpu_s"] = self._cpu_s
        s["cpu_share_of_one_cpu"] = (s.get("thread_cpu_s", 0.0) + self._cpu_s) / s["wall_s"] if s["wall_s"] else None
