"""Kernel `ping` (iputils) over a testbed path: the kernel baseline of the
AF_XDP latency lab. Each reply's round trip, as ping prints it (µs precision)."""
from __future__ import annotations

import re

import numpy as np

from softnet.errors import InputError
from softnet.tools import hostcmd

TIME_RE = re.compile(r"icmp_seq=(\d+) .*time=([0-9.]+) ms")
MIN_INTERVAL_S = 0.002  # shorter is a flood, not a baseline


def parse_ping(text: str) -> tuple[np.ndarray, np.ndarray]:
    """(sequence numbers, RTTs in ns) of the replies in ping's output."""
    seqs, rtts = [], []
    for m in TIME_RE.finditer(text):
        seqs.append(int(m.group(1)))
        rtts.append(round(float(m.group(2)) * 1e6))
    return np.array(seqs, dtype=np.int64), np.array(rtts, dtype=np.int64)


def kernel_ping(ns: str, dst_ip: str, count: int, interval_s: float, size: int = 64) -> dict:
    """Ping ``dst_ip`` from namespace ``ns``: sent, received and each RTT (ns).
    ``size``: the frame size incl. FCS, like softnet's (ICMP payload derived)."""
    if not 1 <= count <= 10**6:
        raise InputError("baseline.count", f"{count}: expected 1..1000000")
    if interval_s < MIN_INTERVAL_S:
        raise InputError("baseline.interval_s", f"{interval_s}: at least {MIN_INTERVAL_S} s")
    payload = max(size - 4 - 14 - 20 - 8, 16)  # ping needs 16 B for its own timestamp
    out = hostcmd.in_netns(ns, ["ping", "-n", "-c", str(count), "-i", f"{interval_s:g}",
                                "-s", str(payload), "-W", "1", dst_ip], check=False, timeout=count * interval_s + 30)
    seqs, rtts = parse_ping(out)
    return {"sent": count, "received": int(len(rtts)), "rtt_ns": rtts, "seq": seqs}
