"""Trial latency in the HdrHistogram interval-log format, the one the
`hdrhistogram` package (HdrHistogram's Python port), HdrHistogram's Java
HistogramLogProcessor and TRex's `--hdrh` output read and write: one line per
interval (start, length, max, base64 of the compressed histogram).

The sink's histogram (softnet.analysis.latency_hist) is log-linear already;
each of its buckets goes into the HdrHistogram at its midpoint, the value
softnet reports for a percentile in that bucket. An HdrHistogram at 3
significant digits then gives back the same percentiles within 0.1% (its
own resolution). Delays beyond the sink's range (2^36 ns) have no bucket and
are left out; the log says how many.
"""
from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TextIO

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogWriter

from softnet.analysis.latency_hist import RANGE_LOG2_NS, midpoint
from softnet.results import readers
from softnet.results.trial import LatencyHistogram

SIGNIFICANT_DIGITS = 3  # HdrHistogram's resolution: 0.1%, finer than the sink's 0.39% buckets


@dataclass(frozen=True)
class HdrInterval:
    """One trial's window as an interval of the log."""

    start_unix_s: float
    end_unix_s: float
    histogram: LatencyHistogram
    label: str  # what the interval is (a comment line before it)


def hdr_of(hist: LatencyHistogram) -> HdrHistogram:
    """The sink's histogram as an HdrHistogram of nanoseconds."""
    h = HdrHistogram(1, 1 << max(hist.range_log2_ns, RANGE_LOG2_NS), SIGNIFICANT_DIGITS)
    for i, count in hist.buckets:
        if count:
            h.record_value(max(1, math.floor(midpoint(i, hist.sub_bucket_bits))), count)
    return h


def write_log(out: TextIO, intervals: Sequence[HdrInterval], comment: str) -> None:
    """An interval log: absolute time stamps (base time 0), values in ns,
    each interval's max in ms (the format's convention)."""
    w = HistogramLogWriter(out)
    w.output_comment(comment)
    w.output_log_format_version()
    if intervals:
        start = min(i.start_unix_s for i in intervals)
        stamp = _dt.datetime.fromtimestamp(start, _dt.timezone.utc).isoformat(" ")
        w.output_comment(f"[StartTime: {start:f} (seconds since epoch), {stamp}]")
    w.output_legend()
    for i in intervals:
        over = f", {i.histogram.over_range_pkts} delays beyond 2^{i.histogram.range_log2_ns} ns left out" \
            if i.histogram.over_range_pkts else ""
        w.output_comment(f"{i.label}{over}")
        w.output_interval_histogram(hdr_of(i.histogram), i.start_unix_s, i.end_unix_s)


def export_logs(results_dir: Path, target: Path) -> list[Path]:
    """One log per campaign, cell and load of a results store
    (``target/CAMPAIGN/cellCCC-loadLLL.hlog``), an interval per run's
    measurement window; trials without a latency histogram are left out."""
    written = []
    with readers.open_results(results_dir) as store:
        for c in readers.campaigns(store):
            by_load: dict[tuple[int, int], list[HdrInterval]] = {}
            for t in readers.stored_trials(store, c.campaign_id):
                doc, r = t.document, t.result
                if not doc.get("latency_hist") or r.started_unix_s is None:
                    continue
                start = r.started_unix_s + (r.warmup_s or 0.0)
                by_load.setdefault((t.cell_id, t.load_index), []).append(HdrInterval(
                    start, start + r.duration_s, LatencyHistogram.model_validate(doc["latency_hist"]),
                    f"cell {t.cell_id} load {t.load_index} run {t.run_index}: {r.intended_rate_pps:.0f} pps offered, "
                    f"{r.received_pkts} received"))
            for (cell, load), intervals in sorted(by_load.items()):
                path = Path(target) / c.campaign_id / f"cell{cell:03d}-load{load:03d}.hlog"
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("w") as out:
                    write_log(out, sorted(intervals, key=lambda i: i.start_unix_s),
                              f"softnet one-way delays (ns), campaign {c.campaign_id}, cell {cell}, load {load}")
                written.append(path)
    return written
