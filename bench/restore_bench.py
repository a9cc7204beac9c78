"""Are both hosts restored after a crash mid-trial? (the acceptance test)

For each scenario and repeat, on emulated hosts (softnet.testbed.emulated_hosts:
a namespace + sshd per host): snapshot both hosts, start a remote trial as
its own process (`softnet trial --inventory INV --testbed tb1 --rate 100kpps
--duration D --json`), wait a random time (stratified: repeat k of N falls in
the k-th of N equal slices of --at, in random order), then

  controller_kill  SIGKILL the controller;
  agent_kill       SIGKILL the agent (`softnet agent --stdio`) of a randomly
                   chosen host (found by its cmdline and network namespace);
  mgmt_cut         cut the management link of both hosts (EmulatedHosts.cut_mgmt:
                   link down + an unreachable route, a pulled cable), restored
                   once the hosts are restored or the deadline passed;

and poll both hosts' snapshots (softnet.tools.snapshot) until they equal the
ones taken before, up to lease + 10 s after the action. While the management
links are cut, their own state (mgmt0 loses its carrier: our doing, not the
agent's) is left out of the comparison; after restore_mgmt the full snapshots
must match again. Also recorded: how the controller ended (exit code, error
text, seconds from the action; it must fail with a clear error, not hang),
processes of the run left in the hosts' namespaces, and journals with
pending entries (softnet.tools.journal).

The hosts are built once per scenario and reused: every repeat first checks
that both hosts are back at the snapshot taken right after the build.

Run (root):  SOFTNET_WAIT=3600 .venv/bin/python bench/restore_bench.py --repeats 10 --scenario all
Writes bench/results/restore.json and prints a summary table.

tests/test_remote_restore.py runs one of each scenario through run_one().
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from softnet.testbed.emulated_hosts import MGMT_IF, EmulatedHosts  # noqa: E402
from softnet.tools import journal  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
from softnet.tools.snapshot import host_snapshot, snapshot_diff  # noqa: E402

SCENARIOS = ("controller_kill", "agent_kill", "mgmt_cut")
SOFTNET = Path(sys.executable).parent / "softnet"
POLL_S = 0.1
CONTROLLER_GRACE_S = 60.0  # after restore: a controller still running then is hung


# ---- hosts and their processes ---------------------------------------------
def ns_inode(ns: str) -> int:
    return os.stat(f"/run/netns/{ns}").st_ino


def _proc_net_ino(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def pids_in(ns: str) -> list[int]:
    ino = ns_inode(ns)
    return [int(p.name) for p in Path("/proc").glob("[0-9]*") if _proc_net_ino(int(p.name)) == ino]


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def agent_pids(ns: str) -> list[int]:
    """`softnet agent --stdio` processes in that host's namespace (exact argv
    elements: the `bash -c "... agent --stdio ..."` sshd may run it under is
    not one). A child the agent just forked has its cmdline until it execs a
    tool: only agents whose parent is not an agent count."""
    found = [pid for pid in pids_in(ns) if {"agent", "--stdio"} <= set(_cmdline(pid))]
    return [pid for pid in found if _ppid(pid) not in found]


def run_processes(ns: str) -> list[dict]:
    """softnet processes still in the host's namespace: agents, reapers,
    tools (softnet-*). sshd and its sessions are not softnet's."""
    out = []
    for pid in pids_in(ns):
        comm, argv = _comm(pid), _cmdline(pid)
        if comm.startswith("softnet-") or {"agent", "--stdio"} <= set(argv) or "softnet.tools.reaper" in argv:
            out.append({"pid": pid, "comm": comm, "cmdline": " ".join(argv).strip()})
    return out


def sshd_sessions(ns: str) -> int:
    """sshd processes in the namespace besides the listener (informational)."""
    return max(0, sum(1 for pid in pids_in(ns) if _comm(pid) == "sshd") - 1)


