"""Per-packet round-trip records of the AF_XDP latency lab (native/xsk, role
ping), as the tool writes them: one fixed-size little-endian record per packet
sent, in sequence order. All times are CLOCK_MONOTONIC ns (bpf_ktime_get_ns
in the XDP programs: the same clock), 0 where a stamp is absent.

Topology: A (ping) -> B (forward) -> C (reflect) -> B (forward) -> A.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

# Where each hop stamp was taken, in path order (index into hop_ns).
HOPS = (
    "b_xdp_rx_fwd",   # B's XDP hook, packet from A (metadata)
    "b_user_rx_fwd",  # B's application read it from its RX ring
    "b_user_tx_fwd",  # B's application put it on the TX ring towards C
    "c_xdp_rx",       # C's XDP hook
    "c_user_rx",      # C's application read it
    "c_user_tx",      # C's application put the reply on its TX ring
    "b_xdp_rx_ret",   # B's XDP hook, reply from C
    "b_user_rx_ret",
    "b_user_tx_ret",  # B's application put the reply on the TX ring towards A
    "a_xdp_rx",       # A's XDP hook, the reply
)
FLAG_RECEIVED = 1      # a reply came back (t3_ns set)
FLAG_DUPLICATE = 2     # more than one reply for this sequence number
FLAG_REORDERED = 4     # its reply came after a later sequence number's
FLAG_IMPOSSIBLE = 8    # a stamp earlier than the one before it on the path: never reported as a delay

RECORD_DTYPE = np.dtype([
    ("seq", "<u8"),
    ("t0_ns", "<u8"),      # A's application wrote the packet to its TX ring
    ("t3_ns", "<u8"),      # A's application read the reply from its RX ring (0: lost)
    ("hop_ns", "<u8", (len(HOPS),)),
    ("flags", "<u4"),
    ("_pad", "<u4"),
])
assert RECORD_DTYPE.itemsize == 112


def read_records(path: str | Path) -> np.ndarray:
    """The records of one run; a file that is not a whole number of records is an error."""
    path = Path(path)
    size = path.stat().st_size
    if size % RECORD_DTYPE.itemsize:
        raise ValueError(f"{path}: {size} B is not a whole number of {RECORD_DTYPE.itemsize} B records")
    return np.fromfile(path, dtype=RECORD_DTYPE)


# ---- one run's evaluated result ------------------------------------------------

LATENCY_SCHEMA_VERSION = 1
Number = int | float


class LatencyRunResult(BaseModel):
    """One run of one configuration (softnet.analysis.latency_eval.evaluate_run)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = LATENCY_SCHEMA_VERSION
    knobs: dict[str, Any]
    interval_s: Number
    phase: str = "base"  # base | fast | flood (softnet.campaign.latency.Run)
    sent: int
    received: int
    lost: int
    impossible: int
    duplicates: int
    reordered: int
    rtt: dict[str, Number | None]  # n, mean_ns, median_ns, std_ns, q1_ns, q3_ns, min_ns, max_ns, p90_ns, p99_ns, p999_ns
    kernel_baseline: dict[str, Any] | None  # kernel ping over the same path: sent, received, median_ns
    busy_poll_rx_pkts: dict[str, int]  # BusyPollRxPackets growth per host during the run
    applied: dict[str, Any]  # every knob as applied, or {"unsupported": why}
    tool: dict[str, Any]  # what the AF_XDP tool reported (hello per role, ping summary)
    flags: list[str]
    valid: bool
    started_unix_s: Number
    records_path: str | None = None
    provenance: dict[str, Any]

    def to_dict(self) -> dict:
        return self.model_dump()
