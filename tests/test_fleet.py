"""Campaigns over a fleet: a real Dask scheduler and real workers (processes
on this machine over localhost TCP), each worker a simulated testbed (the
synthetic SUT, each trial taking a set wall time). Every cell runs where its
knobs pin it, every trial is stored once, and a worker, the scheduler or a
controller lost mid-campaign loses nothing."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import duckdb
import psutil
import pytest

from softnet.campaign.spec import CampaignSpec
from softnet.errors import InputError
from softnet.fleet.resources import cell_resources, describe, resources_arg, satisfies, worker_resources
from softnet.fleet.local import LocalFleet as Fleet, free_port
from softnet.results.store import Store
from tests.conftest import softnet_cmd
from tests.test_serve_browser import browser, open_page  # noqa: F401 (browser: a fixture)

# long end-to-end tests: `make test` runs them, `make check` does not
pytestmark = pytest.mark.slow


@pytest.fixture
def fleet(tmp_path):
    made = []
    before = {p.name for p in Path(tempfile.gettempdir()).glob("*dask*")}

    def make(testbeds: list[str]) -> Fleet:
        made.append(Fleet(tmp_path, testbeds))
        return made[-1]
    yield make
    for f in made:
        f.close()
    assert {p.name for p in Path(tempfile.gettempdir()).glob("*dask*")} == before  # scratch spaces removed
    assert not list(Path(tempfile.gettempdir()).glob("softnet-fleet-*"))
    assert not list(Path(tempfile.gettempdir()).glob("softnet-part-*"))  # a part's scratch store, killed or not


SIMULATED = """name = "{name}"
[testbed]
sut = "synthetic"
[synthetic]
trial_wall_s = {wall}
"""  # a simulated testbed: each trial takes {wall} s of wall time
SPEC = SIMULATED + """[method]
loads = ["100kpps", "300kpps", "500kpps"]
runs = 2
duration_s = 1
[matrix]
{matrix}
"""


def spec_file(tmp: Path, name: str, matrix: str, wall: float = 0.05) -> Path:
    p = tmp / f"{name}.toml"
    p.write_text(SPEC.format(name=name, wall=wall, matrix=matrix))
    return p


def run(spec: Path, results: Path, fleet: Fleet, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(softnet_cmd("run", str(spec), "--results", str(results), "--scheduler", fleet.address),
                          capture_output=True, text=True, timeout=300, **kw)


def stored(results: Path) -> list[tuple]:
    """(campaign, cell, load, run, the cell's pinned testbed, the testbed that measured it) per stored trial."""
    with duckdb.connect(str(results / "softnet.duckdb"), read_only=True) as c:
        return c.execute("""SELECT campaign_id, cell_id, load_index, run_index,
                                   json_extract_string(knobs_json, '$."fleet.testbed"'),
                                   json_extract_string(result_json, '$.provenance.fleet.testbed')
                            FROM trials ORDER BY ALL""").fetchall()


def test_cells_run_where_their_knobs_pin_them_and_each_trial_is_stored_once(tmp_path, fleet):
    f = fleet(["sim1", "sim2", "sim3"])
    # two pinned cells, and four any testbed may take
    spec = spec_file(tmp_path, "spread", '"fleet.testbed" = ["sim1", "sim3"]\n"traffic.frame_bytes" = [64, 512]')
    free = spec_file(tmp_path, "free", '"traffic.frame_bytes" = [64, 128, 256, 512]', wall=0.2)
    for s in (spec, free):
        r = run(s, tmp_path / "r", f)
        assert r.returncode == 0, r.stderr[-3000:]
    rows = stored(tmp_path / "r")
    assert len(rows) == len({r[:4] for r in rows}) == 4 * 6 + 4 * 6  # every trial once
    for cid, cell, li, ri, pinned, ran in rows:
        assert ran in ("sim1", "sim2", "sim3")
        assert pinned is None or pinned == ran, (cid, cell, pinned, ran)
        assert len({x[5] for x in rows if x[:2] == (cid, cell)}) == 1  # a cell on one testbed
    assert len({r[5] for r in rows if r[0].startswith("free")}) >= 2  # the free cells spread
    assert "3 testbed(s): sim1, sim2, sim3" in r.stderr
    # one lab, read whole: each testbed's series, from the store and from its Parquet export alike
    ex = subprocess.run(softnet_cmd("export", str(tmp_path / "r"), "--out", str(tmp_path / "lab")),
                        capture_output=True, text=True, timeout=120)
    assert ex.returncode == 0, ex.stderr
    measured = {(f"{cid.rsplit('-', 1)[0]}", ran) for cid, _, _, _, _, ran in rows}
    got = {}
    for src in ("r", "lab"):
        t = subprocess.run(softnet_cmd("trend", str(tmp_path / src), "--json"), capture_output=True, text=True,
                           timeout=120)
        assert t.returncode == 0, t.stderr
        got[src] = sorted(x["key"] for x in json.loads(t.stdout)["series"])
        assert {(x["name"], x["testbed"]) for x in json.loads(t.stdout)["series"]} == measured
    assert got["r"] == got["lab"] and all(" @ sim" in k for k in got["r"]), got
    one = subprocess.run(softnet_cmd("trend", str(tmp_path / "lab"), "--testbed", "sim1", "--json"),
                         capture_output=True, text=True, timeout=120)
    assert {x["testbed"] for x in json.loads(one.stdout)["series"]} == {"sim1"}
    bad = subprocess.run(softnet_cmd("trend", str(tmp_path / "lab"), "--testbed", "sim9"), capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "--testbed" in bad.stderr and "sim9" in bad.stderr, bad.stderr
    # every read command takes the lab's part: analyze (serve, report, compare share the store's view)
    for src in ("r", "lab"):
        a = subprocess.run(softnet_cmd("analyze", str(tmp_path / src), "--testbed", "sim1", "--json"),
                           capture_output=True, text=True, timeout=120)
        assert a.returncode == 0, a.stderr
        cells = {(c["meta"]["campaign_id"], c["meta"]["cell_id"]) for c in json.loads(a.stdout)}
        assert cells == {(cid, cell) for cid, cell, *_, ran in rows if ran == "sim1"}, (src, cells)


START = re.compile(r"(sim\d): cell (\d+) load (\d+)/\d+ \(.*\) run (\d+)/")


def starts(lines: list[str]) -> Counter:
    """How many times each trial (testbed, cell, load index, run index) was started, from the progress log."""
    keys = [START.search(line) for line in lines]
    return Counter((m[1], int(m[2]), int(m[3]) - 1, int(m[4]) - 1) for m in keys if m)


def test_a_worker_killed_mid_cell_repeats_at_most_the_trial_in_flight(tmp_path, fleet):
    f = fleet(["sim1", "sim2"])
    spec = spec_file(tmp_path, "kill", '"fleet.testbed" = ["sim1", "sim2"]', wall=0.4)
    p = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r"), "--scheduler", f.address),
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen = []
    for line in p.stderr:  # kill sim1's worker in the middle of its cell (6 trials of 0.4 s), 2 trials stored
        seen.append(line)
        if sum("sim1: cell 0 run" in x for x in seen) == 2:
            time.sleep(0.2)
            f.kill_worker_process("sim1")
            break
    else:
        raise AssertionError("sim1 stored no 2 trials: " + "".join(seen)[-3000:])
    seen += p.stderr.readlines()
    assert p.wait(timeout=300) == 0, "".join(seen)[-3000:]
    rows = stored(tmp_path / "r")
    assert len(rows) == len({r[:4] for r in rows}) == 12, rows
    n = starts(seen)
    # the cell started again on sim1's new worker from the trial in flight: the stored ones not again
    assert len([k for k in n if k[:2] == ("sim1", 0)]) == 6 and sum(n.values()) <= 13, n
    assert all(c == 1 for k, c in n.items() if k[0] == "sim2"), n


def test_a_controller_killed_mid_cell_loses_nothing_the_worker_measured(tmp_path, fleet):
    """The worker goes on with the cell; its trials wait on the scheduler's
    log for the next controller, which stores them and measures nothing again."""
    f = fleet(["sim1"])
    spec = spec_file(tmp_path, "ctl", '"traffic.frame_bytes" = [64]', wall=0.5)
    p = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r"), "--scheduler", f.address),
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in p.stderr:
        if "sim1: cell 0 run" in line:  # one trial stored
            p.kill()
            break
    else:
        raise AssertionError("no trial stored")
    p.wait()
    before = stored(tmp_path / "r")
    assert len(before) == 1, before
    time.sleep(3.5)  # the worker measures on meanwhile (6 trials of 0.5 s)
    r = run(spec, tmp_path / "r", f)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = stored(tmp_path / "r")
    assert len(rows) == len({x[:4] for x in rows}) == 6 and before[0] in rows
    # what the worker measured while no controller listened was stored, not measured again
    assert sum(starts(r.stderr.splitlines()).values()) <= 6 - len(before) - 3, r.stderr[-3000:]


SEARCH = SIMULATED + """[method]
kind = "search"
goals = ["ndr", "pdr0.5"]
min_load = "10kpps"
max_load = "1Mpps"
runs = 2
[matrix]
"fleet.testbed" = ["sim1", "sim2"]
"""

COMPARE = SIMULATED + """[fleet]
testbed = "{testbed}"
[method]
kind = "compare"
loads = ["200kpps"]
duration_s = 1.0
[compare]
variants = [{{"synthetic.o_sat_pps" = 500000}}, {{"synthetic.o_sat_pps" = 450000}}]
metrics = ["capacity"]
decide_on = ["capacity"]
overload = "1Mpps"
budget_s = 40
"""


def goals(results: Path) -> list[tuple]:
    with duckdb.connect(str(results / "softnet.duckdb"), read_only=True) as c:
        return c.execute("SELECT cell_id, run_index, goal, lower_bound_pps, upper_bound_pps, trial_count "
                         "FROM searches ORDER BY ALL").fetchall()


def test_searches_on_a_fleet_find_what_one_testbed_finds(tmp_path, fleet):
    """Each cell's searches on the testbed it names, its trials streamed: the
    same bounds, trial for trial, as the campaign run here; a worker killed
    mid-search goes on from the trials stored."""
    f = fleet(["sim1", "sim2"])
    local = tmp_path / "local.toml"
    local.write_text(SEARCH.format(name="s", wall=0))
    here = subprocess.run(softnet_cmd("run", str(local), "--results", str(tmp_path / "here")),
                          capture_output=True, text=True, timeout=300)
    assert here.returncode == 0, here.stderr[-3000:]
    spec = tmp_path / "s.toml"
    spec.write_text(SEARCH.format(name="s", wall=0.1))
    p = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r"), "--scheduler", f.address),
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen = []
    for line in p.stderr:  # sim2's worker killed after 4 of its search trials are stored
        seen.append(line)
        if sum("sim2: cell 1" in x and "stored" not in x and ": load" in x for x in seen) == 4:
            f.kill_worker_process("sim2")
            break
    else:
        raise AssertionError("sim2 stored no 4 search trials: " + "".join(seen)[-3000:])
    seen += p.stderr.readlines()
    assert any("sim2: cell 1" in x and "search" in x and "stored" in x for x in seen), "".join(seen)[-3000:]
    assert p.wait(timeout=300) == 0, "".join(seen)[-3000:]
    got, want = goals(tmp_path / "r"), goals(tmp_path / "here")
    assert got == want and len(got) == 2 * 2 * 2, (got, want)  # cells x searches x goals
    rows = stored(tmp_path / "r")
    assert all(pinned == ran for *_, pinned, ran in rows), rows
    assert len(rows) == len({r[:4] for r in rows}) == len(stored(tmp_path / "here"))


def test_search_and_compare_commands_take_the_fleet(tmp_path, fleet):
    """`softnet search` and `softnet compare` with --scheduler: measured on the
    fleet's testbed, shown as without it."""
    f = fleet(["sim1"])
    s = subprocess.run(softnet_cmd("search", "--sut", "synthetic", "--goals", "ndr", "--repeats", "2", "--results",
                                   str(tmp_path / "s"), "--scheduler", f.address, "--json"),
                       capture_output=True, text=True, timeout=300)
    assert s.returncode == 0, s.stderr[-3000:]
    (search,) = json.loads(s.stdout)["searches"]
    assert [r["trial_count"] > 0 for r in search["repeats"]] == [True, True]
    assert {ran for *_, ran in stored(tmp_path / "s")} == {"sim1"}
    c = subprocess.run(softnet_cmd("compare", "--variant", "testbed.sut=synthetic;synthetic.o_sat_pps=500000",
                                   "--variant", "testbed.sut=synthetic;synthetic.o_sat_pps=450000", "--metrics", "capacity",
                                   "--decide-on", "capacity", "--overload", "1Mpps", "--budget", "40", "--results",
                                   str(tmp_path / "c"), "--scheduler", f.address, "--json"),
                       capture_output=True, text=True, timeout=300)
    assert c.returncode == 0, c.stderr[-3000:]
    assert "slower" in c.stdout and {ran for *_, ran in stored(tmp_path / "c")} == {"sim1"}, c.stdout[-2000:]


def test_soaks_run_each_cell_on_a_testbed_with_its_summary_stored(tmp_path, fleet):
    f = fleet(["sim1", "sim2"])
    spec = tmp_path / "soak.toml"
    spec.write_text(SIMULATED.format(name="soak", wall=0.02) + '[method]\nkind = "soak"\nduration_s = 1\n'
                    '[soak]\nwall_s = 4\n[matrix]\n"traffic.frame_bytes" = [64, 128]\n')
    r = run(spec, tmp_path / "r", f)
    assert r.returncode == 0, r.stderr[-3000:]
    with duckdb.connect(str(tmp_path / "r" / "softnet.duckdb"), read_only=True) as c:
        soaks = c.execute("SELECT cell_id, finished, trials FROM soaks ORDER BY cell_id").fetchall()
        counts = c.execute("SELECT cell_id, count(*), count(DISTINCT json_extract_string(result_json, "
                           "'$.provenance.fleet.testbed')) FROM trials GROUP BY cell_id ORDER BY cell_id").fetchall()
    assert [(cell, done) for cell, done, _ in soaks] == [(0, True), (1, True)]
    assert [(cell, n) for cell, n, _ in counts] == [(cell, n) for cell, _, n in soaks]
    assert all(testbeds == 1 for *_, testbeds in counts)  # a soak's trials all on one testbed
    assert "critical load at loss ratio 1e-07" in r.stdout


def test_two_comparisons_run_at_once_each_on_its_testbed(tmp_path, fleet):
    """A comparison's pairs on one testbed (the one it names); two of them on
    two testbeds at the same time, each with the verdict it has here."""
    f = fleet(["sim1", "sim2"])
    here = tmp_path / "here.toml"
    here.write_text(COMPARE.format(name="c", wall=0, testbed="sim1"))
    r = subprocess.run(softnet_cmd("run", str(here), "--results", str(tmp_path / "here")),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    procs = {}
    for tb in ("sim1", "sim2"):
        spec = tmp_path / f"{tb}.toml"
        spec.write_text(COMPARE.format(name=f"c{tb}", wall=0.2, testbed=tb))
        procs[tb] = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(tmp_path / tb), "--scheduler",
                                                 f.address, "--json"),
                                     stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    out = {tb: p.communicate(timeout=300) for tb, p in procs.items()}
    wall = time.monotonic() - t0
    assert all(p.returncode == 0 for p in procs.values()), {tb: o[1][-2000:] for tb, o in out.items()}
    with Store(tmp_path / "here", read_only=True) as st:
        (cid,) = [c["campaign_id"] for c in st.campaigns()]
        want = st.comparison(cid)
    for tb in ("sim1", "sim2"):
        rows = stored(tmp_path / tb)
        assert {ran for *_, ran in rows} == {tb}, rows  # every pair on the testbed it names
        with Store(tmp_path / tb, read_only=True) as st:
            (cid,) = [c["campaign_id"] for c in st.campaigns()]
            got = st.comparison(cid)
        assert got is not None and got.rounds == want.rounds and got.stop_reason == want.stop_reason
        assert [d.verdict for _, d in got.all_differences()] == [d.verdict for _, d in want.all_differences()]
        assert len(rows) == len(stored(tmp_path / "here"))
    # at once: not one after the other (each comparison's trials take 0.2 s of wall time)
    assert wall < 1.5 * len(rows) * 0.2 + 10, wall


def test_two_controllers_share_the_fleet(tmp_path, fleet):
    f = fleet(["sim1", "sim2"])
    a = spec_file(tmp_path, "alice", '"traffic.frame_bytes" = [64, 128, 256, 512]', wall=0.1)
    b = spec_file(tmp_path, "bob", '"traffic.frame_bytes" = [64, 128, 256, 512]', wall=0.1)
    t0 = time.monotonic()
    pa = subprocess.Popen(softnet_cmd("run", str(a), "--results", str(tmp_path / "ra"), "--scheduler", f.address),
                          stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    pb = subprocess.Popen(softnet_cmd("run", str(b), "--results", str(tmp_path / "rb"), "--scheduler", f.address),
                          stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    errs = [p.communicate(timeout=300)[1] for p in (pa, pb)]
    wall = time.monotonic() - t0
    assert pa.returncode == pb.returncode == 0, errs
    ra, rb = stored(tmp_path / "ra"), stored(tmp_path / "rb")
    assert len(ra) == len(rb) == 24
    # both used both testbeds: their cells interleaved on the free ones
    assert {r[5] for r in ra} == {r[5] for r in rb} == {"sim1", "sim2"}
    assert wall < 48 * 0.1 + 15  # not one after the other on one testbed (48 trials of 0.1 s, plus start-up)


def test_the_scheduler_lost_is_waited_for_and_the_campaign_resumes(tmp_path, fleet):
    f = fleet(["sim1"])
    spec = spec_file(tmp_path, "lost", '"traffic.frame_bytes" = [64, 128, 256]', wall=0.3)
    p = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r"), "--scheduler", f.address),
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen = []
    for line in p.stderr:
        seen.append(line)
        if "sim1: cell 1 load 1/3" in line:  # cell 0 stored, cell 1 in flight: the scheduler dies
            for child in psutil.Process(f.scheduler.pid).children(recursive=True):
                child.kill()
            f.scheduler.wait()
            break
    else:
        raise AssertionError("cell 1 never started: " + "".join(seen)[-3000:])
    time.sleep(3)
    f.restart_scheduler()  # the worker finds it again by itself
    seen += p.stderr.readlines()
    assert p.wait(timeout=300) == 0, "".join(seen)[-3000:]
    text = "".join(seen)
    assert "waiting for it" in text, text[-3000:]
    rows = stored(tmp_path / "r")
    assert len(rows) == len({r[:4] for r in rows}) == 18


def test_a_testbed_that_fails_its_check_is_left_out_with_the_reason(tmp_path, fleet):
    f = fleet(["sim1"])
    inv = tmp_path / "inv.toml"
    ports = "".join(f'[[hosts.gone.interfaces]]\nname = "eth{i}"\nmac = "02:00:00:00:00:0{i}"\ndriver = "veth"\n'
                    f'role = "{role}"\nallow_physical = true\nlink = "l{1 + i % 2}"\n'
                    for i, role in enumerate(("gen_out", "sink_in", "sut_in", "sut_out"), 1))
    # a host nothing listens for: its check cannot reach it
    inv.write_text(f'[hosts.gone]\naddress = "127.0.0.1"\nport = 1\n{ports}[testbeds.tb9]\ntraffic = "gone"\n'
                   'sut = "gone"\n')
    w = f.start_worker("tb9", "--inventory", str(inv))
    assert w.wait(timeout=120) != 0
    log = (tmp_path / "worker-tb9.log").read_text()
    assert "tb9 failed its check, left out of the fleet" in log, log
    r = run(spec_file(tmp_path, "left", '"traffic.frame_bytes" = [64]'), tmp_path / "r", f)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "tb9 left out: hosts.gone" in r.stderr, r.stderr


def test_a_worker_signalled_with_its_whole_group_says_goodbye_once(tmp_path, fleet):
    """Ctrl-C, scancel and systemd signal every process of the worker at once;
    the Dask worker must get one signal, not ours on top (a second one kills
    it before it leaves the scheduler). A signal to `softnet fleet worker`
    alone is passed on."""
    f = fleet(["g1", "g2"])
    os.killpg(f.workers["g1"].pid, signal.SIGTERM)  # the whole group, as scancel
    f.workers["g2"].send_signal(signal.SIGINT)  # softnet fleet worker alone
    for tb in ("g1", "g2"):
        assert f.workers[tb].wait(timeout=60) == 0
        log = (tmp_path / f"worker-{tb}.log").read_text()
        assert "Received signal SIG" in log and "End worker" in log, log[-2000:]


def test_a_cell_no_testbed_can_take_is_refused_by_name(tmp_path, fleet):
    f = fleet(["sim1"])
    r = run(spec_file(tmp_path, "nowhere", '"fleet.testbed" = ["sim7"]'), tmp_path / "r", f)
    assert r.returncode != 0 and "cell 0 (testbed sim7): no testbed of the fleet has it (sim1)" in r.stderr, r.stderr


# ---- without a fleet ---------------------------------------------------------------------------

def test_resources_name_the_testbed_and_what_pins_a_cell():
    tb = worker_resources("tb1", ["mlx5_core", "mlx5_core"], "6.18.44")
    assert tb == {"testbed": 1, "testbed-tb1": 1, "driver-mlx5_core": 1, "kernel-6.18.44": 1}
    assert resources_arg(tb) == "testbed=1,testbed-tb1=1,driver-mlx5_core=1,kernel-6.18.44=1"
    base = {"name": "x", "method": {"loads": ["10kpps"]}, "testbed": {"sut": "synthetic"}}
    free = CampaignSpec.model_validate(base)
    assert cell_resources(free) == {"testbed": 1} and describe(cell_resources(free)) == "any testbed"
    pinned = CampaignSpec.model_validate({**base, "fleet": {"testbed": "tb1", "driver": "mlx5_core"}})
    assert satisfies(tb, cell_resources(pinned)) and describe(cell_resources(pinned)) == \
        "testbed tb1 and driver mlx5_core"
    assert not satisfies(worker_resources("tb2"), cell_resources(pinned))
    with pytest.raises(InputError) as e:
        cell_resources(CampaignSpec.model_validate({**base, "fleet": {"testbed": "a,b"}}))
    assert e.value.field == "fleet.testbed"
    spec = CampaignSpec.model_validate({**base, "matrix": {"fleet.testbed": ["tb1", "tb2"]}})
    assert [k for k, _ in spec.cells()] == [{"fleet.testbed": "tb1"}, {"fleet.testbed": "tb2"}]


@pytest.mark.parametrize("address", ["127.0.0.1:8786", "http://h:1", "tcp://h"])
def test_a_bad_scheduler_address_is_refused_by_name(tmp_path, address):
    spec = spec_file(tmp_path, "bad", '"traffic.frame_bytes" = [64]')
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r"), "--scheduler", address),
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--scheduler" in r.stderr and "tcp://HOST:PORT" in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()


def test_no_scheduler_there_is_said_and_waited_for(tmp_path):
    spec = spec_file(tmp_path, "none", '"traffic.frame_bytes" = [64]')
    p = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r"), "--scheduler",
                                     f"tcp://127.0.0.1:{free_port()}"), stderr=subprocess.PIPE, text=True)
    seen = []
    for line in p.stderr:  # said, and waiting (not ended): Ctrl-C
        seen.append(line)
        if "waiting for it" in line:
            break
    time.sleep(0.5)
    assert p.poll() is None, "".join(seen)
    p.send_signal(signal.SIGINT)
    err = "".join(seen) + p.communicate(timeout=30)[1]
    assert "no Dask scheduler at tcp://127.0.0.1:" in err and "waiting for it" in err, err
    assert p.returncode == 130, err


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_a_campaign_over_two_emulated_testbeds(tmp_path, fleet):
    """Real testbeds (each host a namespace with its own sshd, driven by its
    agent): each worker checks its testbed, then runs the cells pinned to it."""
    from softnet.testbed import lock
    from softnet.testbed.emulated_hosts import EmulatedHosts
    from softnet.tools.changes import HostChanges
    from tests.conftest import host_state, wait_host_state

    with lock.testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 0)):
        before = host_state()
        with HostChanges() as changes:
            eh = EmulatedHosts(changes, testbeds=2)
            eh.build()
            f = fleet([])
            for tb in ("tb1", "tb2"):
                f.start_worker(tb, "--inventory", str(eh.inventory))
            f.wait_workers(2, timeout=180)

            def real(name: str, where: str, method: str, more: str = "") -> Path:
                """A spec on the emulated testbeds, without the kernel sampler and stall probe."""
                p = tmp_path / f"{name}.toml"
                p.write_text(f'name = "{name}"\n[testbed]\nsut = "ipv4-fwd"\ninventory = "{eh.inventory}"\n'
                             f'{where}\n[method]\n{method}\nduration_s = 0.3\nwarmup_s = 0.1\n'
                             f'[collect]\nsample = false\nstall_probe = false\n{more}')
                return p
            both = 'testbeds = ["tb1", "tb2"]'
            r = run(real("real", both, 'loads = ["20kpps"]\nruns = 2',
                         '[matrix]\n"traffic.frame_bytes" = [64, 128]\n'), tmp_path / "r", f)
            # a search on each testbed, and a comparison on the one it names, with real packets
            rs = run(real("search", both, 'kind = "search"\ngoals = ["ndr"]\nmin_load = "10kpps"\n'
                          'max_load = "100kpps"\nwidth = 0.5\ninitial_duration_s = 0.3\nmax_trials = 3\nruns = 1'),
                     tmp_path / "s", f)
            compare = real("compare", 'name = "tb2"', 'kind = "compare"\nloads = ["20kpps"]',
                           '[compare]\nvariants = [{"traffic.frame_bytes" = 64}, {"traffic.frame_bytes" = 128}]\n'
                           'metrics = ["loss"]\ndecide_on = ["loss"]\nmin_rounds = 2\nmax_rounds = 2\n')
            rc = run(compare, tmp_path / "c", f)
            f.close()
        assert r.returncode == 0, r.stderr[-3000:]
        assert rs.returncode == 0, rs.stderr[-3000:]
        assert rc.returncode == 0, rc.stderr[-3000:]
        srows = stored(tmp_path / "s")
        assert {ran for *_, ran in srows} == {"tb1", "tb2"} and 2 <= len(srows) <= 6, srows
        with duckdb.connect(str(tmp_path / "s" / "softnet.duckdb"), read_only=True) as c:
            assert c.execute("SELECT count(DISTINCT cell_id) FROM searches").fetchone()[0] == 2
            assert all(n > 0 for (n,) in c.execute("SELECT received_pkts FROM trials").fetchall())
        crows = stored(tmp_path / "c")
        assert {ran for *_, ran in crows} == {"tb2"} and len(crows) == 4, crows  # 2 rounds x 2 variants
        with duckdb.connect(str(tmp_path / "c" / "softnet.duckdb"), read_only=True) as c:
            assert c.execute("SELECT finished FROM comparisons").fetchall() == [(True,)]
        rows = stored(tmp_path / "r")
        assert len(rows) == 8
        with duckdb.connect(str(tmp_path / "r" / "softnet.duckdb"), read_only=True) as c:
            got = c.execute("""SELECT json_extract_string(knobs_json, '$."testbed.name"'),
                                      json_extract_string(result_json, '$.provenance.fleet.testbed'),
                                      sent_pkts, received_pkts FROM trials""").fetchall()
        assert all(pinned == ran for pinned, ran, *_ in got), got  # each cell on the testbed it names
        assert {ran for _, ran, *_ in got} == {"tb1", "tb2"}
        # real packets through each testbed; how many a 0.3 s trial loses is the host's business
        assert all(0 < n <= sent for *_, sent, n in got), got
        assert wait_host_state(before) == before


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_the_afxdp_lab_on_a_worker_of_its_own_host(tmp_path, fleet):
    """A worker without an inventory measures on its own host: the AF_XDP
    lab's configurations there, then the re-runs per cluster; each run's
    records reach the controller's store, where the analysis reads them."""
    from softnet.testbed import lock
    from softnet.results.latency import read_records
    from tests.conftest import host_state, wait_host_state

    with lock.testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 0)):
        before = host_state()
    f = fleet(["here"])
    spec = tmp_path / "lat.toml"
    spec.write_text('name = "lat"\n[method]\nkind = "latency"\nruns = 2\nduration_s = 0.3\n[latency]\n'
                    'interval_s = 0.005\nbaseline_count = 5\nrerun_per_cluster = 1\nrerun_count = 100\n'
                    '[matrix]\n"latency.poll_forwarder" = [false, true]\n"latency.poll_receiver" = [false, true]\n')
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r"), "--scheduler", f.address,
                                   "--json"), capture_output=True, text=True, timeout=600)
    f.close()
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert len(out["configurations"]) == 4
    with duckdb.connect(str(tmp_path / "r" / "softnet.duckdb"), read_only=True) as c:
        rows = c.execute("SELECT cell_id, run_index, records_path, sent FROM latency_runs ORDER BY ALL").fetchall()
    base = [x for x in rows if x[1] < 100]
    assert [x[:2] for x in base] == [(c, r) for c in range(4) for r in range(2)], rows
    # the second phase, one part after the configurations: per cluster one configuration, fast and flood
    assert out["clustering"] and len(rows) - len(base) == 2 * out["clustering"]["k"], out.get("reruns")
    for _, _, path, sent in rows:  # the records where the controller keeps them
        assert path.startswith(str(tmp_path / "r" / "records")) and len(read_records(path)) == sent
    assert wait_host_state(before) == before


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (make setup installs it)")
def test_serve_shows_a_labs_export_per_testbed_in_chromium(tmp_path, fleet, browser):
    """Three campaigns over two testbeds, exported as a lab: serve lists each
    campaign with the testbeds that measured it, and the trends page has one
    series per configuration and testbed, each with every campaign."""
    from tests.test_serve import Server

    f = fleet(["sim1", "sim2"])
    for seed in (1, 2, 3):
        spec = tmp_path / f"lab{seed}.toml"
        spec.write_text(SPEC.format(name="lab", wall=0.02, matrix='"fleet.testbed" = ["sim1", "sim2"]')
                        .replace("[synthetic]\n", f"[synthetic]\nseed = {seed}\n"))
        r = run(spec, tmp_path / "r", f)
        assert r.returncode == 0, r.stderr[-2000:]
    ex = subprocess.run(softnet_cmd("export", str(tmp_path / "r"), "--out", str(tmp_path / "lab")),
                        capture_output=True, text=True, timeout=120)
    assert ex.returncode == 0, ex.stderr
    s = Server(str(tmp_path / "lab"))
    try:
        page, errors = open_page(browser, f"http://127.0.0.1:{s.port}/")
        page.wait_for_selector("#campaigns")
        assert page.locator("#campaigns tbody tr").count() == 3
        assert page.locator("#campaigns td.testbed").all_text_contents() == ["sim1, sim2"] * 3
        page.click("a[href=\"/trends\"]")
        page.wait_for_selector("#trend-1-0 .main-svg")
        titles = sorted(page.locator("h2").all_text_contents())
        assert len(titles) == 2 and titles[0].endswith("@ sim1") and titles[1].endswith("@ sim2"), titles
        assert page.locator("#trend-0-0 .point").count() == page.locator("#trend-1-0 .point").count() == 3
        assert not errors, errors
    finally:
        s.stop()
