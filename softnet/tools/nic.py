"""NIC knobs the studies vary: ring sizes (ethtool -G), channels (-L),
interrupt coalescing (-C), the interface's IRQ affinity (PASTRAMI's
unpinned / pin-1cpu / pin-2cpu) and RSS: the receive queues the flows are
spread over (-X: the indirection table, as per-queue weights). What an interface takes is read from the
driver itself (ethtool -g/-l/-c and the device's MSI IRQs), so a knob it
refuses is refused before anything changes, naming the knob, the interface
and its driver. Applying is left to the caller's registry (a local testbed's
HostChanges, a remote agent's journal): this module reads and plans.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from softnet.errors import InputError

# knob -> (ethtool flag, ethtool's parameter name)
ETHTOOL_KNOBS = {
    "rx_ring": ("-G", "rx"), "tx_ring": ("-G", "tx"),
    "channels": ("-L", "combined"), "rx_channels": ("-L", "rx"), "tx_channels": ("-L", "tx"),
    "rx_usecs": ("-C", "rx-usecs"), "tx_usecs": ("-C", "tx-usecs"),
    "rx_frames": ("-C", "rx-frames"), "tx_frames": ("-C", "tx-frames"),
    "adaptive_rx": ("-C", "adaptive-rx"), "adaptive_tx": ("-C", "adaptive-tx"),
    "rss_queues": ("-X", "weight"),
}
IRQ_MODES = ("unpinned", "pin-1cpu", "pin-2cpu")
CHANNEL_KNOBS = ("channels", "rx_channels", "tx_channels")
KNOBS = (*ETHTOOL_KNOBS, "irq_affinity")
READ_FLAG = {"-G": "-g", "-L": "-l", "-C": "-c", "-X": "-x"}
_NAMES = {"-g": {"RX": "rx", "TX": "tx"}, "-l": {"RX": "rx", "TX": "tx", "Combined": "combined"}}


@dataclass
class NicCaps:
    """What one interface takes: for each ethtool parameter its current value
    (and for rings and channels the driver's maximum); its IRQs."""

    ifname: str
    driver: str
    current: dict[str, dict[str, str]] = field(default_factory=dict)  # flag -> param -> value
    maximum: dict[str, dict[str, int]] = field(default_factory=dict)  # "-G"/"-L" -> param -> max
    irqs: list[int] = field(default_factory=list)

    def takes(self) -> list[str]:
        """The knobs this interface accepts."""
        out = [k for k, (flag, param) in ETHTOOL_KNOBS.items() if param in self.current.get(flag, {})
               and (flag == "-C" or self.maximum.get(flag, {}).get(param, 0) > 0)]
        return out + (["irq_affinity"] if self.irqs else [])


def parse_ethtool(flag: str, text: str) -> tuple[dict[str, str], dict[str, int]]:
    """ethtool -g/-l/-c/-x output -> (current settings, pre-set maximums);
    parameters the driver does not have ("n/a") are left out."""
    current: dict[str, str] = {}
    maximum: dict[str, int] = {}
    if flag == "-x":
        return parse_rss(text)
    if flag == "-c":
        for line in text.splitlines():
            m = re.match(r"\s*Adaptive RX:\s*(\S+)\s+TX:\s*(\S+)", line)
            if m:
                for k, v in zip(("adaptive-rx", "adaptive-tx"), m.groups()):
                    if v != "n/a":
                        current[k] = v
                continue
            key, sep, val = line.partition(":")
            if sep and val.strip() and val.strip() != "n/a" and re.fullmatch(r"[a-z][a-z-]*", key.strip()):
                current[key.strip()] = val.strip()
        return current, maximum
    section = None
    for line in text.splitlines():
        if line.startswith("Pre-set maximums"):
            section = maximum
            continue
        if line.startswith("Current hardware settings"):
            section = current
            continue
        key, sep, val = line.partition(":")
        name = _NAMES[flag].get(key.strip())
        if section is None or not sep or name is None or val.strip() == "n/a":
            continue
        if section is maximum:
            maximum[name] = int(val.strip())
        else:
            current[name] = val.strip()
    return current, maximum


def parse_rss(text: str) -> tuple[dict[str, str], dict[str, int]]:
    """ethtool -x: the indirection table as {"weight": each ring's share,
    lowest terms, ring 0 first} and the rings it may use {"weight": rings};
    nothing where the driver has no table ("Operation not supported")."""
    rings, table = 0, []
    for line in text.splitlines():
        if m := re.match(r"RX flow hash indirection table for \S+ with (\d+) RX ring", line):
            rings = int(m.group(1))
        elif m := re.match(r"\s*\d+:((?:\s+\d+)+)\s*$", line):
            table += [int(v) for v in m.group(1).split()]
    if not rings or not table or max(table) >= rings:
        return {}, {}
    counts = [table.count(r) for r in range(rings)]
    g = math.gcd(*counts)
    return {"weight": " ".join(str(c // g) for c in counts)}, {"weight": rings}


def device_irqs(ifname: str, sysfs: Path = Path("/sys/class/net")) -> list[int]:
    """The MSI(-X) IRQs of the interface's device (a virtio NIC's are its PCI
    parent's); none for a virtual device (veth, bridge)."""
    dev = sysfs / ifname / "device"
    for d in (dev, dev / ".."):
        msi = d / "msi_irqs"
        if msi.is_dir():
            return sorted(int(p.name) for p in msi.iterdir() if p.name.isdigit())
    return []


def capabilities(ifname: str, run: Callable[[list[str]], str], driver: str,
                 irqs: list[int] | None = None) -> NicCaps:
    """``run(argv)``: ethtool on the interface's host and namespace; a query
    the driver refuses gives no parameters for that flag."""
    caps = NicCaps(ifname, driver, irqs=list(irqs or []))
    for set_flag, read_flag in READ_FLAG.items():
        try:
            text = run(["ethtool", read_flag, ifname])
        except Exception:  # noqa: BLE001 -- "Operation not supported": nothing of this kind
            continue
        caps.current[set_flag], caps.maximum[set_flag] = parse_ethtool(read_flag, text)
    return caps


@dataclass
class NicPlan:
    """What to set on one interface: ethtool settings by flag, and the CPU
    list its IRQs go to (None: left alone)."""

    ifname: str
    ethtool: dict[str, dict[str, str]] = field(default_factory=dict)  # flag -> param -> new value
    irq_cpus: list[int] | None = None


def _value(knob: str, value, top: int | None) -> str:
    if knob.startswith("adaptive_"):
        return "on" if value else "off"
    if knob == "rss_queues":  # equal shares on the first N receive queues, none on the rest
        return " ".join("1" if r < int(value) else "0" for r in range(top or 0))
    return str(int(value))


def plan(knobs: dict, caps: NicCaps, role: str, sut_cpus: list[int], field_prefix: str) -> NicPlan:
    """The settings of ``knobs`` (knob -> value, None: not set) for the
    interface of ``caps``, acting as ``role`` ("sut_in" receives, "sut_out"
    sends); every knob it refuses raises InputError naming knob, interface
    and driver."""
    out = NicPlan(caps.ifname)
    takes = set(caps.takes())
    if knobs.get("rss_queues") is not None and any(knobs.get(k) is not None for k in CHANNEL_KNOBS):
        # a channel count change resets the table to all the new queues, and
        # the table's undo needs the channel count it was read with
        raise InputError(f"{field_prefix}.rss_queues", "give rss_queues or channels, not both: new channels "
                         "spread the flows over all of them; rss_queues narrows the spread to the first N")
    for knob, value in knobs.items():
        if value is None or (knob == "irq_affinity" and value == "unpinned"):
            continue
        where = f"{field_prefix}.{knob}"
        if knob not in takes:
            raise InputError(where, f"{caps.ifname} ({caps.driver}) does not take {knob}; it takes: "
                             f"{', '.join(sorted(takes)) or 'none of the NIC knobs'}")
        if knob == "irq_affinity":
            if value not in IRQ_MODES:
                raise InputError(where, f"{value!r}; accepted: {', '.join(IRQ_MODES)}")
            if value == "pin-2cpu" and len(sut_cpus) < 2:
                raise InputError(where, "pin-2cpu puts receive and transmit interrupts on two CPUs: "
                                 "give testbed.sut_cpus two CPUs")
            # pin-1cpu: both directions on the first SUT CPU; pin-2cpu: receive on the first, transmit on the second
            out.irq_cpus = [sut_cpus[1 if value == "pin-2cpu" and role == "sut_out" else 0]]
            continue
        flag, param = ETHTOOL_KNOBS[knob]
        top = caps.maximum.get(flag, {}).get(param)
        if top is not None and not 1 <= int(value) <= top:
            raise InputError(where, f"{value} on {caps.ifname} ({caps.driver}): the driver takes 1..{top}")
        out.ethtool.setdefault(flag, {})[param] = _value(knob, value, top)
    return out


def changed(plan_: NicPlan, caps: NicCaps) -> dict[str, dict[str, str]]:
    """The old values of what the plan changes (flag -> param -> old), for the undo."""
    return {flag: {p: caps.current[flag][p] for p in params if caps.current[flag].get(p) != params[p]}
            for flag, params in plan_.ethtool.items()}


def ethtool_argv(ifname: str, flag: str, params: dict[str, str]) -> list[str]:
    """A value of several words (-X's weights) is several arguments."""
    return ["ethtool", flag, ifname, *[x for p, v in sorted(params.items()) for x in (p, *str(v).split())]]


def readback(caps_after: NicCaps, plan_: NicPlan) -> list[str]:
    """What the driver did not take as asked (read after applying): one line each."""
    bad = []
    for flag, params in plan_.ethtool.items():
        for p, v in params.items():
            got = caps_after.current.get(flag, {}).get(p)
            if got != v:
                bad.append(f"{caps_after.ifname}: {p} {v} asked, {got} read back")
    return bad


def irq_affinity_path(irq: int) -> str:
    return f"/proc/irq/{irq}/smp_affinity_list"
