"""Real hosts over SSH, on emulated hosts: each host a network
namespace running its own sshd, the data links veth pairs between them. One
kernel, so these tests prove the plumbing, the safety rules and the cleanup,
not SUT numbers."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import duckdb
import pytest

from softnet.errors import InputError, SoftnetError, TestbedError
from softnet.hosts import inventory as inv_mod
from softnet.hosts.agent import PROTOCOL_VERSION
from softnet.campaign.trial import trial
from softnet.hosts.remote_trial import RemoteTestbed
from softnet.hosts.session import AgentSession, controller_id, run
from softnet.results.live import read_live
from softnet.results.trial import TrialSpec
from softnet.tools.changes import HostChanges
from softnet.tools.snapshot import host_snapshot, snapshot_diff
from tests.conftest import host_state, wait_host_state

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "inventory.toml"
SOFTNET = str(Path(sys.executable).parent / "softnet")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def softnet(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([SOFTNET, *args], capture_output=True, text=True, timeout=timeout)


# ---- the inventory: every error names its field --------------------------------
def example() -> dict:
    return tomllib.loads(EXAMPLE.read_text())


def test_example_inventory_makes_its_testbed():
    inv = inv_mod.load(EXAMPLE)
    ports = inv.ports("tb1")
    assert {r: (p.host, p.iface.name) for r, p in ports.items()} == {
        "gen_out": ("tg", "ens1f0"), "sut_in": ("dut", "ens2f0"), "sut_out": ("dut", "ens2f1"),
        "sink_in": ("tg", "ens1f1")}


@pytest.mark.parametrize("mutate, field, words", [
    (lambda d: d["hosts"]["dut"]["interfaces"][0].update(mac="3c:fd:fe:00:00"), "hosts.dut.interfaces.0.mac",
     "not a MAC address"),
    (lambda d: d["hosts"]["tg"]["interfaces"][1].update(pci="3b:00.1"), "hosts.tg.interfaces.1.pci",
     "not a PCI address"),
    (lambda d: d["hosts"]["tg"]["interfaces"][0].update(role="gen"), "hosts.tg.interfaces.0.role", "gen_out"),
    (lambda d: d["hosts"]["tg"]["interfaces"][0].pop("allow_physical"), "hosts.tg.interfaces.0.allow_physical",
     "allow_physical = true"),
    (lambda d: d["hosts"]["dut"]["interfaces"][1].update(link="l1"), "hosts.tg.interfaces.0.link",
     "joins 3 interface(s)"),
    (lambda d: d["testbeds"]["tb1"].update(sut="dut9"), "testbeds.tb1.sut", "not in [hosts]"),
    (lambda d: d["hosts"]["dut"]["interfaces"][0].update(role="sut_out"), "hosts.dut.interfaces",
     "role = \"sut_in\""),
    (lambda d: d["hosts"]["dut"].update(port=70000), "hosts.dut.port", "less than or equal"),
    (lambda d: d["hosts"]["dut"].update(colour="red"), "hosts.dut.colour", "Extra inputs"),
    (lambda d: d["testbeds"]["tb1"].update(sink="rx"), "testbeds.tb1.sink", "not in [hosts]"),
    (lambda d: d["testbeds"]["tb1"].update(sink="dut"), "hosts.dut.interfaces", "on its sink host"),
])
def test_inventory_errors_name_the_field(mutate, field, words):
    data = example()
    mutate(data)
    with pytest.raises(InputError) as err:
        inv_mod.parse(data, "inv.toml")
    assert err.value.field == f"inv.toml: {field}", err.value
    assert words in err.value.message


def test_a_sink_host_of_its_own_is_the_latency_labs_and_refused_by_trials():
    """sink_in moved to a third host: the testbed is made of three hosts, and a
    trial (one-way delays on two clocks) refuses it by its field."""
    from softnet.hosts.remote_trial import RemoteTestbed

    data = example()
    rx_if = data["hosts"]["tg"]["interfaces"].pop(1)
    data["hosts"]["rx"] = {**{k: v for k, v in data["hosts"]["tg"].items() if k != "interfaces"},
                           "interfaces": [rx_if]}
    data["testbeds"]["tb1"]["sink"] = "rx"
    inv = inv_mod.parse(data, "inv.toml")
    assert {r: p.host for r, p in inv.ports("tb1").items()} == {
        "gen_out": "tg", "sut_in": "dut", "sut_out": "dut", "sink_in": "rx"}
    with pytest.raises(InputError) as err:
        RemoteTestbed(inv, "tb1")
    assert err.value.field == "testbeds.tb1.sink" and "one clock" in err.value.message


def test_inventory_cli_errors_name_file_and_field(tmp_path):
    bad = tmp_path / "inv.toml"
    bad.write_text(EXAMPLE.read_text().replace('mac = "3c:fd:fe:00:00:20"', 'mac = "nonsense"'))
    r = softnet("inventory", "check", str(bad))
    assert r.returncode == 2
    assert f"{bad}: hosts.dut.interfaces.0.mac" in r.stderr and "Traceback" not in r.stderr
    r = softnet("inventory", "check", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "no such file" in r.stderr


# ---- the protocol, against asyncssh's in-process server ---------------------------
@pytest.fixture
def inprocess_agent(tmp_path):
    """An asyncssh server in this process whose sessions run `softnet agent
    --stdio` (with its own state dir): the controller's session talks to it
    as it would over the network."""
    import asyncssh

    server_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    (tmp_path / "id").write_bytes(client_key.export_private_key())
    (tmp_path / "id").chmod(0o600)
    (tmp_path / "known_hosts").write_text(f"[127.0.0.1]:PORT {server_key.export_public_key().decode()}")
    state = tmp_path / "state"
    lease = {"s": 10}

    async def handle(process):
        argv = [SOFTNET, "agent", "--stdio", "--state-dir", str(state), "--lease-s", str(lease["s"])]
        local = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        await process.redirect(stdin=local.stdin, stdout=local.stdout, stderr=local.stderr)
        await process.stdout.drain()
        code = await asyncio.get_running_loop().run_in_executor(None, local.wait)
        process.exit(code)

    class Server(asyncssh.SSHServer):
        def begin_auth(self, username):
            return True

        def public_key_auth_supported(self):
            return True

        def validate_public_key(self, username, key):
            return key.public_data == client_key.public_data

    async def start():
        return await asyncssh.create_server(Server, "127.0.0.1", 0, server_host_keys=[server_key],
                                            process_factory=handle, encoding=None)

    server = run(start(), 10)
    port = server.sockets[0].getsockname()[1]
    kh = tmp_path / "known_hosts"
    kh.write_text(kh.read_text().replace("PORT", str(port)))
    host = inv_mod.Host(address="127.0.0.1", port=port, identity=str(tmp_path / "id"), known_hosts=str(kh),
                        softnet=SOFTNET)
    yield host, lease

    async def stop():  # on the session's loop: asyncio servers are not thread-safe
        server.close()
        await server.wait_closed()

    run(stop(), 10)


@needs_root
def test_protocol_hello_check_and_errors(inprocess_agent):
    host, _ = inprocess_agent
    s = AgentSession("local", host).open()
    try:
        assert s.hello.version == PROTOCOL_VERSION and "journal" in s.hello.capabilities
        assert s.hello.host.kernel == os.uname().release
        assert abs(s.clock.offset_s) < 0.05 and s.clock.uncertainty_s < 0.05  # one clock here
        with pytest.raises(TestbedError, match="unknown op 'fly'.*accepted: apply"):
            s.call("fly")
        with pytest.raises(TestbedError, match="protocol version 99"):
            s.call("hello", version=99)
        lo_mac = Path("/sys/class/net/lo/address").read_text().strip()
        found = s.call("check", ports={"0": {"field": "hosts.x.interfaces.0", "name": "lo", "mac": lo_mac,
                                             "pci": "0000:00:01.0", "driver": "", "allow_physical": False}})
        fields = {p["field"] for p in found["refusals"]}
        assert fields == {"hosts.x.interfaces.0.pci", "hosts.x.interfaces.0.allow_physical"}
        assert found["facts"]["0"]["mac"] == lo_mac
        # a refusal to change the host names the inventory field
        with pytest.raises(InputError) as err:
            s.call("apply", role="sut", ports={r: {"field": f"hosts.x.interfaces.{i}", "name": "lo", "mac": lo_mac,
                                                  "pci": "", "driver": "", "allow_physical": False}
                                              for i, r in enumerate(("sut_in", "sut_out"))},
                   sut="ipv4-fwd", gen_mac=lo_mac, sink_mac=lo_mac, sut_cpus=[0])
        assert err.value.field == "hosts.x.interfaces.0.allow_physical"
        assert s.call("undo")["undone"] == []
    finally:
        s.close()


@needs_root
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_agent_answers_a_signal_by_undoing_and_exiting_5(tmp_path, sig):
    """A signal is the agent's cue to undo and end (exit 5, said on stderr),
    not an exception that escapes it (which would leave the undo to its reaper)."""
    import signal
    import time

    proc = subprocess.Popen([SOFTNET, "agent", "--stdio", "--state-dir", str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdin.write(json.dumps({"id": 1, "op": "hello", "version": PROTOCOL_VERSION}) + "\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["ok"]
    time.sleep(0.2)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 5 and "agent ends: signal" in err and "Traceback" not in err, err


def test_agent_ends_when_its_lease_lapses(inprocess_agent):
    host, lease = inprocess_agent
    lease["s"] = 1
    s = AgentSession("local", host.model_copy(update={"lease_s": 1.0})).open()
    try:
        import time

        time.sleep(2.5)
        with pytest.raises(TestbedError, match="the agent ended.*lease of 1 s lapsed"):
            s.call("time", timeout=5)
    finally:
        s.close(undo=False)


# ---- two emulated hosts --------------------------------------------------------------
@pytest.fixture(scope="module")
def hosts():
    """Two emulated testbeds (tg, dut and tg2, dut2); the host is as it was after."""
    from softnet.testbed.emulated_hosts import EmulatedHosts

    from softnet.testbed import lock

    if os.geteuid() != 0:
        pytest.skip("needs root")
    # held around both looks at the host, so that another suite's testbed is
    # not half-seen (this module's own local testbed takes it again for free)
    with lock.testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 0)):
        before = host_state()
        with HostChanges() as changes:
            eh = EmulatedHosts(changes, testbeds=2)
            path = eh.build()
            yield eh, path
        assert not changes.undo_errors
        assert wait_host_state(before) == before


@pytest.fixture(autouse=True)
def previous_agents_gone():
    """Agents of an earlier test (and their reapers) exit just after their
    sessions close; a snapshot taken before they are gone would list them."""
    import time

    def reapers() -> bool:
        for c in Path("/proc").glob("[0-9]*/comm"):
            try:
                if c.read_text().strip() == "softnet-reaper":
                    return True
            except OSError:  # gone meanwhile
                pass
        return False

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and reapers():
        time.sleep(0.1)
    yield


def snapshots(eh, names=("tg", "dut")) -> dict:
    return {h: host_snapshot(eh.ns_of(h)) for h in names}


def same(before: dict, after: dict) -> list[str]:
    return [f"{h}: {d}" for h in before for d in snapshot_diff(before[h], after[h])]


def restored(eh, before: dict, timeout: float = 5.0) -> list[str]:
    """The differences left once the hosts settle (agents and their reapers
    exit just after the session closes); [] when restored."""
    import time

    deadline = time.monotonic() + timeout
    while (diff := same(before, snapshots(eh, tuple(before)))) and time.monotonic() < deadline:
        time.sleep(0.1)
    return diff


@pytest.mark.netns
@pytest.mark.slow
def test_two_host_trial_gives_the_local_trial_keys_and_restores_both_hosts(hosts):
    from softnet.campaign.trial import run_trial
    from softnet.testbed.local import LocalTestbed

    eh, path = hosts
    spec = TrialSpec(rate_pps=50e3, duration_s=1.0, warmup_s=0.3, sample_interval_s=0.25)
    before = snapshots(eh)
    live = []
    with RemoteTestbed(inv_mod.load(path), "tb1") as tb:
        during = snapshots(eh)
        remote = trial(tb, spec, keep_raw=True, live=live.append)
    assert restored(eh, before) == []
    # the SUT host's sampler, asked while the trial ran: its interfaces' rates, its CPUs
    assert len(live) >= 3 and all(s.per_cpu for s in live)
    offered = sorted(s.offered_pps or 0 for s in live)  # the median: a stall's catch-up inflates one interval
    assert 0.7 * spec.rate_pps <= offered[len(offered) // 2] <= 1.3 * spec.rate_pps, offered
    assert same(before, during)  # it did change them while it ran
    with HostChanges() as changes:
        ltb = LocalTestbed(changes)
        local = run_trial(ltb, ltb.build(), spec, changes)
    # the local trial's keys (one procedure measured both), and which hosts ran it
    assert set(local) <= set(remote), set(local) - set(remote)
    assert set(remote) - set(local) == {"hosts", "window_skew_ms", "raw_trial"}  # kept: keep_raw
    assert remote["sent_pkts"] == spec.window_pkts
    assert remote["received_pkts"] > 0.9 * spec.window_pkts  # forwarded by the dut's kernel
    for role, name in (("traffic", "tg"), ("sut", "dut")):
        h = remote["hosts"][role]
        assert h["name"] == name and h["kernel"] == os.uname().release and h["softnet_version"]
        assert {f["driver"] for f in h["interfaces"].values()} == {"veth"}
        assert h["host_changes_applied"]
    applied = remote["hosts"]["sut"]["host_changes_applied"]
    # the SUT's personality in a namespace of its own holding the NICs (softnet.testbed.sut_lab)
    assert any(c.startswith("netns sn-") and c.endswith("-sut holding eth1, eth2") for c in applied), applied
    assert any(c.startswith("sysctl sn-") and "net.ipv4.ip_forward=1 (was 0)" in c for c in applied), applied
    assert 0 <= remote["window_skew_ms"] < 100
    raw = remote["raw_trial"]
    assert raw["window"]["start"] and raw["window"]["end"]  # taken on the SUT host, on its clock
    assert raw["testbed"]["remote"]["hosts"] == {"traffic": "tg", "sut": "dut"}


@pytest.mark.netns
def test_inventory_check_names_a_wrong_mac_pci_or_driver(hosts, tmp_path):
    eh, path = hosts
    r = softnet("inventory", "check", str(path), "--no-doctor", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    found = json.loads(r.stdout)
    assert found["problems"] == []
    # which NIC knobs each interface takes (the emulated SUT ports: veth with two receive queues)
    assert {f["name"]: f["nic_knobs"] for f in found["hosts"]["dut"]["interfaces"].values()} == {
        "eth1": ["rx_channels", "tx_channels"], "eth2": ["rx_channels", "tx_channels"]}
    text = path.read_text()
    wrong = (text.replace('mac = "02:00:00:02:00:01"', 'mac = "02:00:00:02:00:09"', 1)
             .replace('driver = "veth"', 'driver = "i40e"', 1)
             .replace('pci = ""', 'pci = "0000:3b:00.0"', 2))
    bad = tmp_path / "wrong.toml"
    bad.write_text(wrong)
    inv = inv_mod.load(bad)
    r = softnet("inventory", "check", str(bad), "--no-doctor", "--json")
    assert r.returncode == 1
    fields = {p["field"] for p in json.loads(r.stdout)["problems"]}
    dut_mac = next(i for i, f in enumerate(inv.hosts["dut"].interfaces) if f.mac == "02:00:00:02:00:09")
    assert f"hosts.dut.interfaces.{dut_mac}.mac" in fields
    assert "hosts.tg.interfaces.0.driver" in fields and "hosts.tg.interfaces.0.pci" in fields
    r = softnet("inventory", "check", str(bad), "--no-doctor")  # for people: the field, in 80 columns
    assert r.returncode == 1 and f"hosts.dut.interfaces.{dut_mac}.mac" in r.stdout
    assert "dut eth1 (veth) takes NIC knobs: rx_channels, tx_channels" in r.stdout


@pytest.mark.netns
def test_inventory_check_runs_doctor_on_each_host(hosts):
    eh, path = hosts
    r = softnet("inventory", "check", str(path), "--json", timeout=300)
    found = json.loads(r.stdout)
    assert r.returncode == 0, found["problems"]
    for name in ("tg", "dut"):
        names = {c["name"]: c["ok"] for c in found["hosts"][name]["doctor"]}
        assert names["root"] is True and names["threaded_napi"] is True


@pytest.mark.netns
def test_agent_refuses_the_management_interface(hosts, tmp_path):
    eh, path = hosts
    data = tomllib.loads(path.read_text())
    mgmt_mac = subprocess.run(["ip", "netns", "exec", eh.ns_of("dut"), "cat", "/sys/class/net/mgmt0/address"],
                              capture_output=True, text=True, check=True).stdout.strip()
    iface = data["hosts"]["dut"]["interfaces"][0]
    assert iface["role"] == "sut_in"
    iface.update(name="mgmt0", mac=mgmt_mac)
    before = snapshots(eh)
    with pytest.raises(InputError) as err:
        with RemoteTestbed(inv_mod.parse(data, "mgmt.toml"), "tb1"):
            pass
    assert err.value.field == "hosts.dut.interfaces.0.name"
    assert "management connection" in err.value.message and "never touches it" in err.value.message
    assert restored(eh, before) == []


@pytest.mark.netns
def test_agent_refuses_an_interface_not_allowed(hosts):
    """The inventory refuses it first; the agent refuses it too, on its own."""
    eh, path = hosts
    inv = inv_mod.load(path)
    before = snapshots(eh, ("dut",))
    s = AgentSession("dut", inv.hosts["dut"]).open()
    try:
        ports = {f.role: {"field": f"hosts.dut.interfaces.{i}", **f.model_dump(), "allow_physical": False}
                 for i, f in enumerate(inv.hosts["dut"].interfaces)}
        with pytest.raises(InputError) as err:
            s.call("apply", role="sut", ports=ports, sut="ipv4-fwd", gen_mac="02:00:00:00:00:01",
                   sink_mac="02:00:00:00:00:02", sut_cpus=[1])
        assert err.value.field.endswith(".allow_physical") and "not created by softnet" in err.value.message
    finally:
        s.close()
    assert restored(eh, before) == []


@pytest.mark.netns
def test_a_second_user_is_told_who_holds_the_testbed(hosts):
    eh, path = hosts
    inv = inv_mod.load(path)
    with RemoteTestbed(inv, "tb1"):
        with pytest.raises(SoftnetError) as err:
            with RemoteTestbed(inv, "tb1"):
                pass
    msg = str(err.value)
    assert "reserved by" in msg and controller_id() in msg and "softnet testbed tb1" in msg


@pytest.mark.netns
@pytest.mark.slow
def test_campaign_runs_across_two_emulated_testbeds(hosts, tmp_path):
    eh, path = hosts
    spec = tmp_path / "two.toml"
    spec.write_text(f"""
