"""A fleet on this machine: a scheduler and one worker per testbed, each a
process over localhost TCP, started as a lab starts them (`softnet fleet
scheduler`, `softnet fleet worker`). For trying a fleet out, the tests and
the scale bench (bench/fleet_scale.py); simulated testbeds need no hosts."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def softnet_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "softnet", *args]


class LocalFleet:
    """A scheduler and one worker per testbed, as `softnet fleet` starts them."""

    def __init__(self, tmp: Path, testbeds: list[str]):
        self.port, self.tmp = free_port(), tmp
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.scheduler = self._start("scheduler", "fleet", "scheduler", "--port", str(self.port))
        self.schedulers = [self.scheduler]  # every one started: close() stops them all
        self.workers: dict[str, subprocess.Popen] = {}
        for tb in testbeds:
            self.start_worker(tb)
        self.wait_workers(len(testbeds))

    def _start(self, log: str, *args: str) -> subprocess.Popen:
        out = open(self.tmp / f"{log}.log", "ab")
        return subprocess.Popen(softnet_argv(*args), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def start_worker(self, tb: str, *extra: str) -> subprocess.Popen:
        self.workers[tb] = self._start(f"worker-{tb}", "fleet", "worker", "--scheduler", self.address,
                                       "--testbed", tb, *extra)
        return self.workers[tb]

    def restart_scheduler(self) -> None:
        self.scheduler = self._start("scheduler", "fleet", "scheduler", "--port", str(self.port))
        self.schedulers.append(self.scheduler)

    def wait_workers(self, n: int, timeout: float = 60) -> None:
        from distributed import Client

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with contextlib.suppress(OSError, TimeoutError):
                with Client(self.address, timeout=5, set_as_default=False) as c:
                    if len(c.scheduler_info()["workers"]) >= n:
                        return
            time.sleep(0.5)
        raise AssertionError(f"{n} workers did not join {self.address}: " + "".join(
            p.read_text()[-2000:] for p in self.tmp.glob("*.log")))

    def kill_worker_process(self, tb: str) -> None:
        """SIGKILL the Dask worker (its nanny and the process it runs): `softnet
        fleet worker` starts another."""
        for child in psutil.Process(self.workers[tb].pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()

    def close(self) -> None:
        """SIGTERM, as a lab stops them (they remove their scratch space); SIGKILL what is left.
        The workers first: one whose scheduler is already gone waits seconds to say goodbye."""
        for group in (list(self.workers.values()), self.schedulers):
            for p in group:
                with contextlib.suppress(ProcessLookupError):
                    p.terminate()
            for p in group:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=20)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