def pending_journals(eh: EmulatedHosts) -> dict[str, list[str]]:
    """host -> what its journal still holds (an empty dict: nothing pending);
    also any stale journal (dead owner) of these hosts' state dirs."""
    out: dict[str, list[str]] = {}
    base = journal.agent_base()
    stale = set(journal.stale_journals(base))
    for host in eh.hosts:
        path = base / f"net-{ns_inode(eh.ns_of(host))}" / journal.JOURNAL_NAME
        try:
            _, pending = journal.read_journal(path)
        except FileNotFoundError:
            continue
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            out[host] = [f"unreadable: {exc}"]
            continue
        if pending or path in stale:
            out[host] = [e.what or e.op for e in pending]
    return out


def reaper_log_tail(eh: EmulatedHosts, host: str, n: int = 5) -> list[str]:
    path = journal.agent_base() / f"net-{ns_inode(eh.ns_of(host))}" / "reaper.log"
    try:
        return path.read_text(errors="replace").splitlines()[-n:]
    except OSError:
        return []


# ---- snapshots -----------------------------------------------------------------
def snapshots(eh: EmulatedHosts, pool: ThreadPoolExecutor) -> dict[str, dict]:
    futs = {h: pool.submit(host_snapshot, eh.ns_of(h)) for h in eh.hosts}
    return {h: f.result() for h, f in futs.items()}


def settled_snapshots(eh: EmulatedHosts, pool: ThreadPoolExecutor, timeout: float = 10) -> dict[str, dict]:
    """Snapshots once the hosts are idle: no address still tentative (IPv6
    duplicate address detection of a link just up takes ~1-2 s) and two in a
    row equal."""
    until = time.monotonic() + timeout
    last = snapshots(eh, pool)
    while time.monotonic() < until:
        time.sleep(0.2)
        now = snapshots(eh, pool)
        tentative = any(a.get("tentative") for s in now.values() for addrs in s["addresses"].values() for a in addrs)
        if now == last and not tentative:
            return now
        last = now
    return last


def without_mgmt_state(snap: dict) -> dict:
    """The snapshot less what a cut management link changes by itself (the
    carrier of mgmt0 and its routes' linkdown flag): compared while cut."""
    s = json.loads(json.dumps(snap))
    link = s["links"].get(MGMT_IF)
    if link:
        for k in ("flags", "operstate"):
            link.pop(k, None)
    for key in ("routes4", "routes6"):
        for r in s[key]:
            if r.get("dev") == MGMT_IF:
                r.pop("flags", None)
    return s


def diffs(before: dict[str, dict], now: dict[str, dict], mask=None) -> dict[str, list[str]]:
    f = mask or (lambda x: x)
    return {h: d for h in before if (d := snapshot_diff(f(before[h]), f(now[h])))}


# ---- one crash ---------------------------------------------------------------------
def controller_argv(inventory: Path, duration_s: float, nic: str | None = None) -> list[str]:
    return [str(SOFTNET), "trial", "--inventory", str(inventory), "--testbed", "tb1", "--rate", "100kpps",
            "--duration", f"{duration_s:g}", "--json", *(["--nic", nic] if nic else [])]


def sut_channels(eh: EmulatedHosts) -> dict[str, str]:
    """The SUT's first port's channels now (ethtool -l), as the NIC knobs set them."""
    from softnet.tools import hostcmd, nic

    text = hostcmd.in_netns(eh.ns_of("dut"), ["ethtool", "-l", "eth1"], check=False)
    if not text.strip():
        # in the SUT's namespace while a testbed lives (softnet.testbed.sut_lab), which is
        # mounted in the agent's mount namespace (sshd runs under `ip netns exec`)
        for pid in agent_pids(eh.ns_of("dut")):
            for ns in sorted(p.name for p in Path("/run/netns").glob("sn-*-sut")):
                text = subprocess.run(["nsenter", "-t", str(pid), "-m", "ip", "netns", "exec", ns, "ethtool", "-l",
                                       "eth1"], capture_output=True, text=True).stdout
                if text.strip():
                    break
    return nic.parse_ethtool("-l", text)[0] if text.strip() else {}


