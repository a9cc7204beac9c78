"""The report's paired comparisons: the section, its forest plot and table,
on a comparison run on the simulated SUT beside a load sweep."""
from __future__ import annotations

import re

import pytest

from softnet.analysis.comparisons import stored_paired
from softnet.analysis.paired import decide
from softnet.campaign.runner import run_campaign
from softnet.campaign.spec import CampaignSpec
from softnet.report import compare_plots
from softnet.report.html import write_report
from softnet.results.comparison import ComparisonSummary, PairedDifference

from .test_report import assert_no_tick_overlap, assert_titles_fit, esc

A = {"synthetic.o_sat_pps": 500_000}
B = {"synthetic.o_sat_pps": 475_000}  # 5% less capacity: slower


def compare_spec() -> CampaignSpec:
    return CampaignSpec.model_validate({
        "name": "cmp", "testbed": {"sut": "synthetic"},
        "method": {"kind": "compare", "loads": ["200kpps"], "duration_s": 1.0},
        "compare": {"variants": [A, B], "metrics": ["capacity", "loss"], "decide_on": ["capacity"],
                    "budget_s": 60, "overload": "1Mpps"}})


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory):
    """A load sweep and a paired comparison in one results directory."""
    d = tmp_path_factory.mktemp("mixed")
    run_campaign(CampaignSpec.model_validate({
        "name": "sweep", "testbed": {"sut": "synthetic"}, "synthetic": {"o_sat_pps": 500_000, "seed": 1},
        "method": {"loads": ["300kpps", "450kpps", "600kpps"], "runs": 3, "duration_s": 1.0}}), d)
    cid = run_campaign(compare_spec(), d)
    return d, cid


def section(text: str) -> str:
    start = text.index("<h2>Paired comparisons</h2>")
    return text[start:text.index("<h2>", start + 1)]


def test_report_shows_the_comparison_as_a_forest_plot_and_a_table(mixed_dir, tmp_path):
    d, cid = mixed_dir
    summary = stored_paired(str(d), cid)
    text = write_report(d, tmp_path / "r.html").read_text(encoding="utf-8")
    part = section(text)
    assert f"<h3>cmp ({cid})</h3>" in part
    assert part.count("data:image/png;base64,") == 1  # the forest plot, embedded
    assert f'alt="paired comparison cmp ({cid})"' in part
    rows = re.findall(r'<td class="l nw">([^<]*)</td>.*?<span class="badge v-(\w+)">', part)
    expect = [(esc(dd.metric), dd.verdict) for _, dd in summary.all_differences()]
    assert rows == expect and len(rows) == 2  # capacity, loss (loss_all is loss again: no stall set any apart)
    assert dict(rows)[esc(summary.differences[summary.candidates[0]][0].metric)] == "slower"
    assert {v for _, v in rows} == {"slower", "equivalent"}
    assert esc(summary.baseline) in part and esc(summary.candidates[0]) in part
    assert "paired over" in part and "stopped when every metric it decides on had a verdict" in part


def test_the_comparison_is_no_load_sweep_elsewhere(mixed_dir, tmp_path):
    d, cid = mixed_dir
    text = write_report(d, tmp_path / "r.html").read_text(encoding="utf-8")
    assert text.count('class="config') == 1  # the sweep's one configuration, not the comparison's cells
    # the sweep's three figures, its synthetic SUT's model and the forest plot
    assert text.count("data:image/png;base64,") == 3 + 1 + 1
    before = text[:text.index("<h2>Paired comparisons</h2>")]
    assert "o_sat_pps=475000" not in before and cid not in before
    assert f"({cid})" in text[text.index("<h2>Campaigns</h2>"):]  # still in the provenance


def test_a_results_dir_holding_only_a_comparison_has_a_report(tmp_path):
    cid = run_campaign(compare_spec(), tmp_path / "cmp")
    text = write_report(tmp_path / "cmp", tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<h2>Paired comparisons</h2>" in text and cid in section(text)
    assert "<h2>Summary</h2>" not in text
    # named for what it holds: a comparison's method, no load-loss analysis it did not run
    assert "<title>softnet report \u2014 " in text and "load-loss" not in text.split("</title>")[0]
    assert "paired comparison (rounds of pairs" in text and "PASTRAMI load-loss analysis" not in text


def difference(metric: str, scale: str, est: float | None, half: float | None,
               better: str = "lower") -> PairedDifference:
    ci = None if est is None else (est - half, est + half)
    margin = 0.02 if scale == "ratio" else 0.001
    verdict, significant = decide(ci, margin, better)
    return PairedDifference(
        metric=metric, unit="pps" if scale == "ratio" else "ratio", better=better, scale=scale, n_pairs=12,
        baseline_mean=1.0, candidate_mean=1.0, estimate=est, ci=ci, confidence=0.99, margin=margin, p_value=0.01,
        verdict=verdict, significant=significant)


def twelve_rows() -> ComparisonSummary:
    """Three candidates with long names, four metrics each (one with no pair), every verdict."""
    cands = [f"testbed.sut=ipv4-fwd, testbed.steering=threaded, traffic.frame_bytes=1500, variant {i} $HOME"
             for i in range(3)]
    diffs = {c: [difference("capacity@3 Mpps", "ratio", -0.05 + 0.04 * i, 0.012, "higher"),
                 difference("cpu@200 kpps", "ratio", 0.004 * i, 0.01),
                 difference("latency_p99@200 kpps", "ratio", None, None),
                 difference("loss@200 kpps", "difference", 0.0004 * i, 0.0003)]
             for i, c in enumerate(cands)}
    return ComparisonSummary(baseline="testbed.sut=ipv4-fwd", candidates=cands, differences=diffs, rounds=12)


def test_forest_plot_of_12_rows_has_no_overprinted_label():
    s = twelve_rows()
    fig = compare_plots.comparison_figure(s, "paired comparison: cmp (cmp-0)")
    assert len(fig.axes) == 2  # % change, and loss in percentage points
    assert {d.verdict for _, d in s.all_differences()} == {"slower", "faster", "equivalent", "undecided"}
    assert_no_tick_overlap(fig)
    assert_titles_fit(fig)
    renderer = fig.canvas.get_renderer()
    verdicts = [t for ax in fig.axes for t in ax.texts]
    assert [t.get_text().split(" ")[0] for t in verdicts] == [d.verdict for sc in ("ratio", "difference")
                                                            for _, d in s.all_differences() if d.scale == sc]
    boxes = [t.get_window_extent(renderer) for t in verdicts]
    ticks = [t.get_window_extent(renderer) for ax in fig.axes for t in ax.get_yticklabels() if t.get_text()]
    for i, b in enumerate(boxes):
        assert fig.bbox.x0 <= b.x0 and b.x1 <= fig.bbox.x1, verdicts[i].get_text()  # inside the figure
        assert not any(b.overlaps(o) for o in boxes[i + 1:] + ticks), verdicts[i].get_text()
        assert not any(b.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)  # beside the data
