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


# ---- the safety net: every way a run can die ------------------------------------
def cmdline_pids(marker: str) -> list[int]:
    """Processes whose command line holds marker (a SUT's own, which no comm names)."""
    out = []
    for c in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in c.read_bytes() and int(c.parent.name) != os.getpid():
                out.append(int(c.parent.name))
        except (OSError, ValueError):
            pass
    return out


@pytest.mark.parametrize("delay_s", [0.05, 0.25, 0.9])  # loading, building, starting the tools
def test_ctrl_c_at_any_point_of_start_up_ends_quietly(delay_s):
    """Ctrl-C while the command line loads, builds the testbed or starts the
    tools: exit 130, a line saying so, no traceback, the host as it was."""
    before = host_state()
    proc = subprocess.Popen(softnet_cmd("trial", "--rate", "10kpps", "--duration", "1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _started.append(proc)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err and "interrupted" in err, err
    assert wait_host_state(before) == before


def test_busy_poll_sysctls_killed_with_the_lab_are_restored_by_clean():
    """`softnet latency --busy-poll` sets two host-wide sysctls; killed with
    SIGKILL, its journal holds their old values: `clean --check` reports
    them, `clean` writes them back."""
    before = host_state()
    proc = subprocess.Popen(softnet_cmd("latency", "--busy-poll", "--busy-poll-us", "37", "--runs", "1",
                                        "--duration", "30", "--results", "/tmp/sn-teardown-lat"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _started.append(proc)
    wait_for(lambda: Path("/proc/sys/net/core/busy_read").read_text().strip() == "37", timeout=60,
             what="busy_read set by the lab")
    proc.kill()
    proc.communicate(timeout=10)
    assert Path("/proc/sys/net/core/busy_poll").read_text().strip() == "37"
    check = subprocess.run(softnet_cmd("clean", "--check"), capture_output=True, text=True)
    assert check.returncode == 1 and "net.core.busy_read=37" in check.stdout, check.stdout
    clean = subprocess.run(softnet_cmd("clean"), capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert subprocess.run(softnet_cmd("clean", "--check"), capture_output=True, text=True).returncode == 0
    from softnet.tools.journal import agent_base

    assert not (agent_base() / f"local-{proc.pid}").exists()  # its journal replayed, its folder gone
    assert wait_host_state(before) == before


def test_custom_sut_setup_that_hangs_is_ended_with_all_it_started(tmp_path):
    """A setup past its timeout: its process group is killed, and nothing it
    started lives on in the removed namespace."""
    marker = f"{time.time():.6f}"
    (tmp_path / "sut.toml").write_text(f'setup = ["sh -c \\"sleep {marker}\\" & sleep {marker}"]\n'
                                       'teardown = []\ntimeout_s = 1\nl3 = true\n')
    before = host_state()
    r = subprocess.run(softnet_cmd("trial", "--sut", f"custom:file={tmp_path / 'sut.toml'}", "--rate", "1kpps",
                                   "--duration", "0.2"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "did not finish in 1 s" in r.stderr, r.stderr
    wait_for(lambda: not cmdline_pids(marker), timeout=5, what="the hung setup's processes to end")
    assert wait_host_state(before) == before


def test_custom_sut_whose_teardown_fails_flags_the_trial_and_exits_non_zero(tmp_path):
    (tmp_path / "sut.toml").write_text('setup = ["true"]\nteardown = ["echo cannot undo >&2; exit 4"]\nl3 = true\n')
    before = host_state()
    r = subprocess.run(softnet_cmd("trial", "--sut", f"custom:file={tmp_path / 'sut.toml'}", "--rate", "10kpps",
                                   "--duration", "0.3", "--json"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    import json

    result = json.loads(r.stdout)
    assert "host_not_restored" in result["flags"] and result["valid"] is False
    assert "cannot undo" in " ".join(result["undo_errors"]) and "host not restored" in r.stderr
    assert wait_host_state(before) == before


def test_a_killed_campaign_is_restored_when_it_resumes(tmp_path):
    """kill -9 mid-trial, then the same run again: it first removes what the
    dead run left, then finishes, and the host is as it was."""
    spec = tmp_path / "c.toml"
    spec.write_text('name = "resume"\n[method]\nkind = "sweep"\nloads = [10000]\nruns = 1\n'
                    'duration_s = 20\nwarmup_s = 0.1\n[testbed]\nsut = "ipv4-fwd"\n')
    results = tmp_path / "r"
    before = host_state()
    proc = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(results)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _started.append(proc)
    wait_generator_running(proc)
    proc.kill()
    proc.communicate(timeout=10)
    assert host_state()["netns"] != before["netns"]  # the dead run's testbed is still there
    spec.write_text(spec.read_text().replace("duration_s = 20", "duration_s = 0.3"))
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(results)), capture_output=True, text=True,
                       timeout=300)
    assert "restored what a killed run left" in r.stderr, r.stderr
    assert wait_host_state(before) == before
