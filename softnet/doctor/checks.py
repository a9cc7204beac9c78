"""The answers of `softnet doctor`, what each enables, and small shared helpers."""
from __future__ import annotations

import errno
import gzip
import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text

from softnet.testbed.personalities import names as personality_names
from softnet.tools.changes import NAME_PREFIX


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
    "nic_knobs": "NIC knobs on the local testbed (testbed.nic, --nic): what veth takes; docs/how-to/nic-knobs.md",
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
    return (["root", "netns", "veth", "xdp_veth", "af_xdp", "threaded_napi", "rps", "nic_knobs"]
            + [f"qdisc:{k}" for k in QDISCS] + [f"tc_filter:{k}" for k in CLASSIFIERS]
            + [f"tc_action:{k}" for k in ACTIONS]
            + ["tracefs", "bpf_raw_tracepoint", "kprobes", "fentry_fexit", "kernel_btf", "hw_perf_counters",
               "rapl_power", "irq_time_accounting"]
            + [f"tool:{k}" for k in TOOLS] + [f"sut:{n}" for n in personality_names()])


def _enables(name: str) -> str:
    kind, _, sub = name.partition(":")
    if kind == "sut":
        return f"SUT personality {sub}"
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


@dataclass(frozen=True)
class KernelConfig:
    """The running kernel's build config and where it was read from;
    ``values`` None: none was found (``source`` says where it was looked for)."""

    values: dict[str, str] | None  # CONFIG_... -> y, m or a value; "n" for "# ... is not set"
    source: str

    def setting(self, key: str) -> str | None:
        """The option's value ("n" when the config leaves it out); None without a config."""
        return None if self.values is None else self.values.get(key, "n")

    def shown(self, key: str) -> str:
        """KEY=value, or KEY=? without a config."""
        value = self.setting(key)
        return f"{key}={'?' if value is None else value}"


def kernel_config() -> KernelConfig:
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
        return KernelConfig(config, str(path))
    return KernelConfig(None, "no kernel config found (/proc/config.gz, /boot/config-<release>)")


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

