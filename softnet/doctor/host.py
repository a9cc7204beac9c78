"""Host-wide probes: nothing to undo (tracefs only in a private mount namespace)."""
from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ValidationError

from softnet.doctor.checks import Check, TOOLS, KernelConfig, _check, _cmd, _errno_text
from softnet.doctor.bpf import (BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY,
                                BPF_TRACE_FEXIT, BPF_TRACE_RAW_TP, BTF_KIND_FUNC, BTF_KIND_TYPEDEF, btf_ids)
from softnet.doctor.bpf import _perf_open, _try_attach

# ---- host-wide probes (nothing to undo) ------------------------------------------
def _probe_af_xdp() -> Check:
    try:
        s = socket.socket(44, socket.SOCK_RAW, 0)  # AF_XDP
    except OSError as exc:
        return _check("af_xdp", False, f"socket(AF_XDP, SOCK_RAW): {_errno_text(exc.errno)}")
    s.close()
    return _check("af_xdp", True, "socket(AF_XDP, SOCK_RAW) succeeded (veth supports copy mode only, no zero-copy)")


_TRACEPOINTS = ("napi/napi_poll", "net/netif_receive_skb", "net/net_dev_xmit", "irq/softirq_entry",
                "irq/softirq_exit", "skb/kfree_skb")
_TRACEFS_SCRIPT = """
import json, os, subprocess, sys
root = "/sys/kernel/tracing"
r = subprocess.run(["mount", "-t", "tracefs", "tracefs", root], capture_output=True, text=True)
if r.returncode != 0:
    print(json.dumps({"error": (r.stderr or r.stdout).strip()}))
    sys.exit(0)
names = sys.argv[1].split(",")
print(json.dumps({"events": os.path.isdir(root + "/events"),
                  "kprobe_events": os.path.exists(root + "/kprobe_events"),
                  "tracepoints": {n: os.path.isdir(root + "/events/" + n) for n in names}}))
"""


@dataclass(frozen=True)
class Tracefs:
    """Where tracefs is, or whether it can be mounted, and what it offers."""

    where: str | None  # its mount point, "mountable (not mounted on the host)", or None (see error)
    events: bool = False
    kprobe_events: bool = False
    tracepoints: dict[str, bool] = field(default_factory=dict)  # _TRACEPOINTS -> present
    error: str | None = None


class _MountAnswer(BaseModel):
    """What _TRACEFS_SCRIPT prints: an error, or what the mounted tracefs has."""

    error: str | None = None
    events: bool = False
    kprobe_events: bool = False
    tracepoints: dict[str, bool] = {}


def tracefs_info() -> Tracefs:
    """Where tracefs is, or whether it can be mounted (tried only in a private mount namespace)."""
    for root in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(f"{root}/events"):
            return Tracefs(root, events=True, kprobe_events=os.path.exists(f"{root}/kprobe_events"),
                           tracepoints={n: os.path.isdir(f"{root}/events/{n}") for n in _TRACEPOINTS})
    r = _cmd(["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-c", _TRACEFS_SCRIPT,
              ",".join(_TRACEPOINTS)])
    if r.rc != 0:
        return Tracefs(None, error=f"unshare --mount: {r.why}")
    try:
        info = _MountAnswer.model_validate_json(r.out.strip().splitlines()[-1])
    except (ValidationError, IndexError):
        return Tracefs(None, error=f"unexpected answer from the mount probe: {r.out.strip()!r} {r.err.strip()!r}")
    if info.error is not None:
        return Tracefs(None, error=f"mount -t tracefs in a private mount namespace: {info.error}")
    return Tracefs("mountable (not mounted on the host)", info.events, info.kprobe_events, info.tracepoints)


def _probe_tracefs(tfs: Tracefs) -> Check:
    if not tfs.events:
        return _check("tracefs", False, "no tracefs events directory" if tfs.error is None else tfs.error)
    tps = tfs.tracepoints
    have = [n for n, ok in tps.items() if ok]
    missing = [n for n, ok in tps.items() if not ok]
    where = tfs.where
    if where.startswith("mountable"):
        where = ("not mounted at /sys/kernel/tracing; mounts in a private mount namespace "
                 "(tried with unshare --mount, the host is unchanged)")
    else:
        where = f"mounted at {where}"
    detail = f"{where}; tracepoints: {', '.join(have) or 'none'}"
    if missing:
        detail += f"; missing: {', '.join(missing)}"
    return _check("tracefs", not missing, detail)


def _probe_bpf_raw_tracepoint() -> Check:
    results = [_try_attach(f"raw_tracepoint/{tp}", BPF_PROG_TYPE_RAW_TRACEPOINT, tp)
               for tp in ("napi_poll", "netif_receive_skb")]
    return _check("bpf_raw_tracepoint", all(ok for ok, _ in results), "; ".join(d for _, d in results))


def _probe_kprobes(config: KernelConfig, tfs: Tracefs) -> Check:
    pmu = os.path.isdir("/sys/bus/event_source/devices/kprobe")
    built = None if config.values is None else config.setting("CONFIG_KPROBES") == "y"
    parts = [f"{config.shown('CONFIG_KPROBES')} (from kernel config {config.source})" if config.values is not None
             else config.source,
             f"kprobe PMU (/sys/bus/event_source/devices/kprobe): {'present' if pmu else 'absent'}"]
    if tfs.events:
        parts.append(f"tracefs kprobe_events: {'present' if tfs.kprobe_events else 'absent'}")
    evidence = pmu or tfs.kprobe_events
    if evidence:
        ok = True
    elif built is False or tfs.events:
        ok = False
    else:
        ok = None
    return _check("kprobes", ok, "; ".join(parts))


