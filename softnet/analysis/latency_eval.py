"""evaluate_run(raw) -> LatencyRunResult: one AF_XDP latency run's figures and
flags from what was read (the ping's records and summary, each role's hello,
the kernel baseline, BusyPollRxPackets before and after). Pure: a stored raw
run re-evaluates to the same result."""
from __future__ import annotations

import numpy as np

from softnet.analysis.latency_stats import AccountingError, run_stats
from softnet.results.latency import LatencyRunResult, RawLatencyRun, ToolReports


def _busy_poll_growth(raw: RawLatencyRun) -> dict[str, int]:
    # /proc/net/netstat per host, keyed by counter name
    b, a = raw.netstat_before, raw.netstat_after
    return {h: a[h].get("TcpExt.BusyPollRxPackets", 0) - b[h].get("TcpExt.BusyPollRxPackets", 0) for h in a}


def flags(raw: RawLatencyRun, accounted: bool, impossible: int, busy: dict[str, int]) -> list[str]:
    out = []
    if not accounted:
        out.append("counters_inconsistent")  # some sequence number neither received, lost nor impossible
    if impossible:
        out.append("impossible_delays")  # counted, never used as a delay
    # Busy polling must be seen working, not assumed: the kernel counts packets
    # it took by busy polling in each namespace's BusyPollRxPackets.
    if raw.knobs.busy_poll and not any(busy.get(h, 0) > 0 for h in ("b", "c")):
        out.append("busy_poll_inactive")
    if raw.other_runs:
        out.append("overlapped_other_run")
    if raw.ping.interrupted:
        out.append("interrupted")
    obs, req = raw.observed, raw.requested_cpus
    if obs and req and (obs.forward_cpu not in (None, req.b) or obs.reflect_cpu not in (None, req.c)):
        out.append("placement_not_as_requested")
    return out


def evaluate_run(raw: RawLatencyRun | dict, records: np.ndarray) -> LatencyRunResult:
    """``raw``: a RawLatencyRun, or its JSON (a stored raw run): checked here."""
    raw = RawLatencyRun.model_validate(raw)
    try:
        st = run_stats(records, raw.run, sent=raw.ping.sent_pkts)
        accounted = True
    except AccountingError:
        st, accounted = run_stats(records, raw.run), False
    busy = _busy_poll_growth(raw)
    base = None
    if raw.kernel_baseline is not None:
        rtts = np.asarray(raw.kernel_baseline.rtt_ns, dtype=float)
        base = {"sent": raw.kernel_baseline.sent, "received": raw.kernel_baseline.received,
                "median_ns": float(np.median(rtts)) if rtts.size else None}
    found = flags(raw, accounted, st.impossible, busy)
    rtt = {k: (None if isinstance(v, float) and v != v else v) for k, v in st.rtt.to_dict().items()}
    return LatencyRunResult(
        knobs=raw.knobs.to_dict(), interval_s=raw.interval_s, phase=raw.phase, sent=st.sent, received=st.received,
        lost=st.lost, impossible=st.impossible, duplicates=st.duplicates, reordered=st.reordered, rtt=rtt,
        kernel_baseline=base, busy_poll_rx_pkts=busy, applied=raw.applied,
        tool=ToolReports(hello=raw.hello, ping=raw.ping, observed=raw.observed), flags=found, valid=not found,
        started_unix_s=raw.started_unix_s, records_path=raw.records_path, provenance=raw.provenance)
