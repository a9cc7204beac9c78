"""The on-host change journal: real changes in a throwaway namespace are undone
by undo_all, by the reaper after a SIGKILL, and by `softnet clean`."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyroute2 import netns

from softnet.errors import TestbedError
from softnet.testbed.netns import OWNERS_DIR
from softnet.tools import journal
from softnet.tools.journal import Journal
from tests.conftest import needs_root, softnet_cmd

REPO = Path(__file__).resolve().parents[1]
DEV, PEER = "sn-jt0", "sn-jt0p"
XDP_OBJ = REPO / "native" / "build" / "xdp_pass.bpf.o"

# The "agent": journals each change, then makes it. argv: mode state_dir pid
# (mode undo: wait for a line on stdin, then undo_all; crash: spawn the
# reaper first; stale: no reaper). pid: a process to re-pin.
AGENT = r'''
import json, os, subprocess, sys, time
from pathlib import Path
from pyroute2 import IPRoute
from softnet.tools.journal import Journal
from softnet.tools.reaper import spawn_reaper

mode, state_dir, other = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
DEV, XDP = "sn-jt0", sys.argv[4]
j = Journal.open(state_dir, {"role": "jtest"})
reaper = spawn_reaper(os.getpid(), j.path) if mode == "crash" else None
ipr = IPRoute()
idx = ipr.link_lookup(ifname=DEV)[0]

def run(*argv):
    subprocess.run(argv, check=True, capture_output=True)

def sysfs(rel, value):
    path = Path("/sys/class/net", DEV, rel)
    j.record(f"{DEV} {rel} {value}", "file", path=str(path), old=path.read_text().strip())
    path.write_text(value)

j.record("veth sn-jtnew", "link_del", ifname="sn-jtnew")
ipr.link("add", ifname="sn-jtnew", kind="veth", peer="sn-jtnewp")
j.record(f"{DEV} gro on", "ethtool_features", ifname=DEV, features={"gro": "off"})
run("ethtool", "-K", DEV, "gro", "on")
j.record(f"{DEV} up", "link_state", ifname=DEV, up=False)
ipr.link("set", index=idx, state="up")
if XDP:
    j.record(f"{DEV} xdp pass", "xdp_off", ifname=DEV, prog_id=None)
    run("ip", "link", "set", "dev", DEV, "xdpdrv", "obj", XDP, "sec", "xdp")
sysfs("threaded", "1")
sysfs("queues/rx-0/rps_cpus", "1")
for address, plen in (("10.250.0.1", 24), ("fd00:250::1", 64)):
    j.record(f"{DEV} {address}/{plen}", "addr_del", ifname=DEV, address=address, prefixlen=plen)
    ipr.addr("add", index=idx, address=address, prefixlen=plen)
j.record(f"{DEV} neigh 10.250.0.2", "neigh_del", ifname=DEV, dst="10.250.0.2")
ipr.neigh("add", ifindex=idx, dst="10.250.0.2", lladdr="02:00:00:00:00:02", state=0x80)
old = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
j.record("ip_forward 1", "sysctl", key="net.ipv4.ip_forward", old=old)
Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
j.record(f"pin {other} to CPU 0", "affinity", pid=other, old=sorted(os.sched_getaffinity(other)))
os.sched_setaffinity(other, {0})
sleeper = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # our pipes must end with us
j.record(f"sleep {sleeper.pid}", "kill", pid=sleeper.pid)
print(json.dumps({"ready": True, "sleep": sleeper.pid, "reaper": reaper, "journal": str(j.path)}), flush=True)
if mode == "undo":
    sys.stdin.readline()
    print(json.dumps({"errors": j.undo_all()}), flush=True)
else:
    time.sleep(1000)
'''

pytestmark = [needs_root]


def in_ns(ns: str, *argv: str, **kw) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, check=True,
                          **kw).stdout


def ns_state(ns: str, other: int) -> dict:
    """Everything the agent script changes, as the kernel reports it."""
    sysfs = Path("/sys/class/net", DEV)
    return {"links": json.loads(in_ns(ns, "ip", "-j", "link")),
            "addrs": json.loads(in_ns(ns, "ip", "-j", "addr")),
            "neigh": json.loads(in_ns(ns, "ip", "-j", "neigh")),
            "ip_forward": in_ns(ns, "sysctl", "-n", "net.ipv4.ip_forward").strip(),
            "threaded": in_ns(ns, "cat", str(sysfs / "threaded")).strip(),
            "rps_cpus": in_ns(ns, "cat", str(sysfs / "queues/rx-0/rps_cpus")).strip(),
            "ethtool": in_ns(ns, "ethtool", "-k", DEV),
            "affinity": sorted(os.sched_getaffinity(other))}


def gone(pid: int) -> bool:
    return not journal.running(pid, None)


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := pred():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def ns():
    """A namespace with a veth pair, claimed like a live run's so that a
    concurrent `softnet clean` spares it (run id: the part after sn-)."""
    name = f"sn-jtest{secrets.token_hex(3)}"
    owner = OWNERS_DIR / f"{name[3:]}.owner"
    OWNERS_DIR.mkdir(parents=True, exist_ok=True)
    owner.write_text(str(os.getpid()))
    try:
        netns.create(name)
        in_ns(name, "ip", "link", "add", DEV, "type", "veth", "peer", "name", PEER)
        # once up, a device keeps its default qdisc when down again: not ours to undo
        in_ns(name, "ip", "link", "set", DEV, "up")
        in_ns(name, "ip", "link", "set", DEV, "down")
        yield name
    finally:
        for pid in processes_in(name):  # left by a failed test: they would keep it alive
            os.kill(pid, signal.SIGKILL)
        if Path("/run/netns", name).exists():
            netns.remove(name)
        owner.unlink(missing_ok=True)


def processes_in(name: str) -> list[int]:
    try:
        ino = os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return []
    pids = []
    for link in Path("/proc").glob("[0-9]*/ns/net"):
        try:
            if os.stat(link).st_ino == ino:
                pids.append(int(link.parts[2]))
        except OSError:
            pass
    return pids


@pytest.fixture
def base(tmp_path, monkeypatch):
    """Journals of these tests live apart from real agents' (and from a
    concurrent `softnet clean` of another suite)."""
    path = tmp_path / "agent"
    monkeypatch.setenv("SOFTNET_AGENT_BASE", str(path))
    return path


@pytest.fixture
def other():
    """A process of ours for the agent to re-pin."""
    proc = subprocess.Popen(["sleep", "1000"])
    yield proc.pid
    proc.kill()
    proc.wait()


def start_agent(ns: str, mode: str, state_dir: Path, other: int) -> tuple[subprocess.Popen, dict]:
    xdp = str(XDP_OBJ) if XDP_OBJ.exists() else ""
    proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", AGENT, mode, str(state_dir),
                             str(other), xdp], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=journal.reaper_env())
    line = proc.stdout.readline()
    if not line:
        proc.wait(10)
        raise AssertionError(f"agent failed: {proc.stderr.read()}")
    info = json.loads(line)
    info["pid"] = proc.pid  # ip netns exec execs python: the same process
    return proc, info


def diff(a, b, where: str = "") -> list[str]:
    """Where two snapshots differ (pytest's dict diff truncates nested lists)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in diff(a.get(k), b.get(k), f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def assert_restored(ns: str, other: int, before: dict) -> None:
    assert diff(before, ns_state(ns, other)) == []


def assert_changed(before: dict, now: dict) -> None:
    """The agent really changed each thing it journaled."""
    for key in before:
        assert now[key] != before[key], key


def kill_agent(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.communicate(timeout=10)


@pytest.mark.netns
def test_undo_all_restores_the_namespace(locked_host_unchanged, ns, base, other):
    before = ns_state(ns, other)
    proc, info = start_agent(ns, "undo", base / "a", other)
    assert_changed(before, ns_state(ns, other))
    out, err = proc.communicate("undo\n", timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == {"errors": []}
    assert_restored(ns, other, before)
    assert gone(info["sleep"])
    # finished: kept as a done file, nothing pending anywhere
    assert not (base / "a" / "journal.jsonl").exists()
    [done] = (base / "a").glob("journal-*.done.jsonl")
    lines = [json.loads(x) for x in done.read_text().splitlines()]
    assert lines[0]["journal"] == 1 and lines[0]["pid"] == info["pid"] and lines[0]["role"] == "jtest"
    entries = [x for x in lines if "op" in x]
    assert [x["undone"] for x in lines if "undone" in x] == [e["i"] for e in reversed(entries)]


@pytest.mark.netns
def test_reaper_restores_after_sigkill(locked_host_unchanged, ns, base, other):
    before = ns_state(ns, other)
    proc, info = start_agent(ns, "crash", base / "a", other)
    assert_changed(before, ns_state(ns, other))
    # the reaper names itself once its Python has started: give it that time
    wait_for(lambda: Path(f"/proc/{info['reaper']}/comm").read_text().strip() == "softnet-reaper", 10,
             "the reaper to name itself")
    kill_agent(proc)
    wait_for(lambda: ns_state(ns, other) == before and gone(info["sleep"]), 5, "the reaper to restore")
    wait_for(lambda: gone(info["reaper"]), 5, "the reaper to exit")
    assert not Path(info["journal"]).exists()
    assert "host restored" in (base / "a" / "reaper.log").read_text()


@pytest.mark.netns
def test_reaper_of_an_agent_that_undid_everything_just_exits(locked_host_unchanged, ns, base, other):
    proc, info = start_agent(ns, "undo", base / "a", other)
    # not "crash" mode: spawn the reaper for it from here, as the agent would
    reaper = subprocess.Popen([sys.executable, "-m", "softnet.tools.reaper", "--pid", str(info["pid"]),
                               "--journal", info["journal"]], env=journal.reaper_env())
    time.sleep(0.5)
    assert reaper.poll() is None  # waiting for the agent
    proc.communicate("undo\n", timeout=30)
    assert reaper.wait(5) == 0


@pytest.mark.netns
def test_clean_replays_a_stale_journal(locked_host_unchanged, ns, base, other):
    before = ns_state(ns, other)
    proc, info = start_agent(ns, "stale", base / "a", other)
    kill_agent(proc)
    changed = ns_state(ns, other)
    assert_changed(before, changed)

    check = subprocess.run(softnet_cmd("clean", "--check"), capture_output=True, text=True)
    assert check.returncode == 1, check.stderr
    assert info["journal"] in "".join(check.stdout.split()) and "ip_forward 1" in check.stdout
    assert ns_state(ns, other) == changed and not gone(info["sleep"])  # --check changes nothing

    clean = subprocess.run(softnet_cmd("clean", "--json"), capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
    removed = json.loads(clean.stdout)
    assert [j["path"] for j in removed["removed"]["journals"]] == [info["journal"]]
    assert removed["journal_errors"] == []
    assert_restored(ns, other, before)
    assert gone(info["sleep"])
    again = subprocess.run(softnet_cmd("clean", "--check"), capture_output=True, text=True)
    assert again.returncode == 0, again.stdout


@pytest.mark.netns
def test_replaying_twice_is_harmless(locked_host_unchanged, ns, base, other):
    before = ns_state(ns, other)
    proc, info = start_agent(ns, "stale", base / "a", other)
    kill_agent(proc)
    copy = base / "b" / "journal.jsonl"
    copy.parent.mkdir()
    shutil.copy(info["journal"], copy)
    # from the root namespace: replay joins the journal's namespace
    assert journal.replay(Path(info["journal"])) == []
    assert_restored(ns, other, before)
    assert gone(info["sleep"])
    assert journal.replay(Path(info["journal"])) == []  # finished: nothing to do
    _, pending = journal.read_journal(copy)
    assert len(pending) >= 10
    assert journal.replay(copy) == []  # every undo once more, on a restored namespace
    assert_restored(ns, other, before)
    assert not copy.exists()


@pytest.mark.netns
def test_journal_of_a_removed_namespace(locked_host_unchanged, base, tmp_path):
    """Its links and net sysctls went with the namespace; the rest is undone."""
    name = f"sn-jtest{secrets.token_hex(3)}"
    outside = tmp_path / "setting"
    outside.write_text("old\n")
    netns.create(name)
    try:
        code = ("import sys; from pathlib import Path; from softnet.tools.journal import Journal\n"
                "j = Journal.open(Path(sys.argv[1]), {})\n"
                "j.record('veth', 'link_del', ifname='sn-jtnew')\n"
                "j.record('fwd', 'sysctl', key='net.ipv4.ip_forward', old='0')\n"
                "j.record('setting', 'file', path=sys.argv[2], old='old')\n"
                "Path(sys.argv[2]).write_text('new')\n")
        in_ns(name, sys.executable, "-c", code, str(base / "a"), str(outside), env=journal.reaper_env())
    finally:
        netns.remove(name)
    path = base / "a" / "journal.jsonl"
    assert journal.stale_journals() == [path]
    assert journal.replay(path) == []
    assert outside.read_text() == "old\n"
    [done] = (base / "a").glob("journal-*.done.jsonl")
    marks = [json.loads(x) for x in done.read_text().splitlines() if "undone" in x]
    assert [m.get("skipped") for m in marks] == [None, journal.NETNS_GONE, journal.NETNS_GONE]


@pytest.mark.netns
@pytest.mark.skipif(not XDP_OBJ.exists(), reason="native/build/xdp_pass.bpf.o not built")
def test_xdp_off_detaches_only_the_recorded_program(locked_host_unchanged, ns, base):
    in_ns(ns, "ip", "link", "set", "dev", DEV, "xdpdrv", "obj", str(XDP_OBJ), "sec", "xdp")
    prog = json.loads(in_ns(ns, "ip", "-j", "link", "show", "dev", DEV))[0]["xdp"]["prog"]["id"]
    code = ("import sys; from pathlib import Path; from softnet.tools.journal import Journal\n"
            "j = Journal.open(Path(sys.argv[1]), {})\n"
            "j.record('xdp', 'xdp_off', ifname=sys.argv[2], prog_id=int(sys.argv[3]))\n"
            "print(j.undo_all())\n")
    agent = ["ip", "netns", "exec", ns, sys.executable, "-c", code, str(base / "a"), DEV]
    env = journal.reaper_env()
    assert subprocess.run([*agent, str(prog + 1000)], capture_output=True, text=True, env=env).stdout == "[]\n"
    assert "xdp" in json.loads(in_ns(ns, "ip", "-j", "link", "show", "dev", DEV))[0]  # not ours: kept
    assert subprocess.run([*agent, str(prog)], capture_output=True, text=True, env=env).stdout == "[]\n"
    assert "xdp" not in json.loads(in_ns(ns, "ip", "-j", "link", "show", "dev", DEV))[0]


# ---- the journal file itself (no namespace needed) -------------------------
def write_lines(path: Path, *objs, tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o) + "\n" for o in objs) + tail)
    return path


def header(pid: int, start: int | None) -> dict:
    return {"journal": 1, "pid": pid, "pid_start": start, "started_unix_s": 0,
            "netns_ino": journal.netns_ino(), "netns_cookie": journal.netns_cookie()}


def test_default_state_dir(monkeypatch):
    monkeypatch.delenv("SOFTNET_AGENT_STATE", raising=False)
    monkeypatch.delenv("SOFTNET_AGENT_BASE", raising=False)
    ino = os.stat("/proc/self/ns/net").st_ino
    assert journal.default_state_dir() == Path(f"/run/softnet/agent/net-{ino}")
    monkeypatch.setenv("SOFTNET_AGENT_STATE", "/tmp/x")
    assert journal.default_state_dir() == Path("/tmp/x")


def test_live_owner_is_refused_and_a_dead_ones_journal_is_stale(base, tmp_path):
    setting = tmp_path / "setting"
    setting.write_text("old\n")
    j = Journal.open(base / "a", {"run": "r1"})
    j.record("setting new", "file", path=str(setting), old="old")
    setting.write_text("new\n")
    with pytest.raises(TestbedError, match="in use by pid"):
        Journal.open(base / "a", {})
    assert journal.stale_journals() == []
    os.close(j._fd)  # the agent "dies": its journal is left as it is

    # a dead pid, and a live pid whose start time says it is another process
    dead = subprocess.Popen(["true"])
    dead.wait()
    write_lines(base / "b" / "journal.jsonl", header(dead.pid, 1), {"i": 0, "op": "file", "what": "x",
                                                                    "path": str(tmp_path / "b"), "old": "1"})
    write_lines(base / "c" / "journal.jsonl", header(os.getpid(), 1), {"i": 0, "op": "file", "what": "y",
                                                                       "path": str(tmp_path / "c"), "old": "1"})
    reused = j.header.model_copy(update={"pid_start": -1})  # ours, "reused": stand-in for a killed agent
    write_lines(j.path, reused.line(), *[e.line() for e in journal.read_journal(j.path)[1]])
    assert journal.stale_journals() == [base / n / "journal.jsonl" for n in "abc"]

    with pytest.raises(TestbedError, match="softnet clean"):
        Journal.open(base / "a", {})
    j2 = Journal.open(base / "a", {}, replay_stale=True)
    assert setting.read_text() == "old\n"
    assert j2.pending() == [] and j2.undo_all() == []
    assert len(list((base / "a").glob("journal-*.done.jsonl"))) == 2


def test_failures_stay_pending_and_the_rest_is_undone(base, tmp_path):
    good = tmp_path / "good"
    path = write_lines(base / "a" / "journal.jsonl", header(os.getpid(), -1),
                       {"i": 0, "op": "file", "what": "good", "path": str(good), "old": "1"},
                       {"i": 1, "op": "frobnicate", "what": "odd"},
                       tail='{"i": 2, "op": "file", "what": "torn')  # a writer killed mid-line
    good.write_text("2\n")
    errors = journal.replay(path)
    assert errors == ["undo 'odd': unknown op 'frobnicate'"]
    assert good.read_text() == "1\n"
    _, pending = journal.read_journal(path)
    assert [e.i for e in pending] == [1]  # retried by the next replay / softnet clean
    assert '{"undo_failed": 1, "error": "unknown op \'frobnicate\'"}' in path.read_text().splitlines()
    assert journal.stale_journals() == [path]


def test_record_checks_its_entries_and_keeps_five_done_files(base, tmp_path):
    (tmp_path / "f").write_text("new\n")
    for n in range(7):
        with Journal.open(base / "a", {}) as j:
            with pytest.raises(ValueError, match="unknown journal op"):
                j.record("x", "reboot")
            with pytest.raises(ValueError, match="needs old"):
                j.record("x", "sysctl", key="net.ipv4.ip_forward")
            assert j.record("x", "file", path=str(tmp_path / "f"), old=str(n)) == 0
            assert [e.what for e in j.pending()] == ["x"]  # on disk when record returns
    assert len(list((base / "a").glob("journal-*.done.jsonl"))) == 5
    assert (tmp_path / "f").read_text() == "6\n"
    with pytest.raises(TestbedError, match="closed"):
        j.record("x", "file", path=str(tmp_path / "f"), old="1")


@pytest.mark.netns
def test_clean_spares_the_root_links_of_a_live_run(locked_host_unchanged):
    """Emulated hosts put management veths in the root namespace: a concurrent
    `softnet clean` (this suite's, for one) must not cut a live run off."""
    from softnet.testbed.cleanup import leftover_links

    run_id = secrets.token_hex(3)
    link, owner = f"sn{run_id}z", OWNERS_DIR / f"{run_id}.owner"
    OWNERS_DIR.mkdir(parents=True, exist_ok=True)
    owner.write_text(str(os.getpid()))
    subprocess.run(["ip", "link", "add", link, "type", "veth", "peer", "name", f"sn{run_id}y"], check=True)
    try:
        assert link not in leftover_links()
        owner.unlink()
        assert link in leftover_links()
    finally:
        subprocess.run(["ip", "link", "del", link], check=True)
        owner.unlink(missing_ok=True)


# Lines as the journal has always written them, one per undo op: each reads
# as its op's model and writes back unchanged (an older journal still replays).
EVERY_OP = [
    {"i": 0, "op": "sysctl", "what": "s", "key": "net.ipv4.ip_forward", "old": "0"},
    {"i": 1, "op": "file", "what": "f", "path": "/sys/class/net/x/threaded", "old": "0"},
    {"i": 2, "op": "affinity", "what": "a", "pid": 1, "pid_start": 5, "old": [0, 1]},
    {"i": 3, "op": "kill", "what": "k", "pid": 1, "pid_start": 5},
    {"i": 4, "op": "link_del", "what": "l", "ifname": "sn0"},
    {"i": 5, "op": "link_state", "what": "u", "ifname": "sn0", "up": False, "qdisc": "noop"},
    {"i": 6, "op": "addr_del", "what": "ad", "ifname": "sn0", "address": "10.0.0.1", "prefixlen": 24},
    {"i": 7, "op": "neigh_del", "what": "n", "ifname": "sn0", "dst": "10.0.0.2"},
    {"i": 8, "op": "ethtool_features", "what": "e", "ifname": "sn0", "features": {"gro": "off"}},
    {"i": 9, "op": "ethtool_set", "what": "g", "ifname": "sn0", "flag": "-L", "old": {"combined": "2"}},
    {"i": 10, "op": "xdp_off", "what": "x", "ifname": "sn0", "prog_id": None},
    {"i": 11, "op": "device_state", "what": "d", "ifname": "sn0",
     "state": {"up": True, "qdisc": "mq", "mtu": 1500, "gro": "on", "threaded": "0", "rps": {"rx-0": "0"},
               "xdp": False}},
    {"i": 12, "op": "lab_netns", "what": "ns", "ns": "sn-x", "ifnames": ["eth1", "eth2"]},
]


def test_every_op_reads_typed_and_writes_back_the_same_line(tmp_path):
    path = write_lines(tmp_path / "journal.jsonl", header(os.getpid(), 1), *EVERY_OP, {"undone": 4},
                       {"undo_failed": 3, "error": "x"})
    head, pending = journal.read_journal(path)
    assert head.pid == os.getpid() and head.owner() == {}
    assert [e.i for e in pending] == [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12]
    assert [e.line() for e in pending] == [e for e in EVERY_OP if e["i"] != 4]
    assert all(type(e).__name__ != "Unreadable" for e in pending)
    bound = {e.op for e in pending if e.netns_bound()}
    assert bound == {"sysctl", "file", "link_state", "addr_del", "neigh_del", "ethtool_features",
                     "ethtool_set", "xdp_off", "device_state", "lab_netns"}
