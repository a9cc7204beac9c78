"""Where a paired comparison's spread comes from, and what trial length buys
the most precision per trial-second: A against itself (two named variants
of one data path), one comparison per trial duration, each with the same
budget. Per duration and metric (capacity at the overload, CPU per packet
at the fixed load):

* the pairs' spread: the robust SD (1.4826 x MAD) of ln(b / a); CPU per
  packet both over the whole trial (the kthreads' run time before to after,
  warm-up and drain in it) and between the window's edges (cpu_window);
* its cost: SD^2 x trial-seconds per round, the variance one trial-second
  buys (lower is better: the same interval for fewer trial-seconds);
* the trials a metric could not use (their flags), and how much of the CPU
  spread the host's stalls and steal time on the SUT's CPU explain (the
  correlation of the pairs' changes with their difference in stall time),
  and how much the batching does: the kthreads' wake-ups per packet
  (schedstat), their correlation, slope and the spread left after taking
  them out by regression.

Writes bench/results/compare_spread-<UTC>.json (ignored by git).
With --pairings sequential,interleaved each duration gets one comparison of
each pairing, one after the other (softnet.campaign.interleave).

Run (root): .venv/bin/python bench/compare_spread.py [--durations 0.25,0.5,1,2] [--budget 40] [--sut ipv4-fwd]
            [--metrics capacity,cpu] [--pairings sequential,interleaved] [--repeats N]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from softnet.analysis.comparisons import METRICS, MetricDef, compared, usable, value  # noqa: E402
from softnet.analysis.paired import adjust  # noqa: E402
from softnet.results.store import Store  # noqa: E402
import results_file  # noqa: E402


def stalled_ms(result: dict) -> float | None:
    """The probe's stall plus steal time on the data path's CPUs during the trial, ms."""
    per_cpu = ((result.get("host_stalls") or {}).get("per_cpu")) or {}
    if not per_cpu:
        return None
    return sum((c.get("total_ms") or 0) + (c.get("steal_ms") or 0) for c in per_cpu.values())


def wakeups_per_pkt(result: dict, kind: str) -> float | None:
    """The SUT kthreads' wake-ups per packet, over the trial or the window (cpu_window)."""
    c = result.get("sut_thread_cpu") or {}
    if kind == "cpu_window":
        runs, pkts = c.get("window_runs"), result.get("received_pkts")
    else:
        runs, pkts = c.get("runs"), c.get("forwarded_pkts")
    return runs / pkts if runs and pkts else None