def _probe_fentry_fexit(config: KernelConfig) -> Check:
    cfg = ", ".join(config.shown(k) for k in ("CONFIG_FUNCTION_TRACER", "CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS"))
    cfg += f" (kernel config {config.source})" if config.values is not None else ""
    try:
        cfg += f"; kernel.ftrace_enabled={Path('/proc/sys/kernel/ftrace_enabled').read_text().strip()}"
    except OSError:
        pass
    target = "bpf_fentry_test1"  # only called by BPF_PROG_TEST_RUN: a harmless place to attach
    try:
        ids = btf_ids({target: BTF_KIND_FUNC, "netif_receive_skb": BTF_KIND_FUNC,
                       "btf_trace_napi_poll": BTF_KIND_TYPEDEF})
    except (OSError, ValueError, struct.error) as exc:
        return _check("fentry_fexit", None, f"cannot read kernel BTF to find an attach target: {exc}; {cfg}")
    if target not in ids:
        return _check("fentry_fexit", None, f"{target} not in kernel BTF; {cfg}")
    results = [_try_attach(f"{kind}/{target}", BPF_PROG_TYPE_TRACING, None, at, ids[target])
               for kind, at in (("fentry", BPF_TRACE_FENTRY), ("fexit", BPF_TRACE_FEXIT))]
    ok = all(r for r, _ in results)
    detail = "; ".join(d for _, d in results)
    if not ok and "netif_receive_skb" in ids:  # a refusal specific to the target, or general?
        _, d2 = _try_attach("fentry/netif_receive_skb", BPF_PROG_TYPE_TRACING, None, BPF_TRACE_FENTRY,
                            ids["netif_receive_skb"])
        detail += f"; {d2}"
    if "btf_trace_napi_poll" in ids:
        _, tp = _try_attach("tp_btf/napi_poll", BPF_PROG_TYPE_TRACING, None, BPF_TRACE_RAW_TP,
                            ids["btf_trace_napi_poll"])
        detail += f"; {tp}"
    return _check("fentry_fexit", ok, f"{detail}; {cfg}")


def _probe_kernel_btf() -> Check:
    path = Path("/sys/kernel/btf/vmlinux")
    try:
        with path.open("rb") as f:
            head = f.read(4)
        size = path.stat().st_size
    except OSError as exc:
        return _check("kernel_btf", False, f"{path}: {exc.strerror}")
    magic = struct.unpack_from("<H", head)[0] if len(head) >= 2 else 0
    if magic != 0xEB9F:
        return _check("kernel_btf", False, f"{path} exists but is not BTF (magic {magic:#x})")
    return _check("kernel_btf", True, f"{path}: {size} bytes")


def _probe_hw_perf() -> Check:
    hw, hw_err = _perf_open(0, 0)  # PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES
    sw, sw_err = _perf_open(1, 0)  # PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK
    sw_text = "software cpu-clock: ok" if sw >= 0 else f"software cpu-clock: {_errno_text(sw_err)}"
    if hw >= 0:
        return _check("hw_perf_counters", True, f"perf_event_open(PERF_COUNT_HW_CPU_CYCLES): ok; {sw_text}")
    return _check("hw_perf_counters", False,
                  f"perf_event_open(PERF_COUNT_HW_CPU_CYCLES): {_errno_text(hw_err)}; {sw_text}")


def _probe_rapl() -> Check:
    from softnet.analysis.power import classify
    from softnet.collect.sampler import POWERCAP, rapl_zones

    zones = classify(rapl_zones())
    if not zones:
        where = f"{POWERCAP} absent" if not POWERCAP.is_dir() else "no readable RAPL energy_uj"
        return _check("rapl_power", False, f"{where}: trials have no power figures")
    counted = [z.name or z.zone for z in zones if z.counted]
    return _check("rapl_power", True, f"power = {' + '.join(counted)} ({len(zones)} zones; the others lie "
                  "inside these or repeat them)")


def _probe_irq_time(config: KernelConfig) -> Check:
    if config.values is None:
        return _check("irq_time_accounting", None, config.source)
    on = config.setting("CONFIG_IRQ_TIME_ACCOUNTING") == "y"
    keys = ("CONFIG_IRQ_TIME_ACCOUNTING", "CONFIG_TICK_CPU_ACCOUNTING", "CONFIG_VIRT_CPU_ACCOUNTING_GEN")
    detail = f"{', '.join(config.shown(k) for k in keys)} (from kernel config {config.source})"
    try:
        cmdline = Path("/proc/cmdline").read_text()
    except OSError:
        cmdline = ""
    if on and "noirqtime" in cmdline:
        on = False
        detail += "; disabled at boot by tsc=noirqtime"
    detail += ("; softirq time in /proc/stat is measured at irq entry/exit" if on else
               "; softirq time in /proc/stat is tick-sampled (misaccounting reproducible)")
    return _check("irq_time_accounting", on, detail)


def _probe_tools() -> list[Check]:
    out = []
    for name, (argv, _) in TOOLS.items():
        path = shutil.which(name)
        if path is None:
            out.append(_check(f"tool:{name}", False, f"{name} not found in PATH"))
            continue
        r = _cmd(argv, timeout=5)
        # Some tools (trafgen -v) print their version and exit 1: judge by the version string.
        lines = [ln.strip() for ln in (r.out + "\n" + r.err).splitlines() if ln.strip()]
        version = next((ln for ln in lines if re.search(r"\d+\.\d+", ln)), None)
        if version is None:
            out.append(_check(f"tool:{name}", False, f"{path}: `{' '.join(argv)}` printed no version: {r.why}"))
        else:
            out.append(_check(f"tool:{name}", True, f"{path}: {version}"))
    return out


