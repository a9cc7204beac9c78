"""`softnet doctor`: probe what this host can actually do for softnet.

Every answer comes from trying the thing, not from assuming it: namespaces,
veth, XDP, threaded NAPI, RPS, qdiscs and tc classifiers are exercised inside
one temporary namespace `sn-doctor-<hex>` that is always deleted (it is a
change recorded in a `HostChanges` registry, so an exception, Ctrl-C or
SIGTERM still removes it and stops any helper process). eBPF attach types are
tried with tiny no-op programs loaded through the bpf(2) syscall; tracefs is
mounted only inside a private mount namespace (`unshare --mount`), never on
the host. Where only the kernel configuration can answer (kprobes when the
kernel has no tracefs entry for them, IRQ time accounting), the detail says
so.

    checks = run_probes()            # list[Check], a few seconds
    console.print(render_table(checks))
    json.dumps([c.to_dict() for c in checks])
"""
from __future__ import annotations

import ctypes
import errno
import glob
import gzip
import json
import os
import platform
import re
import secrets
import select
import shutil
import socket
import struct
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text

from softnet.errors import TestbedError
from softnet.testbed.changes import NAME_PREFIX, HostChanges
from softnet.testbed.local import napi_thread_pids

NS_PREFIX = f"{NAME_PREFIX}doctor-"
CMD_TIMEOUT_S = 10.0


@dataclass
class Check:
    """One capability: `ok` is True (works), False (does not), None (unknown / not probed)."""

    name: str
    ok: bool | None
    detail: str
    enables: str

    def to_dict(self) -> dict:
        return asdict(self)


# ---- what each answer enables ----------------------------------------------
ENABLES = {
    "root": "everything that changes the host: namespaces, veth, XDP, qdiscs, sysctls, IRQ/RPS affinity",
    "netns": "the local testbed: generator, SUT and sink each in its own network namespace",
    "veth": "links between the testbed namespaces (generator -> SUT -> sink)",
    "xdp_veth": "the XDP sink (softnet-sink): counts, loss, reordering and latency of test frames, dropped cheaply",
    "af_xdp": "AF_XDP sockets: the AF_XDP round-trip latency experiments (af-xdp-delays paper)",
    "threaded_napi": "threaded NAPI: pin SUT receive processing to its own CPU on veth (steering=threaded)",
    "rps": "RPS: move SUT receive processing to other CPUs on veth (steering=rps)",
    "tracefs": "tracefs tracepoints (napi, net, irq, skb): per-stage kernel events; libbpf SEC(\"tracepoint/...\") "
               "programs resolve tracepoint ids through tracefs",
    "bpf_raw_tracepoint": "eBPF collectors on raw tracepoints (napi_poll, netif_receive_skb) without tracefs",
    "kprobes": "eBPF kprobes: timing of receive-path functions that have no tracepoint",
    "fentry_fexit": "eBPF fentry/fexit (and tp_btf): cheap function-level stage timing (ebpf-linux-stack-profile paper)",
    "kernel_btf": "BPF CO-RE: collectors built once run on this kernel",
    "hw_perf_counters": "cycles per packet and cycles per Mbps from hardware counters (wifi-ap paper, Table I)",
    "rapl_power": "energy per Mbps from RAPL power readings (wifi-ap paper)",
    "irq_time_accounting": "exact softirq CPU time in /proc/stat; without it softirq time is tick-sampled, which is "
                           "what the wifi-ap paper's softirq misaccounting analysis relies on (reproducible here)",
}
QDISCS = {
    # kind: (argv after `root`, what it enables)
    "pfifo": (["pfifo", "limit", "1000"], "packet-limited FIFO as the SUT egress queue (queue-length experiments)"),
    "bfifo": (["bfifo", "limit", "100000"], "byte-limited FIFO as the SUT egress queue"),
    "tbf": (["tbf", "rate", "1mbit", "burst", "32kbit", "latency", "400ms"], "token-bucket rate limit on the SUT egress"),
    "htb": (["htb", "default", "1"], "hierarchical shaping classes on the SUT egress"),
    "fq_codel": (["fq_codel"], "fq_codel AQM as the SUT egress qdisc (the common Linux default)"),
    "netem": (["netem", "delay", "1ms"], "netem delay/loss emulation on testbed links"),
    "fq": (["fq"], "fq fair queueing and pacing on the SUT egress"),
    "clsact": (None, "clsact hooks for tc BPF (sched_cls) programs and classifiers on ingress/egress"),
}
CLASSIFIERS = {
    "u32": (["protocol", "all", "prio", "1", "u32", "match", "u32", "0", "0"], "u32 classifier: header match rules"),
    "bpf": (["protocol", "all", "prio", "2", "bpf", "bytecode", "1,6 0 0 0,"], "cls_bpf: BPF programs as tc classifiers"),
    "flower": (["protocol", "ip", "prio", "3", "flower"], "flower classifier: flow-key match rules"),
    "matchall": (["protocol", "all", "prio", "4", "matchall"], "matchall classifier: act on every packet"),
}
ACTIONS = {
    "gact": (["pass", "index", "7"], "gact action: pass/drop verdicts in tc rules"),
    "mirred": (["mirred", "egress", "redirect", "dev", "{dev}", "index", "8"], "mirred action: redirect/mirror between interfaces"),
}
TOOLS = {
    "trafgen": (["trafgen", "-v"], "trafgen generator adapter"),
    "iperf3": (["iperf3", "-v"], "iperf3 load adapter (TCP/UDP)"),
    "bpftool": (["bpftool", "version"], "inspect loaded BPF programs and maps while debugging"),
    "nft": (["nft", "-v"], "nftables rules in SUT personalities"),
    "ethtool": (["ethtool", "--version"], "GRO switch for threaded NAPI, ring sizes, ethtool -S statistics"),
    "perf": (["perf", "version"], "perf stat/record profiles of the SUT"),
}
# bpf(2) and perf_event_open(2) numbers per machine.
SYSCALLS = {"x86_64": {"bpf": 321, "perf_event_open": 298}, "aarch64": {"bpf": 280, "perf_event_open": 241}}