name = "two-testbeds"
[testbed]
sut = "ipv4-fwd"
inventory = "{path}"
testbeds = ["tb1", "tb2"]
[method]
loads = ["20kpps", "40kpps"]
runs = 1
duration_s = 0.3
warmup_s = 0.1
""")
    before = snapshots(eh, ("tg", "dut", "tg2", "dut2"))
    results = tmp_path / "results"
    r = softnet("run", str(spec), "--results", str(results), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    assert restored(eh, before) == []
    db = duckdb.connect(str(results / "softnet.duckdb"), read_only=True)
    rows = db.execute("SELECT cell_id, load_index, result_json FROM trials ORDER BY cell_id, load_index").fetchall()
    assert [(c, li) for c, li, _ in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    on = {c: json.loads(j)["provenance"]["spec"]["testbed"] for c, _, j in rows}
    assert on == {0: "tb1", 1: "tb2"}
    for c, _, j in rows:
        assert json.loads(j)["received_pkts"] > 0


def leave_stale_journal(ns: str) -> None:
    """An agent that died before its reaper ran: a journalled sysctl change
    in host ``ns`` that nobody undid."""
    code = ("import os; from pathlib import Path; from softnet.tools.journal import Journal, default_state_dir\n"
            "j = Journal.open(default_state_dir(), {'controller': 'test'}, replay_stale=True)\n"
            "j.record('sysctl net.ipv4.ip_forward=1 (was 0)', 'sysctl', key='net.ipv4.ip_forward', old='0')\n"
            "Path('/proc/sys/net/ipv4/ip_forward').write_text('1')\n"
            "os._exit(0)\n")
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], check=True, cwd=ROOT, timeout=30)


def ip_forward(eh, host: str) -> str:
    return subprocess.run(["ip", "netns", "exec", eh.ns_of(host), "cat", "/proc/sys/net/ipv4/ip_forward"],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.netns
def test_a_dead_agents_journal_stops_a_run_until_clean_replays_it(hosts):
    eh, path = hosts
    before = snapshots(eh)
    leave_stale_journal(eh.ns_of("dut"))
    assert ip_forward(eh, "dut") == "1"
    with pytest.raises(TestbedError, match="host dut: a killed run left changes.*sysctl net.ipv4.ip_forward=1"):
        with RemoteTestbed(inv_mod.load(path), "tb1"):
            pass
    r = softnet("clean", "--inventory", str(path), "--check")
    assert r.returncode == 1 and "dut: found journal of a dead agent, 1 changes" in r.stdout
    assert "tg: nothing left by softnet" in r.stdout
    r = softnet("clean", "--inventory", str(path))
    assert r.returncode == 0 and "dut: replayed journal" in r.stdout, r.stdout + r.stderr
    assert ip_forward(eh, "dut") == "0"
    assert softnet("clean", "--inventory", str(path), "--check").returncode == 0
    assert restored(eh, before) == []


@pytest.mark.netns
@pytest.mark.slow
def test_host_prepare_ships_softnet_and_builds_the_native_tools(hosts, tmp_path):
    eh, path = hosts
    target = tmp_path / "remote-softnet"
    inv = tmp_path / "inv.toml"
    inv.write_text(path.read_text().replace(f'softnet = "{SOFTNET}"', f'softnet = "{target}/.venv/bin/softnet"'))
    r = softnet("host", "prepare", str(inv), "--hosts", "dut", "--steps", "native", timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    assert f"dut: softnet 0.1.0 in {target} (native," in " ".join(r.stdout.split())
    gen = target / "native" / "build" / "softnet-gen"
    help_text = subprocess.run(["ip", "netns", "exec", eh.ns_of("dut"), str(gen), "--help"],
                               capture_output=True, text=True, timeout=30).stdout
    assert "usage: softnet-gen" in help_text
    assert (target / "softnet" / "hosts" / "agent.py").read_text() == (ROOT / "softnet/hosts/agent.py").read_text()
    r = softnet("host", "prepare", str(path), "--hosts", "nohost")
    assert r.returncode == 2 and "--hosts: 'nohost' is not in" in r.stderr
    inv.write_text(path.read_text().replace(f'softnet = "{SOFTNET}"', 'softnet = "softnet"'))
    r = softnet("host", "prepare", str(inv), "--hosts", "dut", "--steps", "native")
    assert r.returncode == 2 and "hosts.dut.softnet" in r.stderr and "DIR/.venv/bin/softnet" in r.stderr
    r = softnet("host", "prepare", str(path), "--hosts", "dut", "--steps", "compile")
    assert r.returncode == 2 and "--steps" in r.stderr and "accepted: apt, venv, native" in r.stderr


@pytest.mark.netns
@pytest.mark.slow
def test_killed_remote_campaign_resumes_without_loss_or_repeats(hosts, tmp_path):
    """kill -9 of the controller mid-campaign: the agents restore the hosts by
    themselves, and the rerun measures only what is missing."""
    import signal
    import time

    eh, path = hosts
    spec = tmp_path / "resume.toml"
    spec.write_text(f"""
