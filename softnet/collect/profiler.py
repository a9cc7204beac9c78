"""softnet-profile (native/profile): per-CPU packet-path aggregates from BTF
tracepoints, read at chosen instants; `delta()` of two reads is what happened
between them.

The attach plan is fixed to what this kernel allows everywhere softnet runs:
tp_btf tracepoints, which need neither tracefs nor kprobes nor fentry (all
unavailable here). The base programs: softirq and irq handler entry/exit,
the x86 system vectors' entry/exit (IPIs, local timer, irq work),
sched_switch, napi_poll; attached ``base_duty`` of every 500 ms (all along at
1), their counters summed over that time (``base_ns``) and scaled to the
window by softnet.analysis.profile_reads. The once-per-packet ones (the stage
clock's packet events and kfree_skb's drop reasons) are attached ``duty`` of
every 500 ms, inside that time; the counters over those sampled periods come
apart in each read (``sampled_cpus``) so that softnet.analysis.stages can
scale them to the window.
"""
from __future__ import annotations

import os
import subprocess
import threading

from pydantic import BaseModel, ConfigDict

from softnet.analysis.profile_reads import delta, name_drops  # noqa: F401 (the arithmetic on reads)
from softnet.results.raw import ProfileRead
from softnet.results.trial import Number
from softnet.tools.changes import HostChanges
from softnet.tools.process import quit_tool, read_json_line, read_tool, tool


class ProfileHello(BaseModel):
    """softnet-profile's first line: what it attached, and how to name what it counts."""

    model_config = ConfigDict(extra="ignore")

    plan: str
    duty: Number
    base_duty: Number = 1
    period_ms: Number
    drop_reasons: dict[int, str]  # the kernel's skb drop reason -> its name
    events: list[str]  # the stage clock's event names, by number


class Profiler:
    """The tracepoint programs, attached while this object lives (a change
    recorded in ``changes``: detached however the run ends)."""

    def __init__(self, changes: HostChanges, per_packet: bool = True, duty: float = 1.0, base_duty: float = 1.0,
                 avoid_cpus: list[int] | None = None):
        """``per_packet``: also the tracepoints hit once per packet (the stage
        clock's packet events, kfree_skb: drop reasons); ``duty``: the share of
        time the stage events are attached (sampled in 500 ms periods);
        ``base_duty``: the same for the other programs (at least ``duty``);
        ``avoid_cpus``: keep the loader (its attach/detach work) off these."""
        self.proc = None
        self._lock = threading.Lock()
        changes.record("softnet-profile tracepoint programs", self.close)
        argv = [str(tool("profile"))] + (["--duty", f"{duty:g}"] if per_packet else ["--no-per-packet"])
        if base_duty < 1:
            argv += ["--base-duty", f"{max(base_duty, duty) if per_packet else base_duty:g}"]
        allowed = sorted(set(os.sched_getaffinity(0)) - set(avoid_cpus or []))
        if allowed:
            argv += ["--cpu", str(allowed[0])]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        hello = ProfileHello.model_validate(read_json_line(self.proc, "softnet-profile did not start", 15))
        self.plan, self.duty, self.base_duty, self.period_ms = hello.plan, hello.duty, hello.base_duty, hello.period_ms
        self.drop_reasons, self.events = hello.drop_reasons, hello.events

    def read(self) -> dict:
        with self._lock:  # the trial and the kernel sampler's thread both read
            return read_tool(self.proc, "softnet-profile")

    def series_values(self) -> dict:
        """One read as kernel-sampler values: per CPU, the cumulative times
        (ns) and NAPI counts, source "ebpf" (a time series at every sample).
        With the base programs duty-cycled, the sums over their periods and
        the time those took (``attached_ns``), by which a delta is scaled."""
        out = {}
        read = ProfileRead.model_validate(self.read())
        for cpu, c in enumerate(read.cpus):
            if read.base_ns is not None:
                out[("ebpf", "attached_ns", cpu)] = read.base_ns
            out.update({("ebpf", "busy_ns", cpu): c.busy_ns, ("ebpf", "idle_ns", cpu): c.idle_ns,
                        ("ebpf", "napi_thread_ns", cpu): c.napi_thread_ns, ("ebpf", "hardirq_ns", cpu): c.hardirq_ns,
                        ("ebpf", "sysvec_ns", cpu): c.sysvec_ns, ("ebpf", "napi_polls", cpu): c.napi_polls,
                        ("ebpf", "napi_work", cpu): c.napi_work})
            for vec in ("NET_RX", "NET_TX"):
                out[("ebpf", f"softirq_{vec}_ns", cpu)] = sum(ns for ns, _ in c.softirq_ns[vec].values())
        return out

    def close(self) -> None:
        quit_tool(self.proc)
