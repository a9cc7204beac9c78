"""The host's pace as a covariate of paired comparisons: A against itself
(two named variants of one data path), each trial with the pace probe, a
fixed budget; per comparison the interval of capacity and of CPU per packet
with and without the pace taken out (the same trials, 95%), the slope, and
the correlation of the pairs' changes with their pace changes.

Writes bench/results/compare_pace-<UTC>.json (ignored by git).
Run (root): .venv/bin/python bench/compare_pace.py [--repeats 3] [--budget 60] [--sut ipv4-fwd] [--load 200kpps]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from softnet.analysis.comparisons import METRICS, compared, pace_of, value  # noqa: E402
from softnet.analysis.paired import paired_difference  # noqa: E402
from softnet.results.store import Store  # noqa: E402
import results_file  # noqa: E402


def one(sut: str, load: str, budget: float, folder: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "softnet", "compare", "--variant", f"name=A;testbed.sut={sut}",
                        "--variant", f"name=A2;testbed.sut={sut}", "--load", load, "--metrics", "capacity,cpu",
                        "--budget", str(budget), "--pace", "--results", str(folder), "--json"],
                       capture_output=True, text=True, timeout=3600)
    if r.returncode not in (0, 1):
        raise SystemExit(r.stderr)
    out = json.loads(r.stdout)
    with Store(folder, read_only=True) as st:
        rows = st.query("SELECT cell_id, load_index, run_index, result_json FROM trials")
    trials = {(x["cell_id"], x["load_index"], x["run_index"]): compared(json.loads(x["result_json"])) for x in rows}
    rounds = 1 + max(k[2] for k in trials)
    got = {"rounds": rounds, "stop": out.get("stop_reason"), "live": {}}
    for d in out["differences"]["A2"]:
        got["live"][d["metric"]] = {"verdict": d["verdict"], "ci": d["ci"], "beta": d.get("covariate_beta")}
    loads = sorted({k[1] for k in trials})
    for kind in ("capacity", "cpu"):
        m = METRICS[kind][0]
        li = loads[-1] if kind == "capacity" else loads[0]
        a = [value(trials.get((0, li, r)), m) for r in range(rounds)]
        b = [value(trials.get((1, li, r)), m) for r in range(rounds)]
        cov = (pace_of(trials, 0, li, range(rounds)), pace_of(trials, 1, li, range(rounds)))
        plain = paired_difference(kind, a, b, better=m.better, confidence=0.95)
        paced = paired_difference(kind, a, b, better=m.better, confidence=0.95, covariate=cov)
        ok = [i for i in range(rounds) if None not in (a[i], b[i], cov[0][i], cov[1][i])]
        dm = np.log([b[i] / a[i] for i in ok])
        dx = np.log([cov[1][i] / cov[0][i] for i in ok])
        got[kind] = {"plain_ci": plain.ci, "paced_ci": paced.ci, "beta": paced.covariate_beta,
                     "corr": float(np.corrcoef(dm, dx)[0, 1]) if len(ok) > 2 else None,
                     "plain_width": None if plain.ci is None else plain.ci[1] - plain.ci[0],
                     "paced_width": None if paced.ci is None else paced.ci[1] - paced.ci[0],
                     "plain_verdict": plain.verdict, "paced_verdict": paced.verdict}
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=60)
    ap.add_argument("--sut", default="ipv4-fwd")
    ap.add_argument("--load", default="200kpps")
    a = ap.parse_args()
    runs = []
    for i in range(a.repeats):
        with tempfile.TemporaryDirectory(prefix="softnet-pace-") as d:
            got = one(a.sut, a.load, a.budget, Path(d) / "r")
        runs.append(got)
        for kind in ("capacity", "cpu"):
            g = got[kind]
            f = {k: "-" if g[k] is None else f"{g[k]:.4f}" for k in ("plain_width", "paced_width", "beta", "corr")}
            print(f"{i}: {kind}: width {f['plain_width']} -> {f['paced_width']}, beta {f['beta']}, "
                  f"corr {f['corr']}, {g['plain_verdict']} -> {g['paced_verdict']} ({got['rounds']} rounds)",
                  flush=True)
    print(results_file.write("compare_pace", {"args": vars(a), "runs": runs}))


if __name__ == "__main__":
    main()
