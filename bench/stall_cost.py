"""What softnet-stalls (or softnet-stacks) takes from a busy CPU, by detours: a loop pinned to the
SUT CPU reads CLOCK_MONOTONIC back to back (bench/detour/detour.c); gaps above
300 ns are time taken from it (interrupts, the probe's programs, the host).
Probe off / on alternated, REPS pairs of SECS each; Welch 95% intervals of the
difference. Extra arguments go to softnet-stalls (e.g. --period-us 1000);
with --tool stacks first, to softnet-stacks sampling the loop's CPU (e.g.
--freq 999).

Run (root, quiet host): .venv/bin/python bench/stall_cost.py REPS SECS [--tool stacks] [--period-us N | --freq HZ]
Writes bench/results/stall_cost-<UTC>.json."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from softnet.testbed.lock import testbed_lock  # noqa: E402
from softnet.tools.process import tool  # noqa: E402
import results_file  # noqa: E402

CPU = 1
COLS = ["small/s", "small ns/s", "mid/s", "mid ns/s", "big/s", "big ns/s", "loops/s"]  # < 20 us, < 1 ms, >= 1 ms


def main() -> None:
    reps, secs, extra = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
    name = "stalls"
    if extra[:1] == ["--tool"]:
        name, extra = extra[1], extra[2:]
    cpus = ["--cpus", "0,1"] if name == "stalls" else ["--cpus", str(CPU)]
    with tempfile.TemporaryDirectory() as tmp:
        detour = Path(tmp) / "detour"
        subprocess.run(["gcc", "-O2", "-o", str(detour), str(ROOT / "bench/detour/detour.c")], check=True)
        res: dict[bool, list] = {False: [], True: []}
        with testbed_lock(wait_s=3600):
            for rep in range(reps):
                for on in ((False, True) if rep % 2 == 0 else (True, False)):
                    probe = None
                    if on:
                        probe = subprocess.Popen([str(tool(name)), *cpus, "--cpu", "0", *extra],
                                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                        probe.stdout.readline()
                    out = subprocess.run([str(detour), str(CPU), str(secs)], capture_output=True, text=True).stdout
                    if probe:
                        probe.stdin.write("quit\n")
                        probe.stdin.flush()
                        probe.wait()
                    res[on].append([float(x) for x in out.split()])
    off, on = np.array(res[False]), np.array(res[True])
    tot_on, tot_off = on[:, [1, 3, 5]].sum(axis=1), off[:, [1, 3, 5]].sum(axis=1)
    ci = stats.ttest_ind(tot_on, tot_off, equal_var=False).confidence_interval(0.95)
    summary = {"added_cpu_pct": 100 * (tot_on.mean() - tot_off.mean()) / 1e9,
               "added_cpu_pct_ci95": [100 * ci.low / 1e9, 100 * ci.high / 1e9],
               "loop_rate_on_off": on[:, 6].mean() / off[:, 6].mean()}
    out = {"benchmark": "stall_cost", "tool": name, "args": sys.argv[1:], "columns": COLS, "on": on.tolist(), "off": off.tolist(),
           "summary": summary}
    path = results_file.write("stall_cost", out)
    print(json.dumps(summary, indent=1), f"\nwritten: {path}")


if __name__ == "__main__":
    main()
