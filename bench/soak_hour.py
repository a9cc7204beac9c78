"""The one-hour soak of kernel IPv4 forwarding on this host
(examples/soak/ipv4-fwd.toml): runs it with `softnet run` (resuming a
results folder given with --results), then reads the estimate's path: its
interval at 5, 10, 20, 30, 45 and 60 minutes, the trials, the flags, and
whether the host was left as it was; the figure goes next to the results
(--figure to put it elsewhere, e.g. docs/figures).

    sudo SOFTNET_WAIT=3600 .venv/bin/python bench/soak_hour.py
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results_file  # noqa: E402
from softnet.analysis.soak import stored_soaks  # noqa: E402
from softnet.report.soak_plots import plot_soak  # noqa: E402
from softnet.results.store import Store  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CHECKPOINTS_MIN = (5, 10, 20, 30, 45, 60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(REPO / "examples" / "soak" / "ipv4-fwd.toml"))
    ap.add_argument("--results", help="a results folder to run in (resumed if it holds the soak) or only read")
    ap.add_argument("--read-only", action="store_true", help="only read --results, run nothing")
    ap.add_argument("--figure", help="where the figure goes (a path without suffix)")
    a = ap.parse_args()
    started = datetime.now(timezone.utc)
    results = Path(a.results) if a.results else results_file.RESULTS / f"soak_hour-{started:%Y%m%dT%H%M%SZ}"
    t0 = time.monotonic()
    if not a.read_only:
        r = subprocess.run([sys.executable, "-m", "softnet", "run", a.spec, "--results", str(results)])
        if r.returncode != 0:
            return r.returncode
    clean = subprocess.run([sys.executable, "-m", "softnet", "clean", "--check"], capture_output=True, text=True)
    with Store(results, read_only=True) as st:
        cid = st.campaigns()[0]["campaign_id"]
        soak = stored_soaks(st, cid)[0]
    s = soak.summary
    rows = []
    for minutes in CHECKPOINTS_MIN:
        p = next((p for p in s.path if p[0] >= minutes * 60), None)
        if p is None:
            continue
        n = sum(1 for m in soak.marks if m.elapsed_s <= p[0])
        rows.append({"minutes": minutes, "trials": n, "median_pps": p[1], "lower_pps": p[2], "upper_pps": p[3],
                     "relative_width": (p[3] - p[2]) / p[1]})
        print(f"{minutes:3d} min  {n:4d} trials  critical load {p[1]:>12,.0f} pps  [{p[2]:,.0f}, {p[3]:,.0f}]  "
              f"width {100 * rows[-1]['relative_width']:.1f}%")
    for f in s.flags:
        print(f"flag: {f}")
    print(f"host after: {clean.stdout.strip() or clean.stderr.strip()}")
    figure = Path(a.figure) if a.figure else results / "soak"
    figure.parent.mkdir(parents=True, exist_ok=True)
    files = plot_soak(s, soak.marks, soak.loads, f"one-hour soak of ipv4-fwd ({cid})", figure, formats=("png",))
    out = results_file.write("soak_hour", {"results": str(results), "campaign_id": cid, "checkpoints": rows,
                                           "summary": s.model_dump(), "host_clean": clean.returncode == 0,
                                           "figure": [str(f) for f in files], "wall_s": time.monotonic() - t0},
                             at=started)
    print(f"results: {out}; figure: {files[0]}")
    return 0 if clean.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
