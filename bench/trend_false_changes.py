"""False change points of `softnet trend` on the real local testbed, and a
planted real 5% step.

Two series of short real campaigns of one configuration (kernel IPv4
forwarding), interleaved so both see the same host (A, B, A, B, ...):

* repeats: ``--campaigns`` campaigns of loads spanning this VM's saturation;
  nothing changes between them, so every change point jumpavg finds in any
  figure is a false one (the vCPU's drift, host stalls);
* step: loads below saturation (where the forwarded rate follows the offered
  load), scaled by 0.95 from the middle of the series on: a known 5% step in
  capacity at the middle campaign. Found: a capacity change point there, a
  regression of about 5%.

Each campaign has its own results directory (one per CI run, as a CI job
would keep them). Writes bench/results/trend_false_changes-<UTC>.json.
Run (root): SOFTNET_WAIT=900 .venv/bin/python bench/trend_false_changes.py [--campaigns 10] [--keep DIR]
(``--analyse DIR``: the analysis again over what ``--keep DIR`` kept, measuring nothing).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.campaign.runner import run_campaign  # noqa: E402
from softnet.campaign.spec import CampaignSpec  # noqa: E402
from softnet.report.web_trends import series_of  # noqa: E402
import results_file  # noqa: E402

REPEAT_LOADS = [100e3, 250e3, 400e3, 500e3, 600e3]  # spans this VM's saturation (about 450-750 kpps)
STEP_LOADS = [100e3, 200e3, 300e3]  # below it
STEP = 0.95


def spec(name: str, loads: list[float], runs: int) -> CampaignSpec:
    return CampaignSpec.model_validate({
        "name": name, "testbed": {"sut": "ipv4-fwd"},
        "method": {"kind": "sweep", "loads": [f"{x:.0f}pps" for x in loads], "runs": runs, "duration_s": 1.0,
                   "warmup_s": 0.5}})


def summary(series) -> dict:
    """Per figure: the points' values and the change points found."""
    out = {}
    for s in series:
        for f in s.figures:
            vals = [p.value for p in f.points]
            out[f.figure] = {
                "points": vals, "cv": statistics.stdev(vals) / statistics.mean(vals) if len(vals) > 1 else None,
                "change_points": [{"index": c.index, "change_pct": c.change_pct, "direction": c.direction}
                                  for c in f.change_points]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaigns", type=int, default=10, help="campaigns per series (>= 4)")
    ap.add_argument("--runs", type=int, default=2, help="runs per load of each campaign")
    ap.add_argument("--keep", type=Path, help="keep the results directories here")
    ap.add_argument("--analyse", type=Path, help="measure nothing: analyse the directories --keep kept there")
    a = ap.parse_args()
    if a.campaigns < 4:
        ap.error("--campaigns: give at least 4")
    root = a.analyse or a.keep or Path(tempfile.mkdtemp(prefix="trend-bench-"))
    t0, repeat_dirs, step_dirs = time.time(), [], []
    if a.analyse:
        repeat_dirs, step_dirs = sorted(root.glob("repeats-*")), sorted(root.glob("step-*"))
        a.campaigns = len(step_dirs)
    half = a.campaigns // 2
    for i in range(0 if a.analyse else a.campaigns):
        for dirs, name, loads in ((repeat_dirs, "repeats", REPEAT_LOADS),
                                  (step_dirs, "step", [x * (STEP if i >= half else 1) for x in STEP_LOADS])):
            d = root / f"{name}-{i:02d}"
            started = time.time()
            run_campaign(spec(f"trend-{name}", loads, a.runs), d)
            dirs.append(d)
            print(f"{name} {i + 1}/{a.campaigns}: {time.time() - started:.1f} s", flush=True)
    repeats, _ = series_of(repeat_dirs)
    step, _ = series_of(step_dirs)
    rep, stp = summary(repeats), summary(step)
    cap = stp.get("capacity", {"change_points": []})
    found = [c for c in cap["change_points"] if c["index"] == half and c["direction"] == "regression"]
    result = {
        "when": datetime.now(timezone.utc).isoformat(), "campaigns": a.campaigns, "runs": a.runs,
        "wall_s": time.time() - t0, "repeat_loads": REPEAT_LOADS, "step_loads": STEP_LOADS, "step_at": half,
        "repeats": rep, "step": stp,
        "false_change_points": {f: len(v["change_points"]) for f, v in rep.items()},
        "step_found": bool(found), "step_found_pct": found[0]["change_pct"] if found else None,
        "step_other_change_points": [c for c in cap["change_points"] if c not in found],
        "results": str(root) if a.keep or a.analyse else None}
    path = results_file.write("trend_false_changes", result)
    print(f"false change points over {a.campaigns} repeats: {result['false_change_points']}")
    for f, v in rep.items():
        print(f"  {f}: CV {v['cv']:.2%}" if v["cv"] is not None else f"  {f}: -")
    print(f"planted {100 * (STEP - 1):+.0f}% step at campaign #{half + 1}: "
          + (f"found, {result['step_found_pct']:+.1f}%" if found else "not found")
          + f"; other capacity change points: {result['step_other_change_points']}")
    print(f"capacity of the step series: {[round(v) for v in cap.get('points', [])]}")
    print(f"wrote {path} ({result['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