def check_names() -> list[str]:
    """Every check name run_probes() returns, in order."""
    return (["root", "netns", "veth", "xdp_veth", "af_xdp", "threaded_napi", "rps"]
            + [f"qdisc:{k}" for k in QDISCS] + [f"tc_filter:{k}" for k in CLASSIFIERS]
            + [f"tc_action:{k}" for k in ACTIONS]
            + ["tracefs", "bpf_raw_tracepoint", "kprobes", "fentry_fexit", "kernel_btf", "hw_perf_counters",
               "rapl_power", "irq_time_accounting"]
            + [f"tool:{k}" for k in TOOLS])


def _enables(name: str) -> str:
    kind, _, sub = name.partition(":")
    table = {"qdisc": QDISCS, "tc_filter": CLASSIFIERS, "tc_action": ACTIONS, "tool": TOOLS}.get(kind)
    return table[sub][1] if table else ENABLES[name]


def _check(name: str, ok: bool | None, detail: str) -> Check:
    return Check(name=name, ok=ok, detail=detail, enables=_enables(name))


# ---- small helpers ----------------------------------------------------------
@dataclass
class _Result:
    rc: int
    out: str
    err: str

    @property
    def why(self) -> str:
        text = (self.err.strip() or self.out.strip()).splitlines()
        return text[0] if text else f"exit {self.rc}"


def _cmd(argv: list[str], input: str | None = None, timeout: float = CMD_TIMEOUT_S) -> _Result:
    """Run an argv list (never a shell); missing tools and timeouts become results, not exceptions."""
    try:
        p = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return _Result(127, "", f"{argv[0]}: not found")
    except subprocess.TimeoutExpired:
        return _Result(124, "", f"`{' '.join(argv)}` did not finish within {timeout:.0f} s")
    return _Result(p.returncode, p.stdout, p.stderr)


def _errno_text(e: int) -> str:
    return f"{errno.errorcode.get(e, f'errno {e}')} ({os.strerror(e)})"


