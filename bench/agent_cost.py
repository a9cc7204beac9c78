"""What the SUT host's agent costs a housekeeping CPU while a remote trial's
window runs (the target: < 0.5% at a 1 s sample interval).

Remote trials on emulated hosts (softnet.testbed.emulated_hosts), driven from
this process through RemoteTestbed: 100 kpps, 1 s warm-up, a WINDOW s window.
At the window's edges (the times the controller sends the SUT agent in its
`window` request), utime + stime of /proc/PID/stat are read for

  agent    the SUT host's `softnet agent --stdio` (the process: all its
           threads, the kernel sampler's among them)
  stalls   the softnet-stalls process the agent runs (the stall probe)
  sshd     the sshd session processes between the host's sshd and the agent
  reaper   the agent's reaper (waits on a pidfd: ~0)

and the cost is CPU seconds / window seconds x 100, in % of one CPU. Also
recorded: the agent's children reaped during the window (cutime + cstime) and
the agent's threads' run time from schedstat (ns, a finer cross-check of the
tick-based figure). Repeated REPEATS times with sampling at 1 s and with
sampling off (sample_interval_s=None), alternating; median and spread (min,
max) of each.

Run (root):  SOFTNET_WAIT=3600 .venv/bin/python bench/agent_cost.py --repeats 5 --window 30
Writes bench/results/agent_cost.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.restore_bench import _comm, _cmdline, _ppid, agent_pids, pids_in  # noqa: E402
from softnet.hosts import session as session_mod  # noqa: E402
from softnet.hosts.inventory import load  # noqa: E402
from softnet.campaign.trial import trial
from softnet.hosts.remote_trial import RemoteTestbed  # noqa: E402
from softnet.results.trial import TrialSpec  # noqa: E402
from softnet.testbed.emulated_hosts import EmulatedHosts  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
PARTS = ("agent", "stalls", "sshd", "reaper")


def cpu_s(pid: int) -> tuple[float, float]:
    """(utime + stime, cutime + cstime) of a process, s: all its threads."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK, (int(f[13]) + int(f[14])) / TICK


def sched_ns(pid: int) -> int:
    """Run time of the process's live threads (schedstat), ns."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def processes(ns: str) -> dict[str, list[int]]:
    """The SUT host's agent, its stall probe, reaper and sshd session chain."""
    agents = agent_pids(ns)
    if len(agents) != 1:
        raise RuntimeError(f"expected one agent in {ns}, found {agents}")
    agent = agents[0]
    chain, pid = [], _ppid(agent)
    while pid and _comm(pid) in ("sshd", "sshd-session", "bash", "sh"):  # up to the listener
        if any("[listener]" in a for a in _cmdline(pid)) or "-D" in _cmdline(pid):
            break
        chain.append(pid)
        pid = _ppid(pid)
    in_ns = pids_in(ns)
    return {"agent": [agent], "sshd": chain,
            "stalls": [p for p in in_ns if _comm(p) == "softnet-stalls"],
            "reaper": [p for p in in_ns if _comm(p) == "softnet-reaper"]}


def read_all(procs: dict[str, list[int]]) -> dict:
    out = {"t": time.monotonic()}
    for part, pids in procs.items():
        out[part] = sum(cpu_s(p)[0] for p in pids)
    out["agent_children"] = cpu_s(procs["agent"][0])[1]
    out["agent_sched_ns"] = sched_ns(procs["agent"][0])
    return out


class WindowWatch:
    """Reads the SUT agent's processes at the window edges the controller
    sends it (on this machine the hosts share our clock)."""

    def __init__(self, ns: str):
        self.ns, self.edges, self.reads, self.error = ns, None, [], None
        self._orig = session_mod.AgentSession.call
        self._thread = None

    def __enter__(self):
        watch = self

        def call(s, op, timeout=60.0, **args):
            if op == "window" and watch.edges is None:
                watch.edges = list(args["at_unix_s"])
                watch._thread = threading.Thread(target=watch._run, daemon=True)
                watch._thread.start()
            return watch._orig(s, op, timeout=timeout, **args)

        session_mod.AgentSession.call = call
        return self

    def __exit__(self, *exc):
        session_mod.AgentSession.call = self._orig
        if self._thread:
            self._thread.join()

    def _run(self):
        try:
            procs = processes(self.ns)
            self.procs = procs
            self.cmdlines = {k: [" ".join(_cmdline(pid)).strip() for pid in v] for k, v in procs.items()}
            for at in self.edges:
                time.sleep(max(0.0, at - time.time()))
                self.reads.append(read_all(procs) | {"unix_s": time.time()})
        except Exception as exc:  # noqa: BLE001 - reported with the repeat
            self.error = f"{type(exc).__name__}: {exc}"


