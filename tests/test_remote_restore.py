"""Both hosts are restored after a crash mid-trial: the controller
SIGKILLed, an agent SIGKILLed, the management links cut. Emulated hosts with
a 3 s lease, a 3 s trial (1 s warm-up) crashed in its window; the crash and
the checks are bench/restore_bench.py's run_one (its module doc), which the
benchmark repeats at random points."""
from __future__ import annotations

import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from softnet.testbed.emulated_hosts import EmulatedHosts
from softnet.testbed import lock
from softnet.testbed.sshd import SSHD
from softnet.tools.changes import HostChanges
from tests.conftest import needs_root

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.restore_bench import run_one, settled_snapshots  # noqa: E402



def crash_test(fn):
    """Root, namespaces, sshd; a few seconds each."""
    for mark in (needs_root, pytest.mark.netns, pytest.mark.slow,
                 pytest.mark.skipif(not SSHD.exists(), reason="needs openssh-server")):
        fn = mark(fn)
    return fn

LEASE_S, DURATION_S = 3.0, 3.0
# The agents start ~0.8 s after the controller, the generator ~1.7 s; then
# 1 s of warm-up and the 3 s window: 3.5 s is in the window.
AT_S = 3.5


@pytest.fixture
def testbed():
    """The testbed lock around host_unchanged's two looks (request it first):
    no other measuring run changes the host in between."""
    with lock.testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 0)):
        yield


def crash(scenario: str, victim: str | None = None, nic: str | None = None) -> dict:
    with HostChanges() as ch, ThreadPoolExecutor(4) as pool:
        eh = EmulatedHosts(ch, lease_s=LEASE_S)
        inventory = eh.build()
        settled_snapshots(eh, pool)  # IPv6 link-local addresses past their duplicate detection
        rec = run_one(eh, inventory, scenario, AT_S, random.Random(0), DURATION_S, LEASE_S, pool, eh.workdir,
                      victim=victim, nic=nic)
    assert not ch.undo_errors
    return rec


def assert_restored(rec: dict) -> None:
    assert not rec.get("missed"), rec
    assert rec["restored"], rec.get("diff") or rec.get("diff_at_end")
    assert rec["restore_s"] <= LEASE_S + 10
    assert rec["left_processes"] == {}
    assert rec["pending_journals"] == {}


def assert_failed_naming(rec: dict, host: str) -> None:
    """The controller ended by itself, non-zero, with one line naming the host."""
    c = rec["controller"]
    assert not c["hung"], c
    assert c["exit_code"] not in (0, None) and not c["traceback"], c
    assert f"host {host}:" in c["error"], c["error"]


NIC = "rx_channels=1"  # a NIC knob the reaper must undo too (the emulated SUT ports have two receive queues)


@crash_test
def test_controller_killed(testbed, host_unchanged):
    """With the channels knob applied (journalled first) when the kill comes:
    the agents give the queues back with the rest."""
    rec = crash("controller_kill", nic=NIC)
    assert rec["sut_channels_at_action"] == {"rx": "1", "tx": "1"}, rec  # was rx 2
    assert_restored(rec)
    assert rec["controller"]["exit_code"] == -9


@crash_test
@pytest.mark.parametrize("victim", ["dut", "tg"])
def test_agent_killed(testbed, host_unchanged, victim):
    """The reaper restores the killed agent's host (the SUT's namespace, its
    NICs' state and the channels knob on dut); the controller learns it from
    the closed channel (the SUT's only after the window: nothing is asked of
    it meanwhile) and restores the other host."""
    rec = crash("agent_kill", victim, nic=NIC)
    assert rec["killed_pids"]
    assert rec["sut_channels_at_action"] == {"rx": "1", "tx": "1"}, rec
    assert_restored(rec)
    assert_failed_naming(rec, victim)
    assert "the agent ended" in rec["controller"]["error"]


@crash_test
def test_management_links_cut(testbed, host_unchanged):
    """The agents' leases lapse and they undo everything; the controller's
    keepalives give up on a host whose link was cut: the traffic host, whose
    agent it polls during the traffic, or the SUT host where a slow host was
    still applying its changes when the links went."""
    rec = crash("mgmt_cut")
    assert rec["cut"] == ["tg", "dut"]
    assert_restored(rec)
    assert "diff_at_end" not in rec
    # the error's own line (undo warnings before it may name the other host)
    line = rec["controller"]["error"].rpartition("softnet: error:")[2]
    named = [h for h in rec["cut"] if f"host {h}:" in line]
    assert len(named) == 1, rec["controller"]
    assert_failed_naming(rec, named[0])
    assert rec["controller"]["ended_s_after_action"] < LEASE_S + 10


def test_a_journal_of_a_gone_namespace_does_not_block_a_host(tmp_path):
    """State dirs are keyed by namespace inode, which the kernel reuses at
    once: a dead agent's journal from a deleted namespace (a test's, an
    emulated host's) once blocked every trial on a host that got its inode.
    The netns cookie tells them apart; its entries are moot and skipped."""
    import io
    import json

    from softnet.hosts.agent import Agent
    from softnet.tools import journal

    if journal.netns_cookie() is None:
        pytest.skip("needs SO_NETNS_COOKIE (Linux >= 5.14)")
    state = tmp_path / f"net-{journal.netns_ino()}"
    state.mkdir()
    old = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()  # a wrong replay would change nothing
    entry = {"i": 0, "op": "sysctl", "what": "sysctl net.ipv4.ip_forward=1", "key": "net.ipv4.ip_forward", "old": old}

    def write(cookie: int) -> None:
        header = {"journal": 1, "pid": os.getpid(), "pid_start": -1, "started_unix_s": 0.0,  # a dead owner
                  "netns_ino": journal.netns_ino(), "netns_cookie": cookie, "controller": "test"}
        (state / journal.JOURNAL_NAME).write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")

    agent = Agent(state, out=io.StringIO())
    write(journal.netns_cookie() + 1)  # written in another namespace with our inode
    assert agent.op_clean(check=True) == {"journals": [], "errors": []}
    assert not (state / journal.JOURNAL_NAME).exists()
    assert journal.NETNS_GONE in next(state.glob("journal-*.done.jsonl")).read_text()
    write(journal.netns_cookie())  # a dead agent's of this very namespace: reported, left alone
    assert [j["pending"] for j in agent.op_clean(check=True)["journals"]] == [["sysctl net.ipv4.ip_forward=1"]]
    assert (state / journal.JOURNAL_NAME).exists()
