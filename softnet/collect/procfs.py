"""Parsers for the kernel's per-CPU packet and CPU accounting in procfs.

Each parser takes the file's text so it can be tested on captured files
(tests/data/procfs/). `snapshot()` reads them all at one instant and `delta()`
subtracts two snapshots. All of these are host-wide (not per-namespace).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence
from pathlib import Path

# The arithmetic on these counters is pure and lives in analysis/counters.py.
from softnet.analysis.counters import (IDLE_TICKS, SOFTNET_GAUGES, STAT_FIELDS, busy_ratio,  # noqa: F401
                                       counter_delta, delta, softnet_delta, tick_total)

# /proc/net/softnet_stat columns (net/core/net-procfs.c softnet_seq_show, 6.x);
# hex, u32. None: printed as 0 since the counter was removed. Columns a newer
# kernel adds are kept as col<N>.
SOFTNET_FIELDS = ("processed", "dropped", "time_squeeze", None, None, None, None, None,
                  None, "received_rps", "flow_limit_count", "backlog_len", "cpu", "input_qlen", "process_qlen")
U32 = 1 << 32


def _cpu_header(line: str, where: str) -> list[int]:
    """CPU ids of the column header ('CPU0 CPU1 ...'): offline CPUs leave gaps,
    so a column's CPU comes from the header, never from its position."""
    names = line.split()
    if not names or not all(n.startswith("CPU") and n[3:].isdigit() for n in names):
        raise ValueError(f"{where}: line 1: expected a header of CPU columns (CPU0 CPU1 ...), got '{line.strip()}'")
    return [int(n[3:]) for n in names]


def parse_softirqs(text: str) -> dict[str, dict[int, int]]:
    """{'NET_RX': {cpu: count, ...}, ...}"""
    lines = text.strip("\n").splitlines()
    cpus = _cpu_header(lines[0], "softirqs")
    out = {}
    for no, line in enumerate(lines[1:], start=2):
        name, _, rest = line.partition(":")
        vals = [int(v) for v in rest.split()]
        if len(vals) != len(cpus):
            raise ValueError(f"softirqs: line {no} '{name.strip()}' has {len(vals)} values, expected {len(cpus)}")
        out[name.strip()] = dict(zip(cpus, vals))
    return out


@dataclass(frozen=True)
class IrqCounts:
    """One /proc/interrupts row: per-CPU counts, or one host total (ERR, MIS)."""

    name: str  # the description ("IO-APIC 4-edge ttyS0"), "" for a total
    cpus: dict[int, int] | None = None
    total: int | None = None


@dataclass(frozen=True)
class ProcStat:
    """/proc/stat: per-CPU ticks (offline CPUs have no line) and the host's totals."""

    cpus: dict[int, dict[str, int]]  # CPU -> column (STAT_FIELDS) -> ticks
    ctxt: int | None = None
    intr: int | None = None
    softirq: int | None = None
    processes: int | None = None


def parse_interrupts(text: str) -> dict[str, IrqCounts]:
    """/proc/interrupts: {irq: IrqCounts(description, {cpu: count})}.
    Rows with one bare value (ERR, MIS) are host totals."""
    lines = text.strip("\n").splitlines()
    cpus = _cpu_header(lines[0], "interrupts")
    out = {}
    for no, line in enumerate(lines[1:], start=2):
        irq, sep, rest = line.partition(":")
        if not sep:
            raise ValueError(f"interrupts: line {no}: expected 'IRQ: counts...', got '{line.strip()}'")
        fields = rest.split()
        counts = []
        for f in fields[:len(cpus)]:
            if not f.isdigit():
                break
            counts.append(int(f))
        desc = " ".join(fields[len(counts):])
        if len(counts) == len(cpus):
            out[irq.strip()] = IrqCounts(desc, cpus=dict(zip(cpus, counts)))
        elif len(counts) == 1 and not desc:
            out[irq.strip()] = IrqCounts("", total=counts[0])
        else:
            raise ValueError(f"interrupts: line {no} '{irq.strip()}' has {len(counts)} counts, "
                             f"expected {len(cpus)} (one per CPU column) or 1")
    return out


def parse_stat(text: str) -> ProcStat:
    """/proc/stat: per-CPU ticks and the ctxt, intr, softirq and processes
    totals. Offline CPUs have no line; the aggregate 'cpu' line is skipped."""
    cpus, totals = {}, {}
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, *vals = line.split()
            cpus[int(name[3:])] = dict(zip(STAT_FIELDS, (int(v) for v in vals)))
        elif line.startswith(("ctxt ", "intr ", "softirq ", "processes ")):
            key, first = line.split()[:2]
            totals[key] = int(first)
    return ProcStat(cpus, **totals)