def one(inv, ns: str, window_s: float, sample_interval_s: float | None) -> dict:
    spec = TrialSpec(rate_pps=100e3, duration_s=window_s, warmup_s=1.0, sample_interval_s=sample_interval_s)
    with RemoteTestbed(inv, "tb1") as tb, WindowWatch(ns) as w:
        result = trial(tb, spec)
    if w.error or len(w.reads) != 2:
        raise RuntimeError(f"window reads failed: {w.error or w.reads}")
    a, b = w.reads
    secs = b["t"] - a["t"]
    pct = {part: 100 * (b[part] - a[part]) / secs for part in PARTS}
    pct["agent_children"] = 100 * (b["agent_children"] - a["agent_children"]) / secs
    pct["agent_schedstat"] = 100 * (b["agent_sched_ns"] - a["agent_sched_ns"]) / 1e9 / secs
    pct["total"] = sum(pct[p] for p in PARTS) + pct["agent_children"]
    kernel = result.get("kernel") or {}
    return {"sample_interval_s": sample_interval_s, "window_s": round(secs, 3), "pct_of_one_cpu": pct,
            "pids": {k: v for k, v in w.procs.items()},
            "cmdlines": w.cmdlines,
            "trial": {k: result.get(k) for k in ("sent_pkts", "received_pkts", "loss_ratio", "valid", "flags")},
            "samples": kernel.get("samples"),
            # the sampler's own account (its thread + window-edge samples), % of one CPU
            "sampler_self_pct": (100 * kernel["sampler"]["cpu_share_of_one_cpu"]
                                 if (kernel.get("sampler") or {}).get("cpu_share_of_one_cpu") is not None else None)}


def stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": [round(v, 4) for v in values]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--window", type=float, default=30.0, help="the trial's window, s")
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/agent_cost.json")
    a = p.parse_args()
    os.environ.setdefault("SOFTNET_WAIT", "3600")
    runs = []
    started = time.time()
    with HostChanges() as ch:
        eh = EmulatedHosts(ch)
        inv = load(eh.build())
        for i in range(a.repeats):
            for interval in ((1.0, None) if i % 2 == 0 else (None, 1.0)):
                r = one(inv, eh.ns_of("dut"), a.window, interval)
                r["repeat"] = i
                runs.append(r)
                pc = r["pct_of_one_cpu"]
                print(f"#{i} sampling {interval or 'off'}: agent {pc['agent']:.3f}% (schedstat "
                      f"{pc['agent_schedstat']:.3f}%), stalls {pc['stalls']:.3f}%, sshd {pc['sshd']:.3f}%, "
                      f"reaper {pc['reaper']:.3f}%, total {pc['total']:.3f}% over {r['window_s']:.1f} s; "
                      f"trial {r['trial']}", flush=True)
    summary = {}
    for interval, name in ((1.0, "sampling_1s"), (None, "sampling_off")):
        rs = [r["pct_of_one_cpu"] for r in runs if r["sample_interval_s"] == interval]
        summary[name] = {k: stats([r[k] for r in rs]) for k in rs[0]}
    doc = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "window_s": a.window,
           "rate_pps": 100e3, "clock_ticks_per_s": TICK, "kernel": os.uname().release, "cpus": os.cpu_count(),
           "started_unix_s": started, "elapsed_s": round(time.time() - started, 1), "target_pct": 0.5,
           "summary": summary, "runs": runs}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'% of one CPU':<14}{'agent':>22}{'agent schedstat':>22}{'stalls':>22}{'sshd':>22}{'total':>22}")
    for name, s in summary.items():
        cells = [f"{s[k]['median']:.3f} ({s[k]['min']:.3f}-{s[k]['max']:.3f})"
                 for k in ("agent", "agent_schedstat", "stalls", "sshd", "total")]
        print(f"{name:<14}" + "".join(f"{c:>22}" for c in cells))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
