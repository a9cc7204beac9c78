"""A CPU-bound victim pinned to one CPU: the eBPF-profile paper's cross-check
(sec. V). What packet processing takes from that CPU shows up twice: as the
victim's lost throughput, and as the softirq and hardirq time the profiler
measures there. The victim prints (CLOCK_MONOTONIC seconds, iterations so
far, its run time in ns as the kernel accounts it) every 50 ms;
softnet.analysis.victim_check reads its rate and its share of the CPU over
any span.

Two victims: the Python loop (the interpreter's working set lives in the
caches, so interruptions also cost it cache refills) and softnet-victim, a C
loop on a few registers that loses only the CPU time taken from it.
"""
from __future__ import annotations

import subprocess
import sys
import time

from softnet.tools.changes import HostChanges
from softnet.tools.process import tool

KINDS = ("python", "c")

# The loop: batches of ~1 ms of pure interpreter work between clock reads.
_VICTIM = """
import os, sys, time
os.sched_setaffinity(0, [int(sys.argv[1])])
end = time.monotonic() + float(sys.argv[2])
n, nxt = 0, time.monotonic()
while True:
    for _ in range(20000):
        n += 1
    t = time.monotonic()
    if t >= nxt:
        print(t, n, time.thread_time_ns(), flush=True)
        nxt += 0.05
    if t >= end:
        break
"""


class Victim:
    """Runs for ``seconds`` on ``cpu`` (stopped with the run however it ends);
    ``kind``: "python" or "c" (softnet-victim)."""

    def __init__(self, changes: HostChanges, cpu: int, seconds: float, kind: str = "python"):
        if kind not in KINDS:
            raise ValueError(f"victim kind '{kind}': expected one of {', '.join(KINDS)}")
        self.proc = None
        changes.record(f"victim workload on CPU {cpu}", self.stop)
        argv = ([sys.executable, "-c", _VICTIM, str(cpu), str(seconds)] if kind == "python"
                else [str(tool("victim")), "--cpu", str(cpu), "--seconds", f"{max(seconds, 0.01):g}"])
        self.kind, self.cpu = kind, cpu
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        self.started = time.monotonic()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    close = stop  # as the agent ends its tools

    def read(self) -> dict:
        """Stop it now (a trial is over) and give its progress as the raw trial keeps it."""
        if self.proc.poll() is None:
            self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        rows = [line.split() for line in out.splitlines()]
        return {"kind": self.kind, "cpu": self.cpu, "started_mono_s": self.started,
                "series": [[float(x) for x in row[:3]] for row in rows if len(row) >= 2]}
