"""The AF_XDP latency lab on this host and across three emulated inventory
hosts (A on the traffic host, B on the SUT host, C on a sink host of its
own): the same campaign, the same checks; after a kill -9 of the controller
mid-campaign every host is restored by its agent."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from softnet.testbed.sshd import SSHD
from softnet.tools.changes import HostChanges
from tests.conftest import host_state, needs_root, softnet_cmd, wait_host_state

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.restore_bench import diffs, pending_journals, settled_snapshots, snapshots  # noqa: E402

pytestmark = [needs_root, pytest.mark.netns, pytest.mark.slow,
              pytest.mark.skipif(not SSHD.exists(), reason="needs openssh-server")]

LEASE_S = 3.0
SPEC = """name = "xsk-lab"
[method]
kind = "latency"
runs = {runs}
duration_s = {duration_s}
[latency]
interval_s = 0.005
baseline_count = 5
threaded_napi = true
napi_defer_hard_irqs = 2
gro_flush_timeout_ns = 20000
"""


@pytest.fixture(scope="module")
def three_hosts():
    """tg (A), dut (B), rx (C); the host is as it was after."""
    from softnet.testbed.emulated_hosts import EmulatedHosts

    before = host_state()
    with HostChanges() as changes, ThreadPoolExecutor(3) as pool:
        eh = EmulatedHosts(changes, hosts=("tg", "dut", "rx"), lease_s=LEASE_S)
        eh.build()
        yield eh, settled_snapshots(eh, pool), pool
    assert not changes.undo_errors
    assert wait_host_state(before) == before


def restored(eh, snaps: dict, pool, within_s: float) -> dict:
    """The hosts' differences from their snapshots once they settle: an
    agent's reaper outlives it by a moment, its journal replayed."""
    deadline = time.monotonic() + within_s
    while (d := diffs(snaps, snapshots(eh, pool))) and time.monotonic() < deadline:
        time.sleep(0.2)
    return d


def spec_file(tmp_path: Path, inventory: Path | None, runs: int = 2, duration_s: float = 0.5) -> Path:
    text = SPEC.format(runs=runs, duration_s=duration_s)
    if inventory is not None:
        text += f'[testbed]\ninventory = "{inventory}"\nname = "tb1"\n'
    spec = tmp_path / "lab.toml"
    spec.write_text(text)
    return spec


@pytest.mark.parametrize("where", ["this host", "three hosts"])
def test_the_lab_runs_and_every_host_is_restored(where, request, tmp_path):
    eh = snaps = pool = None
    if where == "three hosts":
        eh, snaps, pool = request.getfixturevalue("three_hosts")
    else:
        request.getfixturevalue("host_unchanged")  # the command takes the testbed lock itself
    results = tmp_path / "results"
    r = subprocess.run(softnet_cmd("run", str(spec_file(tmp_path, eh and eh.inventory)), "--results", str(results),
                                   "--json"), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    runs = json.loads(r.stdout)["runs"]
    assert len(runs) == 2
    for run in runs:
        assert run["sent"] == 100 and run["received"] >= 95, run  # a run's packets came back through B
    raws = [json.loads(p.read_text())["raw"] for p in sorted(results.glob("raw/*/*latency-run*.json"))]
    for raw in raws:
        # B's application forwarded each packet both ways (its counters run over the campaign)
        assert raw["forward_counters"]["rx_pkts"] >= 2 * raw["ping"]["received_pkts"] > 0
        assert raw["applied"]["napi_defer_hard_irqs.b_a"] == 2  # the knob reached B's receiving NIC
        assert raw["observed"]["forward_cpu"] == raw["requested_cpus"]["b"]
    last = raws[-1]
    assert last["kernel_baseline"]["received"] >= 4  # ping from A to C over B's kernel path
    if eh is None:
        assert last["testbed"].get("remote") is None and last["hello"]["ping"]["stamp"] is True
    else:
        assert last["testbed"]["remote"]["hosts"] == {"a": "tg", "b": "dut", "c": "rx"}
        # one NIC per lab host moved into a namespace of each agent: three run ids
        assert len(set(last["testbed"]["remote"]["run_ids"].values())) == 3
        assert last["hello"]["ping"]["stamp"] is False  # hop stamps across hosts would mix clocks
        assert restored(eh, snaps, pool, 10) == {}  # the NICs are back, as they were
        assert pending_journals(eh) == {}


def test_controller_killed_mid_campaign_every_host_restored(three_hosts, tmp_path):
    eh, snaps, pool = three_hosts
    results = tmp_path / "results"
    proc = subprocess.Popen(softnet_cmd("run", str(spec_file(tmp_path, eh.inventory, runs=4, duration_s=2)),
                                        "--results", str(results)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(results.glob("raw/*/*latency-run*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    mid = snapshots(eh, pool)
    assert diffs(snaps, mid)  # the lab was up when the kill came
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert restored(eh, snaps, pool, LEASE_S + 15) == {}  # each agent's lease lapses, it undoes everything
    assert pending_journals(eh) == {}
