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
anything but measuring (submission, the result's trip, storing).

Writes bench/results/fleet_scale-<UTC>.json (ignored by git).
Run: .venv/bin/python bench/fleet_scale.py [--sizes 1,2,4,8,16] [--cells 32] [--trial-s 0.5]
"""
from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from softnet.fleet.local import LocalFleet, softnet_argv  # noqa: E402
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


def one(n: int, cells: int, trial_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "s.toml").write_text(SPEC.format(trial_s=trial_s, flows=list(range(1, cells + 1))))
        fleet = LocalFleet(d, [f"sim{i + 1}" for i in range(n)])
        try:
            t0 = time.monotonic()
            p = subprocess.Popen(softnet_argv("run", str(d / "s.toml"), "--results", str(d / "r"), "--scheduler",
                                              fleet.address), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)
            t_plan = t_last = None
            lines = []
            for line in p.stderr:  # the controller's own progress: its plan, then every trial stored
                lines.append(line)
                if "cell(s) to measure" in line and t_plan is None:
                    t_plan = time.monotonic()
                if " run " in line and "loss" in line:
                    t_last = time.monotonic()
            end = time.monotonic()
        finally:
            fleet.close()
    if p.wait() or t_plan is None or t_last is None:
        raise SystemExit("".join(lines)[-3000:])
    wall = t_last - t_plan
    cell_s = 4 * trial_s  # 2 loads x 2 runs
    ideal = math.ceil(cells / n) * cell_s
    return {"testbeds": n, "cells": cells, "cell_s": cell_s, "wall_s": wall, "ideal_s": ideal,
            "controller_s": end - t0,  # with its start-up (imports, the scheduler's hello) and the final analysis
            "cells_per_hour": cells / wall * 3600, "ideal_cells_per_hour": cells / ideal * 3600,
            "efficiency": ideal / wall, "overhead_s_per_cell": (n * wall - cells * cell_s) / cells}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,2,4,8,16")
    ap.add_argument("--cells", type=int, default=32)
    ap.add_argument("--trial-s", type=float, default=0.5)
    a = ap.parse_args()
    rows = []
    for n in (int(x) for x in a.sizes.split(",")):
        rows.append(one(n, a.cells, a.trial_s))
        x = rows[-1]
        print(f"{n:3d} testbeds: {x['cells_per_hour']:7.0f} cells/h (ideal {x['ideal_cells_per_hour']:7.0f}, "
              f"{100 * x['efficiency']:.0f}%), wall {x['wall_s']:.1f} s, overhead {x['overhead_s_per_cell']:.2f} s "
              "per cell", flush=True)
    print(results_file.write("fleet_scale", {"trial_s": a.trial_s, "runs": rows}))


if __name__ == "__main__":
    main()
