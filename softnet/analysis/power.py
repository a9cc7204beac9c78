"""Power from RAPL energy counters, counting no joule twice, over a trial's
window and over the idle time before its traffic (the WiFi-AP study's
power panel and Table II, mW per Mbps).

/sys/class/powercap lists every zone flat: a package (``intel-rapl:0``,
name ``package-0``) and the zones inside it (``intel-rapl:0:0`` core,
``intel-rapl:0:1`` uncore), the same package again through the MMIO
interface (``intel-rapl-mmio:0``), and on client CPUs the platform
(``intel-rapl:1``, ``psys``), which holds the packages. Summing them all
counts the package two to four times. The host's power is its packages
plus its DRAM zones (DRAM lies outside the package's domain even where
the kernel lists it under the package); the others are shown on their own.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RaplZone:
    zone: str  # the powercap directory: intel-rapl:0:1
    name: str  # what the zone says it is: package-0, core, uncore, dram, psys
    counted: bool  # part of the host's total
    why: str  # why it is or is not


def classify(zones: dict[str, str]) -> list[RaplZone]:
    """{zone directory: its name} -> each zone, counted or not, and why. A
    zone whose name is unknown (a raw trial from before names were kept)
    counts when it is at the top of its tree and not the MMIO interface's."""
    packages = {n for z, n in zones.items() if z.startswith("intel-rapl:") and z.count(":") == 1}
    out = []
    for z, name in sorted(zones.items()):
        if name == "dram":
            out.append(RaplZone(z, name, True, "DRAM: outside the package's domain"))
        elif z.count(":") >= 2:
            out.append(RaplZone(z, name, False, f"inside {zones.get(z.rpartition(':')[0]) or 'its package'}"))
        elif name == "psys":
            out.append(RaplZone(z, name, False, "the platform: holds the packages"))
        elif z.startswith("intel-rapl-mmio:") and (name in packages or not name):
            out.append(RaplZone(z, name, False, f"{name or 'a package'} again, through MMIO"))
        else:
            out.append(RaplZone(z, name, True, "a package"))
    return out


def watts(energy_uj: dict[str, float], seconds: float, names: dict[str, str]) -> tuple[float | None, dict[str, float]]:
    """(the host's power, W, or None without a counted zone; every zone's
    power, W, by its name or directory) from energy counter differences."""
    zones = classify({z: names.get(z, "") for z in energy_uj})
    per_zone = {f"{z.zone} ({z.name})" if z.name else z.zone: energy_uj[z.zone] / 1e6 / seconds for z in zones}
    counted = [energy_uj[z.zone] for z in zones if z.counted]
    return (sum(counted) / 1e6 / seconds if counted else None), per_zone
