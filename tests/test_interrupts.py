"""Ctrl-C and SIGTERM from exec to exit: every start-up phase signalled
deterministically (softnet.interrupts.checkpoint: the command pauses there
and says so), with the signal swallowed on its way too (as a library's bare
except or a __del__ during an import does), then a sweep of delays."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import needs_root, softnet_cmd

# each test starts a softnet process or several: `make test` runs them, `make check` does not
pytestmark = pytest.mark.slow

SEARCH = ["search", "--sut", "synthetic", "--width", "0.02"]
TRIAL = ["trial", "--sut", "ipv4-fwd", "--rate", "50kpps", "--duration", "3", "--warmup", "0.2"]
EXIT = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated")}


def paused(args: list[str], phase: str, swallow: bool = False) -> subprocess.Popen:
    """The command started with SOFTNET_PAUSE_AT=phase, once it says it is paused there."""
    env = {**os.environ, "SOFTNET_PAUSE_AT": phase, "SOFTNET_PAUSE_SWALLOW": "1" if swallow else "0"}
    p = subprocess.Popen(softnet_cmd(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in p.stderr:
        seen.append(line)
        if f"softnet: paused at {phase}" in line:
            return p
    p.wait(timeout=30)
    raise AssertionError(f"never paused at {phase} (exit {p.returncode}): {''.join(seen)}")


def ended(p: subprocess.Popen, sig: int) -> tuple[int, str, str]:
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err


def assert_ended_by(sig: int, rc: int, out: str, err: str) -> None:
    code, word = EXIT[sig]
    assert rc == code, f"exit {rc}, expected {code}:\n{out}\n{err}"
    assert word in err and "Traceback" not in err, err
    assert "valid:" not in out and "found" not in out  # never the report of a run that went on


@pytest.mark.parametrize("phase", ["imports", "options", "spec"])
@pytest.mark.parametrize("swallow", [False, True], ids=["raised", "swallowed"])
def test_a_signal_at_each_start_up_phase_ends_the_command(tmp_path, phase, swallow):
    """Even swallowed where it landed, the signal ends the command before it
    reports anything, and nothing is stored."""
    p = paused([*SEARCH, "--results", str(tmp_path / "r")], phase, swallow)
    assert_ended_by(signal.SIGINT, *ended(p, signal.SIGINT))
    assert not (tmp_path / "r" / "softnet.duckdb").exists() or phase == "spec"


@pytest.mark.parametrize("phase", ["imports", "spec"])
def test_sigterm_at_start_up_exits_143(tmp_path, phase):
    p = paused([*SEARCH, "--results", str(tmp_path / "r")], phase, swallow=True)
    assert_ended_by(signal.SIGTERM, *ended(p, signal.SIGTERM))


@needs_root
@pytest.mark.parametrize("phase, swallow", [("options", True), ("spec", True), ("testbed", False),
                                            ("testbed", True), ("tools", False), ("tools", True)])
def test_a_trial_signalled_at_each_phase_leaves_the_host_as_it_was(host_unchanged, phase, swallow):
    """The testbed built and the tools running: the signal ends the trial and
    everything is undone (host_unchanged), swallowed or not."""
    p = paused(TRIAL, phase, swallow)
    assert_ended_by(signal.SIGINT, *ended(p, signal.SIGINT))


@needs_root
@pytest.mark.parametrize("delay", [0.1, 0.15, 0.25, 0.35, 0.45, 0.6, 0.9, 1.3])
def test_a_trial_interrupted_after_any_delay_never_reports_success(host_unchanged, delay):
    """Through `python -m softnet`; from exec on, test_the_command_holds_signals_from_exec."""
    p = subprocess.Popen(softnet_cmd(*TRIAL), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    assert_ended_by(signal.SIGINT, *ended(p, signal.SIGINT))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_command_holds_signals_from_exec(tmp_path, sig):
    """The `softnet` command make setup writes holds signals back through
    Python's start-up (where Python answers them with a traceback, or loses
    one in a .pth file) and softnet answers them once it can. Only its shell's
    first instants, before it execs, end it by the signal itself."""
    command = Path(sys.executable).parent / "softnet"
    assert command.read_text().startswith("#!/bin/sh"), f"{command} is pip's entry point: run make setup"
    for i, delay in enumerate([0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.07]):
        p = subprocess.Popen([str(command), *SEARCH, "--results", str(tmp_path / str(i))], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        try:  # who the process is as it is signalled: a busy host can keep the shell from exec for long
            before = Path(f"/proc/{p.pid}/comm").read_text().strip()
        except OSError:
            before = "gone"
        rc, out, err = ended(p, sig)
        if rc == -sig:  # the shell (or env) before Python: the signal's own ending, nothing ran
            assert before in ("softnet", "sh", "env") and not out and not err, (delay, before, out, err)
            continue
        assert_ended_by(sig, rc, out, err)


def test_a_signal_stops_a_long_store_query_and_ends_the_command(tmp_path):
    """DuckDB answers Ctrl-C its own way, and not always: its check can lose the signal and the query
    runs on. A store's connection is interrupted by the signal itself (interrupts.stop_on_signal), and
    the error the query ends with ends the command as interrupted, 130, without its traceback."""
    code = f"""
import os, signal, threading, time
from softnet import interrupts
interrupts.install()
from softnet.results.store import Store
from softnet.cli.main import _exit_if_signalled
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
with Store({str(tmp_path)!r}) as s:
    try:
        s.query("SELECT count(*) FROM range(1000000000000)")
    except (RuntimeError, KeyboardInterrupt) as exc:
        print(type(exc).__name__, exc)
        _exit_if_signalled()
"""
    for _ in range(5):  # the signal's landing varies: in the query's set-up, its run, its check
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert r.returncode == 130 and "softnet: interrupted" in r.stderr and "Traceback" not in r.stderr, \
            (r.returncode, r.stdout, r.stderr)