def error_text(stderr: str) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-3:])


def run_one(eh: EmulatedHosts, inventory: Path, scenario: str, at_s: float, rng: random.Random,
            duration_s: float, lease_s: float, pool: ThreadPoolExecutor, workdir: Path,
            cut_hosts: str = "both", victim: str | None = None, nic: str | None = None) -> dict:
    """One trial crashed at at_s seconds after the controller started; see the
    module doc. agent_kill kills the agent of ``victim`` (None: a random host).
    ``nic``: the trial's --nic knobs (the SUT's channels just before the
    action are recorded: whether they were applied when it came)."""
    hosts = list(eh.hosts)
    before = snapshots(eh, pool)
    rec: dict = {"scenario": scenario, "at_s": round(at_s, 3)}
    out_path, err_path = workdir / "controller.out", workdir / "controller.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.monotonic()
        ctl = subprocess.Popen(controller_argv(inventory, duration_s, nic), stdin=subprocess.DEVNULL, stdout=out,
                               stderr=err, start_new_session=True, cwd=str(ROOT))
    seen_agents: dict[str, list[int]] = {h: [] for h in hosts}
    phases: dict[str, float] = {}  # first seen, s after the controller started: where the action fell

    def note_agents():
        for h in hosts:
            for pid in agent_pids(eh.ns_of(h)):
                if pid not in seen_agents[h]:
                    seen_agents[h].append(pid)
                    phases.setdefault(f"agent_{h}", round(time.monotonic() - t0, 2))

    def note_phases():
        note_agents()
        gen = any(_comm(pid) == "softnet-gen" for pid in pids_in(eh.ns_of(hosts[0])))
        if gen:
            phases.setdefault("generator_running", round(time.monotonic() - t0, 2))
        elif "generator_running" in phases:
            phases.setdefault("generator_done", round(time.monotonic() - t0, 2))

    while time.monotonic() - t0 < at_s and ctl.poll() is None:
        note_phases()
        time.sleep(0.02)
    cut: list[str] = []
    if nic:
        rec["sut_channels_at_action"] = sut_channels(eh)
    if ctl.poll() is not None:
        rec["missed"] = f"the controller had ended ({ctl.returncode}) before the action"
        t_act = time.monotonic()
    elif scenario == "controller_kill":
        t_act = time.monotonic()
        os.kill(ctl.pid, signal.SIGKILL)
    elif scenario == "agent_kill":
        victim = victim or rng.choice(hosts)
        rec["victim"] = victim
        pids: list[int] = []
        while ctl.poll() is None and not (pids := agent_pids(eh.ns_of(victim))):
            time.sleep(0.01)  # not started yet: kill it as soon as it is
        t_act = time.monotonic()
        if pids:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            rec["killed_pids"] = pids
        else:
            rec["missed"] = "the controller ended before the agent appeared"
    elif scenario == "mgmt_cut":
        cut = hosts if cut_hosts == "both" else [rng.choice(hosts)]
        rec["cut"] = cut
        t_act = time.monotonic()
        for h in cut:
            eh.cut_mgmt(h)
    else:
        raise ValueError(scenario)
    rec["action_s"] = round(t_act - t0, 3)
    note_phases()
    # where the action fell: before the generator ran, while it ran, after it was done
    rec["phase"] = ("teardown" if "generator_done" in phases else "trial" if "generator_running" in phases
                    else "setup")
    note_agents()

    # Restored? Poll the snapshots until they equal the ones before and the
    # controller has ended (a controller still alive could change the hosts
    # again: with a link cut before it connected, it would once the link is
    # back), up to lease + 10 s. restore_s: since when they have been equal.
    deadline = t_act + lease_s + 10.0
    mask = without_mgmt_state if cut else None
    restored_s = None
    ctl_end: list[float] = []  # when the controller was first seen ended

    def note_end():
        if not ctl_end and ctl.poll() is not None:
            ctl_end.append(time.monotonic())

    while True:
        note_end()
        now = snapshots(eh, pool)
        t = time.monotonic()
        d = diffs(before, now, mask)
        if "first_diff" not in rec:
            rec["first_diff"] = {h: x[:10] for h, x in d.items()}
        if d:
            restored_s = None
        elif restored_s is None:
            restored_s = t - t_act
        if (not d and ctl_end) or t > deadline:
            break
        time.sleep(POLL_S)
    rec["restored"] = restored_s is not None
    rec["restore_s"] = None if restored_s is None else round(restored_s, 3)
    if d:
        rec["diff"] = d
    if cut:  # the links stay cut until the hosts are restored and the controller gave up
        for h in cut:
            eh.restore_mgmt(h)
        rec["mgmt_restored_s"] = round(time.monotonic() - t_act, 3)

    # The controller: ended by itself (agent_kill, mgmt_cut) with a clear error?
    grace_until = time.monotonic() + CONTROLLER_GRACE_S
    while ctl.poll() is None and time.monotonic() < grace_until:
        time.sleep(0.05)
    note_end()
    t_end = ctl_end[0] if ctl_end else time.monotonic()
    if ctl.poll() is None:
        rec["controller"] = {"hung": True, "running_s_after_action": round(t_end - t_act, 1)}
        os.killpg(ctl.pid, signal.SIGKILL)
        ctl.wait()
    else:
        stderr = err_path.read_text(errors="replace")
        rec["controller"] = {"hung": False, "exit_code": ctl.returncode,
                             "error": error_text(stderr) if ctl.returncode != 0 else "",
                             "traceback": "Traceback (most recent call last)" in stderr}
    rec["controller"]["ended_s_after_action"] = (None if rec["controller"]["hung"]
                                                 else round(t_end - t_act, 2))
    # Once all is over (the management links back, whose carrier returns
    # asynchronously): the full snapshots, mgmt0 included, equal the ones before.
    until = time.monotonic() + 5
    while (d_full := diffs(before, snapshots(eh, pool))) and time.monotonic() < until:
        time.sleep(POLL_S)
    if d_full:
        rec["restored"] = False
        rec["diff_at_end"] = d_full
    if ctl.returncode == 0:
        try:
            res = json.loads(out_path.read_text())
            rec["controller"]["result"] = {k: res.get(k) for k in ("sent_pkts", "received_pkts", "valid")}
        except ValueError:
            pass

    # Leftovers of this run: processes in the hosts' namespaces, pending journals.
    until = time.monotonic() + 5  # the reaper exits right after the agent's own undo
    while (left := {h: p for h in hosts if (p := run_processes(eh.ns_of(h)))}) and time.monotonic() < until:
        time.sleep(0.1)
    rec["left_processes"] = left
    rec["pending_journals"] = pending_journals(eh)
    rec["sshd_sessions_left"] = {h: sshd_sessions(eh.ns_of(h)) for h in hosts}
    rec["agents_seen"] = seen_agents
    rec["phases_s"] = phases
    if scenario == "agent_kill" and rec.get("victim"):
        rec["reaper_log"] = reaper_log_tail(eh, rec["victim"])
    # A controller may finish well when the kill came after its last request
    # to that host (teardown); otherwise it must fail.
    rec["ok"] = (not rec.get("missed") and rec["restored"] and not left and not rec["pending_journals"]
                 and not rec["controller"].get("hung") and not rec["controller"].get("traceback")
                 and (scenario == "controller_kill" or rec["controller"]["exit_code"] != 0
                      or rec["phase"] == "teardown"))
    return rec


