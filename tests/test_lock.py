"""One measuring run per testbed host: the lock refuses or waits, names its
holder, and is taken over when its holder died."""
from __future__ import annotations

import json
import tempfile
import signal
import subprocess
import sys
import time

import pytest

from softnet.testbed.lock import LOCK_DIR, LOCK_NAME, TestbedBusy, read_holder
from softnet.testbed.lock import testbed_lock as hold_testbed  # a test_* name would be collected
from tests.conftest import needs_root, softnet_cmd, valid_or_held

HOLD = """
import sys, time
from pathlib import Path
from softnet.testbed.lock import testbed_lock
with testbed_lock("/results/of/holder", lock_dir=Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def holder(lock_dir, seconds: float) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_dir), str(seconds)], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_second_run_is_refused_naming_the_holder(tmp_path):
    p = holder(tmp_path, 30)
    try:
        started = time.monotonic()
        with pytest.raises(TestbedBusy) as busy:
            with hold_testbed(lock_dir=tmp_path):
                pass
        assert time.monotonic() - started < 1  # --wait 0: at once
        msg = str(busy.value)
        assert f"pid {p.pid}" in msg and "/results/of/holder" in msg and "since" in msg
        assert busy.value.exit_code == 1
    finally:
        p.kill()
        p.wait()


def test_second_run_waits_for_the_holder_then_runs(tmp_path):
    p = holder(tmp_path, 1.0)
    told = []
    started = time.monotonic()
    with hold_testbed("/mine", wait_s=20, lock_dir=tmp_path, on_wait=told.append) as me:
        waited = time.monotonic() - started
        assert json.loads((tmp_path / LOCK_NAME).read_text())["results_dir"] == "/mine"
    assert 0.5 < waited < 10 and told and told[0].pid == p.pid and me.results_dir == "/mine"
    assert p.wait() == 0


def test_wait_runs_out_naming_the_holder(tmp_path):
    p = holder(tmp_path, 30)
    try:
        with pytest.raises(TestbedBusy, match=f"pid {p.pid}.*after waiting"):
            with hold_testbed(wait_s=0.5, lock_dir=tmp_path):
                pass
    finally:
        p.kill()
        p.wait()


def test_lock_of_a_killed_run_is_taken_over(tmp_path):
    p = holder(tmp_path, 30)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == p.pid  # its note stays...
    with hold_testbed(lock_dir=tmp_path) as me:  # ...but the kernel dropped its flock
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == me.pid


def test_lock_is_released_on_error(tmp_path):
    with pytest.raises(RuntimeError):
        with hold_testbed(lock_dir=tmp_path):
            raise RuntimeError("boom")
    with hold_testbed(lock_dir=tmp_path):
        pass


TRIAL = ("trial", "--rate", "200kpps", "--duration", "3", "--warmup", "0.5", "--json")


def trials_0_3_s_apart(second_wait: str) -> tuple[subprocess.Popen, subprocess.CompletedProcess]:
    """The first trial (queued behind any other run) and, 0.3 s later (once
    the first holds the testbed), the second, finished."""
    # Its output to files, not pipes: a trial's JSON is larger than a pipe holds, and a
    # writer blocked on a full pipe would hold the testbed while the second waits.
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    first = subprocess.Popen(softnet_cmd(*TRIAL, "--wait", "600"), stdout=out, stderr=err, text=True)
    first.output = (out, err)
    time.sleep(0.3)
    deadline = time.monotonic() + 600
    while read_holder(LOCK_DIR / LOCK_NAME).pid != first.pid and time.monotonic() < deadline:
        time.sleep(0.1)  # another suite's run holds the testbed: the first queues behind it
    second = subprocess.run(softnet_cmd(*TRIAL, "--wait", second_wait), capture_output=True, text=True,
                            timeout=180)
    return first, second


def finish(proc: subprocess.Popen) -> tuple[str, str]:
    proc.wait(timeout=120)
    texts = []
    for f in proc.output:
        f.seek(0)
        texts.append(f.read())
        f.close()
    return texts[0], texts[1]


@needs_root
@pytest.mark.netns
def test_two_trials_at_once_the_second_refuses_naming_the_first(tmp_path):
    first, second = trials_0_3_s_apart("0")
    out, err = finish(first)
    assert second.returncode == 1, second.stderr
    assert f"pid {first.pid}" in second.stderr and "softnet trial --rate 200kpps" in second.stderr
    assert "Traceback" not in second.stderr and second.stdout == ""
    assert first.returncode == 0, err
    assert valid_or_held(json.loads(out))


@needs_root
@pytest.mark.netns
def test_two_trials_at_once_the_second_waits_then_runs(tmp_path):
    first, second = trials_0_3_s_apart("120")
    out, err = finish(first)
    assert first.returncode == 0 and second.returncode == 0, err + second.stderr
    assert f"in use by pid {first.pid}" in second.stderr
    assert valid_or_held(json.loads(out)) and valid_or_held(json.loads(second.stdout))


def test_nested_take_in_one_process_is_free(tmp_path):
    with hold_testbed(lock_dir=tmp_path) as outer, hold_testbed(lock_dir=tmp_path) as inner:
        assert inner is outer
    with hold_testbed(lock_dir=tmp_path):  # released by the outer one
        pass


@needs_root
@pytest.mark.netns
def test_a_library_testbed_holds_the_lock_against_a_command(host_unchanged, monkeypatch):
    """Bench scripts and tests build a LocalTestbed without a command around
    it: the testbed itself takes the lock, so a softnet command is refused."""
    from softnet.testbed.local import LocalTestbed, Placement
    from softnet.tools.changes import HostChanges

    monkeypatch.setenv("SOFTNET_WAIT", "0")
    with HostChanges() as ch:
        LocalTestbed(ch, "ipv4-fwd", Placement(gen_cpu=0, sut_cpus=[1])).build()
        r = subprocess.run(softnet_cmd("trial", "--sut", "ipv4-fwd", "--rate", "10kpps", "--duration", "0.2"),
                           capture_output=True, text=True, timeout=60, env={**__import__("os").environ,
                                                                            "SOFTNET_WAIT": "0"})
        assert r.returncode == 1 and f"pid {__import__('os').getpid()}" in r.stderr
    with hold_testbed():  # undone with the testbed
        pass
