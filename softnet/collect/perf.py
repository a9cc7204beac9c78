"""Per-CPU perf counters through perf_event_open(2), counting only (no samples).

System-wide counters (pid = -1, one per CPU) of software events (context
switches, cpu-clock) and, when the host has a PMU, hardware events (cycles,
instructions, cache references and misses). Opening fails cleanly on hosts
without them (ENOENT for every hardware event on a VM without a PMU); the caller records
which events are missing and why. Read with the time the counter was enabled
and running, so multiplexed hardware counters are scaled and say so.

cpu-clock counted system-wide on one CPU measures the time that CPU existed
(idle included), not its busy time: it is a clock check, not a CPU cost.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1
PERF_FORMAT_TOTAL_TIME_ENABLED, PERF_FORMAT_TOTAL_TIME_RUNNING = 1, 2
PERF_FLAG_FD_CLOEXEC = 8
SYSCALL = {"x86_64": 298, "aarch64": 241, "riscv64": 241, "ppc64le": 319, "s390x": 331}

# name -> (type, config)
EVENTS = {
    "context_switches": (PERF_TYPE_SOFTWARE, 3),
    "cpu_clock_ns": (PERF_TYPE_SOFTWARE, 0),
    "cycles": (PERF_TYPE_HARDWARE, 0),
    "instructions": (PERF_TYPE_HARDWARE, 1),
    "cache_references": (PERF_TYPE_HARDWARE, 2),
    "cache_misses": (PERF_TYPE_HARDWARE, 3),
}


class _Attr(ctypes.Structure):
    # The first 64 bytes of struct perf_event_attr (PERF_ATTR_SIZE_VER0); flags
    # all zero: enabled at open, counting user, kernel and idle.
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
                ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32), ("config1", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)


def _open(ev_type: int, config: int, cpu: int) -> int:
    nr = SYSCALL.get(platform.machine())
    if nr is None:
        raise OSError(errno.ENOSYS, f"perf_event_open: unknown syscall number on {platform.machine()}")
    attr = _Attr(type=ev_type, size=ctypes.sizeof(_Attr), config=config,
                 read_format=PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING)
    fd = _libc.syscall(nr, ctypes.byref(attr), -1, cpu, -1, PERF_FLAG_FD_CLOEXEC)
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return fd


class PerfCounters:
    """Open the events on the CPUs; ``missing`` names each event that could
    not be opened and why. Use as a context manager (the fds are closed)."""

    def __init__(self, cpus: list[int], events: list[str] | None = None):
        self.cpus = list(cpus)
        self.fds: dict[str, dict[int, int]] = {}
        self.missing: dict[str, str] = {}
        for name in events or list(EVENTS):
            ev_type, config = EVENTS[name]
            fds = {}
            try:
                for cpu in self.cpus:
                    fds[cpu] = _open(ev_type, config, cpu)
            except OSError as e:
                for fd in fds.values():
                    os.close(fd)
                self.missing[name] = f"perf_event_open: {e.strerror or e}"
                continue
            self.fds[name] = fds

    def read(self) -> dict[str, dict[int, float]]:
        """{event: {cpu: count}}, scaled by enabled/running when multiplexed."""
        out: dict[str, dict[int, float]] = {}
        for name, fds in self.fds.items():
            out[name] = {}
            for cpu, fd in fds.items():
                value, enabled, running = struct.unpack("QQQ", os.read(fd, 24))
                out[name][cpu] = value * enabled / running if running and running < enabled else float(value)
        return out

    def close(self) -> None:
        for fds in self.fds.values():
            for fd in fds.values():
                os.close(fd)
        self.fds = {}

    def __enter__(self) -> "PerfCounters":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