def kernel_config() -> tuple[dict[str, str] | None, str]:
    """The running kernel's build config (/proc/config.gz or /boot/config-*) and where it came from."""
    sources = [Path("/proc/config.gz"), Path(f"/boot/config-{platform.release()}")]
    for path in sources:
        try:
            if path.suffix == ".gz":
                with gzip.open(path, "rt") as f:
                    text = f.read()
            else:
                text = path.read_text()
        except OSError:
            continue
        config = {}
        for line in text.splitlines():
            if line.startswith("CONFIG_"):
                key, _, val = line.partition("=")
                config[key] = val
            elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
                config[line[2:-len(" is not set")]] = "n"
        return config, str(path)
    return None, "no kernel config found (/proc/config.gz, /boot/config-<release>)"


def _cfg(config: dict[str, str] | None, key: str) -> str:
    if config is None:
        return f"{key}=?"
    return f"{key}={config.get(key, 'n')}"


# ---- bpf(2) with ctypes -------------------------------------------------------
BPF_PROG_LOAD, BPF_RAW_TRACEPOINT_OPEN = 5, 17
BPF_PROG_TYPE_RAW_TRACEPOINT, BPF_PROG_TYPE_TRACING = 17, 26
BPF_TRACE_RAW_TP, BPF_TRACE_FENTRY, BPF_TRACE_FEXIT = 23, 24, 25
BTF_KIND_TYPEDEF, BTF_KIND_FUNC = 8, 12
# "r0 = 0; exit": the smallest valid program.
_NOOP_INSNS = struct.pack("<BBhi", 0xB7, 0, 0, 0) + struct.pack("<BBhi", 0x95, 0, 0, 0)
_PROG_LOAD_ATTR_SIZE = 144


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _syscall_nr(name: str) -> int | None:
    return SYSCALLS.get(platform.machine(), {}).get(name)


def _bpf(cmd: int, attr: ctypes.Array) -> tuple[int, int]:
    """bpf(cmd, attr): (fd or -1, errno)."""
    nr = _syscall_nr("bpf")
    if nr is None:
        return -1, errno.ENOSYS
    libc = _libc()
    ctypes.set_errno(0)
    ret = libc.syscall(ctypes.c_long(nr), ctypes.c_long(cmd), attr, ctypes.c_uint(len(attr)))
    return int(ret), ctypes.get_errno()


def _bpf_load_noop(prog_type: int, attach_type: int = 0, attach_btf_id: int = 0) -> tuple[int, int, str]:
    """Load the no-op program: (fd or -1, errno, last line of the verifier log)."""
    insns = ctypes.create_string_buffer(_NOOP_INSNS, len(_NOOP_INSNS))
    license_ = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(1 << 16)
    attr = ctypes.create_string_buffer(_PROG_LOAD_ATTR_SIZE)
    struct.pack_into("<IIQQIIQ", attr, 0, prog_type, len(_NOOP_INSNS) // 8, ctypes.addressof(insns),
                     ctypes.addressof(license_), 1, len(log), ctypes.addressof(log))
    struct.pack_into("<16s", attr, 48, b"sn_doctor")
    struct.pack_into("<I", attr, 68, attach_type)
    struct.pack_into("<I", attr, 108, attach_btf_id)
    fd, err = _bpf(BPF_PROG_LOAD, attr)
    lines = [ln for ln in log.value.decode(errors="replace").splitlines() if ln.strip()]
    return fd, err, lines[-1] if lines else ""


def _bpf_raw_tp_open(prog_fd: int, name: str | None) -> tuple[int, int]:
    """BPF_RAW_TRACEPOINT_OPEN: attaches raw_tracepoint programs by name, tracing programs (name NULL) by BTF id."""
    name_buf = ctypes.create_string_buffer(name.encode()) if name else None
    attr = ctypes.create_string_buffer(16)
    struct.pack_into("<QI", attr, 0, ctypes.addressof(name_buf) if name_buf else 0, prog_fd)
    return _bpf(BPF_RAW_TRACEPOINT_OPEN, attr)


