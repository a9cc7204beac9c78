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

from pydantic import BaseModel, ConfigDict

from softnet.tools.changes import HostChanges
from softnet.tools.process import CommandTool, pinned_off, tool

DEFAULT_HZ = 499  # per CPU: off the 250 Hz tick's multiples; each sample costs ~11 us here (0.55%)


class StacksHello(BaseModel):
    """softnet-stacks' first line: what it samples, and how often."""

    model_config = ConfigDict(extra="ignore")

    cpus: list[int]
    freq_hz: int
    period_ns: int
    depth: int
    started_ns: int


class StackSampler(CommandTool):
    """softnet-stacks on ``cpus``, attached while this object lives (a change
    recorded in ``changes``: detached however the run ends)."""

    def __init__(self, changes: HostChanges, cpus: list[int], freq_hz: int = DEFAULT_HZ):
        """Its own thread is kept off the sampled CPUs: its reads and
        symbolizing are not the SUT's work."""
        if not cpus:
            raise ValueError("StackSampler: no CPU to sample")
        cpu_list = ",".join(str(c) for c in sorted(set(cpus)))
        argv = [str(tool("stacks")), "--cpus", cpu_list, "--freq", str(int(freq_hz)), *pinned_off(cpus)]
        super().__init__(changes, argv, f"softnet-stacks sampler on CPUs {cpu_list}", StacksHello)
        self.cpus, self.freq_hz, self.period_ns = self.hello.cpus, self.hello.freq_hz, self.hello.period_ns

    def read(self) -> dict:
        """The counts so far: {"monotonic_ns", "samples_per_cpu", "missed",
        "counts": [[cpu, tid, comm, stack id, samples], ...]}."""
        return self.ask()

    def symbols(self) -> dict:
        """Every stack seen: {"stacks": {id: "root;...;leaf"}, "symbols",
        "unknown_frames"} (a 120k-symbol kallsyms takes about 0.1 s)."""
        return self.ask("stacks", timeout=30)
