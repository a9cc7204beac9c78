"""Emulated remote hosts (a namespace + sshd each) and the host snapshot that
proves a run restored them."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from softnet.testbed.netns import processes_in
from softnet.testbed.emulated_hosts import EmulatedHosts
from softnet.testbed import lock
from softnet.testbed.sshd import SSHD
from softnet.tools import hostcmd
from softnet.tools.changes import HostChanges
from softnet.tools.snapshot import host_snapshot, snapshot_diff
from tests.conftest import host_state, needs_root, softnet_cmd, wait_host_state

pytestmark = [needs_root, pytest.mark.netns,
              pytest.mark.skipif(not SSHD.exists(), reason="needs openssh-server")]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def hosts(tmp_path):
    with HostChanges() as ch:
        eh = EmulatedHosts(ch, workdir=tmp_path)
        eh.build()
        yield eh


def ssh(eh: EmulatedHosts, host: str, command: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(eh.ssh_argv(host) + [command], capture_output=True, text=True, timeout=timeout)


def interfaces_seen(eh: EmulatedHosts, host: str) -> set[str]:
    out = ssh(eh, host, "cat /proc/self/net/dev")
    assert out.returncode == 0, out.stderr
    return {line.split(":")[0].strip() for line in out.stdout.splitlines()[2:]}


def our_sshds(workdir: Path) -> list[int]:
    """pids of sshd processes started with a config under workdir."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(workdir).encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def test_sessions_run_in_their_host(hosts):
    for name in ("tg", "dut"):
        assert interfaces_seen(hosts, name) == {"lo", "mgmt0", "eth1", "eth2"}
    # Data links: unaddressed, down, fixed MACs (the agent must configure them).
    link = ssh(hosts, "dut", "ip -br link show eth2; ip -br -4 addr show eth2").stdout
    assert "DOWN" in link and "02:00:00:02:00:02" in link and "inet" not in link

    async def run_over_asyncssh() -> str:
        import asyncssh

        h = hosts.hosts["tg"]
        async with asyncssh.connect(h.addr, 22, username="root", client_keys=[str(hosts.identity)],
                                    known_hosts=str(hosts.known_hosts)) as conn:
            result = await conn.run("ip -br link", check=True)
            return result.stdout

    out = asyncio.run(run_over_asyncssh())
    assert "mgmt0" in out and "eth1" in out and hosts.mgmt_link("tg") not in out


def test_inventory_schema(hosts):
    inv = tomllib.loads(hosts.inventory.read_text())
    assert set(inv) == {"hosts", "testbeds"}
    assert inv["testbeds"] == {"tb1": {"traffic": "tg", "sut": "dut"}}
    tg = inv["hosts"]["tg"]
    assert tg["address"] == "198.18.255.2" and inv["hosts"]["dut"]["address"] == "198.18.255.6"
    assert {k: v for k, v in tg.items() if k not in ("address", "interfaces")} == {
        "port": 22, "user": "root", "identity": str(hosts.identity), "known_hosts": str(hosts.known_hosts),
        "softnet": str(Path(sys.executable).parent / "softnet"), "housekeeping_cpus": [0], "lease_s": 10}
    assert Path(tg["identity"]).is_absolute() and Path(tg["softnet"]).exists()
    nic = {"pci": "", "driver": "veth", "allow_physical": True}
    assert tg["interfaces"] == [
        {"name": "eth1", "mac": "02:00:00:01:00:01", "role": "gen_out", "link": "l1", **nic},
        {"name": "eth2", "mac": "02:00:00:01:00:02", "role": "sink_in", "link": "l2", **nic}]
    assert inv["hosts"]["dut"]["interfaces"] == [
        {"name": "eth1", "mac": "02:00:00:02:00:01", "role": "sut_in", "link": "l1", **nic},
        {"name": "eth2", "mac": "02:00:00:02:00:02", "role": "sut_out", "link": "l2", **nic}]


def test_cut_and_restore_management(hosts):
    hosts.cut_mgmt("tg")
    started = time.monotonic()
    assert ssh(hosts, "tg", "true").returncode == 255
    assert time.monotonic() - started < 6
    assert ssh(hosts, "dut", "true").returncode == 0  # only that host is cut off
    hosts.restore_mgmt("tg")
    assert ssh(hosts, "tg", "true").returncode == 0


def test_snapshot_is_stable_and_shows_a_change(hosts):
    ns = hosts.ns_of("tg")
    before = host_snapshot(ns)
    assert host_snapshot(ns) == before
    assert before["ethtool"]["eth1"]["channels"]["Current hardware settings"]["RX"] == "1"
    hostcmd.in_netns(ns, ["ip", "addr", "add", "198.18.254.1/30", "dev", "eth1"])
    diff = snapshot_diff(before, host_snapshot(ns))
    assert len(diff) == 1 and diff[0].startswith("addresses.eth1: (absent) -> ") and "198.18.254.1" in diff[0]
    hostcmd.in_netns(ns, ["ip", "addr", "del", "198.18.254.1/30", "dev", "eth1"])
    assert snapshot_diff(before, host_snapshot(ns)) == []


