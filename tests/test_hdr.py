"""Latency in the HdrHistogram interval-log format: written from real
captured trials, read back with the `hdrhistogram` package, whose recorded
values give the percentiles softnet reports within its 0.1% resolution;
merged intervals give the percentiles of the pooled delays."""
from __future__ import annotations

import json
import math
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from softnet.analysis.latency_hist import percentiles
from softnet.report.hdr import SIGNIFICANT_DIGITS, hdr_of
from softnet.results.store import Store
from softnet.results.trial import LatencyHistogram
from tests.conftest import softnet_cmd

CAPTURED = sorted((Path(__file__).parent / "data" / "raw_trials").glob("*.json"))
QS = ((50, "latency_p50_ns"), (90, "latency_p90_ns"), (99, "latency_p99_ns"), (99.9, "latency_p99_9_ns"))
RESOLUTION = 10 ** -SIGNIFICANT_DIGITS


def close(hdr_value: float, softnet_value: float) -> bool:
    """HdrHistogram reports a value's bucket's highest equivalent: within its resolution (and a ns of rounding)."""
    return abs(hdr_value - softnet_value) <= RESOLUTION * softnet_value + 1


def at_percentile(h: HdrHistogram, q: float) -> float:
    """The nearest-rank percentile (the smallest value with at least q% at or
    below it: softnet's, numpy's inverted_cdf, Java HdrHistogram's since
    2.1.10) over the package's recorded values. The Python port's own
    get_value_at_percentile rounds the rank instead (q n / 100 + 0.5), which
    at a sparse tail can land on the neighbouring delay; where both ranks
    agree it must give the same value."""
    n = h.get_total_count()
    rank, acc = max(1, math.ceil(Fraction(str(q)) * n / 100)), 0
    for item in h.get_recorded_iterator():
        acc += item.count_at_value_iterated_to
        if acc >= rank:
            value = h.get_highest_equivalent_value(item.value_iterated_to)
            if int(q * n / 100 + 0.5) == rank:
                assert h.get_value_at_percentile(q) == value
            return value
    raise AssertionError("rank beyond the histogram")


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.stem)
def test_each_captured_trials_histogram_gives_its_percentiles_back(path):
    r = json.loads(path.read_text())["result"]
    h = hdr_of(LatencyHistogram.model_validate(r["latency_hist"]))
    assert h.get_total_count() == sum(c for _, c in r["latency_hist"]["buckets"])
    for q, key in QS:
        # softnet clamps a percentile to the exact max (never further from the truth): so must the check
        assert close(min(at_percentile(h, q), r["latency_max_ns"]), r[key]), (q, r[key])


def test_export_writes_logs_the_package_reads_and_merges(tmp_path):
    """A store of captured trials (two loads, the runs of each an interval):
    `softnet export --format hdrh` writes a log per load; each interval read
    back has its trial's percentiles, and the merged log those of the pooled
    buckets."""
    runs = {0: CAPTURED[:3], 1: CAPTURED[3:5]}
    results = tmp_path / "r"
    with Store(results) as st:
        st.register_campaign("c-1", "c", "h", {}, 1.0)
        st.register_cell("c-1", 0, {}, {})
        for load, paths in runs.items():
            for run, p in enumerate(paths):
                st.add_trial("c-1", 0, load, run, {}, json.loads(p.read_text())["result"])
    out = tmp_path / "logs"
    r = subprocess.run(softnet_cmd("export", str(results), "--format", "hdrh", "--out", str(out)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    logs = sorted((out / "c-1").glob("*.hlog"))
    assert [p.name for p in logs] == ["cell000-load000.hlog", "cell000-load001.hlog"]
    for load, log in enumerate(logs):
        results_ = [json.loads(p.read_text())["result"] for p in runs[load]]
        results_.sort(key=lambda x: x["started_unix_s"])  # intervals in time order
        reader = HistogramLogReader(str(log), HdrHistogram(1, 1 << 36, SIGNIFICANT_DIGITS))
        merged = HdrHistogram(1, 1 << 36, SIGNIFICANT_DIGITS)
        for res in results_:
            h = reader.get_next_interval_histogram()
            assert h is not None
            for q, key in QS:
                assert close(min(at_percentile(h, q), res["latency_max_ns"]), res[key]), (log, q)
            merged.add(h)
        assert reader.get_next_interval_histogram() is None
        pooled = {}
        for res in results_:
            for i, c in res["latency_hist"]["buckets"]:
                pooled[i] = pooled.get(i, 0) + c
        for q, want in percentiles(sorted(pooled.items())).items():
            assert close(at_percentile(merged, q), want), (log, q)
        text = log.read_text()
        assert "#[StartTime: " in text and '"Interval_Compressed_Histogram"' in text


def test_export_refuses_an_unknown_format(tmp_path):
    with Store(tmp_path / "r") as st:
        st.register_campaign("c-1", "c", "h", {}, 1.0)
    r = subprocess.run(softnet_cmd("export", str(tmp_path / "r"), "--format", "hdr"), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "--format" in r.stderr and "hdrh" in r.stderr
