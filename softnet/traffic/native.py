"""Wrappers around the native generator and sink (native/gen, native/sink)."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from softnet.errors import TestbedError
from softnet.testbed.changes import HostChanges

# A bitmap of one bit per expected packet lives in the sink: 2^33 bits = 1 GiB.
MAX_TRIAL_PKTS = 1 << 33


def native_dir() -> Path:
    env = os.environ.get("SOFTNET_NATIVE_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "native" / "build"


def tool(name: str) -> Path:
    path = native_dir() / f"softnet-{name}"
    if not os.access(path, os.X_OK):
        raise TestbedError(f"{path} is missing: build it with `make setup` (or `make -C native`)")
    return path


def bpf_object(name: str) -> Path:
    """A BPF object built by native/Makefile (loaded by ip(8))."""
    path = native_dir() / f"{name}.bpf.o"
    if not path.exists():
        raise TestbedError(f"{path} is missing: build it with `make setup` (or `make -C native`)")
    return path


def read_tool(proc: subprocess.Popen, name: str) -> dict:
    """Ask a native tool that reads commands on stdin for its counters ("read")."""
    if proc.poll() is not None:
        raise TestbedError(f"{name} died (exit {proc.returncode}): {proc.stderr.read().strip()}")
    proc.stdin.write("read\n")
    proc.stdin.flush()
    return read_json_line(proc, f"{name} read", 5)


def quit_tool(proc: subprocess.Popen | None) -> None:
    """Stop a native tool that reads commands on stdin ("quit"), killing it if
    it does not go within 5 s, and close its pipes."""
    if proc is None:
        return
    if proc.poll() is None:
        try:
            proc.stdin.write("quit\n")
            proc.stdin.flush()
            proc.wait(timeout=5)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        f.close()


def read_json_line(proc: subprocess.Popen, what: str, timeout: float) -> dict:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if not line:
        err = proc.stderr.read() if proc.poll() is not None else f"no answer within {timeout} s"
        raise TestbedError(f"{what}: {err.strip()}")
    return json.loads(line)


class Sink:
    """The XDP sink on the sink interface, alive for one trial."""

    def __init__(self, changes: HostChanges, ns: str, ifname: str, count: int, warmup: int):
        argv = [str(tool("sink")), "--netns", ns, "--ifname", ifname, "--count", str(count),
                "--warmup", str(warmup)]
        self.proc = None
        changes.record(f"XDP sink program on {ns}/{ifname}", self.close)  # before it exists: no leak window
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        hello = read_json_line(self.proc, "softnet-sink did not start", 10)
        self.prog_id = hello["prog_id"]

    def read(self) -> dict:
        return read_tool(self.proc, "softnet-sink")

    def close(self) -> None:
        quit_tool(self.proc)


@dataclass
class GeneratorJob:
    """A running softnet-gen; `wait()` returns its JSON report."""

    proc: subprocess.Popen

    @classmethod
    def start(cls, changes: HostChanges, ep, rate_pps: float, count: int, warmup: int,
              frame_bytes: int, flows: int, cpu: int) -> "GeneratorJob":
        argv = [str(tool("gen")), "--netns", ep.gen_ns, "--ifname", ep.gen_if, "--anchor", ep.anchor_if,
                "--src-mac", ep.gen_mac, "--dst-mac", ep.next_hop_mac, "--src-ip", ep.src_ip,
                "--dst-ip", ep.dst_ip, "--size", str(frame_bytes), "--rate", repr(float(rate_pps)),
                "--count", str(count), "--warmup", str(warmup), "--flows", str(flows), "--cpu", str(cpu)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        job = cls(proc)
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
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TestbedError(f"softnet-gen did not finish within {timeout:.0f} s") from None
        if self.proc.returncode < 0:
            raise TestbedError(f"softnet-gen was killed by signal {-self.proc.returncode}")
        report = json.loads(out) if out.strip().startswith("{") else {}
        if self.proc.returncode != 0 or not report:
            why = report.get("error") or err.strip()
            raise TestbedError(f"softnet-gen failed (exit {self.proc.returncode}): {why}")
        return report
