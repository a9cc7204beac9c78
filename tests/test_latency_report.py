"""Stored latency campaigns through the store, analysis, CLI and report,
without root: records drawn from known log-normals (the truth is planted),
written and read back like the AF_XDP tool's."""
from __future__ import annotations

import itertools
import json
import subprocess

import numpy as np
import pytest

from softnet.analysis.latency_campaigns import analyze_latency, stability
from softnet.analysis.latency_eval import evaluate_run
from softnet.provenance import provenance
from softnet.report.html import write_report
from softnet.results.store import Store
from tests.conftest import softnet_cmd
from tests.test_latency_stats import lognormal_run

KNOBS = {"busy_poll": [False, True], "need_wakeup": [True, False], "poll_receiver": [False, True]}


def median_of(k: dict) -> float:
    """Two planted clusters: busy polling halves nothing, poll() at the receiver costs 4x."""
    return 160_000 if k["poll_receiver"] else 40_000


def store_campaign(store: Store, name: str, seed: int, tmp_path, spec: dict | None = None) -> str:
    rng = np.random.default_rng(seed)
    cid = f"{name}-0000"
    store.register_campaign(cid, name, "hash", {"name": name}, 0.0)
    for cell_id, values in enumerate(itertools.product(*KNOBS.values())):
        knobs = dict(zip(KNOBS, values))
        store.register_cell(cid, cell_id, {f"latency.{k}": v for k, v in knobs.items()}, spec or {})
        for run in range(3):
            records = lognormal_run(rng, median_of(knobs), 0.05, 200)
            path = store.records_path(cid, cell_id, run)
            path.parent.mkdir(parents=True, exist_ok=True)
            records.tofile(path)
            raw = {"knobs": knobs, "interval_s": 0.01, "hello": {},
                   "ping": {"role": "ping", "sent_pkts": 200, "received_pkts": 200, "lost_pkts": 0,
                            "interrupted": False},
                   "netstat_before": {"b": {}, "c": {}}, "netstat_after": {"b": {}, "c": {}},
                   "kernel_baseline": {"sent": 20, "received": 20, "rtt_ns": [500_000] * 20},
                   "applied": {"coalesce_rx_usecs.b_a": {"unsupported": "veth"}}, "started_unix_s": 0.0,
                   "records_path": str(path), "provenance": provenance(latency=knobs)}
            store.add_latency_run(cid, cell_id, run, evaluate_run(raw, records).to_dict(), raw)
    return cid


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("lat")
    with Store(d) as store:
        store_campaign(store, "first", 1, d)
        store_campaign(store, "second", 2, d)
    return d


def test_a_campaigns_fixed_k_is_the_one_its_clusters_use(tmp_path):
    """[latency] clusters = 3: k-means with that k (the study fixes 4 and 6),
    not the silhouette's choice (2 for these two planted groups)."""
    with Store(tmp_path) as store:
        store_campaign(store, "fixed", 3, tmp_path, {"latency": {"clusters": 3}})
        store_campaign(store, "free", 3, tmp_path)
        fixed = analyze_latency(store, "fixed-0000", n_resamples=100).clustering
        free = analyze_latency(store, "free-0000", n_resamples=100).clustering
    assert (fixed.k, fixed.chosen_by) == (3, "fixed") and (free.k, free.chosen_by) == (2, "silhouette")


def test_two_runs_of_a_matrix_cluster_alike(results):
    with Store(results, read_only=True) as store:
        analyses = [(cid, analyze_latency(store, cid, n_resamples=100)) for cid in ("first-0000", "second-0000")]
    for _, a in analyses:
        assert a.clustering is not None and a.clustering.k == 2
        fast = a.clustering.clusters[0]
        assert fast.always_present == {"poll_receiver": False}
        held = {f.key: f.verdict for f in a.findings}
        assert held["poll_receiver_worse"] == "held"
    (s,) = stability(analyses)
    assert s["verdict"] == "stable" and s["ari"] == 1.0 and s["common"] == 8


@pytest.mark.slow
def test_report_and_analyze_show_the_latency_campaigns(results, tmp_path):
    out = write_report(results, tmp_path / "r.html")
    html = out.read_text()
    assert "AF_XDP round-trip latency" in html and "adjusted Rand index 1.00 over 8 configurations" in html
    assert html.count("<h3>first-0000</h3>") == 1 and "poll_receiver=true" in html
    r = subprocess.run(softnet_cmd("analyze", str(results), "--json"), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lat = [d for d in json.loads(r.stdout) if d.get("latency")]
    assert len(lat) == 2 and all(d["clustering"]["k"] == 2 for d in lat)
    people = subprocess.run(softnet_cmd("analyze", str(results)), capture_output=True, text=True, timeout=120,
                            env={**__import__("os").environ, "COLUMNS": "80"})
    assert people.returncode == 0 and "unsupported here" in people.stdout
    assert max(len(line) for line in people.stdout.splitlines()) <= 80
