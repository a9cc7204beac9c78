"""softnet-profile (native/profile): per-CPU packet-path aggregates from BTF
tracepoints, read at chosen instants; `delta()` of two reads is what happened
between them.

The attach plan is fixed to what this kernel allows everywhere softnet runs:
tp_btf tracepoints, which need neither tracefs nor kprobes nor fentry (all
unavailable here). Always attached: softirq and irq handler entry/exit, the
x86 system vectors' entry/exit (IPIs, local timer, irq work), sched_switch,
napi_poll. The once-per-packet ones (the stage clock's packet events and
kfree_skb's drop reasons) are attached ``duty`` of every 500 ms; the counters
over those sampled periods come apart in each read (``sampled_cpus``) so that
softnet.analysis.stages can scale them to the window.
"""
from __future__ import annotations

import os
import subprocess
import threading

from softnet.tools.changes import HostChanges
from softnet.tools.process import quit_tool, read_json_line, read_tool, tool

CTXS = ("idle", "ksoftirqd", "napi_thread", "other_task")
COUNTERS = ("hardirq_ns", "hardirq_cnt", "sysvec_ns", "sysvec_cnt", "busy_ns", "idle_ns", "napi_thread_ns", "hardirq_in_idle_ns", "softirq_in_idle_ns",
            "ctx_switches", "napi_polls", "napi_work", "napi_budget_exhausted", "rx_skbs", "consumed_skbs",
            "dropped_skbs", "unmatched_exits", "drop_keys_full")
SERIES_COUNTERS = ("busy_ns", "idle_ns", "napi_thread_ns", "hardirq_ns", "sysvec_ns", "napi_polls", "napi_work")


class Profiler:
    """The tracepoint programs, attached while this object lives (a change
    recorded in ``changes``: detached however the run ends)."""

    def __init__(self, changes: HostChanges, per_packet: bool = True, duty: float = 1.0,
                 avoid_cpus: list[int] | None = None):
        """``per_packet``: also the tracepoints hit once per packet (the stage
        clock's packet events, kfree_skb: drop reasons); ``duty``: the share of
        time the stage events are attached (sampled in 500 ms periods);
        ``avoid_cpus``: keep the loader (its attach/detach work) off these."""
        self.proc = None
        self._lock = threading.Lock()
        changes.record("softnet-profile tracepoint programs", self.close)
        argv = [str(tool("profile"))] + (["--duty", f"{duty:g}"] if per_packet else ["--no-per-packet"])
        allowed = sorted(set(os.sched_getaffinity(0)) - set(avoid_cpus or []))
        if allowed:
            argv += ["--cpu", str(allowed[0])]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        hello = read_json_line(self.proc, "softnet-profile did not start", 15)
        self.plan = hello["plan"]
        self.duty = hello["duty"]
        self.period_ms = hello["period_ms"]
        self.drop_reasons = {int(k): v for k, v in hello["drop_reasons"].items()}
        self.events = hello["events"]  # the stage clock's event names, by number

    def read(self) -> dict:
        with self._lock:  # the trial and the kernel sampler's thread both read
            return read_tool(self.proc, "softnet-profile")

    def series_values(self) -> dict:
        """One read as kernel-sampler values: per CPU, the cumulative times
        (ns) and NAPI counts, source "ebpf" (a time series at every sample)."""
        out = {}
        for cpu, c in enumerate(self.read()["cpus"]):
            for k in SERIES_COUNTERS:
                out[("ebpf", k, cpu)] = c[k]
            for vec in ("NET_RX", "NET_TX"):
                out[("ebpf", f"softirq_{vec}_ns", cpu)] = sum(ns for ns, _ in c["softirq_ns"][vec].values())
        return out

    def close(self) -> None:
        quit_tool(self.proc)


def delta(a: dict, b: dict) -> dict:
    """b - a per CPU (the counters only grow while the programs are attached)."""
    cpus = [_counters(ca, cb) for ca, cb in zip(a["cpus"], b["cpus"])]
    for d, ca, cb in zip(cpus, a["cpus"], b["cpus"]):
        before = {(f, t): (ns, n) for f, t, ns, n in ca["transitions"]}
        d["transitions"] = [[f, t, ns - before.get((f, t), (0, 0))[0], n - before.get((f, t), (0, 0))[1]]
                            for f, t, ns, n in cb["transitions"] if n != before.get((f, t), (0, 0))[1]]
    before = {(r, i, ns): n for r, i, ns, n in a["drops"]}
    drops = [(r, i, ns, n - before.get((r, i, ns), 0)) for r, i, ns, n in b["drops"]
             if n - before.get((r, i, ns), 0)]
    return {"cpus": cpus, "drops": drops, "wall_ns": b["monotonic_ns"] - a["monotonic_ns"],
            "monotonic_ns": [a["monotonic_ns"], b["monotonic_ns"]],
            # the same counters summed over the periods the stage events were attached
            "sampled_cpus": [_counters(ca, cb) for ca, cb in zip(a["sampled_cpus"], b["sampled_cpus"])],
            "sampled_ns": b["sampled_ns"] - a["sampled_ns"]}


def _counters(ca: dict, cb: dict) -> dict:
    d = {k: cb[k] - ca[k] for k in COUNTERS}
    d["napi_work_hist"] = [y - x for x, y in zip(ca["napi_work_hist"], cb["napi_work_hist"])]
    d["softirq_ns"] = {vec: {ctx: [cb["softirq_ns"][vec][ctx][i] - ca["softirq_ns"][vec][ctx][i] for i in (0, 1)]
                             for ctx in CTXS} for vec in cb["softirq_ns"]}
    return d


def name_drops(drops: list, reasons: dict[int, str], devices: dict[tuple[int, int], str],
               scale: float = 1.0) -> list[dict]:
    """[(reason, ifindex, netns inode, count)] -> rows with the reason's name
    (the kernel's enum) and the device's testbed role where it is one.
    ``scale``: all packets over those polled while sampled, for the estimate
    over the whole window when kfree_skb counted only part of the time (1:
    counted exactly)."""
    rows = [{"reason": reasons.get(r, f"reason {r}"), "device": devices.get((ns, i), f"ifindex {i} (netns {ns})"),
             "skbs": n, "estimated_skbs": round(n * scale)} for r, i, ns, n in drops]
    return sorted(rows, key=lambda row: -row["skbs"])
