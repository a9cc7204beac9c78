"""Shared fixtures: root-only tests, and a check that the host is left as it was."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from softnet.tools.changes import HostChanges
from softnet.testbed.local import LocalTestbed, Placement
from softnet.campaign.trial import TrialSpec, run_trial

# softnet commands the tests start queue behind a measuring run that holds the
# testbed lock (another suite, a demo) instead of failing at once.
os.environ.setdefault("SOFTNET_WAIT", "900")

ROOT_SYSCTLS = ("net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/core/netdev_max_backlog",
                "net/core/rps_sock_flow_entries", "net/core/busy_poll", "net/core/busy_read")


def host_state() -> dict:
    """What softnet could leak into the host: namespaces, root links, sysctls, eBPF programs, processes."""
    links = json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True, text=True, check=True).stdout)
    netns = sorted(p.name for p in Path("/run/netns").iterdir()) if Path("/run/netns").is_dir() else []
    progs = []
    if shutil.which("bpftool"):
        out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
        progs = sorted(p.get("name", "") for p in json.loads(out or "[]") if p.get("name", "").startswith("sn_"))
    procs = sorted(c.read_text().strip() for c in Path("/proc").glob("[0-9]*/comm")
                   if c.exists() and c.read_text().strip().startswith("softnet-")) if True else []
    return {
        "netns": netns,
        "links": sorted((l["ifname"], l.get("xdp", {}).get("prog", {}).get("id") if "xdp" in l else None) for l in links),
        "sysctls": {k: Path("/proc/sys", k).read_text().strip() for k in ROOT_SYSCTLS if Path("/proc/sys", k).exists()},
        "sn_bpf_progs": progs,
        "softnet_processes": procs,
    }


def wait_host_state(expected: dict, timeout: float = 5.0) -> dict:
    """Namespaces and programs go away asynchronously in the kernel: poll briefly."""
    import time

    deadline = time.monotonic() + timeout
    state = host_state()
    while state != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        state = host_state()
    return state


@pytest.fixture
def host_unchanged():
    """Fails the test if softnet left anything behind on the host."""
    before = host_state()
    yield before
    assert wait_host_state(before) == before


@pytest.fixture
def locked_host_unchanged():
    """host_unchanged with the testbed lock held around both looks at the
    host, so another suite's testbed (which holds the lock) is not half-seen.
    Only for tests that build testbeds in this process (the lock is free to
    its holder); a softnet command started by the test would wait for it."""
    from softnet.testbed import lock

    with lock.testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 0)):
        before = host_state()
        yield before
        assert wait_host_state(before) == before


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, eBPF)")


def softnet_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "softnet", *args]


def run_spec(tmp_path: Path, text: str) -> tuple[list[dict], list[dict]]:
    """`softnet run --json` of a campaign spec's text: its printed summaries,
    and each stored trial's result (in cell, load, run order)."""
    (tmp_path / "s.toml").write_text(text)
    r = subprocess.run(softnet_cmd("run", str(tmp_path / "s.toml"), "--results", str(tmp_path / "r"), "--json"),
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    trials = [json.loads(p.read_text())["result"] for p in sorted((tmp_path / "r" / "raw").glob("*/cell*.json"))]
    return json.loads(r.stdout), trials


def run_until_interrupted(monkeypatch, run, after_trials: int) -> None:
    """Call ``run()`` with a KeyboardInterrupt raised right after the
    ``after_trials``-th stored trial (a kill between two trials), then restore
    the store."""
    from softnet.results.store import Store

    real_add, calls = Store.add_trial, {"n": 0}

    def add_then_die(self, *a, **kw):
        real_add(self, *a, **kw)
        calls["n"] += 1
        if calls["n"] == after_trials:
            raise KeyboardInterrupt

    monkeypatch.setattr(Store, "add_trial", add_then_die)
    with pytest.raises(KeyboardInterrupt):
        run()
    monkeypatch.setattr(Store, "add_trial", real_add)


def split_trial(rate: float, setup=None, **spec) -> dict:
    """One kernel IPv4 forwarding trial, generator on CPU 0 and SUT on CPU 1;
    ``setup(tb)`` runs after the testbed is built."""
    with HostChanges() as ch:
        tb = LocalTestbed(ch, "ipv4-fwd", Placement(gen_cpu=0, sut_cpus=[1]))
        ep = tb.build()
        if setup:
            setup(tb)
        return run_trial(tb, ep, TrialSpec(rate_pps=rate, **spec), ch)


HOST_FIXTURES = {"host_unchanged", "locked_host_unchanged"}
PACING_FLAGS = frozenset({"generator_limited", "generator_overshoot"})


def valid_or_held(r: dict) -> bool:
    """A trial result (its JSON) that is valid, or flagged only for its pace
    with the generator's own lags showing the host held it once: the largest
    lag explains the miss at the window's edge, and the mean lag is a small
    share of it. A generator that cannot keep the rate falls behind all
    through the window (mean about half the largest), and is not excused."""
    if r["valid"]:
        return True
    g = r.get("generator") or {}
    lag_max, lag_mean = g.get("window_lag_max_ns") or 0, g.get("window_lag_mean_ns") or 0
    miss_ns = abs(1 - r["achieved_ratio"]) * r["duration_s"] * 1e9  # the pace's miss, as time
    return (set(r["flags"]) <= PACING_FLAGS and r["sent_pkts"] == r["intended_pkts"]
            and lag_max >= 0.5 * miss_ns and lag_mean <= 0.25 * lag_max)


# ---- a host_noise test's failed attempt leaves its evidence in the log ----------
_HOST_AT_START: dict[str, tuple[float, dict]] = {}
_RERUN_EVIDENCE: list[str] = []


def _host_now() -> tuple[float, dict]:
    import time

    from softnet.collect.procfs import parse_stat_cpus

    return time.monotonic(), parse_stat_cpus(Path("/proc/stat").read_text())


def host_during(start: tuple[float, dict], end: tuple[float, dict]) -> str:
    """What the host did meanwhile, from /proc/stat: each CPU's steal time
    (the hypervisor held the vCPU) and busy share; the load average."""
    (t0, a), (t1, b) = start, end
    cpus = []
    for cpu in sorted(set(a) & set(b)):
        d = {k: b[cpu][k] - a[cpu].get(k, 0) for k in b[cpu]}  # USER_HZ ticks: 10 ms each
        total = sum(d.values()) or 1
        busy = 100 * (total - d.get("idle", 0) - d.get("iowait", 0)) / total
        cpus.append(f"CPU{cpu} steal {10 * d.get('steal', 0)} ms, busy {busy:.0f}%")
    load = Path("/proc/loadavg").read_text().split()[0]
    return f"over {t1 - t0:.1f} s: " + "; ".join(cpus) + f"; load average {load}"


def pytest_runtest_setup(item):
    if item.get_closest_marker("host_noise"):
        _HOST_AT_START[item.nodeid] = _host_now()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """The host's steal and load during a host_noise attempt that failed,
    read where it ran (an xdist worker too) and carried in the report."""
    outcome = yield
    report = outcome.get_result()
    start = _HOST_AT_START.get(item.nodeid)
    if start and report.failed:
        report.user_properties.append(("host_during", host_during(start, _host_now())))


def pytest_runtest_logreport(report):
    """A host_noise attempt that failed (and runs again, or fails for good):
    its figures and the host's during it, kept for the summary, so a rerun
    that passes does not hide why the first attempt failed."""
    host = dict(report.user_properties).get("host_during")
    if report.outcome != "rerun" and not (report.failed and host):
        return
    crash = getattr(report.longrepr, "reprcrash", None)
    why = " ".join((crash.message if crash else str(report.longrepr)).split())[:400]
    _RERUN_EVIDENCE.append(f"{report.nodeid} ({report.outcome}, {report.when}): {why}\n"
                           f"    host {host or 'not read'}")


def pytest_terminal_summary(terminalreporter):
    if _RERUN_EVIDENCE:
        terminalreporter.section("host_noise attempts that failed: their evidence")
        for line in _RERUN_EVIDENCE:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(config, items):
    """A test that needs root or compares the host before and after runs with
    the netns ones, one at a time (`make test` runs the others two at once):
    a native tool it starts, or another test's, would show in the other's
    look at the host."""
    for item in items:
        if item.get_closest_marker("host_noise"):  # pytest-rerunfailures: each rerun shows in the summary
            item.add_marker(pytest.mark.flaky(reruns=2))
        if item.get_closest_marker("netns"):
            continue
        root = any(m.name == "skipif" and "root" in str(m.kwargs.get("reason", "")) for m in item.iter_markers())
        if root or HOST_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.netns)
