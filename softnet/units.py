"""Rates, sizes and durations as users type them, converted to base units.

Bit rates are converted to packets per second on the L1 size (frame + 20 B of
preamble and inter-frame gap, how line rate is quoted: 10 Gb/s = 14.88 Mpps at
64 B) or on the L2 size (the frame alone, FCS included, as RFC 2544 counts it).
"""
import re

from softnet.errors import InputError

L1_OVERHEAD_BYTES = 20  # 7 B preamble + 1 B SFD + 12 B inter-frame gap
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z/]*)\s*$")
_PPS_UNITS = {"": 1, "pps": 1, "kpps": 1e3, "mpps": 1e6, "gpps": 1e9}
_BPS_UNITS = {"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
MAX_RATE_PPS = 100e6  # far above any software path here; higher is a typo
RATE_HELP = "a number with unit pps, kpps, Mpps, or a bit rate bps, kbps, Mbps, Gbps"


def parse_rate(text: str, frame_bytes: int, layer: str = "l1", field: str = "--rate") -> float:
    """Return packets per second for a rate such as '200kpps', '1.5Mpps' or '1Gbps'."""
    m = _RATE.match(str(text))
    if not m:
        raise InputError(field, f"cannot read '{text}': expected {RATE_HELP}")
    value, unit = float(m.group(1)), m.group(2).lower().replace("/s", "ps")
    if unit in _PPS_UNITS:
        pps = value * _PPS_UNITS[unit]
    elif unit in _BPS_UNITS:
        if layer not in ("l1", "l2"):
            raise InputError("--rate-layer", f"'{layer}' is not l1 or l2")
        bits = 8 * (frame_bytes + (L1_OVERHEAD_BYTES if layer == "l1" else 0))
        pps = value * _BPS_UNITS[unit] / bits
    else:
        raise InputError(field, f"unknown unit '{m.group(2)}' in '{text}': expected {RATE_HELP}")
    if not (0 < pps <= MAX_RATE_PPS):
        raise InputError(field, f"'{text}' is {pps:.0f} pps; accepted: more than 0, at most {MAX_RATE_PPS:.0f} pps")
    return pps


def bits_per_second(pps: float, frame_bytes: int, layer: str = "l1") -> float:
    return pps * 8 * (frame_bytes + (L1_OVERHEAD_BYTES if layer == "l1" else 0))


def format_rate(pps: float) -> str:
    for unit, scale in (("Mpps", 1e6), ("kpps", 1e3)):
        if pps >= scale:
            return f"{pps / scale:.4g} {unit}"
    return f"{pps:.4g} pps"


def format_duration_ns(ns: float) -> str:
    """A time in engineering form, 3 significant digits: 61.5 us, 10.3 ms, 1.2 s."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"
