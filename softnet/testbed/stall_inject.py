"""softnet-inject (native/inject): stalls of one CPU on purpose. A SCHED_FIFO
thread pinned to the CPU busy-spins ``busy_ms`` every ``every_ms`` on an
absolute CLOCK_MONOTONIC schedule; while it spins, no SCHED_OTHER task (a NAPI
kthread, ksoftirqd, a generator) runs on that CPU. It reproduces the vCPU
stalls of this VM at known instants, so that a stall detector and the loss
attribution can be checked against the truth.

The injector is a host change: recorded in ``changes`` before it starts, and
stopped however the run ends (it also dies with its parent: a CPU hog never
outlives softnet).
"""
from __future__ import annotations

import os
import subprocess

from pydantic import BaseModel

from softnet.errors import TestbedError
from softnet.tools.changes import HostChanges
from softnet.tools.process import quit_tool, read_json_line, read_tool, tool


def describe(cpu: int, busy_ms: float, every_ms: float, priority: int, pid: int | None = None) -> str:
    who = f", pid {pid}" if pid is not None else ""
    return f"stall injector: CPU {cpu}, {busy_ms:g} ms every {every_ms:g} ms (SCHED_FIFO {priority}{who})"


def _allow(cpu: int) -> None:
    """In the child: its CPU within reach, though the parent is kept off it
    (a remote agent runs on its host's housekeeping CPUs); an offline CPU is
    left for softnet-inject to name."""
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        pass


class _Ready(BaseModel):
    """softnet-inject's first line: ready, or why not (printed as it came)."""

    ready: object = None


class _Schedule(BaseModel):
    """When its stalls fall, from that line."""

    first_ns: int
    busy_ns: int
    period_ns: int


class StallInjector:
    """softnet-inject on ``cpu`` while this object lives; ``read()`` gives
    every stall so far: {"cpu", "priority", "busy_ns", "period_ns",
    "first_ns", "stalls": [[start_ns, end_ns], ...], "stalls_total",
    "missed", ...} (CLOCK_MONOTONIC ns). Usable as a context manager."""

    def __init__(self, changes: HostChanges, cpu: int, busy_ms: float, every_ms: float, priority: int = 50,
                 delay_ms: float | None = None):
        """``delay_ms``: the first stall that long after the start (default:
        one period)."""
        self.cpu, self.busy_ms, self.every_ms, self.priority = cpu, busy_ms, every_ms, priority
        argv = [str(tool("inject")), "--cpu", str(cpu), "--busy-ms", f"{busy_ms:g}", "--every-ms", f"{every_ms:g}",
                "--priority", str(priority)]
        if delay_ms is not None:
            argv += ["--delay-ms", f"{delay_ms:g}"]
        self.proc = None
        what = describe(cpu, busy_ms, every_ms, priority)
        changes.record(what, self.close)  # before it exists: no leak window
        change = changes.changes[-1]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, preexec_fn=lambda: _allow(cpu))
        # the record names the process, as a generator's does
        named = describe(cpu, busy_ms, every_ms, priority, self.proc.pid)
        change.what = named
        if changes.applied and changes.applied[-1] == what:
            changes.applied[-1] = named
        try:
            hello = read_json_line(self.proc, "softnet-inject did not start", 10)
        except BaseException:
            self.close()
            raise
        if not _Ready.model_validate(hello).ready:
            self.close()
            raise TestbedError(f"softnet-inject did not start: {hello}")
        schedule = _Schedule.model_validate(hello)
        self.first_ns = schedule.first_ns
        self.busy_ns = schedule.busy_ns
        self.period_ns = schedule.period_ns

    @property
    def pid(self) -> int:
        return self.proc.pid

    def read(self) -> dict:
        return read_tool(self.proc, "softnet-inject")

    def close(self) -> None:
        quit_tool(self.proc)

    def __enter__(self) -> "StallInjector":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
