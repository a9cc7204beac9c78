"""The soak's model (softnet.analysis.plr_model) on simulated SUTs whose
critical load is known: the median error of the estimate and how often its
interval holds the truth, against the trial time spent. Each soak is the
runner's loop (the next load drawn from the posterior, pulled up after
zero-loss trials; trials 0.2 s longer each) on a PASTRAMI load-loss model
(softnet.analysis.synthetic) with binomial noise.

    .venv/bin/python bench/soak_model.py --repeats 8 --budget 60,300,1200
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from results_file import write  # noqa: E402
from softnet.analysis.plr_model import LossEvidence, PlrModel  # noqa: E402
from softnet.analysis.synthetic import LoadLossModel  # noqa: E402

TARGET = 1e-7
# name -> (SUT, its critical load at TARGET)
SUTS = {
    "knee 500k": (LoadLossModel(o_sat_pps=500e3), 500e3 / (1 - TARGET)),
    "knee 1.5M, 0.1% at sat": (LoadLossModel(o_sat_pps=1.5e6, plr_at_sat=1e-3, pre_sat_exponent=40),
                               1.5e6 * (TARGET / 1e-3) ** (1 / 40)),
    "power law 8 (misfit)": (LoadLossModel(o_sat_pps=1e6, plr_at_sat=1e-3, pre_sat_exponent=8),
                             1e6 * (TARGET / 1e-3) ** (1 / 8)),
}


def soak(sut: LoadLossModel, budget_s: float, seed: int, step_s: float) -> list[tuple[float, object]]:
    """(trial seconds so far, estimate) after each trial until the budget of trial seconds."""
    model, ev, out, post, received, spent = PlrModel(1e4, 2e6, TARGET), [], [], None, None, 0.0
    rng = np.random.default_rng(seed)
    i = 0
    while spent < budget_s:
        load = model.next_load(post, i, seed, received, ev)
        d = 1.0 + step_s * i
        tx, rx = sut(load, d, rng)
        received = rx / d
        ev.append(LossEvidence(load, d, tx - rx))
        post = model.posterior(ev)
        spent += d
        out.append((spent, post.estimate))
        i += 1
    return out


def at(path: list[tuple[float, object]], seconds: float):
    return next((e for s, e in path if s >= seconds), path[-1][1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--budget", default="60,300,1200", help="trial seconds at which to read the estimate")
    ap.add_argument("--step", type=float, default=0.2, help="each trial this much longer than the last (s)")
    a = ap.parse_args()
    budgets = [float(b) for b in a.budget.split(",")]
    rows, t0 = [], time.monotonic()
    for name, (sut, truth) in SUTS.items():
        paths = [soak(sut, max(budgets), seed, a.step) for seed in range(a.repeats)]
        for b in budgets:
            est = [at(p, b) for p in paths]
            errors = [abs(e.median_pps / truth - 1) for e in est]
            covered = sum(e.lower_pps * 0.99 <= truth <= e.upper_pps * 1.01 for e in est)
            rows.append({"sut": name, "truth_pps": truth, "trial_seconds": b,
                         "median_error": statistics.median(errors), "max_error": max(errors),
                         "covered": covered, "repeats": a.repeats,
                         "median_width": statistics.median(e.relative_width for e in est),
                         "trials": statistics.median(sum(1 for s, _ in p if s <= b) for p in paths)})
            r = rows[-1]
            print(f"{name:24s} {b:6.0f} s  trials {r['trials']:5.0f}  median error {100 * r['median_error']:5.1f}%  "
                  f"max {100 * r['max_error']:5.1f}%  interval holds truth {covered}/{a.repeats}  "
                  f"width {100 * r['median_width']:5.1f}%", flush=True)
    path = write("soak_model", {"target_loss_ratio": TARGET, "step_s": a.step, "rows": rows,
                                "wall_s": time.monotonic() - t0})
    print(f"results: {path}")
    return 0 if all(math.isfinite(r["median_error"]) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