def parse_stat_cpus(text: str) -> dict[int, dict[str, int]]:
    """Per-CPU tick counters from /proc/stat."""
    return parse_stat(text).cpus


def parse_softnet_stat(text: str) -> dict[int, dict[str, int]]:
    """Per-CPU softnet counters keyed by the CPU index the kernel prints
    (column 13; offline CPUs have no row, so the row number is only a
    fallback for kernels that do not print it)."""
    out = {}
    for no, line in enumerate(text.strip().splitlines()):
        try:
            cols = [int(v, 16) for v in line.split()]
        except ValueError:
            raise ValueError(f"softnet_stat: line {no + 1}: expected hexadecimal columns, got '{line.strip()}'") from None
        rec = {}
        for i, v in enumerate(cols):
            name = SOFTNET_FIELDS[i] if i < len(SOFTNET_FIELDS) else f"col{i + 1}"
            if name:
                rec[name] = v
        out[rec.pop("cpu", no)] = rec
    return out


NET_DEV_FIELDS = ("rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_fifo_errors", "rx_frame_errors",
                  "rx_compressed", "multicast", "tx_bytes", "tx_packets", "tx_errors", "tx_dropped",
                  "tx_fifo_errors", "collisions", "tx_carrier_errors", "tx_compressed")


def parse_net_dev(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/dev (of the reader's network namespace): {ifname: {counter: n}},
    counters named as in rtnl_link_stats64."""
    out = {}
    for no, line in enumerate(text.splitlines()[2:], start=3):
        name, sep, rest = line.partition(":")
        vals = rest.split()
        if not sep or len(vals) != len(NET_DEV_FIELDS):
            raise ValueError(f"net/dev: line {no}: expected 'ifname: {len(NET_DEV_FIELDS)} counters', "
                             f"got '{line.strip()}'")
        out[name.strip()] = dict(zip(NET_DEV_FIELDS, map(int, vals)))
    return out


def snapshot(root: Path = Path("/proc"), threads: Sequence[int] = ()) -> dict:
    """The per-CPU tables; with ``threads``, each one's exact run time too
    (the SUT's kthreads at the window's edges: CPU per packet over the window)."""
    out = {
        "softirqs": parse_softirqs((root / "softirqs").read_text()),
        "cpu_ticks": parse_stat_cpus((root / "stat").read_text()),
        "softnet": parse_softnet_stat((root / "net/softnet_stat").read_text()),
    }
    if threads:
        out["thread_runtime_ns"], out["thread_runs"] = thread_times(threads)
    return out


def thread_cpu(pid: int) -> int | None:
    """CPU a task last ran on (/proc/PID/stat field 39)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rsplit(")", 1)[1].split()[36])


def _schedstat(pid: int) -> tuple[int, int] | None:
    """A task's run time in ns (/proc/PID/schedstat's first field: the
    scheduler's sum_exec_runtime, exact, where /proc/stat counts ticks) and
    how many times it was put on a CPU (the third: for a NAPI kthread its
    wake-ups, each a batch of packets), from one read."""
    try:
        fields = Path(f"/proc/{pid}/schedstat").read_text().split()
        return int(fields[0]), int(fields[2])
    except (OSError, ValueError, IndexError):
        return None


def thread_times(pids: Sequence[int]) -> tuple[dict[str, int | None], dict[str, int | None]]:
    """Per thread (pid as text): its run time in ns and its runs (None where unreadable)."""
    read = {str(pid): _schedstat(pid) for pid in pids}
    return ({p: r[0] if r else None for p, r in read.items()}, {p: r[1] if r else None for p, r in read.items()})


# ---- host facts a trial's kernel statistics are normalised by ------------------------------------
def _sysctl_int(name: str) -> int | None:
    try:
        return int(Path("/proc/sys/net/core", name).read_text())
    except (OSError, ValueError):
        return None


def dev_weight() -> int | None:
    return _sysctl_int("dev_weight")


def cpu_freq_hz() -> float | None:
    """Nominal CPU frequency for the cycles normalization (the paper uses the
    core's 1.5 GHz): cpufreq's maximum, else /proc/cpuinfo's 'cpu MHz'."""
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) * 1e3
    except (OSError, ValueError):
        pass
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("cpu MHz"):
            return float(line.split(":")[1]) * 1e6
    return None


def host_sysctls() -> dict:
    """The net.core sysctls trial_kernel_stats needs, as this host has them now."""
    return {"dev_weight": dev_weight(), "netdev_budget": _sysctl_int("netdev_budget")}
