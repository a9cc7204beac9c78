"""softnet serve over a real campaign while it runs: the trial in progress
(its kernel figures at each sample) pushed to the page's event stream and
scraped from /metrics, each finished trial's figures in /metrics equal to
its stored JSON, and a campaign's state (running, done, interrupted)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from softnet.campaign.live import LiveWriter
from softnet.campaign.spec import CampaignSpec
from softnet.results.live import LIVE_FILE, LiveSample, read_live
from softnet.results.store import DB_NAME, Store
from tests.conftest import needs_root, softnet_cmd
from tests.test_serve import Server

SPEC = """name = "live"
[testbed]
sut = "ipv4-fwd"
[method]
loads = ["20kpps", "40kpps"]
runs = 2
duration_s = 2.5
warmup_s = 0.5
[collect]
sample_interval_s = 0.5
"""


def samples(text: str) -> list:
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


def start_run(spec: Path, results: Path) -> subprocess.Popen:
    proc = subprocess.Popen(softnet_cmd("run", str(spec), "--results", str(results), "--json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SOFTNET_WAIT": os.environ.get("SOFTNET_WAIT", "900")})
    deadline = time.monotonic() + 60
    while not (results / DB_NAME).exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    return proc


class Scraper(threading.Thread):
    """Scrapes /metrics every 0.2 s until stopped; keeps each scrape's samples."""

    def __init__(self, server: Server):
        super().__init__(daemon=True)
        self.server, self.scrapes, self.stop = server, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            status, text = self.server.get("/metrics")
            assert status == 200
            self.scrapes.append(samples(text))
            time.sleep(0.2)


