"""How a campaign scales over a fleet: cells per hour against the number of
testbeds, and the scheduler's overhead per cell.

Simulated testbeds (this 2-CPU machine cannot hold real ones): each is a
`softnet fleet worker` whose trials take a fixed wall time (the synthetic
SUT with synthetic.trial_wall_s), so a cell takes runs x loads x that time
wherever it runs. For each fleet size a fresh scheduler and workers start
on localhost, one campaign of CELLS cells runs through `softnet run
--scheduler`, and the wall time from the controller's plan to its last
trial stored is measured (its start-up and final analysis apart).
Ideal: ceil(CELLS / N) x the cell time; the overhead per cell is
(N x wall - CELLS x cell time) / CELLS: what a testbed spends per cell on
anything but measuring (submission, the result's trip, storing). The
controller's and the scheduler's CPU time per trial stored say what each
trial costs them (every trial reaches the controller as it ends, through
the scheduler's event log; the controller's is its CPU time less that of
the same command run again with nothing left to measure). From --light-from testbeds on, the workers are
bare Dask workers (no `softnet fleet worker` supervisor, no nanny: a third
of the memory), so that 64 fit in this machine's memory.

Writes bench/results/fleet_scale-<UTC>.json (ignored by git).
Run: .venv/bin/python bench/fleet_scale.py [--sizes 1,4,16,64] [--cells 64] [--trial-s 0.5] [--light-from 32]
"""
from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from softnet.fleet.local import LocalFleet, softnet_argv  # noqa: E402
from softnet.fleet.resources import resources_arg, worker_resources  # noqa: E402
import results_file  # noqa: E402

SPEC = """name = "scale"
[testbed]
sut = "synthetic"
[synthetic]
trial_wall_s = {trial_s}
[method]
loads = ["100kpps", "300kpps"]
runs = 2
duration_s = 1
[matrix]
"traffic.flows" = {flows}
"""


class LightFleet(LocalFleet):
    """Bare Dask workers, one per simulated testbed (no supervisor, no nanny)."""

    def start_worker(self, tb: str, *extra: str) -> subprocess.Popen:
        out = open(self.tmp / f"worker-{tb}.log", "ab")
        argv = [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--no-nanny", "--nthreads", "1",
                "--resources", resources_arg(worker_resources(tb)), "--name", f"softnet-{tb}", "--host", "127.0.0.1",
                "--preload", "softnet.fleet.task", "--local-directory", str(self.tmp / f"w-{tb}")]
        self.workers[tb] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                            env=dict(os.environ, SOFTNET_FLEET_TESTBED=tb))
        return self.workers[tb]

    def wait_workers(self, n: int, timeout: float = 600) -> None:  # dozens of imports share two CPUs
        super().wait_workers(n, timeout)


def cpu_s(pid: int) -> float:
    import psutil

    t = sum(((c.cpu_times().user + c.cpu_times().system) for c in psutil.Process(pid).children(recursive=True)), 0.0)
    return t + psutil.Process(pid).cpu_times().user + psutil.Process(pid).cpu_times().system


def one(n: int, cells: int, trial_s: float, light: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "s.toml").write_text(SPEC.format(trial_s=trial_s, flows=list(range(1, cells + 1))))
        fleet = (LightFleet if light else LocalFleet)(d, [f"sim{i + 1}" for i in range(n)])
        try:
            sched0 = cpu_s(fleet.scheduler.pid)
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            p = subprocess.Popen(softnet_argv("run", str(d / "s.toml"), "--results", str(d / "r"), "--scheduler",
                                              fleet.address), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)
            t_plan = t_last = None
            lines, trials = [], 0
            for line in p.stderr:  # the controller's own progress: its plan, then every trial stored
                lines.append(line)
                if "part(s) to measure" in line and t_plan is None:
                    t_plan = time.monotonic()
                if " run " in line and "loss" in line:
                    t_last, trials = time.monotonic(), trials + 1
            end = time.monotonic()
            p.wait()
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            sched = cpu_s(fleet.scheduler.pid) - sched0
            # the same command again, nothing left to measure: the controller's fixed cost (start-up, analysis)
            subprocess.run(softnet_argv("run", str(d / "s.toml"), "--results", str(d / "r"), "--scheduler",
                                        fleet.address), capture_output=True, check=True)
            r2 = resource.getrusage(resource.RUSAGE_CHILDREN)
        finally:
            fleet.close()
    if p.returncode or t_plan is None or t_last is None:
        raise SystemExit("".join(lines)[-3000:])
    wall = t_last - t_plan
    cell_s = 4 * trial_s  # 2 loads x 2 runs
    ideal = math.ceil(cells / n) * cell_s
    controller = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    fixed = (r2.ru_utime + r2.ru_stime) - (r1.ru_utime + r1.ru_stime)
    return {"testbeds": n, "light_workers": light, "cells": cells, "trials": trials, "cell_s": cell_s,
            "wall_s": wall, "ideal_s": ideal,
            "controller_s": end - t0,  # with its start-up (imports, the scheduler's hello) and the final analysis
            "controller_cpu_s": controller, "controller_fixed_cpu_s": fixed,
            "controller_cpu_ms_per_trial": 1e3 * (controller - fixed) / max(trials, 1),
            "scheduler_cpu_ms_per_trial": 1e3 * sched / max(trials, 1),
            "cells_per_hour": cells / wall * 3600, "ideal_cells_per_hour": cells / ideal * 3600,
            "efficiency": ideal / wall, "overhead_s_per_cell": (n * wall - cells * cell_s) / cells}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,4,16,64")
    ap.add_argument("--cells", type=int, default=64)
    ap.add_argument("--trial-s", type=float, default=0.5)
    ap.add_argument("--light-from", type=int, default=32)
    a = ap.parse_args()
    rows = []
    for n in (int(x) for x in a.sizes.split(",")):
        rows.append(one(n, a.cells, a.trial_s, n >= a.light_from))
        x = rows[-1]
        print(f"{n:3d} testbeds: {x['cells_per_hour']:7.0f} cells/h (ideal {x['ideal_cells_per_hour']:7.0f}, "
              f"{100 * x['efficiency']:.0f}%), wall {x['wall_s']:.1f} s, overhead {x['overhead_s_per_cell']:.2f} s "
              f"per cell; CPU per trial: controller {x['controller_cpu_ms_per_trial']:.1f} ms, scheduler "
              f"{x['scheduler_cpu_ms_per_trial']:.1f} ms", flush=True)
    print(results_file.write("fleet_scale", {"trial_s": a.trial_s, "runs": rows}))


if __name__ == "__main__":
    main()