def _try_attach(what: str, prog_type: int, tp_name: str | None, attach_type: int = 0, btf_id: int = 0) -> tuple[bool, str]:
    fd, err, log = _bpf_load_noop(prog_type, attach_type, btf_id)
    if fd < 0:
        return False, f"{what}: load refused: {_errno_text(err)}" + (f"; verifier: {log}" if log else "")
    try:
        link, err = _bpf_raw_tp_open(fd, tp_name)
        if link < 0:
            return False, f"{what}: loaded, attach refused: {_errno_text(err)}"
        os.close(link)
        return True, f"{what}: loaded and attached"
    finally:
        os.close(fd)


def btf_ids(names: dict[str, int], path: str = "/sys/kernel/btf/vmlinux") -> dict[str, int]:
    """BTF type ids of `names` ({name: BTF kind}) in the kernel's BTF; missing names are left out."""
    data = Path(path).read_bytes()
    magic, _ver, _flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", data, 0)
    if magic != 0xEB9F:
        raise ValueError(f"{path}: not BTF (magic {magic:#x})")
    strings = data[hdr_len + str_off:hdr_len + str_off + str_len]
    wanted = {}
    for name, kind in names.items():
        at = strings.find(b"\0" + name.encode() + b"\0")
        if at >= 0:
            wanted[(at + 1, kind)] = name
    # bytes after the 12-byte btf_type header, by kind (vlen = number of members/params/...)
    extra = {1: lambda v: 4, 3: lambda v: 12, 4: lambda v: 12 * v, 5: lambda v: 12 * v, 6: lambda v: 8 * v,
             13: lambda v: 8 * v, 14: lambda v: 4, 15: lambda v: 12 * v, 17: lambda v: 4, 19: lambda v: 12 * v}
    found = {}
    pos, end, type_id = hdr_len + type_off, hdr_len + type_off + type_len, 0
    while pos < end and len(found) < len(wanted):
        type_id += 1
        name_off, info, _ = struct.unpack_from("<III", data, pos)
        kind, vlen = (info >> 24) & 0x1F, info & 0xFFFF
        hit = wanted.get((name_off, kind))
        if hit:
            found[hit] = type_id
        f = extra.get(kind)
        pos += 12 + (f(vlen) if f else 0)
    return found


# ---- the temporary namespace and its probes ----------------------------------------
@dataclass
class _Lab:
    changes: HostChanges
    ns: str | None = None
    dev_a: str | None = None  # XDP, qdiscs, classifiers
    dev_b: str | None = None  # threaded NAPI, RPS

    def ns_cmd(self, argv: list[str], **kw) -> _Result:
        return _cmd(["ip", "netns", "exec", self.ns, *argv], **kw)


def _not_probed(name: str, why: str) -> Check:
    return _check(name, None, f"not probed: {why}")


def _probe_root() -> Check:
    euid = os.geteuid()
    return _check("root", euid == 0, f"euid {euid}" + ("" if euid == 0 else ": run softnet as root"))


def _delete_netns(ns: str) -> None:
    if Path("/run/netns", ns).exists():
        r = _cmd(["ip", "netns", "del", ns])
        if r.rc != 0:
            raise RuntimeError(f"ip netns del {ns}: {r.why}")


def _probe_netns(lab: _Lab) -> Check:
    ns = f"{NS_PREFIX}{secrets.token_hex(4)}"
    r = _cmd(["ip", "netns", "add", ns])
    if r.rc != 0:
        return _check("netns", False, f"ip netns add {ns}: {r.why}")
    lab.changes.record(f"netns {ns}", lambda: _delete_netns(ns))
    lab.ns = ns
    r = _cmd(["ip", "-n", ns, "link", "set", "lo", "up"])
    if r.rc != 0:
        return _check("netns", False, f"created {ns} but cannot use it: {r.why}")
    return _check("netns", True, f"created temporary namespace {ns} (deleted when the probe ends)")


