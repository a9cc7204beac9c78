"""Known-truth tests with a CPU hog beside them: each selected test run N
times while a SCHED_OTHER busy loop holds each CPU (the load a shared CI
runner brings). Every run must pass: a figure the host spoilt is to be
reported as such by the product ("disturbed", a spoilt victim rest) and the
test assert on that, never fail on a wrong figure. Reports per test the
passes, the failures (with their first assertion line) and the reruns.

Writes bench/results/known_truth_under_load-<UTC>.json (ignored by git).
Run (root): .venv/bin/python bench/known_truth_under_load.py [--runs 10] [--no-hog]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import results_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/test_trial_hosts.py::test_a_victim_disturbed_at_rest_has_no_baseline",
    "tests/test_victim_check.py::test_profile_with_a_victim_reports_the_cross_check",
    "tests/test_host_stalls.py::test_softnet_trial_finds_injected_stalls_and_says_so",
    "tests/test_stalls.py::test_injected_stalls_found_on_a_sleeping_task",
    "tests/test_stalls.py::test_injected_stalls_found_on_the_napi_kthread",
    "tests/test_sides.py::test_an_egress_qdisc_queues_what_the_sut_sends",
]
HOG = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def hogs(on: bool) -> list[subprocess.Popen]:
    if not on:
        return []
    return [subprocess.Popen([sys.executable, "-c", HOG, str(cpu)]) for cpu in sorted(os.sched_getaffinity(0))]


def run_once(test: str) -> dict:
    t0 = time.monotonic()
    r = subprocess.run([str(ROOT / ".venv/bin/pytest"), "-q", "-p", "no:randomly", "-p", "no:rerunfailures", test],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    tail = r.stdout.strip().splitlines()
    first_e = next((line for line in tail if line.startswith("E ")), "")
    return {"passed": r.returncode == 0, "seconds": round(time.monotonic() - t0, 1), "why": first_e[:300],
            "summary": tail[-1] if tail else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-hog", action="store_true", help="the same runs without the busy loops")
    ap.add_argument("--tests", default=",".join(TESTS), help="comma-separated pytest node ids")
    a = ap.parse_args()
    out = {"runs": a.runs, "hog": not a.no_hog, "tests": {}}
    procs = hogs(not a.no_hog)
    try:
        for test in a.tests.split(","):
            rows = [run_once(test) for _ in range(a.runs)]
            out["tests"][test] = {"passed": sum(r["passed"] for r in rows), "runs": rows}
            print(f"{sum(r['passed'] for r in rows)}/{a.runs} {test}", flush=True)
            for r in rows:
                if not r["passed"]:
                    print(f"    failed: {r['why']}", flush=True)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    print(results_file.write("known_truth_under_load", out))


if __name__ == "__main__":
    main()
