"""softnet serve in a real browser: Debian's Chromium, headless, driven by
playwright (pointed at the system browser: nothing downloads one). The
pages load without console errors, the chart draws every trial, and a trial
the store writes during a run appears in the open page within 2 s."""
from __future__ import annotations

import io
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from softnet.results.store import Store
from tests.test_serve import Server, results, stored  # noqa: F401 (results: the module's store fixture)
from tests.conftest import softnet_cmd

CHROMIUM = shutil.which("chromium")
# long end-to-end tests (a real browser): `make test` runs them, `make check` does not
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make setup installs it)"),
              pytest.mark.slow]
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    return page, errors


def not_blank(png: bytes) -> bool:
    from PIL import Image

    colors = Image.open(io.BytesIO(png)).convert("RGB").getcolors(maxcolors=1 << 16)
    return colors is None or len(colors) > 8


def test_pages_load_and_the_chart_draws_every_trial(browser, results, tmp_path):  # noqa: F811
    cid, trials = stored(results)
    s = Server(str(results))
    try:
        page, errors = open_page(browser, f"http://127.0.0.1:{s.port}/")
        page.wait_for_selector("#campaigns")
        assert page.locator("#campaigns tbody tr").count() == 1 and not errors, errors
        page.click(f"text={cid}")
        page.wait_for_selector("#loss-chart .main-svg")
        assert page.locator("#loss-chart .point").count() == len(trials) == 6
        assert page.locator("#trials tbody tr").count() == 6
        # loss on a log axis (all the loss before saturation would sit on zero on a linear one), named series
        layout = page.evaluate("(() => { const c = document.getElementById('loss-chart');"
                               " return [c.layout.yaxis.type, c.data.map(t => t.name)]; })()")
        assert layout == ["log", ["cell 0"]], layout
        shot = page.screenshot(full_page=True)
        (tmp_path / "campaign.png").write_bytes(shot)
        assert not_blank(shot) and not errors, errors
    finally:
        s.stop()


def test_a_trial_landing_during_a_run_appears_in_the_open_page_within_2_s(browser, results, tmp_path):  # noqa: F811
    cid, trials = stored(results)
    copy = tmp_path / "r"
    subprocess.run(["cp", "-a", str(results), str(copy)], check=True)
    with Store(copy) as writer:  # as a running campaign holds it
        s = Server(str(copy))
        try:
            page, errors = open_page(browser, f"http://127.0.0.1:{s.port}/c/0/{cid}")
            page.wait_for_selector("#loss-chart .main-svg")
            page.wait_for_function("document.querySelectorAll('#trials tbody tr').length === 6")
            landed = time.monotonic()
            writer.add_trial(cid, 0, 2, 2, {}, dict(trials[-1]))
            page.wait_for_selector("#t-0-2-2", timeout=2000)  # within 2 s of the store writing it
            assert time.monotonic() - landed <= 2.0
            page.wait_for_function("document.querySelectorAll('#loss-chart .point').length === 7")
            assert not errors, errors
        finally:
            s.stop()


def test_trends_page_shows_the_change_point_at_the_planted_step(browser, tmp_path):
    """8 stored campaigns (one results directory each) with a planted 5%
    capacity step, and a stored comparison of the two settings: the trend
    draws every campaign, the change point sits between the last before the
    step and the first after it, labelled with the comparison's verdict."""
    from tests.test_trends import N, STEP_AT, make_comparison, make_step_series

    dirs = [*make_step_series(tmp_path), make_comparison(tmp_path)]
    s = Server(*map(str, dirs))
    try:
        page, errors = open_page(browser, f"http://127.0.0.1:{s.port}/")
        page.click("a[href=\"/trends\"]")
        page.wait_for_selector("#trend-0-0 .main-svg")
        assert page.locator("#trend-0-0").get_attribute("data-figure") == "capacity"
        assert page.locator("#trend-0-0 .point").count() == N  # one marker per campaign
        shapes = page.evaluate("document.getElementById('trend-0-0').layout.shapes.map(s => s.x0)")
        assert shapes == [STEP_AT + 0.5]  # between campaign #STEP_AT and #STEP_AT+1 (1-based)
        note = page.locator("#trend-0-0 .annotation-text").first.text_content()
        assert "-5.0% regression" in note and "comparison: slower" in note, note
        assert page.locator("#changes-0-0 li.change-point.regression").get_attribute("data-index") == str(STEP_AT)
        assert page.locator("li.no-change").count() == 2  # pdr and ndr: the load grid did not move
        shot = page.screenshot(full_page=True)
        (Path(__file__).parent.parent / "docs" / "img" / "serve-trends.png").write_bytes(shot)
        assert not_blank(shot) and not errors, errors
        box = page.locator("#trend-0-0 .point").nth(STEP_AT).bounding_box()  # a point links to its campaign
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_selector("#loss-chart .main-svg")
        assert "/c/" in page.url and not errors, errors
    finally:
        s.stop()


