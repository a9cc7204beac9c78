"""`softnet trend`: each configuration's figures over stored campaigns, with
the change points jumpavg finds (analysis.trends); the table, the JSON and
the exit code a CI job gates on."""
from __future__ import annotations

from pathlib import Path

from softnet.analysis.trends import FIGURE_NAMES, Series, figure_def, regressions_at_newest
from softnet.cli.output import Col, console, eng, print_json, table
from softnet.errors import InputError

REGRESSION_EXIT = 1
DIRECTION_WORD = {"regression": "[red]worse[/]", "progression": "[green]better[/]"}
COLS = [Col("figure", justify="left"), Col("latest"), Col("change at", text=True), Col("change"),
        Col("segment mean", wide=True), Col("compared", justify="left")]


def value_text(v: float | None, unit: str) -> str:
    if unit == "ns" and v is not None:
        return eng(v * 1e-9, "s")
    return eng(v, unit)


def rows(s: Series) -> list[list[str]]:
    """One row per figure without a change, one per change point otherwise."""
    out = []
    for f in s.figures:
        last = value_text(f.points[-1].value, f.unit)
        if not f.change_points:
            out.append([f.figure, last, "-", "none",
                        value_text(f.segments[0].mean, f.unit), "-"])
        for c in f.change_points:
            out.append([f.figure, last, f"#{c.index + 1} {c.campaign_id}",
                        f"{c.change_pct:+.1f}% {DIRECTION_WORD[c.direction]}",
                        f"{value_text(c.before_mean, f.unit)}->{value_text(c.after_mean, f.unit)}",
                        c.comparison.verdict])
    return out


def check_dirs(paths: list[Path]) -> None:
    from softnet.results.readers import is_results_dir

    for p in paths:
        if not is_results_dir(p):
            raise InputError(str(p), "not a softnet results directory (no softnet.duckdb)")


def run(paths: list[Path], figure: str | None, as_json: bool, fail_on_regression: bool, wide: bool) -> int:
    """Print the trends (of the lab's part the stores show: `softnet trend
    --testbed`); the exit code: REGRESSION_EXIT when gating and a series'
    latest change point is a regression at the newest campaign."""
    from softnet.report.web_trends import series_of

    figures = [figure_def(figure).name] if figure else list(FIGURE_NAMES)
    check_dirs(paths)
    series, left_out = series_of(paths, figures)
    bad = regressions_at_newest(series)
    code = REGRESSION_EXIT if fail_on_regression and bad else 0
    if as_json:
        print_json({"series": [s.to_dict() for s in series],
                    "regressions": [{"series": r.series, "figure": r.figure, "campaign_id": r.change.campaign_id,
                                     "change_pct": r.change.change_pct} for r in bad], "left_out": left_out})
        return code
    if not series:
        console.print("no load sweep in these results: nothing to trend", highlight=False)
    for s in series:
        n = max((len(f.points) for f in s.figures), default=0)
        console.print(table(f"{s.key}: {n} campaigns", COLS, rows(s), wide))
    console.print("  change at #i: the i-th campaign (oldest first) starts a new segment (jumpavg); worse: a "
                  "regression; compared: a stored comparison's verdict on the change."
                  + ("" if wide else " --wide: segment means."), highlight=False)
    for why in left_out:
        console.print(f"  left out: {why}", highlight=False, markup=False)
    for r in bad:
        console.print(f"  regression at the newest campaign: {r.series} {r.figure} {r.change.change_pct:+.1f}% "
                      f"from {r.change.campaign_id}", highlight=False, markup=False)
    return code
