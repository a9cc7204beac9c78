"""softnet-stalls (native/stalls): the periods when a CPU the data path needs
did not run, found independently of the traffic, so that a loss can be
explained in time.

Two detectors per watched CPU (docs/reference/native-tools.md#softnet-stalls):

* ``runq``: a task waited on the CPU's runqueue (woken, or preempted) for at
  least the threshold before it ran: someone else held the CPU (``by``: a
  SCHED_FIFO hog, another task), or the idle vCPU was slow to wake up
  (``by_pid`` 0, the idle task). A stalled NAPI kthread shows up here.
* ``gap``: a busy CPU gave no sign of life (timer expiry, clock sample,
  context switch) for longer than period + threshold: the vCPU itself did not
  run (the hypervisor descheduled it) or interrupts were off.

Each runq wait carries ``stolen_ns``, the CPU's steal time within it (the
hypervisor's share: the vCPU was runnable but the host ran something else);
null where not known (gaps, a task woken for one CPU that ran on another).

The kernel here does not trace every context switch (this VM's own init
threads switch out unseen); a wait that such a switch ended is found when the
task switches out, with ``end_unseen`` true and ``end_ns`` the earliest it can
have ended. ``unseen_switches_per_cpu`` counts them.

Each read returns every stall since the start (cumulative), in
CLOCK_MONOTONIC ns, the clock of softnet-gen's schedule.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from softnet.tools.changes import HostChanges
from softnet.tools.process import CommandTool, pinned_off, tool


class StallsHello(BaseModel):
    """softnet-stalls' first line: what it watches, and how."""

    model_config = ConfigDict(extra="ignore")

    cpus: list[int]
    period_ns: int
    threshold_ns: int
    started_ns: int
    steal_clock: bool  # stolen_ns is measured (paravirt steal time)


class StallProbe(CommandTool):
    """softnet-stalls watching ``cpus``, attached while this object lives (a
    change recorded in ``changes``: detached however the run ends). Usable as
    a context manager."""

    def __init__(self, changes: HostChanges, cpus: list[int], period_us: int = 4000, threshold_us: int = 200,
                 avoid_cpus: list[int] | None = None, max_events: int = 100000):
        """``period_us``: the cpu-clock timer's period (a busy CPU silent for
        longer than period + threshold is a gap; each timer interrupt costs a
        vCPU 5-10 us here: at 1 ms the probe takes 1.0-1.9% of a busy CPU, at
        the default 4 ms, the tick's own period, 0.2-0.4%); ``threshold_us``: the
        shortest stall reported; ``avoid_cpus``: keep the tool's own thread off
        these (pinned to the first other CPU this process may use, if any)."""
        if not cpus:
            raise ValueError("StallProbe: no CPU to watch")
        cpu_list = ",".join(str(c) for c in sorted(set(cpus)))
        argv = [str(tool("stalls")), "--cpus", cpu_list, "--period-us", str(int(period_us)),
                "--threshold-us", str(int(threshold_us)), "--max-events", str(int(max_events)), *pinned_off(avoid_cpus)]
        super().__init__(changes, argv, f"softnet-stalls probe on CPUs {cpu_list}", StallsHello)
        hello = self.hello
        self.cpus, self.period_ns, self.threshold_ns = hello.cpus, hello.period_ns, hello.threshold_ns
        self.started_ns, self.steal_clock = hello.started_ns, hello.steal_clock

    def read(self) -> dict:
        """Every stall since the start: {"period_ns", "threshold_ns", "cpus",
        "started_ns", "monotonic_ns", "samples_per_cpu", "timers_per_cpu",
        "switches_per_cpu", "unseen_switches_per_cpu", "lost_events",
        "events_seen", "events_truncated", "stalls": [{"cpu", "kind",
        "start_ns", "end_ns", "pid", "task", "prio", "by_pid", "by",
        "by_policy", "end_unseen", "stolen_ns"}, ...]}."""
        return self.ask()

    def __enter__(self) -> "StallProbe":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

