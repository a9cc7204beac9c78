"""The process protocol of softnet's native tools (and, later, the remote
agent): a tool is started with its options, answers "read" on stdin with one
JSON line of counters, and exits on "quit". Below traffic/ and collect/, so
both drive their tools the same way, locally or over a pipe."""
from __future__ import annotations

import json
import os
import select
import subprocess
from pathlib import Path

from softnet.errors import TestbedError


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


def read_tool(proc: subprocess.Popen, name: str, command: str = "read", timeout: float = 5) -> dict:
    """Send a native tool that reads commands on stdin one command (its
    counters: "read") and return its JSON answer."""
    if proc.poll() is not None:
        raise TestbedError(f"{name} died (exit {proc.returncode}): {proc.stderr.read().strip()}")
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    return read_json_line(proc, f"{name} {command.split()[0]}", timeout)


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


def terminate(proc: subprocess.Popen | None, timeout: float = 5.0) -> None:
    """SIGTERM (a tool detaches and exits), then SIGKILL after ``timeout`` s."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def read_json_line(proc: subprocess.Popen, what: str, timeout: float) -> dict:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if not line:
        if ready:  # stdout closed: the tool is exiting, and its exit status may not be there yet
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        err = proc.stderr.read() if proc.poll() is not None else f"no answer within {timeout} s"
        raise TestbedError(f"{what}: {err.strip()}")
    return json.loads(line)


def pinned_off(avoid_cpus) -> list[str]:
    """A tool's --cpu option keeping its own thread off ``avoid_cpus`` (the
    first other CPU this process may use), or none if no CPU is left."""
    allowed = sorted(set(os.sched_getaffinity(0)) - set(avoid_cpus or []))
    return ["--cpu", str(allowed[0])] if avoid_cpus and allowed else []


class CommandTool:
    """A native tool answering commands on stdin ("read", its own, "quit"),
    started now and stopped through ``changes`` however the run ends; its
    first line (``hello``, parsed into that model) says it is ready."""

    def __init__(self, changes, argv: list[str], what: str, hello):
        import threading

        self.proc, self.name = None, Path(argv[0]).name
        self._lock = threading.Lock()  # a trial and a sampler's thread may both ask
        changes.record(what, self.close)  # before it exists: no leak window
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        try:
            self.hello = hello.model_validate(read_json_line(self.proc, f"{self.name} did not start", 15))
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ask(self, command: str = "read", timeout: float = 5) -> dict:
        with self._lock:
            return read_tool(self.proc, self.name, command, timeout)

    def close(self) -> None:
        quit_tool(self.proc)