class LiveEvents(threading.Thread):
    """Reads the campaign page's event stream; keeps each live event with its arrival time."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.events = url, []

    def run(self) -> None:
        with urllib.request.urlopen(self.url, timeout=120) as r:
            kind = None
            for line in r:
                line = line.decode().rstrip("\n")
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "live":
                    self.events.append((time.time(), json.loads(line[6:])))
                    if self.events[-1][1] is None:
                        return
                elif not line:
                    kind = None


@needs_root
@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
def test_a_running_campaign_live_in_metrics_and_events(tmp_path):
    (tmp_path / "s.toml").write_text(SPEC)
    results = tmp_path / "r"
    proc = start_run(tmp_path / "s.toml", results)
    server = Server(str(results))
    try:
        scraper = Scraper(server)
        scraper.start()
        deadline = time.monotonic() + 60
        while not any((results / "raw").glob(f"*/{LIVE_FILE}")):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cid = next((results / "raw").glob(f"*/{LIVE_FILE}")).parent.name
        events = LiveEvents(f"http://127.0.0.1:{server.port}/events/c/0/{cid}")
        events.start()
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        events.join(timeout=10)
        time.sleep(0.5)
        scraper.stop.set()
        scraper.join(timeout=10)
        _, body = server.get("/api/campaigns")
        assert [(c["campaign_id"], c["status"]) for c in json.loads(body)] == [(cid, "done")]
        _, after = server.get("/metrics")
    finally:
        server.stop()
        if proc.poll() is None:
            proc.kill()
    assert not (results / "raw" / cid / LIVE_FILE).exists()
    with Store(results, read_only=True) as st:
        stored = {(r["load_index"], r["run_index"]): json.loads(r["result_json"])
                  for r in st.query("SELECT load_index, run_index, result_json FROM trials")}
    assert len(stored) == 4

    # pushed at each sample: every live event within 2 s of the sample it carries
    live = [(t, e) for t, e in events.events if e is not None]
    with_samples = [(t, e) for t, e in live if e["trial"] and e["trial"]["samples"]]
    assert len(with_samples) >= 8, [e["trial"] for _, e in live]
    assert all(t - e["updated_unix_s"] <= 2.0 for t, e in live)
    assert events.events[-1][1] is None  # the stream says the campaign ended
    # the last trial's count lives only milliseconds before the file goes (the stream polls every 0.25 s)
    assert max(e["done"] for _, e in live) in (3, 4) and live[-1][1]["planned"] == 4
    assert live[0][1]["unit"] == "trials"

    # the trial in progress in /metrics: rates near the offered load (the median over the scrapes: after
    # a vCPU stall the generator catches up, and one interval carries more), every CPU's busy share
    running = [s for scrape in scraper.scrapes for s in scrape if s.name == "softnet_live_offered_rate_pps"]
    assert running, "no scrape caught a trial in progress"
    for load in (20_000, 40_000):
        got = sorted(s.value for s in running if s.labels["trial"].startswith(f"load {load // 20_000 - 1} "))
        assert got and 0.8 * load <= got[len(got) // 2] <= 1.2 * load, (load, got)
    busy = {s.labels["cpu"] for scrape in scraper.scrapes for s in scrape if s.name == "softnet_live_cpu_busy_ratio"}
    assert busy == {str(c) for c in os.sched_getaffinity(0)}
    states = {s.labels["state"] for scrape in scraper.scrapes for s in scrape if s.name == "softnet_campaign_state"}
    assert "running" in states

    # each finished trial, scraped while the next ran (the last after the run): its JSON's figures
    seen = set()
    for scrape in [*scraper.scrapes, samples(after)]:
        by = {}
        for s in scrape:
            if s.name.startswith("softnet_trial_"):
                by.setdefault(s.labels["trial"], []).append(s)
        for trial, got in by.items():
            load, run = (int(w) for w in trial.split()[1::2])
            r = stored[(load, run)]
            want = {("softnet_trial_achieved_rate_pps", None): r["achieved_rate_pps"],
                    ("softnet_trial_loss_ratio", None): r["loss_ratio"],
                    ("softnet_trial_valid", None): int(r["valid"]),
                    ("softnet_trial_host_stalls", None): sum(c["count"] for c in
                                                             r["host_stalls"]["per_cpu"].values()),
                    **{("softnet_trial_latency_seconds", q): r[f] / 1e9 for q, f in (
                        ("0.5", "latency_p50_ns"), ("0.99", "latency_p99_ns"))},
                    **{("softnet_trial_cpu_busy_ratio", c): v["cpu_time_pct"] / 100
                       for c, v in r["kernel"]["per_cpu"].items()},
                    **{("softnet_trial_net_rx_softirqs_per_second", c): v["net_rx_softirqs_per_s"]
                       for c, v in r["kernel"]["per_cpu"].items()}}
            have = {(s.name, s.labels.get("quantile", s.labels.get("cpu"))): s.value for s in got}
            for k, v in want.items():
                assert have[k] == pytest.approx(v, rel=1e-9, abs=1e-12), (trial, k)
            assert got[0].labels["configuration"] == ""
            seen.add((load, run))
    assert seen == set(stored)
    assert not [s for s in samples(after) if s.name.startswith("softnet_live_")]


@needs_root
@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
def test_a_campaign_stopped_by_ctrl_c_shows_interrupted(tmp_path):
    (tmp_path / "s.toml").write_text(SPEC.replace('runs = 2', 'runs = 3'))
    results = tmp_path / "r"
    proc = start_run(tmp_path / "s.toml", results)
    deadline = time.monotonic() + 60
    while not any((lv := read_live(f)) and lv.done for f in (results / "raw").glob("*/")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    server = Server(str(results))
    try:
        _, body = server.get("/api/campaigns")
        (c,) = json.loads(body)
        assert c["status"] == "interrupted" and 1 <= c["trials"] < 6
        _, html = server.get(f"/c/0/{c['campaign_id']}")
        assert 'id="now" class="interrupted"' in html
    finally:
        server.stop()


def test_a_writer_gone_without_a_word_reads_as_interrupted(tmp_path):
    """kill -9: the live file stays 'running', but its writer's pid is gone."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    with LiveWriter(tmp_path, "c-1", "sweep") as w:
        w.progress("plan", 1, 4)
        cell = CampaignSpec.model_validate({"name": "c", "method": {"loads": ["100kpps"], "duration_s": 2.5,
                                                                    "warmup_s": 0.5}})
        w.trial(0, 1, 0, {"testbed.sut": "ipv4-fwd"}, 1e5, cell)(LiveSample(elapsed_s=1.0, interval_s=0.5))
        w.state.pid = dead.pid  # what a killed controller leaves behind
        w._write()
        lv = read_live(tmp_path)
        assert lv is not None and lv.state == "running" and not lv.writer_alive()
        assert lv.trial.configuration == "sut=ipv4-fwd" and lv.trial.latest.elapsed_s == 1.0
        assert lv.trial.expected_s == 3.0
        w.state.pid = os.getpid()
    assert read_live(tmp_path) is None  # ended as planned: no live file
    with pytest.raises(KeyboardInterrupt):
        with LiveWriter(tmp_path, "c-1", "search") as w:
            w.progress("plan", 0, 2)
            raise KeyboardInterrupt
    lv = read_live(tmp_path)
    assert lv is not None and lv.state == "interrupted" and not lv.writer_alive() and lv.unit == "searches"