name = "remote-resume"
[testbed]
inventory = "{path}"
name = "tb1"
[method]
loads = ["20kpps", "40kpps"]
runs = 2
duration_s = 0.3
warmup_s = 0.1
""")
    before = snapshots(eh)
    results = tmp_path / "results"
    proc = subprocess.Popen([SOFTNET, "run", str(spec), "--results", str(results), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while len(list((results / "raw").glob("*/cell*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    first = {p.name: json.loads(p.read_text())["result"]["started_unix_s"] for p in (results / "raw").glob("*/cell*.json")}
    assert 2 <= len(first) < 4
    (folder,) = (results / "raw").glob("*/")
    left = read_live(folder)  # what a viewer reads: the run is gone without finishing
    assert left is not None and left.done >= 1 and not left.writer_alive()
    # the controller's death closed the SSH sessions: each agent undid its host
    assert restored(eh, before, timeout=15) == []
    r = softnet("run", str(spec), "--results", str(results), "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    db = duckdb.connect(str(results / "softnet.duckdb"), read_only=True)
    keys = db.execute("SELECT load_index, run_index, started_unix_s FROM trials").fetchall()
    assert sorted((k[0], k[1]) for k in keys) == [(li, ri) for li in range(2) for ri in range(2)]
    stored = {f"cell000-load{li:03d}-run{ri:03d}.json": t for li, ri, t in keys}
    assert all(stored[name] == t for name, t in first.items())
    assert restored(eh, before) == []


@pytest.mark.netns
def test_inventory_check_names_housekeeping_cpus_the_host_lacks(hosts, tmp_path):
    eh, path = hosts
    bad = tmp_path / "cpus.toml"
    bad.write_text(path.read_text().replace("housekeeping_cpus = [0]", "housekeeping_cpus = [0, 64]", 1))
    r = softnet("inventory", "check", str(bad), "--no-doctor", "--json")
    assert r.returncode == 1
    (problem,) = json.loads(r.stdout)["problems"]
    assert problem["field"] == "hosts.tg.housekeeping_cpus" and "CPU 64 is not usable" in problem["error"]


@pytest.mark.netns
@pytest.mark.slow
def test_remote_trial_profiles_the_sut_host(hosts):
    """The eBPF profiler runs on the SUT host and is read at the window edges
    there; the controller evaluates its stages as for a local trial."""
    eh, path = hosts
    with RemoteTestbed(inv_mod.load(path), "tb1") as tb:
        r = trial(tb, TrialSpec(rate_pps=50e3, duration_s=1.0, warmup_s=0.3, profile=True),
                             keep_raw=True)
    p = r["profile"]
    assert p["plan"] and 0.9 < p["window_s"] / 1.0 < 1.1 and p["stages"]
    ids = r["raw_trial"]["testbed"]["interface_ids"]
    assert [name for _, _, name in ids] == ["sut_in (dut/eth1)", "sut_out (dut/eth2)"]
    assert "ebpf" in json.dumps(r["kernel_samples"])  # the profiler's times at every sample
    # the SUT host's NAPI kthreads, read by its agent over the trial and at the window's edges there
    cpu = r["sut_thread_cpu"]
    assert 0 < cpu["window_ns"] < cpu["ns"] and 0 < cpu["window_runs"] < cpu["runs"], cpu
    # the SUT host's kernel stacks, sampled and named there (its kallsyms), read at the window's edges
    f = p["functions"]
    assert f["cpus"] == [1] and 0.9 < f["window_s"] < 1.1 and f["busy_samples"] > 0
    incl = {row["function"]: row["incl_samples"] for row in f["functions"]}
    # ip_forward itself tail-calls into ip_output and seldom holds a frame: read the IPv4 receive path
    ipv4 = {n: k for n, k in incl.items() if n.startswith("ip_")}
    assert incl.get("__napi_poll", 0) > 0 and ipv4, sorted(incl)[:60]


@pytest.mark.netns
@pytest.mark.slow
def test_search_runs_on_two_emulated_testbeds(hosts, tmp_path):
    eh, path = hosts
    before = snapshots(eh, ("tg", "dut", "tg2", "dut2"))
    r = softnet("search", "--inventory", str(path), "--testbed", "tb1,tb2", "--goals", "ndr", "--width", "0.2",
                "--duration", "0.3", "--initial-duration", "0.3", "--warmup", "0.1", "--max-trials", "4",
                "--min-load", "10kpps", "--max-load", "200kpps", "--results", str(tmp_path / "r"), "--json",
                "--latency-fractions", "0.5", "--latency-duration", "0.3", timeout=300)
    assert r.returncode == 0, r.stderr
    searches = json.loads(r.stdout)["searches"]
    assert sorted(s["label"] for s in searches) == ["name=tb1", "name=tb2"]
    assert all(1 <= rep["trial_count"] <= 4 for s in searches for rep in s["repeats"])
    # latency under load at half the NDR's lower bound, measured on the same hosts after each search that
    # found one (a search whose every trial lost packets on this VM has none)
    for s in searches:
        bound = any(rep["lower_bound_pps"] is not None for rep in s["repeats"])
        assert bool(s["latency"]) == bound, s
        assert all(lat["fraction"] == 0.5 and lat["repeats"] >= 1 and lat["runs"] for lat in s["latency"]), s["latency"]
    assert restored(eh, before) == []
    r = softnet("search", "--inventory", str(path), "--testbed", "tb7")
    assert r.returncode == 2 and "--testbed: 'tb7' is not in" in r.stderr


@pytest.mark.netns
@pytest.mark.slow
def test_remote_trial_with_two_generators_and_many_sources(hosts):
    """Two generator CPUs on the traffic host (streams of one schedule) and 16
    source addresses x 4 ports (RSS spread): every seq once, per stream."""
    eh, path = hosts
    spec = TrialSpec(rate_pps=100e3, duration_s=1.0, warmup_s=0.3, gen_cpus=[0, 1], src_ips=16, flows=4)
    with RemoteTestbed(inv_mod.load(path), "tb1") as tb:
        r = trial(tb, spec, keep_raw=True)
    gen = r["raw_trial"]["generator"]
    assert len(gen["streams"]) == 2 and gen["sent_pkts"] == sum(s["sent_pkts"] for s in gen["streams"])
    assert abs(gen["streams"][0]["sent_pkts"] - gen["streams"][1]["sent_pkts"]) <= 1
    assert r["duplicate_pkts"] == 0 and r["reordered_pkts"] == 0
    assert r["received_pkts"] > 0.9 * spec.window_pkts
    assert r["raw_trial"]["testbed"]["src_ip_first"] == "198.18.0.3"


def test_inventory_check_names_a_missing_key_file(tmp_path):
    inv = tmp_path / "inv.toml"
    inv.write_text(EXAMPLE.read_text().replace('identity = "~/.ssh/softnet_ed25519"',
                                               f'identity = "{tmp_path}/nokey"'))
    r = softnet("inventory", "check", str(inv), "--no-doctor", "--json")
    assert r.returncode == 1
    fields = {p["field"]: p["error"] for p in json.loads(r.stdout)["problems"]}
    assert fields == {"hosts.tg.identity": f"{tmp_path}/nokey: no such file on this controller",
                      "hosts.dut.identity": f"{tmp_path}/nokey: no such file on this controller"}


@pytest.mark.netns
@pytest.mark.slow
def test_a_soak_on_inventory_hosts_watches_the_sut_host_through_its_agent(hosts, tmp_path):
    """The planted nftables leak (examples/soak) on an inventory's SUT host:
    its agent reads the set at every trial's end, and the drift watch flags it."""
    eh, path = hosts
    leak = ROOT / "examples" / "soak" / "leak.nft"
    spec = tmp_path / "soak.toml"
    spec.write_text(f"""
name = "remote-soak"
[testbed]
sut = "custom"
inventory = "{path}"
name = "tb1"
[testbed.custom]
l3 = true
setup = ["nft -f {leak}"]
teardown = ["nft delete table inet softnet_leak"]
[method]
kind = "soak"
min_load = "20kpps"
max_load = "300kpps"
duration_s = 0.5
warmup_s = 0.1
[soak]
wall_s = 25
target_loss_ratio = 1e-3
""")
    before = snapshots(eh, ("tg", "dut"))
    results = tmp_path / "results"
    r = softnet("run", str(spec), "--results", str(results), "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert restored(eh, before) == []
    db = duckdb.connect(str(results / "softnet.duckdb"), read_only=True)
    marks = [json.loads(j)["soak"] for (j,) in db.execute("SELECT result_json FROM trials ORDER BY load_index")
             .fetchall()]
    grown = [m["drift"]["levels"]["nft.inet.softnet_leak.flows_elements"] for m in marks]
    assert len(grown) >= 5 and grown == sorted(grown) and grown[-1] > grown[0] + 1000, grown
    summary = json.loads(db.execute("SELECT result_json FROM soaks").fetchone()[0])
    fit = next(f for f in summary["drift"] if f["series"] == "nft.inet.softnet_leak.flows_elements")
    assert fit["flag"] == "leak_suspected", fit
