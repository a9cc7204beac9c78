"""The host is as it was after every way a run can end."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import host_state, needs_root, softnet_cmd, wait_host_state

pytestmark = [needs_root, pytest.mark.netns]


_started: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def no_trial_outlives_its_test():
    """A test that fails while its trial still waits for the testbed lock
    must not leave that trial to run later, in someone else's test."""
    yield
    while _started:
        proc = _started.pop()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def start_long_trial() -> subprocess.Popen:
    proc = subprocess.Popen(softnet_cmd("trial", "--rate", "20kpps", "--duration", "30", "--json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _started.append(proc)
    return proc


def pids_of(comm: str, parent: int | None = None) -> list[int]:
    """Processes named comm (children of parent only, when given)."""
    pids = []
    for c in Path("/proc").glob("[0-9]*/comm"):
        try:
            if c.read_text().strip() != comm:
                continue
            ppid = int((c.parent / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent is None or ppid == parent:
                pids.append(int(c.parent.name))
        except (OSError, ValueError, IndexError):
            pass
    return pids


def wait_for(pred, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def wait_generator_running(proc) -> int:
    pid = wait_for(lambda: pids_of("softnet-gen", proc.pid), what="softnet-gen to start")[0]
    assert proc.poll() is None
    time.sleep(0.5)  # well inside the trial
    return pid


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_to_cli_mid_trial_undoes_everything(sig, code):
    before = host_state()
    proc = start_long_trial()
    wait_generator_running(proc)
    assert host_state()["netns"] != before["netns"]  # the testbed really exists
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "undone" in err
    assert wait_host_state(before) == before


def test_killed_generator_is_an_error_and_host_is_restored():
    before = host_state()
    proc = start_long_trial()
    gen = wait_generator_running(proc)
    os.kill(gen, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "softnet-gen was killed by signal 9" in err
    assert wait_host_state(before) == before


def test_kill9_of_cli_then_clean():
    before = host_state()
    proc = start_long_trial()
    wait_generator_running(proc)
    sink = pids_of("softnet-sink", proc.pid)
    gen = pids_of("softnet-gen", proc.pid)
    proc.kill()
    proc.communicate(timeout=10)
    # The CLI could not clean up: its namespaces are left behind...
    check = subprocess.run(softnet_cmd("clean", "--check"), capture_output=True, text=True)
    assert check.returncode == 1 and "namespaces" in check.stdout
    # ...but its children die with it (PR_SET_PDEATHSIG), taking their XDP links along.
    wait_for(lambda: not any(Path(f"/proc/{p}").exists() for p in sink + gen), what="children to exit")
    clean = subprocess.run(softnet_cmd("clean", "--json"), capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
    assert subprocess.run(softnet_cmd("clean", "--check"), capture_output=True, text=True).returncode == 0
    assert wait_host_state(before) == before


def test_clean_check_on_a_clean_host_exits_zero():
    r = subprocess.run(softnet_cmd("clean", "--check"), capture_output=True, text=True)
    assert r.returncode == 0 and "nothing left" in r.stdout


def test_a_signal_during_the_undo_waits_for_its_end_and_is_not_lost():
    """Ctrl-C while changes are undone: every undo still runs, then the
    interrupt goes on to the handler it would have met."""
    import os
    import signal

    from softnet.tools.changes import HostChanges

    undone = []
    with pytest.raises(KeyboardInterrupt):
        with HostChanges() as ch:
            ch.record("first", lambda: undone.append("first"))
            ch.record("interrupted", lambda: (os.kill(os.getpid(), signal.SIGINT), undone.append("second")))
    assert undone == ["second", "first"]