def wait_quiet(eh: EmulatedHosts, baseline: dict[str, dict], pool: ThreadPoolExecutor, timeout: float = 60) -> list:
    """Before a repeat: both hosts back at the baseline and no sshd session of
    the last run left (a cut link's sessions end when their TCP gives up)."""
    until = time.monotonic() + timeout
    while True:
        d = diffs(baseline, snapshots(eh, pool))
        busy = {h: n for h in eh.hosts if (n := sshd_sessions(eh.ns_of(h)))}
        if not d and not busy:
            return []
        if time.monotonic() > until:
            return [f"{h}: {x}" for h, xs in d.items() for x in xs] + [f"{h}: {n} sshd sessions" for h, n in busy.items()]
        time.sleep(0.2)


# ---- the benchmark ---------------------------------------------------------------------
def run_scenario(scenario: str, repeats: int, lease_s: float, duration_s: float, at_range: tuple[float, float],
                 rng: random.Random, cut_hosts: str, nic: str | None = None) -> dict:
    runs = []
    with HostChanges() as ch, ThreadPoolExecutor(4) as pool:
        eh = EmulatedHosts(ch, lease_s=lease_s)
        inventory = eh.build()
        baseline = settled_snapshots(eh, pool)
        # Random points stratified over the run: repeat k draws from the k-th of
        # `repeats` equal slices of the range (in random order), so that ten
        # repeats cover setup, warm-up and window; a missed one redraws anywhere.
        lo, hi = at_range
        w = (hi - lo) / repeats
        ats = [rng.uniform(lo + k * w, lo + (k + 1) * w) for k in range(repeats)]
        rng.shuffle(ats)
        i = attempts = 0
        while i < repeats and attempts < 2 * repeats:  # a missed action (the run ended first) is done again
            attempts += 1
            not_back = wait_quiet(eh, baseline, pool)
            if not_back:
                runs.append({"scenario": scenario, "repeat": i, "skipped": "hosts not back at the baseline",
                             "diff": not_back[:20]})
                print(f"{scenario} #{i}: hosts not at the baseline: {not_back[:3]}", flush=True)
                continue
            at = ats[i] if not (runs and runs[-1].get("missed")) else rng.uniform(lo, hi)
            rec = run_one(eh, inventory, scenario, at, rng, duration_s, lease_s, pool, eh.workdir, cut_hosts,
                          nic=nic)
            rec["repeat"] = i
            runs.append(rec)
            i += 0 if rec.get("missed") else 1
            c = rec["controller"]
            print(f"{scenario} #{rec['repeat']}: at {rec['action_s']:.2f} s{' (' + rec['missed'] + ')' if rec.get('missed') else ''}"
                  f"{' victim ' + rec['victim'] if rec.get('victim') else ''}: restored={rec['restored']} "
                  f"in {rec['restore_s']} s; controller "
                  f"{'HUNG' if c.get('hung') else 'exit ' + str(c['exit_code'])} after {c['ended_s_after_action']} s"
                  f"{': ' + c['error'].splitlines()[-1] if c.get('error') else ''}"
                  f"{'; LEFT ' + str(rec['left_processes']) if rec['left_processes'] else ''}"
                  f"{'; PENDING ' + str(rec['pending_journals']) if rec['pending_journals'] else ''}", flush=True)
    return {"scenario": scenario, "runs": runs}


