"""Wrappers around softnet-xsk (native/xsk, docs/reference/xsk.md), the AF_XDP latency
lab's tool: `Reflect` (host C), `Forward` (host B) and `Ping` (host A), each
run inside a network namespace with the tool's --netns and recorded in a
HostChanges registry before it starts, so it is stopped however the run ends.
Its XDP program is a bpf_link owned by the process: it goes with it."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from softnet.errors import TestbedError
from softnet.results.latency import FULL_FRAME_BYTES, read_records  # noqa: F401 - the tool's users read it here
from softnet.tools.changes import HostChanges
from softnet.tools.process import quit_tool, read_json_line, read_tool, terminate, tool

RX_MODES = ("busy", "poll", "recvfrom", "epoll")
TX_KICKS = ("wakeup", "always")
XDP_MODES = ("native", "skb")


@dataclass(frozen=True)
class XskKnobs:
    """The socket and application knobs every role takes (None: the tool's default)."""

    zero_copy: bool = False        # the tool falls back to copy mode, reporting zero_copy unsupported
    need_wakeup: bool = True
    rx_mode: str = "poll"          # busy | poll | recvfrom | epoll
    tx_kick: str = "wakeup"        # wakeup | always
    busy_poll_us: int | None = None
    prefer_busy_poll: bool = False
    busy_poll_budget: int | None = None
    batch: int | None = None       # ping: packets per burst (1); forward/reflect: ring batch (64)
    frame_size: int = 2048         # UMEM chunk
    ring_size: int = 2048
    xdp_mode: str = "native"
    queue: int = 0
    cpu: int | None = None
    stamp: bool = True             # False: --no-stamp (no hop stamps; ping keeps T0 and T3)

    def __post_init__(self):
        for name, value, allowed in (("rx_mode", self.rx_mode, RX_MODES), ("tx_kick", self.tx_kick, TX_KICKS),
                                     ("xdp_mode", self.xdp_mode, XDP_MODES)):
            if value not in allowed:
                raise ValueError(f"{name}: expected one of {', '.join(allowed)}, got {value!r}")

    def argv(self) -> list[str]:
        a = ["--zero-copy" if self.zero_copy else "--copy",
             "--need-wakeup" if self.need_wakeup else "--no-need-wakeup",
             "--rx-mode", self.rx_mode, "--tx-kick", self.tx_kick, "--frame-size", str(self.frame_size),
             "--ring-size", str(self.ring_size), "--xdp-mode", self.xdp_mode, "--queue", str(self.queue)]
        if self.busy_poll_us is not None:
            a += ["--busy-poll-us", str(self.busy_poll_us)]
        if self.prefer_busy_poll:
            a.append("--prefer-busy-poll")
        if self.busy_poll_budget is not None:
            a += ["--busy-poll-budget", str(self.busy_poll_budget)]
        if self.batch is not None:
            a += ["--batch", str(self.batch)]
        if self.cpu is not None:
            a += ["--cpu", str(self.cpu)]
        if not self.stamp:
            a.append("--no-stamp")
        return a


class _Server:
    """forward and reflect: run until "quit", answer "read" with counters."""

    def __init__(self, changes: HostChanges, role: str, ns: str, argv: list[str]):
        self.proc: subprocess.Popen | None = None
        changes.record(f"softnet-xsk --role {role} in {ns}", self.close)  # before it exists: no leak window
        self.proc = subprocess.Popen([str(tool("xsk")), "--role", role, "--netns", ns, *argv],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.hello = read_json_line(self.proc, f"softnet-xsk --role {role} did not start", 10)

    def read(self) -> dict:
        return read_tool(self.proc, "softnet-xsk")

    def stamps(self, path: Path) -> dict:
        """The hop stamps it kept beside frames too short for them, written to
        ``path`` (SIDE_STAMP_DTYPE), and none kept after."""
        got = read_tool(self.proc, "softnet-xsk", f"stamps {path}", timeout=10)
        if got.get("error"):
            raise TestbedError(f"softnet-xsk could not write {path}: {got['error']}")
        return got

    def close(self) -> None:
        quit_tool(self.proc)


class Reflect(_Server):
    """Host C: swaps addresses and ports and sends each test frame back."""

    def __init__(self, changes: HostChanges, ns: str, ifname: str, knobs: XskKnobs = XskKnobs()):
        super().__init__(changes, "reflect", ns, ["--ifname", ifname, *knobs.argv()])


class Forward(_Server):
    """Host B: frames from A (ifname) go out towards C (ifname2), replies come back;
    with a_mac/c_mac the Ethernet addresses are rewritten for the next hop."""

    def __init__(self, changes: HostChanges, ns: str, ifname: str, ifname2: str, a_mac: str | None = None,
                 c_mac: str | None = None, knobs: XskKnobs = XskKnobs()):
        argv = ["--ifname", ifname, "--ifname2", ifname2, *knobs.argv()]
        if a_mac:
            argv += ["--a-mac", a_mac]
        if c_mac:
            argv += ["--c-mac", c_mac]
        super().__init__(changes, "forward", ns, argv)


class Ping:
    """Host A: one `run()` per trial; each run is its own process."""

    def __init__(self, changes: HostChanges, ns: str, ifname: str, src_mac: str, dst_mac: str, src_ip: str,
                 dst_ip: str, size_bytes: int = 64, knobs: XskKnobs = XskKnobs()):
        self.changes, self.ns = changes, ns
        self.argv = ["--role", "ping", "--netns", ns, "--ifname", ifname, "--src-mac", src_mac,
                     "--dst-mac", dst_mac, "--src-ip", src_ip, "--dst-ip", dst_ip, "--size", str(size_bytes),
                     *knobs.argv()]
        self.hello: dict = {}

    def run(self, count: int, records: str | Path, interval_ns: int | None = None,
            rate_pps: float | None = None, arrivals: str = "periodic", seed: int = 1, drain_ms: int = 200,
            timeout: float | None = None) -> tuple[dict, np.ndarray]:
        """Send `count` packets; the tool's JSON summary and its per-packet
        records (softnet.results.latency.RECORD_DTYPE), read back from `records`."""
        argv = [str(tool("xsk")), *self.argv, "--count", str(count), "--records", str(records),
                "--arrivals", arrivals, "--seed", str(seed), "--drain-ms", str(drain_ms)]
        if interval_ns is not None and rate_pps is not None:
            raise ValueError("give interval_ns or rate_pps, not both")
        if interval_ns is not None:
            argv += ["--interval-ns", str(int(interval_ns))]
        if rate_pps is not None:
            argv += ["--rate-pps", repr(float(rate_pps))]
        if timeout is None:
            gap_s = (interval_ns or 1e6) / 1e9 if rate_pps is None else 1 / rate_pps
            timeout = 30 + count * gap_s * (2 if arrivals == "poisson" else 1.2) + drain_ms / 1e3
        proc = None
        self.changes.record(f"softnet-xsk --role ping in {self.ns}", lambda: terminate(proc))
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        self.hello = read_json_line(proc, "softnet-xsk --role ping did not start", 10)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            terminate(proc)
            raise TestbedError(f"softnet-xsk --role ping did not finish within {timeout:.0f} s") from None
        lines = out.strip().splitlines()
        if proc.returncode != 0 or not lines:
            raise TestbedError(f"softnet-xsk --role ping failed (exit {proc.returncode}): {err.strip()}")
        summary = json.loads(lines[-1])
        return summary, read_records(records)
