"""Trends over stored campaigns in `softnet serve` (/trends, /api/trends),
and the reading of stores they need (`softnet trend` reads them the same way).

A store is read as `softnet analyze` reads it (analysis.campaigns), each
sweep configuration's figures as its data-path row gives them
(analysis.data_paths), a search configuration's from its repeats
(analysis.searches),
and the comparisons `softnet compare` stored beside them; the change points
are analysis.trends'.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from softnet.analysis.campaigns import analyze_campaign
from softnet.analysis.data_paths import compare
from softnet.analysis.searches import summarize_searches
from softnet.analysis.trends import (FIGURE_NAMES, CampaignFigures, ComparisonSide, Series, StoredComparison,
                                     campaign_figures, figure_def, search_figures, trends)
from softnet.errors import InputError
from softnet.results import readers


@dataclass
class TrendInputs:
    campaigns: list[CampaignFigures] = field(default_factory=list)
    comparisons: list[StoredComparison] = field(default_factory=list)
    # stores not read, and campaigns with no figure to trend, and why (a run writing one, no goal found)
    skipped: list[str] = field(default_factory=list)


def read_store(index: int, results_dir: Path, into: TrendInputs) -> None:
    """A store's sweep configurations as trend inputs, and its comparisons."""
    with readers.open_results(results_dir) as st:
        for rec in readers.campaigns(st):
            summary = st.comparison(rec.campaign_id, finished_only=False)
            if summary is not None:  # a paired comparison: cell i is variant i, the baseline first
                knobs = [c.knobs for c in readers.cells(st, rec.campaign_id)]
                names = [summary.baseline, *summary.candidates]
                sides = [ComparisonSide(n, {k: v for k, v in (knobs[i] if i < len(knobs) else {}).items()})
                         for i, n in enumerate(names)]
                into.comparisons.append(StoredComparison(index, rec.campaign_id, sides[0], tuple(sides[1:]),
                                                         summary))
                continue
            searches = summarize_searches(st, rec.campaign_id)
            cells = {c.cell_id: c for c in readers.cells(st, rec.campaign_id)}
            # a configuration measured on several testbeds is its own series ("tb1+tb2")
            where = {cell: "+".join(tbs) for cell, tbs in readers.cell_testbeds(st, rec.campaign_id).items()}
            for cell_id in dict.fromkeys(x.cell_id for x in searches):  # a search campaign: NDR/PDR per cell
                got = search_figures(index, str(results_dir), rec.name or rec.campaign_id, rec.created_unix_s or 0.0,
                                     [x for x in searches if x.cell_id == cell_id], cells[cell_id].knobs,
                                     cells[cell_id].spec, where.get(cell_id, readers.LOCAL))
                if got is not None:
                    into.campaigns.append(got)
                else:
                    why = sorted({x.verdict for x in searches if x.cell_id == cell_id})
                    into.skipped.append(f"campaign {rec.campaign_id} ({rec.name}): no goal "
                                        f"found ({', '.join(why)})")
            for config in analyze_campaign(st, rec.campaign_id):
                row = compare([config], {config.label: config.trials})[0]
                into.campaigns.append(campaign_figures(index, str(results_dir), rec.name or rec.campaign_id,
                                                       rec.created_unix_s or 0.0, config, row,
                                                       where.get(config.cell_id, readers.LOCAL)))


def read_trend_inputs(dirs: Sequence[Path], skip_unreadable: bool = False) -> TrendInputs:
    """Every store's trend inputs; a store that cannot be read is an error
    naming it, or (``skip_unreadable``: serve, while a run writes one) noted."""
    out = TrendInputs()
    for i, d in enumerate(dirs):
        try:
            read_store(i, Path(d), out)
        except InputError as exc:
            if not skip_unreadable:
                raise
            out.skipped.append(f"store {i} ({d}): {exc.message}")
    out.comparisons.sort(key=lambda c: c.campaign_id)
    return out


def series_of(dirs: Sequence[Path], figures: Sequence[str] = FIGURE_NAMES,
              skip_unreadable: bool = False) -> tuple[list[Series], list[str]]:
    got = read_trend_inputs(dirs, skip_unreadable)
    return trends(got.campaigns, got.comparisons, figures), got.skipped


def figures_param(request: Request) -> list[str]:
    """?figure=F (repeatable): the figures asked for; all by default."""
    names = request.query_params.getlist("figure") or list(FIGURE_NAMES)
    for n in names:
        if n not in FIGURE_NAMES:
            raise InputError("figure", f"unknown figure '{n[:40]}': one of {', '.join(FIGURE_NAMES)}")
    unknown = sorted(set(request.query_params) - {"figure", "token", "series"})
    if unknown:
        raise InputError(unknown[0][:40], "not a parameter of /trends (figure, series)")
    return names


def trend_routes(results, page: Callable[..., Response]) -> list[Route]:
    """/trends (the page) and /api/trends (its JSON) over ``results.dirs``;
    ``page(template, **context)`` renders a page as web.py does."""

    def build(request: Request) -> tuple[list[Series], list[str]] | Response:
        try:
            names = figures_param(request)
        except InputError as exc:
            return JSONResponse({"error": f"{exc.field}: {exc.message}"}, status_code=400)
        series, skipped = series_of(results.dirs, names, skip_unreadable=True)
        wanted = request.query_params.get("series")
        if wanted is not None:
            series = [s for s in series if s.key == wanted]
            if not series:
                return JSONResponse({"error": f"series: no series '{wanted[:80]}'"}, status_code=404)
        return series, skipped

    async def api(request: Request) -> Response:
        got = build(request)
        if isinstance(got, Response):
            return got
        series, skipped = got
        return JSONResponse({"series": [s.to_dict() for s in series], "skipped": skipped})

    async def view(request: Request) -> Response:
        got = build(request)
        if isinstance(got, Response):
            return got
        series, skipped = got
        return page("serve_trends.html.j2", series=[s.to_dict() for s in series], skipped=skipped,
                    figures=[asdict(figure_def(n)) for n in FIGURE_NAMES],
                    token=request.query_params.get("token", ""))

    return [Route("/trends", view), Route("/api/trends", api)]