def _probe_veth(lab: _Lab) -> Check:
    if lab.ns is None:
        return _not_probed("veth", "no temporary namespace (see netns)")
    tag = secrets.token_hex(3)
    a, b = f"snd{tag}a", f"snd{tag}b"
    r = _cmd(["ip", "-n", lab.ns, "link", "add", a, "type", "veth", "peer", "name", b])
    if r.rc != 0:
        return _check("veth", False, f"ip link add {a} type veth: {r.why}")
    for dev in (a, b):
        r = _cmd(["ip", "-n", lab.ns, "link", "set", dev, "up"])
        if r.rc != 0:
            return _check("veth", False, f"created {a}/{b} but cannot bring {dev} up: {r.why}")
    lab.dev_a, lab.dev_b = a, b
    return _check("veth", True, f"pair {a} <-> {b} in {lab.ns}, both up")


def _need_veth(lab: _Lab, name: str) -> Check | None:
    if lab.ns is None:
        return _not_probed(name, "no temporary namespace (see netns)")
    if lab.dev_a is None:
        return _not_probed(name, "no veth pair (see veth)")
    return None


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            proc.stdin.write("quit\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:
            f.close()


_XDP_MODES = {1: "native (driver)", 2: "generic (skb)", 3: "offloaded", 4: "multi"}


def _xdp_state(lab: _Lab, dev: str) -> dict | None:
    r = _cmd(["ip", "-n", lab.ns, "-j", "link", "show", "dev", dev])
    if r.rc != 0:
        return None
    links = json.loads(r.out or "[]")
    return links[0].get("xdp") if links else None


def _probe_xdp_veth(lab: _Lab) -> Check:
    skip = _need_veth(lab, "xdp_veth")
    if skip:
        return skip
    from softnet.traffic.native import tool  # late: only this probe needs the native tools
    try:
        sink = tool("sink")
    except Exception as exc:
        return _not_probed("xdp_veth", str(exc))
    dev = lab.dev_a
    proc = subprocess.Popen([str(sink), "--netns", lab.ns, "--ifname", dev, "--count", "64"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lab.changes.record(f"softnet-sink on {lab.ns}/{dev} (pid {proc.pid})", lambda: _stop(proc))
    ready, _, _ = select.select([proc.stdout], [], [], 5.0)
    line = proc.stdout.readline() if ready else ""
    if not line:
        if proc.poll() is None:
            why = "no answer within 5 s"
        else:
            why = proc.stderr.read().strip() or f"exit {proc.returncode}"
        _stop(proc)
        return _check("xdp_veth", False, f"softnet-sink on {dev}: {why}")
    hello = json.loads(line)
    xdp = _xdp_state(lab, dev) or {}
    mode = xdp.get("mode")
    if mode == 4:  # several programs: the mode of ours
        mode = next((a.get("mode") for a in xdp.get("attached", [])
                     if a.get("prog", {}).get("id") == hello.get("prog_id")), mode)
    _stop(proc)
    after = _xdp_state(lab, dev)
    detached = "detached on quit" if not after else f"STILL ATTACHED after quit: {after}"
    if mode != 1:
        return _check("xdp_veth", False, f"softnet-sink attached prog {hello.get('prog_id')} to {dev} in mode "
                      f"{_XDP_MODES.get(mode, mode)}, not native; {detached}")
    return _check("xdp_veth", not after, f"softnet-sink attached prog {hello.get('prog_id')} to {dev} in native "
                  f"(driver) mode; {detached}")



def _probe_threaded_napi(lab: _Lab) -> Check:
    skip = _need_veth(lab, "threaded_napi")
    if skip:
        return skip
    dev = lab.dev_b
    r = lab.ns_cmd(["ethtool", "-K", dev, "gro", "on"])
    if r.rc != 0:
        return _check("threaded_napi", False, f"ethtool -K {dev} gro on: {r.why}")
    path = f"/sys/class/net/{dev}/threaded"
    r = lab.ns_cmd(["tee", path], input="1\n")
    if r.rc != 0:
        return _check("threaded_napi", False, f"write 1 to {path}: {r.why}")
    deadline = time.monotonic() + 1.0
    pids = napi_thread_pids(dev)
    while not pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = napi_thread_pids(dev)
    value = lab.ns_cmd(["cat", path]).out.strip()
    if not pids:
        return _check("threaded_napi", False, f"{path} reads {value!r} but no napi/{dev}-* kthread appeared")
    comms = [Path(f"/proc/{p}/comm").read_text().strip() for p in pids if Path(f"/proc/{p}/comm").exists()]
    return _check("threaded_napi", True, f"GRO on + {path}=1 -> kthread {', '.join(comms)} (pid "
                  f"{', '.join(map(str, pids))})")


def _probe_rps(lab: _Lab) -> Check:
    skip = _need_veth(lab, "rps")
    if skip:
        return skip
    path = f"/sys/class/net/{lab.dev_b}/queues/rx-0/rps_cpus"
    r = lab.ns_cmd(["cat", path])
    if r.rc != 0:
        return _check("rps", False, f"{path}: {r.why}")
    before = r.out.strip()
    mask = format(1 << min(os.sched_getaffinity(0)), "x")
    w = lab.ns_cmd(["tee", path], input=mask + "\n")
    if w.rc != 0:
        return _check("rps", False, f"{path} exists ({before!r}) but writing {mask} failed: {w.why}")
    after = lab.ns_cmd(["cat", path]).out.strip()
    ok = int(after.replace(",", "") or "0", 16) == int(mask, 16)
    return _check("rps", ok, f"{path}: {before!r}, wrote {mask}, reads back {after!r}")


def _probe_qdiscs(lab: _Lab) -> list[Check]:
    out = []
    for kind, (args, _) in QDISCS.items():
        name = f"qdisc:{kind}"
        skip = _need_veth(lab, name)
        if skip:
            out.append(skip)
            continue
        base = ["tc", "-n", lab.ns, "qdisc", "add", "dev", lab.dev_a]
        argv = base + (["clsact"] if args is None else ["root", *args])
        r = _cmd(argv)
        shown = " ".join(argv[3:])
        if r.rc != 0:
            out.append(_check(name, False, f"`tc {shown}`: {r.why}"))
            continue
        if args is not None:  # clsact stays for the classifier probes
            _cmd(["tc", "-n", lab.ns, "qdisc", "del", "dev", lab.dev_a, "root"])
        out.append(_check(name, True, f"`tc {shown}` accepted"))
    return out


def _probe_tc(lab: _Lab, name: str, argv: list[str], skip: Check | None) -> Check:
    """One `tc ... add` attempt inside the lab namespace."""
    if skip:
        return skip
    r = _cmd(argv)
    shown = " ".join(argv[3:])
    return _check(name, r.rc == 0, f"`tc {shown}`: " + ("accepted" if r.rc == 0 else r.why))


def _probe_classifiers(lab: _Lab, have_clsact: bool) -> list[Check]:
    return [_probe_tc(lab, f"tc_filter:{kind}",
                      ["tc", "-n", lab.ns, "filter", "add", "dev", lab.dev_a, "ingress", *args],
                      _need_veth(lab, f"tc_filter:{kind}") or
                      (None if have_clsact else _not_probed(f"tc_filter:{kind}", "no clsact qdisc to attach to")))
            for kind, (args, _) in CLASSIFIERS.items()]


def _probe_actions(lab: _Lab) -> list[Check]:
    return [_probe_tc(lab, f"tc_action:{kind}",
                      ["tc", "-n", lab.ns, "actions", "add", "action", *[a.replace("{dev}", lab.dev_b) for a in args]],
                      _need_veth(lab, f"tc_action:{kind}"))
            for kind, (args, _) in ACTIONS.items()]


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


def tracefs_info() -> dict:
    """Where tracefs is, or whether it can be mounted (tried only in a private mount namespace)."""
    for root in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.isdir(f"{root}/events"):
            return {"where": root, "events": True, "kprobe_events": os.path.exists(f"{root}/kprobe_events"),
                    "tracepoints": {n: os.path.isdir(f"{root}/events/{n}") for n in _TRACEPOINTS}}
    r = _cmd(["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-c", _TRACEFS_SCRIPT,
              ",".join(_TRACEPOINTS)])
    if r.rc != 0:
        return {"where": None, "error": f"unshare --mount: {r.why}"}
    try:
        info = json.loads(r.out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"where": None, "error": f"unexpected answer from the mount probe: {r.out.strip()!r} {r.err.strip()!r}"}
    if "error" in info:
        return {"where": None, "error": f"mount -t tracefs in a private mount namespace: {info['error']}"}
    return {"where": "mountable (not mounted on the host)", **info}


def _probe_tracefs(tfs: dict) -> Check:
    if not tfs.get("events"):
        return _check("tracefs", False, tfs.get("error", "no tracefs events directory"))
    tps = tfs["tracepoints"]
    have = [n for n, ok in tps.items() if ok]
    missing = [n for n, ok in tps.items() if not ok]
    where = tfs["where"]
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


def _probe_kprobes(config: dict | None, config_src: str, tfs: dict) -> Check:
    pmu = os.path.isdir("/sys/bus/event_source/devices/kprobe")
    built = None if config is None else config.get("CONFIG_KPROBES", "n") == "y"
    parts = [f"{_cfg(config, 'CONFIG_KPROBES')} (from kernel config {config_src})" if config is not None else config_src,
             f"kprobe PMU (/sys/bus/event_source/devices/kprobe): {'present' if pmu else 'absent'}"]
    if tfs.get("events"):
        parts.append(f"tracefs kprobe_events: {'present' if tfs.get('kprobe_events') else 'absent'}")
    evidence = pmu or bool(tfs.get("kprobe_events"))
    if evidence:
        ok = True
    elif built is False or tfs.get("events"):
        ok = False
    else:
        ok = None
    return _check("kprobes", ok, "; ".join(parts))


def _probe_fentry_fexit(config: dict | None, config_src: str) -> Check:
    cfg = ", ".join(_cfg(config, k) for k in ("CONFIG_FUNCTION_TRACER", "CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS"))
    cfg += f" (kernel config {config_src})" if config is not None else ""
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


def _perf_open(type_: int, config: int) -> tuple[int, int]:
    nr = _syscall_nr("perf_event_open")
    if nr is None:
        return -1, errno.ENOSYS
    attr = ctypes.create_string_buffer(64)  # PERF_ATTR_SIZE_VER0
    struct.pack_into("<IIQ", attr, 0, type_, 64, config)
    struct.pack_into("<Q", attr, 40, 1)  # flags: disabled
    libc = _libc()
    ctypes.set_errno(0)
    fd = libc.syscall(ctypes.c_long(nr), attr, ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1),
                      ctypes.c_ulong(8))  # this thread, any CPU, no group, PERF_FLAG_FD_CLOEXEC
    err = ctypes.get_errno()
    if fd >= 0:
        os.close(fd)
    return int(fd), err


def _probe_hw_perf() -> Check:
    hw, hw_err = _perf_open(0, 0)  # PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES
    sw, sw_err = _perf_open(1, 0)  # PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK
    sw_text = "software cpu-clock: ok" if sw >= 0 else f"software cpu-clock: {_errno_text(sw_err)}"
    if hw >= 0:
        return _check("hw_perf_counters", True, f"perf_event_open(PERF_COUNT_HW_CPU_CYCLES): ok; {sw_text}")
    return _check("hw_perf_counters", False,
                  f"perf_event_open(PERF_COUNT_HW_CPU_CYCLES): {_errno_text(hw_err)}; {sw_text}")


def _probe_rapl() -> Check:
    zones = sorted(glob.glob("/sys/class/powercap/intel-rapl*"))
    if not zones:
        where = "/sys/class/powercap absent" if not os.path.isdir("/sys/class/powercap") else "no intel-rapl zones"
        return _check("rapl_power", False, f"{where} (no RAPL; software power estimates only)")
    readable = []
    for z in zones:
        try:
            readable.append(f"{Path(z).name}={int(Path(z, 'energy_uj').read_text())} uJ")
        except (OSError, ValueError):
            continue
    if not readable:
        return _check("rapl_power", False, f"{len(zones)} RAPL zones but no readable energy_uj")
    return _check("rapl_power", True, "energy counters: " + ", ".join(readable))


def _probe_irq_time(config: dict | None, config_src: str) -> Check:
    if config is None:
        return _check("irq_time_accounting", None, config_src)
    on = config.get("CONFIG_IRQ_TIME_ACCOUNTING", "n") == "y"
    keys = ("CONFIG_IRQ_TIME_ACCOUNTING", "CONFIG_TICK_CPU_ACCOUNTING", "CONFIG_VIRT_CPU_ACCOUNTING_GEN")
    detail = f"{', '.join(_cfg(config, k) for k in keys)} (from kernel config {config_src})"
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


# ---- entry points -------------------------------------------------------------
def _guard(fn, names: list[str], *args):
    """Run one probe; an exception becomes 'unknown' answers for its checks (BaseException passes)."""
    try:
        res = fn(*args)
    except Exception as exc:
        return [_check(n, None, f"probe error: {type(exc).__name__}: {exc}") for n in names]
    return res if isinstance(res, list) else [res]


def run_probes() -> list[Check]:
    """Probe this host; the temporary namespace and any helper process are gone when this returns or raises."""
    checks = _guard(_probe_root, ["root"])
    with HostChanges() as changes:
        lab = _Lab(changes)
        checks += _guard(_probe_netns, ["netns"], lab)
        checks += _guard(_probe_veth, ["veth"], lab)
        checks += _guard(_probe_xdp_veth, ["xdp_veth"], lab)
        checks += _guard(_probe_af_xdp, ["af_xdp"])
        checks += _guard(_probe_threaded_napi, ["threaded_napi"], lab)
        checks += _guard(_probe_rps, ["rps"], lab)
        qdiscs = _guard(_probe_qdiscs, [f"qdisc:{k}" for k in QDISCS], lab)
        checks += qdiscs
        have_clsact = any(c.name == "qdisc:clsact" and c.ok for c in qdiscs)
        checks += _guard(_probe_classifiers, [f"tc_filter:{k}" for k in CLASSIFIERS], lab, have_clsact)
        checks += _guard(_probe_actions, [f"tc_action:{k}" for k in ACTIONS], lab)
    if changes.undo_errors:
        raise TestbedError("softnet doctor could not clean up: " + "; ".join(changes.undo_errors))
    config, config_src = kernel_config()
    tfs = tracefs_info()
    checks += _guard(_probe_tracefs, ["tracefs"], tfs)
    checks += _guard(_probe_bpf_raw_tracepoint, ["bpf_raw_tracepoint"])
    checks += _guard(_probe_kprobes, ["kprobes"], config, config_src, tfs)
    checks += _guard(_probe_fentry_fexit, ["fentry_fexit"], config, config_src)
    checks += _guard(_probe_kernel_btf, ["kernel_btf"])
    checks += _guard(_probe_hw_perf, ["hw_perf_counters"])
    checks += _guard(_probe_rapl, ["rapl_power"])
    checks += _guard(_probe_irq_time, ["irq_time_accounting"], config, config_src)
    checks += _guard(_probe_tools, [f"tool:{k}" for k in TOOLS])
    if os.geteuid() != 0:  # a refusal to a non-root user says nothing about the host
        for c in checks:
            if c.name != "root" and c.ok is False and any(w in c.detail for w in _DENIED):
                c.ok = None
                c.detail += " (not root: unknown; run softnet doctor as root)"
    return checks


_DENIED = ("EPERM", "EACCES", "Operation not permitted", "Permission denied")


def render_table(checks: list[Check]) -> Table:
    """A table for people: check, answer, what was found, what it enables."""
    table = Table(title="softnet doctor", show_lines=False)
    table.add_column("check", no_wrap=True)
    table.add_column("ok", no_wrap=True)
    table.add_column("found")
    table.add_column("enables")
    marks = {True: Text("yes", style="green"), False: Text("no", style="red"), None: Text("unknown", style="yellow")}
    for c in checks:
        # Text, not markup: details quote tc/kernel messages that may contain brackets.
        table.add_row(Text(c.name), marks[c.ok], Text(c.detail), Text(c.enables, style="dim"))
    return table