def summarize(scenario: str, runs: list[dict], lease_s: float) -> dict:
    missed = [r for r in runs if "skipped" not in r and r.get("missed")]
    done = [r for r in runs if "skipped" not in r and not r.get("missed")]  # the action hit a running trial
    times = [r["restore_s"] for r in done if r["restore_s"] is not None]
    ctl = [r["controller"] for r in done]
    ends = [c["ended_s_after_action"] for c in ctl if c.get("ended_s_after_action") is not None]
    exits = sorted({c.get("exit_code") for c in ctl if not c.get("hung")}, key=str)
    return {
        "scenario": scenario, "n": len(done), "restored": sum(r["restored"] for r in done),
        "skipped": sum("skipped" in r for r in runs),
        "within_s": lease_s + 10, "max_restore_s": max(times, default=None),
        "median_restore_s": sorted(times)[len(times) // 2] if times else None,
        "missed": len(missed), "missed_why": sorted({r["missed"] + ": " + r["controller"].get("error", "")
                                                     for r in missed}),
        "controller_hung": sum(bool(c.get("hung")) for c in ctl),
        "controller_tracebacks": sum(bool(c.get("traceback")) for c in ctl),
        "controller_exit_codes": exits, "controller_max_end_s": max(ends, default=None),
        "left_processes": sum(bool(r["left_processes"]) for r in done),
        "pending_journals": sum(bool(r["pending_journals"]) for r in done),
        "ok": sum(bool(r.get("ok")) for r in done),
        "phases": {ph: sum(r.get("phase") == ph for r in done) for ph in ("setup", "trial", "teardown")},
        "controller_exit_0_after_teardown_kill": sum(r["controller"].get("exit_code") == 0 for r in done
                                                     if scenario != "controller_kill"),
    }


def print_table(rows: list[dict]) -> None:
    head = ("scenario", "restored", "max restore s", "median s", "action in setup/trial/teardown",
            "controller outcome", "leftovers")
    lines = [head]
    for s in rows:
        if s["scenario"] == "controller_kill":
            outcome = "SIGKILLed"
        else:
            outcome = (f"exit {'/'.join(map(str, s['controller_exit_codes']))}, ended <= {s['controller_max_end_s']} s"
                       f" after the action; hung {s['controller_hung']}, tracebacks {s['controller_tracebacks']}")
        ph = s["phases"]
        lines.append((s["scenario"], f"{s['restored']}/{s['n']}", str(s["max_restore_s"]), str(s["median_restore_s"]),
                      f"{ph['setup']}/{ph['trial']}/{ph['teardown']}", outcome, f"processes {s['left_processes']}, journals {s['pending_journals']}"
                      + (f"; missed {s['missed']}, skipped {s['skipped']}" if s["missed"] or s["skipped"] else "")))
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    for row in lines:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--lease-s", type=float, default=10.0)
    p.add_argument("--duration", type=float, default=6.0, help="the trial's window, s (1 s warm-up before it)")
    p.add_argument("--scenario", choices=(*SCENARIOS, "all"), default="all")
    p.add_argument("--at", default=None, help="the action's time after the controller starts: uniform LO,HI s "
                   "(default 0.3,DURATION+2.7: from before the agents start to the window's end)")
    p.add_argument("--cut", choices=("both", "one"), default="both", help="mgmt_cut: both hosts or a random one")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--nic", default=None, help="the trials' NIC knobs, e.g. rx_channels=1,tx_channels=1 "
                   "(the SUT's ports have two queues: the crash must give them back)")
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/restore.json")
    a = p.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    # Measured (phases_s): agents start ~0.8 s after the controller, the
    # generator ~1.7 s, and the window ends ~1.7 + 1 (warm-up) + DURATION s.
    lo, hi = (float(x) for x in (a.at or f"0.3,{a.duration + 2.7:g}").split(","))
    scenarios = SCENARIOS if a.scenario == "all" else (a.scenario,)
    os.environ.setdefault("SOFTNET_WAIT", "3600")
    started = time.time()
    results = [run_scenario(s, a.repeats, a.lease_s, a.duration, (lo, hi), rng, a.cut, a.nic) for s in scenarios]
    summary = [summarize(r["scenario"], r["runs"], a.lease_s) for r in results]
    doc = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "seed": seed, "lease_s": a.lease_s,
           "duration_s": a.duration, "at_range_s": [lo, hi], "cut": a.cut, "nic": a.nic, "started_unix_s": started,
           "elapsed_s": round(time.time() - started, 1), "kernel": os.uname().release,
           "summary": summary, "scenarios": results}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print_table(summary)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