@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
@pytest.mark.host_noise
def test_a_real_campaign_live_then_finished_in_the_browser(browser, tmp_path):
    """A real campaign (kernel IPv4 forwarding): while it runs, its page shows
    the trial in progress and draws its samples as they come; once it ends,
    the same page, loaded again, shows every trial, its verdict, no live chart."""
    from tests.test_serve_live import SPEC, start_run

    (tmp_path / "s.toml").write_text(SPEC)
    results = tmp_path / "r"
    proc = start_run(tmp_path / "s.toml", results)
    s = Server(str(results))
    try:
        deadline = time.monotonic() + 60
        while not list((results / "raw").glob("*/live.json")):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cid = next((results / "raw").glob("*/live.json")).parent.name
        page, errors = open_page(browser, f"http://127.0.0.1:{s.port}/c/0/{cid}")
        page.wait_for_selector("#live-chart .point", timeout=20_000)  # the first samples of a trial
        assert page.locator("#now").inner_text().startswith("running: ")
        before = page.locator("#live-chart .point").count()
        # more samples pushed (every 0.5 s while a trial runs; the next trial's testbed takes seconds)
        page.wait_for_function(f"document.querySelectorAll('#live-chart .point').length > {before}",
                               timeout=15_000)
        live_shot = page.screenshot(full_page=True)
        assert proc.wait(timeout=180) == 0, proc.communicate()[1]
        page.wait_for_function("document.getElementById('now').textContent === 'done'", timeout=5_000)
        assert not_blank(live_shot) and not errors, errors
        page, errors = open_page(browser, f"http://127.0.0.1:{s.port}/c/0/{cid}")
        page.wait_for_selector("#loss-chart .main-svg")
        assert page.locator("#trials tbody tr").count() == 4 == page.locator("#loss-chart .point").count()
        assert page.locator("#verdicts tbody tr").count() == 1
        assert page.locator("#now").inner_text() == "done" and not page.locator("#live-chart").is_visible()
        assert not_blank(page.screenshot(full_page=True)) and not errors, errors
    finally:
        s.stop()
        if proc.poll() is None:  # Ctrl-C, as a user would: the run restores the host before it ends
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _boxes_apart(page, chart: str) -> list[str]:
    """Pairs of a chart's labels (title, axis titles, legend, annotations) whose boxes overlap."""
    return page.evaluate("""(id) => {
      const root = document.getElementById(id), sel = ".gtitle, .xtitle, .ytitle, .legend, .annotation";
      const els = [...root.querySelectorAll(sel)].map(e => [e.getAttribute("class"), e.getBoundingClientRect()]);
      const out = [];
      for (let i = 0; i < els.length; i++) for (let j = i + 1; j < els.length; j++) {
        const [a, r] = els[i], [b, s] = els[j];
        if (r.width && s.width && r.left < s.right && s.left < r.right && r.top < s.bottom && s.top < r.bottom)
          out.push(a + " / " + b);
      }
      return out;
    }""", chart)


def test_the_interactive_report_is_one_file_and_draws_without_overlaps(browser, tmp_path):
    """`softnet report --interactive` over the PASTRAMI VM files (14 sweeps in
    groups of related ones): one file that loads nothing from elsewhere; each
    chart draws every load of every configuration, its labels apart."""
    from softnet.analysis.pastrami_files import pastrami_data_dir

    out = tmp_path / "r.html"
    r = subprocess.run(softnet_cmd("report", str(pastrami_data_dir() / "vm"), "--out", str(out), "--interactive"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "<script src=" not in html and " src=\"http" not in html  # self-contained
    page, errors = open_page(browser, out.as_uri())
    page.wait_for_selector("#chart-1-loss .main-svg")
    charts = page.locator("div.chart")
    assert charts.count() >= 6 and charts.count() % 3 == 0  # loss, delivery, throughput per group
    loads = page.evaluate("""() => [...document.querySelectorAll("div.chart")].map(
        d => d.data.filter(t => t.mode === "lines+markers").reduce((n, t) => n + t.x.length, 0))""")
    assert min(loads) > 0
    for i in range(charts.count()):
        chart_id = charts.nth(i).get_attribute("id")
        assert page.locator(f"#{chart_id} .point").count() == loads[i], chart_id
        assert _boxes_apart(page, chart_id) == [], chart_id
    assert not errors, errors


def test_flame_graphs_render_with_labels_inside_their_frames(browser, tmp_path):
    """The report's flame graphs (a real capture of nft-fw's kernel stacks,
    and a differential one) in Chromium: drawn, no console error, and every
    label's rendered width inside its frame (the fitting assumes a
    character width the browser's monospace font must not exceed)."""
    from softnet.analysis.kernel_functions import folded_per_packet
    from softnet.report import flamegraph
    from tests.test_kernel_functions import capture

    a = folded_per_packet([(capture("nft_fw_cpu1.json"), 100_000, None)])
    b = {k: v * (1.5 if k.endswith("nft_do_chain") else 1.0) for k, v in a.items()}
    page_file = tmp_path / "flames.html"
    page_file.write_text("<!doctype html><html><body>" + flamegraph.svg(a, "A: kernel stacks") +
                         flamegraph.svg(b, "B against A", against=a) + "</body></html>")
    page, errors = open_page(browser, page_file.as_uri())
    page.wait_for_selector("svg")
    fits = page.evaluate("""(() => Array.from(document.querySelectorAll('svg g')).map(g => {
        const t = g.querySelector('text'), r = g.querySelector('rect');
        return t ? [t.getComputedTextLength(), r.width.baseVal.value] : null;
    }).filter(x => x))()""")
    assert len(fits) > 20 and all(w <= rect + 0.5 for w, rect in fits), [f for f in fits if f[0] > f[1]][:5]
    assert page.locator("svg").count() == 2 and page.locator("text=nft_do_chain").count() >= 1
    shot = page.screenshot(full_page=True)
    (tmp_path / "flames.png").write_bytes(shot)
    assert not_blank(shot) and not errors, errors