def test_two_testbeds(tmp_path):
    with HostChanges() as ch:
        eh = EmulatedHosts(ch, workdir=tmp_path, testbeds=2)
        inv = tomllib.loads(eh.build().read_text())
        assert list(inv["hosts"]) == ["tg", "dut", "tg2", "dut2"]
        assert inv["testbeds"]["tb2"] == {"traffic": "tg2", "sut": "dut2"}
        assert [i["link"] for i in inv["hosts"]["dut2"]["interfaces"]] == ["l3", "l4"]
        assert interfaces_seen(eh, "dut2") == {"lo", "mgmt0", "eth1", "eth2"}
        # l3 really joins tg2 and dut2 (and not the first testbed).
        for host, addr in (("tg2", "198.18.254.1/30"), ("dut2", "198.18.254.2/30")):
            hostcmd.in_netns(eh.ns_of(host), ["ip", "addr", "add", addr, "dev", "eth1"])
            hostcmd.in_netns(eh.ns_of(host), ["ip", "link", "set", "eth1", "up"])
        hostcmd.in_netns(eh.ns_of("tg2"), ["ping", "-c", "1", "-W", "3", "198.18.254.2"])


def test_teardown_restores_the_host(host_unchanged, tmp_path):
    # Held around both snapshots: no other measuring run changes the host in between.
    with lock.testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 0)):
        before = host_snapshot(None)
        with HostChanges() as ch:
            eh = EmulatedHosts(ch, workdir=tmp_path)
            eh.build()
            namespaces = [h.ns for h in eh.hosts.values()]
            assert ssh(eh, "tg", "true").returncode == 0
            assert our_sshds(tmp_path)
        assert ch.undo_errors == []
        assert not any(Path("/run/netns", ns).exists() for ns in namespaces)
        assert our_sshds(tmp_path) == []
        deadline = time.monotonic() + 5  # namespaces go away asynchronously, their veths with them
        while (diff := snapshot_diff(before, host_snapshot(None))) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert diff == []


KILLED_RUN = """
import sys, time
from pathlib import Path
from softnet.tools.changes import HostChanges
from softnet.testbed.emulated_hosts import EmulatedHosts
with HostChanges() as ch:
    eh = EmulatedHosts(ch, workdir=Path(sys.argv[1]))
    eh.build()
    print(" ".join(h.ns for h in eh.hosts.values()), flush=True)
    time.sleep(600)
"""


def test_kill_9_leftovers_are_cleaned(tmp_path):
    before = host_state()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, str(tmp_path)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        namespaces = proc.stdout.readline().split()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(namespaces) == 2
    assert all(Path("/run/netns", ns).exists() for ns in namespaces)
    sshds = our_sshds(tmp_path)
    assert sshds and set(sshds) <= set(processes_in(namespaces))  # orphaned, still serving
    clean = subprocess.run(softnet_cmd("clean"), capture_output=True, text=True, cwd=REPO)
    assert clean.returncode == 0, clean.stderr
    assert our_sshds(tmp_path) == []
    # `softnet clean` also removes other unclaimed leftovers (a concurrent
    # test's, say): nothing new may remain, but some old things may be gone.
    after = wait_host_state(before)
    assert set(after["netns"]) <= set(before["netns"]) and set(after["links"]) <= set(before["links"])
    assert not any(Path("/run/netns", ns).exists() for ns in namespaces)
    assert {k: v for k, v in after.items() if k not in ("netns", "links")} == \
        {k: v for k, v in before.items() if k not in ("netns", "links")}
    check = subprocess.run(softnet_cmd("clean", "--check"), capture_output=True, text=True, cwd=REPO)
    assert check.returncode == 0, check.stdout


def test_sshd_that_fails_to_start_is_reported(host_unchanged, tmp_path, monkeypatch):
    from softnet.errors import TestbedError
    from softnet.testbed import sshd

    real = sshd.write_config

    def broken(path, *a, **kw):
        real(path, *a, **kw)
        path.write_text(path.read_text() + "NoSuchOption yes\n")

    monkeypatch.setattr(sshd, "write_config", broken)
    started = time.monotonic()
    with pytest.raises(TestbedError, match="NoSuchOption"):
        with HostChanges() as ch:
            EmulatedHosts(ch, workdir=tmp_path).build()
    assert time.monotonic() - started < 5
    assert our_sshds(tmp_path) == []
