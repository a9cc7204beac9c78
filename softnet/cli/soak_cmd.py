"""The display of soaks (`softnet run` of a soak campaign, `softnet analyze`):
the critical load with its interval, the step where the SUT changed, and
the drift watch's series, flagged where they moved."""
from __future__ import annotations

from pathlib import Path

from softnet.cli.output import Col, console, eng, plain, print_json, table
from softnet.results.soak import SoakSummary

SOAK_COLS = [Col("cell"), Col("critical load"), Col("interval"), Col("trials"), Col("soak s"),
             Col("trial s", wide=True), Col("flags")]
DRIFT_COLS = [Col("series", text=True, justify="left"), Col("first"), Col("last"), Col("slope/h"),
              Col("interval", wide=True), Col("flag", text=True)]


def soak_summaries(results_dir: Path, campaign: str | None) -> dict[str, dict[int, SoakSummary]]:
    """Campaign -> cell -> its stored soak summary."""
    from softnet.results import readers

    out = {}
    with readers.open_results(results_dir) as st:
        for c in readers.campaigns(st):
            if campaign is None or c.campaign_id == campaign:
                found = st.soaks(c.campaign_id)
                if found:
                    out[c.campaign_id] = found
    return out


def show(soaks: dict[str, dict[int, SoakSummary]], as_json: bool, wide: bool = False) -> None:
    if as_json:
        print_json({cid: {str(k): s.model_dump() for k, s in cells.items()} for cid, cells in soaks.items()})
        return
    for cid, cells in soaks.items():
        rows = []
        for cell, s in cells.items():
            e = s.estimate
            rows.append([str(cell), eng(e.median_pps if e else None, "pps"),
                         f"[{eng(e.lower_pps, 'pps')}, {eng(e.upper_pps, 'pps')}]" if e else "-", str(s.trials),
                         f"{s.elapsed_s:.0f}", f"{s.trial_seconds:.0f}", str(len(s.flags))])
        target = next((s.estimate.target_loss_ratio for s in cells.values() if s.estimate), None)
        console.print(table(f"soak {cid}: critical load at loss ratio {target:g}" if target else f"soak {cid}",
                            SOAK_COLS, rows, wide))
        for cell, s in cells.items():
            if not s.finished:
                plain(f"cell {cell}: stopped before its wall time (softnet run resumes it)")
            for f in s.flags:
                plain(f"cell {cell}: {f}")
            fits = [f for f in s.drift if wide or f.flag]
            if fits:
                which = "every series" if wide else "flagged series; --wide for all"
                console.print(table(f"cell {cell}: drift watch ({which})", DRIFT_COLS,
                                    [[f.series, eng(f.first), eng(f.last), eng(f.slope_per_h),
                                      f"[{eng(f.slope_ci_per_h[0])}, {eng(f.slope_ci_per_h[1])}]"
                                      if f.slope_ci_per_h else "-", f.flag or "-"] for f in fits], wide))
    plain("critical load: where the SUT's average loss ratio meets the target (PLRsearch's model, both fits "
          "mixed); interval: equal tails at the soak's confidence")
