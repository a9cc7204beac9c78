"""Wrappers around the native generator and sink (native/gen, native/sink)."""
from __future__ import annotations

import json
import math
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import IO

from softnet.errors import TestbedError
from softnet.results.trial import MAX_TRIAL_PKTS  # noqa: F401 (the sink's bitmap bound)
from softnet.tools.changes import HostChanges
from softnet.tools.process import quit_tool, read_json_line, read_tool, tool  # noqa: F401

TIMELINE_MAX_BINS = 1 << 21  # native/sink/sink.h SINK_TIMELINE_MAX_BINS
TIMELINE_MAX_RUNS = 20_000  # runs listed by "timeline" (all are counted)
TIMELINE_BIN_S = 1e-3
DRAIN_STABLE_READS, DRAIN_POLL_S, DRAIN_MAX_S = 3, 0.02, 2.0  # a bin: about 1 ms of the generator's schedule


def timeline_bin_pkts(rate_pps: float, total_pkts: int) -> int:
    """Sequence numbers per bin of the sink's timeline (--bin-pkts): about
    1 ms of schedule at rate_pps, grown so that the total_pkts of the trial
    (warm-up included) make at most TIMELINE_MAX_BINS bins."""
    return max(1, round(rate_pps * TIMELINE_BIN_S), math.ceil(total_pkts / TIMELINE_MAX_BINS))


def netns_args(ns: str | None) -> list[str]:
    """A native tool's namespace option; None: the current namespace (on a
    remote host, the agent's own)."""
    return [] if ns is None else ["--netns", ns]


class Sink:
    """The XDP sink on the sink interface, alive for one trial."""

    def __init__(self, changes: HostChanges, ns: str, ifname: str, count: int, warmup: int, exact: int = 0,
                 bin_pkts: int = 0):
        """``bin_pkts``: keep the timeline (largest delay per bin of that many
        seqs) and answer `timeline()`; timeline_bin_pkts() gives ~1 ms bins."""
        argv = [str(tool("sink")), *netns_args(ns), "--ifname", ifname, "--count", str(count),
                "--warmup", str(warmup)]
        if exact:  # every delay kept too: for checking the histogram, not for long trials
            argv += ["--exact", str(exact)]
        if bin_pkts:
            argv += ["--bin-pkts", str(bin_pkts)]
        self.proc = None
        changes.record(f"XDP sink program on {ns}/{ifname}", self.close)  # before it exists: no leak window
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        hello = read_json_line(self.proc, "softnet-sink did not start", 10)
        self.prog_id = hello["prog_id"]

    def read(self) -> dict:
        return read_tool(self.proc, "softnet-sink")

    def timeline(self, sent: int, timeout: float = 30) -> dict:
        """Where the window's losses sit in the sequence, and the largest delay
        per bin: the sink's "timeline" answer (docs/generator.md, "Loss in
        time"). ``sent``: the generator's sent_pkts (warm-up included), asked
        after the drain so nothing is in flight. Needs ``bin_pkts``."""
        if self.proc.poll() is not None:
            raise TestbedError(f"softnet-sink died (exit {self.proc.returncode}): {self.proc.stderr.read().strip()}")
        self.proc.stdin.write(f"timeline {int(sent)}\n")
        self.proc.stdin.flush()
        reply = read_json_line(self.proc, "softnet-sink timeline", timeout)
        if reply.get("timeline") is None:
            raise TestbedError(f"softnet-sink timeline: {reply.get('error', reply)}")
        return reply["timeline"]

    def drain(self) -> tuple[dict, float]:
        """Read until the counters stop moving (nothing left in flight):
        the counts and how long that took."""
        start = time.monotonic()
        last, stable = self.read(), 0
        while stable < DRAIN_STABLE_READS and time.monotonic() - start < DRAIN_MAX_S:
            time.sleep(DRAIN_POLL_S)
            cur = self.read()
            stable = stable + 1 if cur["rx_test_pkts"] == last["rx_test_pkts"] else 0
            last = cur
        return last, time.monotonic() - start

    def close(self) -> None:
        quit_tool(self.proc)


@dataclass
class GeneratorJob:
    """A running softnet-gen; `wait()` returns its JSON report."""

    proc: subprocess.Popen
    out: IO[str]  # its report: a file, not a pipe (a report beyond the pipe's 64 KiB would block its exit)
    err: IO[str]

    @classmethod
    def start(cls, changes: HostChanges, ep, rate_pps: float, count: int, warmup: int,
              frame_bytes: int, flows: int, cpu: int) -> "GeneratorJob":
        argv = [str(tool("gen")), *netns_args(ep.gen_ns), "--ifname", ep.gen_if, "--anchor", ep.anchor_if,
                "--src-mac", ep.gen_mac, "--dst-mac", ep.next_hop_mac, "--src-ip", ep.src_ip,
                "--dst-ip", ep.dst_ip, "--size", str(frame_bytes), "--rate", repr(float(rate_pps)),
                "--count", str(count), "--warmup", str(warmup), "--flows", str(flows), "--cpu", str(cpu)]
        out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        job = cls(proc, out, err)
        changes.record(f"generator on {ep.gen_ns}/{ep.gen_if} (pid {proc.pid})", job.stop)
        return job

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def interrupt(self) -> None:
        """Ask it to stop now: it reports what it sent, flagged interrupted."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def wait(self, timeout: float) -> dict:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TestbedError(f"softnet-gen did not finish within {timeout:.0f} s") from None
        out, err = (self._read(f) for f in (self.out, self.err))
        if self.proc.returncode < 0:
            raise TestbedError(f"softnet-gen was killed by signal {-self.proc.returncode}")
        report = json.loads(out) if out.strip().startswith("{") else {}
        if self.proc.returncode != 0 or not report:
            why = report.get("error") or err.strip()
            raise TestbedError(f"softnet-gen failed (exit {self.proc.returncode}): {why}")
        return report

    @staticmethod
    def _read(f: IO[str]) -> str:
        f.seek(0)
        text = f.read()
        f.close()
        return text
