"""softnet serve: a real server (uvicorn, in its own process) over a real
results store of the synthetic SUT; pages, JSON, /metrics parsed back with
Prometheus' own parser, 4xx for bad requests, the token off loopback."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from softnet.fleet.local import free_port
from softnet.results.store import Store
from tests.conftest import softnet_cmd

SPEC = """name = "syn"
[testbed]
sut = "synthetic"
[method]
kind = "sweep"
loads = ["100kpps", "500kpps", "800kpps"]
runs = 2
duration_s = 1
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("serve")
    (d / "s.toml").write_text(SPEC)
    r = subprocess.run(softnet_cmd("run", str(d / "s.toml"), "--results", str(d / "r")), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return d / "r"


class Server:
    def __init__(self, *args: str):
        self.port = free_port()
        self.proc = subprocess.Popen(softnet_cmd("serve", *args, "--port", str(self.port)),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.proc.communicate()[1]
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("softnet serve did not listen within 30 s")

    def get(self, path: str, headers: dict | None = None) -> tuple[int, str]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=10)


@pytest.fixture(scope="module")
def server(results):
    """One server for the tests that only read the module's store."""
    s = Server(str(results))
    yield s
    s.stop()


def stored(results: Path) -> tuple[str, list[dict]]:
    with Store(results, read_only=True) as st:
        cid = st.query("SELECT campaign_id FROM campaigns")[0]["campaign_id"]
        rows = st.query("SELECT result_json FROM trials ORDER BY cell_id, load_index, run_index")
    return cid, [json.loads(r["result_json"]) for r in rows]


def test_pages_and_json_show_the_stored_campaign(server, results):
    cid, trials = stored(results)
    status, html = server.get("/")
    assert status == 200 and f'href="/c/0/{cid}"' in html and "<td>sweep</td>" in html
    status, html = server.get(f"/c/0/{cid}")
    assert status == 200 and html.count('<tr id="t-') == len(trials) == 6
    status, body = server.get(f"/api/c/0/{cid}/trials")
    rows = json.loads(body)
    assert [r["loss_ratio"] for r in rows] == [t["loss_ratio"] for t in trials]
    assert json.loads(server.get("/api/campaigns")[1])[0]["trials"] == 6


def test_the_index_says_when_what_and_what_each_campaign_found(tmp_path):
    """Two campaigns of one name (saturation 400 and 600 kpps): the index
    gives each one's date, the setting that sets it apart, its verdict and
    PDR; the campaign page gives the forwarded rate beside the offered one,
    and each row its configuration's name."""
    spec = SPEC.replace('[method]', '[synthetic]\no_sat_pps = {sat}\n[method]')
    for sat in (400_000, 600_000):
        (tmp_path / "s.toml").write_text(spec.format(sat=sat))
        r = subprocess.run(softnet_cmd("run", str(tmp_path / "s.toml"), "--results", str(tmp_path / "r")),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    s = Server(str(tmp_path / "r"))
    try:
        status, html = s.get("/")
        assert status == 200
        rows = re.findall(r"<tr><td class=\"nw\">(\d{4}-\d\d-\d\d \d\d:\d\d)</td>(.*?)</tr>", html, re.S)
        assert len(rows) == 2, html
        # 600 kpps saturates past the top load's predecessor: the loss first exceeds the goal at the top load
        for sat, verdict, pdr in (("400000.0", "GOOD", "PDR 100 kpps"), ("600000.0", "INCONCLUSIVE", "PDR 500 kpps")):
            row = next(r for _, r in rows if f"synthetic.o_sat_pps={sat}" in r)
            assert f"<b>{verdict}</b>" in row and pdr in row, row
        cid = re.search(r'href="/c/0/([^"]+)"', html).group(1)
        status, page = s.get(f"/c/0/{cid}")
        assert "<th>forwarded (pps)</th>" in page and 'data-config="cell 0"' in page
        trials = json.loads(s.get(f"/api/c/0/{cid}/trials")[1])
        t = trials[-1]
        assert t["forwarded_rate_pps"] == pytest.approx(t["achieved_rate_pps"] * (1 - t["loss_ratio"]))
    finally:
        s.stop()


def test_metrics_give_the_last_trials_figures(server, results):
    cid, trials = stored(results)
    last = trials[-1]
    status, text = server.get("/metrics")
    assert status == 200
    samples = {s.name: s for fam in text_string_to_metric_families(text) for s in fam.samples}
    loss = samples["softnet_trial_loss_ratio"]
    assert loss.labels["campaign"] == cid and loss.labels["trial"] == "load 2 run 1"
    assert loss.value == pytest.approx(last["loss_ratio"], rel=1e-12)
    assert samples["softnet_trial_offered_rate_pps"].value == last["intended_rate_pps"] == 800_000
    assert samples["softnet_trial_valid"].value == int(last["valid"])


@pytest.mark.parametrize("path, status, words", [
    ("/c/7/x", 404, "no results store 7"),
    ("/c/zero/x", 400, "not a results store number"),
    ("/c/0/nosuch", 404, "no campaign nosuch"),
    ("/c/0/a%20b", 400, "not a campaign id"),
    ("/c/0/..%2F..%2Fetc%2Fpasswd", 404, "no page"),
    ("/raw/x.json", 404, "no page"),
])
def test_bad_requests_get_a_4xx_naming_what_was_wrong(server, path, status, words):
    got, body = server.get(path)
    assert got == status and words in json.loads(body)["error"], body
    assert "Traceback" not in body


def test_a_token_is_asked_of_every_request_when_given(results):
    s = Server(str(results), "--token", "s3cret")
    try:
        assert s.get("/")[0] == 401 and s.get("/metrics")[0] == 401
        assert s.get("/", {"Authorization": "Bearer wrong"})[0] == 401
        assert s.get("/", {"Authorization": "Bearer s3cret"})[0] == 200
        assert s.get("/metrics?token=s3cret")[0] == 200
    finally:
        s.stop()


@pytest.mark.parametrize("args, field", [
    (["--host", "0.0.0.0"], "--token"),  # off loopback: refused before it listens
    (["--port", "0"], "--port"),
])
def test_refused_serves_name_the_option(results, args, field):
    r = subprocess.run(softnet_cmd("serve", str(results), *args), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and field in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_folder_that_is_not_a_results_store_is_refused(tmp_path):
    r = subprocess.run(softnet_cmd("serve", str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and str(tmp_path) in r.stderr and "softnet.duckdb" in r.stderr, r.stderr


def test_a_running_campaigns_trials_reach_the_page_within_2_s(results, tmp_path):
    """While a run holds the store (DuckDB's lock: here this test, writing as
    the campaign runner does), the pages read its raw files, and the event
    stream the campaign page listens to carries each new trial."""
    cid, trials = stored(results)
    copy = tmp_path / "r"
    subprocess.run(["cp", "-a", str(results), str(copy)], check=True)
    with Store(copy) as writer:  # the run's own connection: readers are locked out
        s = Server(str(copy))
        try:
            index = json.loads(s.get("/api/campaigns")[1])
            assert [(c["campaign_id"], c["status"], c["trials"]) for c in index] == [(cid, "running", 6)]
            got: list[tuple[float, dict]] = []
            stream = urllib.request.urlopen(f"http://127.0.0.1:{s.port}/events/c/0/{cid}", timeout=30)

            def read() -> None:
                try:
                    for line in stream:
                        if line.startswith(b"data: "):
                            got.append((time.monotonic(), json.loads(line[6:])))
                except (OSError, ValueError):  # closed when the test ends
                    pass

            threading.Thread(target=read, daemon=True).start()
            deadline = time.monotonic() + 10
            while len(got) < 6 and time.monotonic() < deadline:  # those there already come first
                time.sleep(0.05)
            assert len(got) == 6
            landed = time.monotonic()
            writer.add_trial(cid, 0, 2, 2, {}, dict(trials[-1]))  # a third run at the highest load lands
            while len(got) < 7 and time.monotonic() < landed + 5:
                time.sleep(0.02)
            assert len(got) == 7, "the new trial did not reach the stream"
            at, row = got[-1]
            assert (row["load_index"], row["run_index"]) == (2, 2) and at - landed <= 2.0
            status, html = s.get(f"/c/0/{cid}")
            assert status == 200 and 'id="t-0-2-2"' in html and "EventSource" in html
        finally:
            s.stop()


def test_api_trends_gives_each_configurations_series(server, results):
    cid, _ = stored(results)
    status, body = server.get("/api/trends?figure=capacity&figure=pdr")
    doc = json.loads(body)
    assert status == 200 and doc["skipped"] == []
    (s,) = doc["series"]
    assert s["key"] == "syn / synthetic" and [f["figure"] for f in s["figures"]] == ["capacity", "pdr"]
    cap = s["figures"][0]
    assert [p["campaign_id"] for p in cap["points"]] == [cid] and cap["change_points"] == []
    assert set(cap["points"][0]) >= {"store", "value", "ci", "created_unix_s", "runs"}
    assert [(g["start"], g["end"]) for g in cap["segments"]] == [(0, 1)]
    status, html = server.get("/trends")
    assert status == 200 and 'id="trend-0-0"' in html


@pytest.mark.parametrize("query, words", [
    ("figure=speed", "figure: unknown figure 'speed'"),
    ("since=2026", "since: not a parameter"),
])
def test_api_trends_refuses_a_bad_parameter_naming_it(server, query, words):
    status, body = server.get(f"/api/trends?{query}")
    assert status == 400 and words in json.loads(body)["error"], body


KINDS = {"search": """name = "ss"
[testbed]
sut = "synthetic"
[method]
kind = "search"
runs = 2
""", "compare": """name = "cc"
[testbed]
sut = "synthetic"
[method]
kind = "compare"
loads = ["200kpps"]
duration_s = 1.0
[compare]
variants = [{"synthetic.o_sat_pps" = 500000}, {"synthetic.o_sat_pps" = 450000}]
metrics = ["capacity"]
decide_on = ["capacity"]
"""}


@pytest.mark.slow
def test_each_methods_verdicts_as_the_analysis_gives_them(tmp_path):
    """A sweep, a search and a paired comparison in one store: each campaign
    page lists its verdicts (the report's), the same as JSON, and links to its
    full report; a campaign that ended as planned is done."""
    from softnet.analysis.campaigns import analyze_path
    from softnet.analysis.comparisons import stored_paired
    from softnet.analysis.searches import summarize_searches

    results = tmp_path / "r"
    for kind, text in {"sweep": SPEC, **KINDS}.items():
        (tmp_path / f"{kind}.toml").write_text(text)
        r = subprocess.run(softnet_cmd("run", str(tmp_path / f"{kind}.toml"), "--results", str(results)),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    with Store(results, read_only=True) as st:
        ids = {r["name"]: r["campaign_id"] for r in st.query("SELECT name, campaign_id FROM campaigns")}
        searches = summarize_searches(st, ids["ss"])
    (sweep,) = analyze_path(results, ids["syn"])
    compared = stored_paired(str(results), ids["cc"])
    s = Server(str(results))
    try:
        _, body = s.get("/api/campaigns")
        assert {(c["name"], c["kind"], c["status"]) for c in json.loads(body)} == {
            ("syn", "sweep", "done"), ("ss", "search", "done"), ("cc", "compare", "done")}
        got = {}
        for name, cid in ids.items():
            status, body = s.get(f"/api/c/0/{cid}/verdicts")
            assert status == 200, body
            got[name] = json.loads(body)
            status, html = s.get(f"/c/0/{cid}")
            assert status == 200 and 'id="verdicts"' in html and f'href="/report/0/{cid}"' in html
            status, html = s.get(f"/report/0/{cid}")
            assert status == 200 and html.lower().startswith("<!doctype html>") and "data:image/png;base64" in html
        assert [(v["configuration"], v["verdict"]) for v in got["syn"]] == [(sweep.label,
                                                                             sweep.analysis.report.verdict.value)]
        assert [(v["figure"], v["verdict"]) for v in got["ss"]] == [(f"search {x.goal}", x.verdict) for x in searches]
        (d,) = compared.differences["o_sat_pps=450000"]
        assert [(v["configuration"], v["figure"], v["verdict"]) for v in got["cc"]] == [
            (f"o_sat_pps=450000 vs {compared.baseline}", d.metric, d.verdict)]
        assert d.verdict == "slower"  # 10% less capacity, the model's truth
        assert s.get("/api/c/0/nope/verdicts")[0] == 404 and s.get("/report/x/y")[0] == 400
    finally:
        s.stop()
