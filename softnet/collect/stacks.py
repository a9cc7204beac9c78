"""softnet-stacks (native/stacks): the kernel stacks of the SUT's CPUs,
sampled at a fixed period on a CPU-clock timer, counted by (CPU, thread,
stack), so that a window's CPU time can be split by kernel function.

A read returns the cumulative counts (cheap: taken at the window's edges);
``symbols()`` every stack seen, named from the host's /proc/kallsyms at that
moment (after the traffic, while the SUT's BPF programs are still loaded),
so the raw trial keeps names, not addresses, and re-evaluates anywhere.
softnet.analysis.kernel_functions turns two reads and the names into time
per function.
"""
from __future__ import annotations

import os
import subprocess
import threading

from pydantic import BaseModel, ConfigDict

from softnet.tools.changes import HostChanges
from softnet.tools.process import quit_tool, read_json_line, read_tool, tool

DEFAULT_HZ = 999  # samples per second per CPU: off the 250 Hz tick's multiples, as perf's 999


class StacksHello(BaseModel):
    """softnet-stacks' first line: what it samples, and how often."""

    model_config = ConfigDict(extra="ignore")

    cpus: list[int]
    freq_hz: int
    period_ns: int
    depth: int
    started_ns: int


class StackSampler:
    """softnet-stacks on ``cpus``, attached while this object lives (a change
    recorded in ``changes``: detached however the run ends)."""

    def __init__(self, changes: HostChanges, cpus: list[int], freq_hz: int = DEFAULT_HZ,
                 avoid_cpus: list[int] | None = None):
        """``avoid_cpus``: keep the tool's own thread off these (the sampled
        CPUs: its reads and symbolizing are not the SUT's work)."""
        if not cpus:
            raise ValueError("StackSampler: no CPU to sample")
        self.proc = None
        self._lock = threading.Lock()
        cpu_list = ",".join(str(c) for c in sorted(set(cpus)))
        argv = [str(tool("stacks")), "--cpus", cpu_list, "--freq", str(int(freq_hz))]
        allowed = sorted(set(os.sched_getaffinity(0)) - set(avoid_cpus or cpus))
        if allowed:
            argv += ["--cpu", str(allowed[0])]
        changes.record(f"softnet-stacks sampler on CPUs {cpu_list}", self.close)  # before it exists: no leak window
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        try:
            hello = StacksHello.model_validate(read_json_line(self.proc, "softnet-stacks did not start", 15))
        except BaseException:
            self.close()
            raise
        self.cpus, self.freq_hz, self.period_ns = hello.cpus, hello.freq_hz, hello.period_ns

    def read(self) -> dict:
        """The counts so far: {"monotonic_ns", "samples_per_cpu", "missed",
        "counts": [[cpu, tid, comm, stack id, samples], ...]}."""
        with self._lock:
            return read_tool(self.proc, "softnet-stacks")

    def symbols(self) -> dict:
        """Every stack seen: {"stacks": {id: "root;...;leaf"}, "symbols",
        "unknown_frames"} (a 120k-symbol kallsyms takes about 0.1 s)."""
        with self._lock:
            return read_tool(self.proc, "softnet-stacks", "stacks", timeout=30)

    def close(self) -> None:
        quit_tool(self.proc)
