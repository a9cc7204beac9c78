"""Golden search traces: record what softnet.search decides on deterministic
simulated SUTs, and check that a change to the search decides the same.

Each case is data (an SUT, goals, settings); its record is every trial in
order (load, duration, counts, flags and the reason the search gave) and the
SearchResult as JSON. A refactor of the search must reproduce every record
byte for byte; a change of method shows up as the cases it moved.

    .venv/bin/python bench/search_golden.py --record /tmp/search_golden.json [--cases full]
    .venv/bin/python bench/search_golden.py --check /tmp/search_golden.json

``--cases test`` is the small set stored in tests/data/search_golden.json and
checked by tests/test_search.py; ``full`` adds 30 seeds per shape, budgets and
every search setting off its default.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.search import Goal, Measurement, SearchConfig, search  # noqa: E402
from softnet.search.simulated import SHAPES, SimulatedSut  # noqa: E402

NDR_PDR = [{"loss_ratio": 0.0, "relative_width": 0.005}, {"loss_ratio": 0.005, "relative_width": 0.005}]
LOADS = {"min_load_pps": 1e4, "max_load_pps": 1e7}


def bench_capacity(seed: int) -> float:
    """The capacity bench/search_bench.py gives a seed."""
    return float(np.exp(np.random.default_rng([seed, 99]).uniform(math.log(5e5), math.log(5e6))))


def sim(shape: str, seed: int, goals=NDR_PDR, **settings) -> dict:
    return {"sut": {"kind": "simulated", "shape": shape, "capacity_pps": bench_capacity(seed), "seed": seed},
            "goals": goals, **LOADS, "relative_width": 0.005, **settings}


def cases(which: str) -> list[dict]:
    out = [sim(shape, seed) for shape in SHAPES for seed in range(3)]
    out += [sim("sharp", 3, max_trials=6), sim("inversion", 1, check_min_load=False),
            sim("low_load_loss", 4, max_trial_seconds=15.0), sim("sharp", 121, knee_trials=3)]
    if which == "test":
        return out
    out += [sim(shape, seed) for shape in SHAPES for seed in range(3, 30)]
    out += [sim(shape, seed, **budget) for shape in SHAPES for seed in range(5)
            for budget in ({"max_trials": 6}, {"max_trials": 20}, {"max_trial_seconds": 4.5},
                           {"max_trial_seconds": 15.0})]
    short = [{**g, "initial_trial_duration": 0.1} for g in NDR_PDR]
    strict = [{"loss_ratio": 0.001, "exceed_ratio": 0.2, "confidence": 0.95}]
    out += [sim(shape, seed, **v) for shape in SHAPES for seed in range(3) for v in (
        {"max_trials_per_load": 5}, {"final_confidence": 0.95}, {"bracket_factor": 2.0}, {"knee_trials": 8},
        {"unstable_width": 0.01}, {"check_min_load": False}, {"relative_width": 0.02, "goals": [{}, {"loss_ratio": 0.005}]},
        {"goals": short}, {"goals": strict})]
    out += [{"sut": {"kind": "flat", "capacity_pps": c, "low_load_loss": x}, "goals": NDR_PDR,
             "min_load_pps": 1e4, "max_load_pps": hi, "relative_width": 0.005}
            for c, x, hi in ((5e5, 0.02, 1e7), (2e7, 0.0, 1e6), (7.4e5, 0.0, 1e7), (3e6, 0.001, 1e7))]
    out += [{"sut": {"kind": "limited", "limit_pps": 2e6}, "goals": NDR_PDR, **LOADS, "relative_width": 0.005}]
    return out


def make_sut(s: dict):
    if s["kind"] == "simulated":
        return SimulatedSut(s["shape"], s["capacity_pps"], s["seed"])

    def measure(load: float, duration: float) -> Measurement:
        offered = int(load * duration)
        if s["kind"] == "limited":  # a generator that cannot offer more than the limit
            if load > s["limit_pps"]:
                return Measurement(load, duration, offered, 0, ("generator_limited",),
                                   {"achieved_rate_pps": s["limit_pps"] * 1.05})
            return Measurement(load, duration, offered, offered)
        fwd = min(offered, int(s["capacity_pps"] * duration))
        return Measurement(load, duration, offered, int(fwd * (1 - s["low_load_loss"])))
    return measure


def run(case: dict) -> str:
    """One case's record: its trials (with the search's reasons) and result, as JSON."""
    whys: list[str] = []
    settings = {k: v for k, v in case.items() if k not in ("sut", "goals")}
    # The records are of the Bayesian rule (recorded before the specification's became the default).
    config = SearchConfig(goals=[Goal(**g) for g in case["goals"]], **{"rule": "bayes", **settings})
    r = search(make_sut(case["sut"]), config, on_trial=lambda m, why: whys.append(why))
    return json.dumps({"case": case, "whys": whys, "result": r.to_dict()}, sort_keys=True)


def run_all(which: list[dict], jobs: int) -> list[str]:
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(run, which, chunksize=1))


def check(path: Path, jobs: int = 2) -> tuple[list[dict], int]:
    """(cases whose record differs now, cases checked)."""
    stored = json.loads(path.read_text())
    now = [json.loads(n) for n in run_all([r["case"] for r in stored], jobs)]
    return [r["case"] for r, n in zip(stored, now) if not same(r, n)], len(stored)


def same(a, b) -> bool:
    """Records equal, floats to 1e-9: a posterior summed in another order moves
    the last bits of a confidence, never a decision. Keys a result gained after
    the record was made (the specification's bounds) are not compared, nor
    ``value_pps``, derived from the status and those bounds (it was the lower
    bound when the records were made, the conditional throughput since)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and (
            math.isclose(a, b, rel_tol=1e-9) or (math.isnan(a) and math.isnan(b)))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() <= b.keys() and all(same(a[k], b[k]) for k in a if k != "value_pps")
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    act = ap.add_mutually_exclusive_group(required=True)
    act.add_argument("--record", type=Path, help="run the cases and write their records here")
    act.add_argument("--check", type=Path, help="run the cases of this file and compare with its records")
    ap.add_argument("--cases", choices=("test", "full"), default="full")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    if args.record:
        records = run_all(cases(args.cases), args.jobs)
        args.record.write_text("[\n" + ",\n".join(records) + "\n]\n")
        print(f"{len(records)} searches recorded in {args.record}")
        return 0
    moved, total = check(args.check, args.jobs)
    for case in moved:
        print("differs:", json.dumps(case))
    print(f"{total - len(moved)} of {total} searches identical")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
