"""Adapter for trafgen (Debian package netsniff-ng) as an external generator.

trafgen runs inside the generator namespace and sends one fixed frame: the
same Ethernet/IP/UDP test frame softnet-gen builds (UDP destination port 7,
frame size incl. FCS, so 64 B is 60 B on the veth). What trafgen cannot do:

- Sequence numbers and timestamps. Its runtime counters are one byte wide
  (dinc) or act on protocol header fields, never on a 64-bit payload word, so
  every frame carries seq 0 and an all-ones timestamp (the sink ignores a send
  time in the future). Open the sink with count=1, warmup=1: every trafgen
  frame then counts in `rx_test_pkts` and nowhere else. Loss is trafgen's own
  sent count minus the sink's count; reordering, duplicates and latency are
  not measurable.
- Per-packet pacing. `-b RATE` (and `-t GAP`) switch trafgen to its slow path,
  one sendto(2) per frame; with -b it sends a second's worth of frames as fast
  as it can, then sleeps until the next second (1-second bursts). The rate is
  given in pps here; a bit or byte rate is divided by the 60 B frame trafgen
  writes (no FCS): `-b 48Mbit` gives 100 kpps for a 64 B frame.
- Its fast path (TX_RING, no -b/-t) aborts on veth here with "Flushing
  TX_RING failed: Resource temporarily unavailable" (EAGAIN when the peer's
  ring is full).

Host changes trafgen would make on its own are switched off: --no-sock-mem
(it raises the global socket buffer sysctls) and -Q (it rewrites the NIC's
IRQ affinity). `--cpus 1` forks one worker that trafgen pins to CPU 0 by
itself, whatever the taskset mask; we re-pin that worker to the requested CPU
and report the CPU it was seen on.
"""
from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from softnet.errors import InputError, TestbedError
from softnet.tools.changes import NAME_PREFIX, HostChanges

SN_UDP_DPORT = 7  # native/common/sn_proto.h
SN_UDP_SPORT = 1024
FCS_BYTES = 4
PAYLOAD_BYTES = 16  # 8-byte sequence number + 8-byte timestamp, big-endian


def trafgen_path() -> str:
    path = shutil.which("trafgen") or ("/usr/sbin/trafgen" if os.access("/usr/sbin/trafgen", os.X_OK) else None)
    if not path:
        raise TestbedError("trafgen not found: install the Debian package netsniff-ng")
    return path


def trafgen_version() -> str:
    out = subprocess.run([trafgen_path(), "--version"], capture_output=True, text=True, timeout=5).stdout
    return out.splitlines()[0].strip() if out else "unknown"


def frame_config(ep, frame_bytes: int = 64) -> str:
    """trafgen packet config for one softnet test frame (seq 0, timestamp all ones)."""
    v6 = ipaddress.ip_address(ep.dst_ip).version == 6
    pad = frame_bytes - FCS_BYTES - (14 + (40 if v6 else 20) + 8 + PAYLOAD_BYTES)
    if pad < 0:
        raise InputError("--size", f"{frame_bytes} B cannot carry the softnet payload over IPv{6 if v6 else 4}")
    ip = (f"ipv6(sa={ep.src_ip}, da={ep.dst_ip}, hl=64)" if v6
          else f"ipv4(sa={ep.src_ip}, da={ep.dst_ip}, ttl=64)")
    return (f"{{\n  eth(da={ep.next_hop_mac}, sa={ep.gen_mac}),\n  {ip},\n"
            f"  udp(sp={SN_UDP_SPORT}, dp={SN_UDP_DPORT}),\n"
            f"  c64(0), fill(0xff, 8){f', fill(0, {pad})' if pad else ''}\n}}\n")


@dataclass
class TrafgenJob:
    """A running trafgen; `stop()` ends it and returns what it reported."""

    proc: subprocess.Popen
    workdir: str
    cpu: int
    started: float
    worker_pid: int | None = None
    report: dict = field(default_factory=dict)

    @classmethod
    def start(cls, changes: HostChanges, ep, rate_pps: float | None, cpu: int,
              frame_bytes: int = 64, count: int | None = None) -> "TrafgenJob":
        """rate_pps=None uses trafgen's fast path (TX_RING, unpaced); count=None sends until stopped."""
        workdir = tempfile.mkdtemp(prefix=f"{NAME_PREFIX}trafgen-")
        changes.record(f"trafgen work directory {workdir}", lambda: shutil.rmtree(workdir, ignore_errors=True))
        conf = Path(workdir, "frame.cfg")
        conf.write_text(frame_config(ep, frame_bytes))
        argv = ["ip", "netns", "exec", ep.gen_ns, "taskset", "-c", str(cpu), trafgen_path(),
                "--dev", ep.gen_if, "--conf", str(conf), "--cpus", "1", "--no-sock-mem", "-Q"]
        if rate_pps is not None:
            argv += ["-b", f"{round(rate_pps)}pps"]
        if count is not None:
            argv += ["-n", str(count)]
        # Own session: SIGINT must reach trafgen's worker too, not only its parent.
        # cwd: trafgen leaves a scratch file (.tmp_mmap.*) in its working directory.
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd=workdir, start_new_session=True)
        job = cls(proc, workdir, cpu, time.monotonic())
        changes.record(f"trafgen on {ep.gen_ns}/{ep.gen_if} (pid {proc.pid})", job.kill)
        job._pin_worker()
        return job

    def _pin_worker(self, timeout_s: float = 2.0) -> None:
        """trafgen pins its worker to CPU 0 itself; move it to the requested CPU."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            except OSError:
                kids = []
            if kids:
                self.worker_pid = int(kids[0])
                time.sleep(0.005)  # let trafgen's own pinning happen first
                try:
                    os.sched_setaffinity(self.worker_pid, {self.cpu})
                except ProcessLookupError:
                    pass
                return
            time.sleep(0.002)

    def worker_cpu(self) -> int | None:
        """The CPU the worker last ran on (field 39 of /proc/PID/stat)."""
        if self.worker_pid is None:
            return None
        try:
            stat = Path(f"/proc/{self.worker_pid}/stat").read_text()
        except OSError:
            return None
        return int(stat.rsplit(")", 1)[1].split()[36])

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 5.0) -> dict:
        """SIGINT (trafgen prints its counters), then parse them."""
        cpu_seen = self.worker_cpu()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
        try:
            out, _ = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            out, _ = self.proc.communicate()
        stopped = time.monotonic()
        sent = re.search(r"(\d+) packets outgoing", out or "")
        cpu_time = re.search(r"(\d+) sec, (\d+) usec on CPU\d+ \((\d+) packets\)", out or "")
        errors = [line.strip() for line in (out or "").splitlines()
                  if re.search(r"fail|error|cannot|invalid|unknown", line, re.I)]
        self.report = {
            "sent_pkts": int(sent.group(1)) if sent else None,
            "send_loop_s": int(cpu_time.group(1)) + int(cpu_time.group(2)) / 1e6 if cpu_time else None,
            "wall_s": stopped - self.started,
            "worker_cpu": cpu_seen,
            "exit_code": self.proc.returncode,
            "error": "; ".join(errors) or None,
        }
        return self.report

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