def one(sut: str, load: str, duration: float, budget: float, folder: Path, keep: Path | None = None,
        metrics: str = "capacity,cpu", pairing: str = "sequential") -> dict:
    r = subprocess.run([sys.executable, "-m", "softnet", "compare", "--variant", f"name=A;testbed.sut={sut}",
                        "--variant", f"name=A2;testbed.sut={sut}", "--load", load, "--metrics", metrics,
                        "--duration", str(duration), "--budget", str(budget), "--min-rounds", "1000",
                        "--pairing", pairing, "--results", str(folder), "--json"],
                       capture_output=True, text=True, timeout=3600)
    if keep is not None:  # each comparison's results folder, to look at its pairs again
        shutil.copytree(folder, keep / f"spread-{pairing}-{duration:g}s-{int(time.time())}")
    if r.returncode not in (0, 1):
        raise SystemExit(r.stderr[-3000:])
    with Store(folder, read_only=True) as st:
        rows = st.query("SELECT cell_id, load_index, run_index, result_json FROM trials")
    raw = {(x["cell_id"], x["load_index"], x["run_index"]): json.loads(x["result_json"]) for x in rows}
    trials = {k: compared(v) for k, v in raw.items()}
    rounds = 1 + max(k[2] for k in trials)
    per_round = len(metrics.split(",")) * 2 * duration
    out = {"duration_s": duration, "pairing": pairing, "rounds": rounds, "trial_s_per_round": per_round}
    window_cpu = MetricDef("cpu", "cpu_window", "ns/pkt", "lower", "ratio",
                           lambda t: t.sut_thread_cpu.window_ns_per_pkt if t.sut_thread_cpu else None)
    kinds = (("capacity", 1, METRICS["capacity"][0]), ("cpu", 0, METRICS["cpu"][0]), ("cpu_window", 0, window_cpu))
    for kind, li, m in (k for k in kinds if k[0].split("_")[0] in metrics.split(",")):
        a = [value(trials.get((0, li, i)), m) for i in range(rounds)]
        b = [value(trials.get((1, li, i)), m) for i in range(rounds)]
        ok = [i for i in range(rounds) if a[i] and b[i]]
        d = np.log([b[i] / a[i] for i in ok])
        flags = Counter(f for v in (0, 1) for i in range(rounds) if (t := trials.get((v, li, i))) is not None
                        and not usable(t, m.kind) for f in t.flags or ())
        sd = float(1.4826 * np.median(np.abs(d - np.median(d)))) if len(d) > 2 else None
        got = {"pairs": len(ok), "sd": sd, "sd_plain": float(d.std(ddof=1)) if len(d) > 2 else None,
               "cost": None if sd is None else sd ** 2 * per_round, "unusable_flags": dict(flags)}
        if kind.startswith("cpu"):  # the kthreads' wake-ups per packet: how the packets were batched
            x = [(wakeups_per_pkt(raw[(0, li, i)], kind), wakeups_per_pkt(raw[(1, li, i)], kind)) for i in ok]
            if len(d) > 3 and all(v for p in x for v in p):
                dx = np.log([b_ / a_ for a_, b_ in x])
                adjusted, beta = adjust(d, dx)
                got |= {"corr_with_wakeups": float(np.corrcoef(d, dx)[0, 1]), "beta_wakeups": beta,
                        "sd_adjusted": float(1.4826 * np.median(np.abs(adjusted - np.median(adjusted)))),
                        "sd_plain_adjusted": float(adjusted.std(ddof=1))}
        s = [(stalled_ms(raw[(0, li, i)]), stalled_ms(raw[(1, li, i)])) for i in ok]
        if len(d) > 3 and all(x is not None for p in s for x in p):
            ds = np.array([y - x for x, y in s])
            got["corr_with_stall_ms"] = float(np.corrcoef(d, ds)[0, 1]) if ds.std() > 0 else None
        out[kind] = got
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--durations", default="0.25,0.5,1,2")
    ap.add_argument("--budget", type=float, default=40)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--sut", default="ipv4-fwd")
    ap.add_argument("--load", default="200kpps")
    ap.add_argument("--keep", type=Path, help="copy each comparison's results folder here")
    ap.add_argument("--metrics", default="capacity,cpu")
    ap.add_argument("--pairings", default="sequential", help="sequential,interleaved: one comparison each, in turn")
    a = ap.parse_args()
    runs = []
    for rep in range(a.repeats):
        for duration, pairing in ((float(x), p) for x in a.durations.split(",") for p in a.pairings.split(",")):
            with tempfile.TemporaryDirectory(prefix="softnet-spread-") as d:
                got = one(a.sut, a.load, duration, a.budget, Path(d) / "r", a.keep, a.metrics, pairing)
            runs.append(got)
            for kind in (k for k in ("capacity", "cpu", "cpu_window") if k in got):
                g = got[kind]
                fmt = {k: "-" if g.get(k) is None else f"{g[k]:.4f}" for k in (
                    "sd", "sd_plain", "cost", "corr_with_stall_ms", "corr_with_wakeups", "sd_adjusted",
                    "sd_plain_adjusted", "beta_wakeups")}
                print(f"{rep} {pairing} {duration:g} s {kind}: {g['pairs']} pairs, sd {fmt['sd']} "
                      f"(plain {fmt['sd_plain']}), "
                      f"cost {fmt['cost']}, corr with stalls {fmt['corr_with_stall_ms']}, with wake-ups per "
                      f"packet {fmt['corr_with_wakeups']} (slope {fmt['beta_wakeups']}; sd after "
                      f"{fmt['sd_adjusted']}, plain {fmt['sd_plain_adjusted']}), left out {g['unusable_flags']}",
                      flush=True)
    print(results_file.write("compare_spread", {"args": vars(a), "runs": runs}))


if __name__ == "__main__":
    main()
