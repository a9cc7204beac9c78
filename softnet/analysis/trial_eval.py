"""evaluate(raw, spec) -> TrialResult: a trial's figures and flags from its raw
reads, with no I/O, so every rule is testable on captured raw trials.

Loss is computed over the window packets only (sequence numbers >= the
warm-up count), so packets still in flight at the window edges are neither
lost nor double counted.
"""
from __future__ import annotations

from softnet.analysis import counters, latency_hist, loss_time
from softnet.analysis.cpu_audit import audit_cpu, cpu_profile
from softnet.analysis.kernel_stats import trial_kernel_stats
from softnet.analysis.profile_reads import delta as profiler_delta
from softnet.analysis.profile_reads import name_drops
from softnet.analysis.stages import stage_breakdown
from softnet.errors import InputError
from softnet.results.series import Series
from softnet.results.raw import check_raw
from softnet.results.trial import KNOWN_RAW_SCHEMA_VERSIONS, RESULT_SCHEMA_OF_RAW, TrialResult, TrialSpec
from softnet.results import shapes

PLACEMENT_MIN_SHARE = 0.99  # of sink packets counted on the requested CPUs
PACING_TOLERANCE = 0.005  # achieved load within +-0.5% of intended, or the trial is flagged
# Flags that inform without invalidating: the trial still measured the SUT
# (host_interference: host stalls explain part of its loss, which is set apart).
INFORMATIONAL_FLAGS = frozenset({loss_time.HOST_INTERFERENCE})


def _int_keys(snap: dict) -> dict:
    """A procfs snapshot as JSON has string CPU keys: back to ints."""
    return {"softirqs": {k: {int(c): v for c, v in per_cpu.items()} for k, per_cpu in snap["softirqs"].items()},
            "cpu_ticks": {int(c): t for c, t in snap["cpu_ticks"].items()},
            "softnet": {int(c): v for c, v in snap["softnet"].items()}}


def latency_v1(sink: dict) -> dict:
    """Raw schema 1 (a log2 histogram): percentiles only as the upper edge of
    their power-of-two bucket, the fields of a schema 2 result."""
    n = sink["rx_window_pkts"]
    hist = sink["latency_log2_hist"]
    out = {"latency_min_ns": sink["latency_min_ns"] if n else None,
           "latency_mean_ns": sink["latency_sum_ns"] / n if n else None,
           "latency_max_ns": sink["latency_max_ns"] if n else None}
    for q in (50, 99, 99.9):
        key = f"latency_p{q:g}_upper_ns".replace(".", "_")
        out[key] = None
        if n:
            acc = 0
            for b, c in enumerate(hist):
                acc += c
                if acc >= n * q / 100:
                    out[key] = 2 ** (b + 1)
                    break
    out["latency_log2_hist"] = hist
    return out


def latency(sink: dict) -> dict:
    """Min, mean and max exact; percentiles from the log-linear histogram
    (softnet.analysis.latency_hist), each within latency_percentile_rel_error
    of the nearest-rank delay; and, with --exact, the truth to check them by."""
    h = sink["latency_hist"]
    n, sub_bits = sink["latency_pkts"], h["sub_bucket_bits"]
    out = {"latency_min_ns": sink["latency_min_ns"] if n else None,
           "latency_mean_ns": sink["latency_sum_ns"] / n if n else None,
           "latency_max_ns": sink["latency_max_ns"] if n else None,
           "latency_pkts": n, "latency_negative_pkts": sink["latency_negative_pkts"]}
    clamp = (sink["latency_min_ns"], sink["latency_max_ns"]) if n else None
    pct = latency_hist.percentiles(h["buckets"], sink["latency_over_range_pkts"], sub_bits=sub_bits, clamp=clamp)
    out.update({latency_hist.percentile_key(q): v for q, v in pct.items()})
    out["latency_percentile_rel_error"] = latency_hist.rel_error_bound(sub_bits)
    out["latency_hist"] = {"sub_bucket_bits": sub_bits, "range_log2_ns": h["range_log2_ns"],
                           "buckets": h["buckets"], "over_range_pkts": sink["latency_over_range_pkts"]}
    if "latency_exact_ns" in sink:
        out["latency_exact"] = exact_check(sink["latency_exact_ns"], sink["latency_exact_seen_pkts"], n, pct)
    return out


def exact_check(delays: list[int], seen: int, n: int, pct: dict) -> dict:
    """The exact nearest-rank percentiles of the delays the sink kept one by
    one, and how far the histogram's are from them (only when it kept them all)."""
    xs = sorted(delays)
    complete = seen == n == len(xs) and (not xs or xs[0] > 0)
    exact = {latency_hist.percentile_key(q): xs[latency_hist.rank(q, len(xs)) - 1] if xs else None for q in pct}
    errors = [abs(pct[q] - exact[latency_hist.percentile_key(q)]) / exact[latency_hist.percentile_key(q)]
              for q in pct if complete and xs and pct[q] is not None]
    return {"kept_pkts": len(xs), "complete": complete, **exact,
            "max_rel_error": max(errors) if errors else None}


def placement(tb: dict, gen: dict, sink: dict, window: dict) -> dict:
    """Requested against observed placement. Evidence over configuration: the
    generator reports the CPU it ran on, the sink counts per CPU, and NET_RX
    softirqs show where receive work ran. A few stray packets elsewhere do not
    make a trial invalid; a real misplacement moves most of them."""
    p = tb["placement"]
    threads = tb["napi_thread_cpus"]
    busy = {str(c): counters.busy_ratio(t) for c, t in window["cpu_ticks"].items()}
    per_cpu = sink["rx_test_pkts_per_cpu"]
    sink_cpus = [c for c, n in enumerate(per_cpu) if n]
    receive_cpus = set(p["sut_cpus"]) | ({p["sink_cpu"]} if p["sink_cpu"] is not None else set())
    on_requested = sum(n for c, n in enumerate(per_cpu) if c in receive_cpus) / max(sum(per_cpu), 1)
    ok = gen["cpu"] == p["gen_cpu"] and on_requested >= PLACEMENT_MIN_SHARE
    if p["steering"] == "threaded":
        def wanted(dev: str) -> list[int]:  # the sink's own NAPI thread (sink_cpu) sits apart from the SUT's
            return [p["sink_cpu"]] if dev == tb["sink_ifname"] and p["sink_cpu"] is not None else p["sut_cpus"]
        ok = ok and all(cpu in wanted(dev) for dev, t in threads.items() for cpu in t.values() if cpu is not None)
    return {
        "requested": dict(p),
        "observed": {"gen_cpu": gen["cpu"], "sink_cpus": sink_cpus, "sink_share_on_requested_cpus": on_requested,
                     "sink_rx_pkts_per_cpu": sink["rx_test_pkts_per_cpu"], "napi_thread_cpus": threads,
                     "net_rx_softirqs_per_cpu": {str(c): n for c, n in window["softirqs"].get("NET_RX", {}).items()},
                     "cpu_busy_ratio_per_cpu": busy},
        "as_requested": ok,
    }


def diagnosis(raw: dict, trial_delta: dict) -> dict:
    b, a = raw["after"], raw["before"]
    links = {role: {k: b["links"][role][k] - a["links"][role][k] for k in b["links"][role]} for role in b["links"]}
    eth0, eth1 = a["ethtool_gen"], b["ethtool_gen"]
    return {
        # Frames the generator's XDP transmit could not put into the peer
        # veth's ring: the SUT's ingress, or the sink's without a SUT.
        "ingress_ring_of": "sink" if raw["testbed"]["sut"] == "none" else "SUT",
        "qdisc_dropped_pkts": b["qdisc_drops"] - a["qdisc_drops"],
        "ingress_ring_full_pkts": eth1.get("tx_queue_0_xdp_xmit_errors", 0) - eth0.get("tx_queue_0_xdp_xmit_errors", 0),
        "softnet_dropped_pkts": sum(v["dropped"] for v in trial_delta["softnet"].values()),
        "softnet_time_squeeze": sum(v["time_squeeze"] for v in trial_delta["softnet"].values()),
        "interface_deltas": links,
        "interface_rx_dropped_pkts": sum(v["rx_dropped"] for v in links.values()),
        "interface_tx_dropped_pkts": sum(v["tx_dropped"] for v in links.values()),
    }


SINK_DROP_SHARE, SINK_DROP_MIN = 0.1, 10


def sink_limited(diag: dict, tb: dict, lost: int | None) -> bool:
    """The sink's veth ring overflowed for a share of the loss: packets the
    SUT forwarded were dropped on the last hop because the sink's receive
    work did not keep up (e.g. its NAPI kthread on a busy generator's CPU),
    so the loss is not all the SUT's. The hop is the SUT interface facing
    the sink (sut_in for a bidirectional trial's reverse way); whole-trial
    drops, counted against the window's loss."""
    links = diag["interface_deltas"]
    hop = tb.get("sink_hop", "sut_out")
    if tb["sut"] == "none" or not lost or hop not in links:
        return False
    drops = links[hop].get("tx_dropped", 0)
    return drops > max(SINK_DROP_MIN, SINK_DROP_SHARE * lost)


def profile(prof: dict, interface_ids: list, window: dict, packets: int) -> dict:
    """Per-CPU eBPF times over the window, drops by reason and device (host-wide:
    the sink's XDP drops of skbs count too, on its device), and the audit
    against the same window's /proc/stat ticks."""
    reads, events = prof["reads"], prof["events"]
    reasons = {int(k): v for k, v in prof["drop_reasons"].items()}
    devices = {(ino, idx): name for ino, idx, name in interface_ids}
    d = profiler_delta(reads.get("window_start", reads["start"]), reads["window_end"])
    per_cpu = {cpu: cpu_profile(d, cpu) for cpu in range(len(d["cpus"])) if cpu in window["cpu_ticks"]}
    transitions = {cpu: [[events[f], events[t], ns, n] for f, t, ns, n in d["cpus"][cpu]["transitions"]]
                   for cpu in per_cpu}
    polled, polled_sampled = (sum(c["napi_work"] for c in d[k]) for k in ("cpus", "sampled_cpus"))
    return {
        "plan": prof["plan"], "window_s": d["wall_ns"] / 1e9, "window_monotonic_ns": d["monotonic_ns"],
        "per_cpu": per_cpu,
        # drops: counted while sampled (all the window at duty 1), and estimated over the window by the
        # packets polled then against in all (not by time: the CPU drains a backlog faster in sampled periods)
        "drops": name_drops(d["drops"], reasons, devices, polled / polled_sampled if polled_sampled else 0.0),
        "sampled_time_share": d["sampled_ns"] / d["wall_ns"] if d["wall_ns"] else None,
        "sampled_packet_share": polled_sampled / polled if polled else None,
        "drop_keys_full": sum(c["drop_keys_full"] for c in d["cpus"]),
        "audit": {cpu: audit_cpu(m, window["cpu_ticks"][cpu]) for cpu, m in per_cpu.items()},
        # the stage clock's raw (from event, to event, ns, count), named, and the stages
        "transitions": transitions,
        "duty": prof["duty"],
        "stages": {cpu: stage_breakdown(d["cpus"][cpu], d["sampled_cpus"][cpu], transitions[cpu], d["wall_ns"] / 1e9,
                                        d["sampled_ns"] / 1e9, packets) for cpu in per_cpu} if d["sampled_ns"] else {},
        "stages_missing": None if d["sampled_ns"] else (
            "no stage events: the light plan (no per-packet tracepoints)" if prof["duty"] == 0 else
            f"no sampled period fell inside the {d['wall_ns'] / 1e9:.2f} s window (stage events attached "
            f"{100 * prof['duty']:g}% of every {prof['period_ms']} ms): use a longer window or duty 1"),
    }


def flags(spec: TrialSpec, gen: dict, sent: int, received: int, achieved: float, sink: dict,
          other_runs: list[str]) -> list[str]:
    """The validity rules, in the order they are reported."""
    out = []
    if gen["sent_pkts"] < spec.warmup_pkts + spec.window_pkts or achieved < (1 - PACING_TOLERANCE) * spec.rate_pps:
        out.append("generator_limited")
    elif achieved > (1 + PACING_TOLERANCE) * spec.rate_pps:
        # Behind schedule at the window start, then catching up back to back:
        # the SUT saw a higher load than intended.
        out.append("generator_overshoot")
    # a send time after the arrival on one clock: a corrupt stamp
    if received > sent or sink["out_of_range_pkts"] or sink.get("latency_negative_pkts"):
        out.append("counters_inconsistent")
    if gen["interrupted"]:
        out.append("interrupted")
    if other_runs:
        out.append("overlapped_other_run")
    return out


def host_stalls_in_time(raw: dict, window: dict, sent: int, lost: int | None, generator_lag: bool) -> dict:
    """Loss in time, the data path's CPU stalls and the loss they explain
    (softnet.analysis.loss_time); the SUT's own loss is what is left."""
    timeline, probe, p = raw.get("sink_timeline"), raw.get("stalls") or {}, raw["testbed"]["placement"]
    missing = probe.get("missing") or (None if timeline else "no sink timeline")
    if missing or lost is None:
        out = {"host_stalls": {"missing": missing or "loss unknown (counters inconsistent)"},
               "sut_lost_pkts": lost, "sut_loss_ratio": lost / sent if sent and lost is not None else None}
        if timeline and lost is not None:  # when packets were lost is known without the probe
            out["loss_timeline"] = loss_time.loss_timeline(timeline, raw["generator"])
        return out
    busy = [counters.busy_ratio(window["cpu_ticks"][c]) for c in p["sut_cpus"] if c in window["cpu_ticks"]]
    busy = [b for b in busy if b is not None]
    steal = {c: 10.0 * t.get("steal", 0) for c, t in window["cpu_ticks"].items()}  # USER_HZ 100: 10 ms a tick
    out = loss_time.attribute(timeline, raw["generator"], probe, p, sum(busy) / len(busy) if busy else None,
                              steal, raw.get("injected_stalls"), generator_lag)
    explained = out["loss_explained_by_host_stalls"]["pkts"]
    # the sink's bitmap and its counters agree when nothing is in flight; if not, the counters rule
    sut_lost = max(lost - explained, 0)
    return {**out, "sut_lost_pkts": sut_lost, "sut_loss_ratio": sut_lost / sent if sent else None}


def achieved_rate(spec: TrialSpec, gen: dict, sent: int, span_s: float) -> float:
    """The window's achieved rate: (packets - 1) / send span at constant
    arrivals; with poisson/onoff the intended rate scaled by the schedule's
    span over the send span (the window need not hold whole bursts or a mean
    sample of gaps: the schedule itself is the reference)."""
    if span_s <= 0:
        return 0.0
    due_span_ns = gen.get("last_due_ns", 0) - gen.get("window_due_start_ns", 0)
    if spec.arrivals != "const" and gen.get("window_due_start_ns") and due_span_ns > 0:
        return spec.rate_pps * (due_span_ns / 1e9) / span_s
    return (sent - 1) / span_s


def traffic_shape(spec: TrialSpec, gen: dict, sink: dict, sent: int, received: int, span_s: float) -> dict:
    """The shape's figures: frame mix, mean frame size and bits throughput
    from the bytes received (window first copies, sizes incl. FCS), per-flow
    counts (the sink's seq % flows) and per-size loss (sent per size from the
    mix's table over the window's seqs [warm-up, warm-up + sent))."""
    mix = spec.mix_sizes()
    mean = shapes.mean_frame_bytes(mix) if mix else spec.frame_bytes
    rx_bytes = sink.get("window_frame_bytes") if mix else received * spec.frame_bytes
    if rx_bytes is None:
        rx_bytes = received * mean
    out = {"frame_mix": shapes.mix_text(mix) if mix else None, "mean_frame_bytes": mean,
           "throughput_bps": rx_bytes * 8 / span_s if span_s > 0 else None, "arrivals": spec.arrivals,
           "traffic_shape": {"arrivals": spec.arrivals, "seed": spec.seed if spec.arrivals == "poisson" else None,
                             "burst_pkts": spec.burst_pkts if spec.arrivals == "onoff" else None,
                             "on_duty": spec.on_duty if spec.arrivals == "onoff" else None,
                             "flows": spec.flows, "src_ips": spec.src_ips, "dst_ips": spec.dst_ips,
                             "dst_ports": spec.dst_ports,
                             "flows_total": shapes.total_flows(spec.flows, spec.src_ips, spec.dst_ips, spec.dst_ports)}}
    counts = sink.get("flow_pkts")
    if counts:
        out["flow_counts"] = {"flows": len(counts), "min_pkts": min(counts), "max_pkts": max(counts),
                              "sum_pkts": sum(counts)}
    if mix and "size_pkts" in sink:
        sent_by = shapes.sent_per_size(mix, spec.warmup_pkts, spec.warmup_pkts + sent)
        rows = {}
        for size, _ in mix:
            n_sent, n_rx = sent_by[size], sink["size_pkts"].get(str(size), 0)
            lost = n_sent - n_rx if n_rx <= n_sent else None
            rows[str(size)] = {"sent_pkts": n_sent, "received_pkts": n_rx, "lost_pkts": lost,
                               "loss_ratio": lost / n_sent if n_sent and lost is not None else None}
        out["size_loss"] = rows
    return out


SUMMED = ("intended_pkts", "sent_pkts", "warmup_sent_pkts", "received_pkts", "reordered_pkts", "duplicate_pkts",
          "out_of_range_pkts", "warmup_received_pkts", "achieved_rate_pps", "intended_rate_pps")
DIRECTION_KEYS = ("intended_rate_pps", "sent_pkts", "received_pkts", "lost_pkts", "loss_ratio", "sut_lost_pkts",
                  "sut_loss_ratio", "achieved_rate_pps", "achieved_ratio", "throughput_bps", "reordered_pkts",
                  "duplicate_pkts", "latency_min_ns", "latency_mean_ns", "latency_max_ns", "latency_p50_ns",
                  "latency_p90_ns", "latency_p99_ns", "latency_p99_9_ns", "flow_counts", "size_loss", "flags",
                  "valid")


def both_directions(raw: dict, spec: TrialSpec) -> TrialResult:
    """A bidirectional trial: each direction evaluated as a one-way trial of
    half the rate (the reverse one from the raw's "reverse" reads, without
    the host-wide samples the forward one carries), then counts, rates and
    loss summed; flags united, valid when both are."""
    one = spec.one_direction()
    fwd_raw = {k: v for k, v in raw.items() if k != "reverse"}
    r = raw["reverse"]
    rev_raw = {**fwd_raw, "generator": r["generator"], "sink": r["sink"], "drain_s": r["drain_s"],
               "sink_timeline": r["sink_timeline"], "series": None, "profile": None,
               "testbed": {**raw["testbed"], "sink_ifname": r["sink_ifname"], "src_ip_first": r["src_ip_first"],
                           "sink_hop": "sut_in"}}
    fwd, rev = evaluate(fwd_raw, one).to_dict(), evaluate(rev_raw, one).to_dict()
    out = dict(fwd)
    for k in SUMMED:
        out[k] = fwd[k] + rev[k]
    sent = out["sent_pkts"]

    def total(key: str):
        return None if fwd.get(key) is None or rev.get(key) is None else fwd[key] + rev[key]

    out["lost_pkts"], out["sut_lost_pkts"] = total("lost_pkts"), total("sut_lost_pkts")
    out["loss_ratio"] = out["lost_pkts"] / sent if sent and out["lost_pkts"] is not None else None
    out["sut_loss_ratio"] = out["sut_lost_pkts"] / sent if sent and out["sut_lost_pkts"] is not None else None
    out["achieved_ratio"] = out["achieved_rate_pps"] / spec.rate_pps
    if fwd.get("throughput_bps") is not None and rev.get("throughput_bps") is not None:
        out["throughput_bps"] = fwd["throughput_bps"] + rev["throughput_bps"]
    if fwd.get("flow_counts") and rev.get("flow_counts"):  # each direction's flows are flows of their own
        f, b = fwd["flow_counts"], rev["flow_counts"]
        out["flow_counts"] = {"flows": f["flows"] + b["flows"], "min_pkts": min(f["min_pkts"], b["min_pkts"]),
                              "max_pkts": max(f["max_pkts"], b["max_pkts"]), "sum_pkts": f["sum_pkts"] + b["sum_pkts"]}
    if fwd.get("size_loss") and rev.get("size_loss"):
        out["size_loss"] = {}
        for size, a in fwd["size_loss"].items():
            b = rev["size_loss"][size]
            n, rx = a["sent_pkts"] + b["sent_pkts"], a["received_pkts"] + b["received_pkts"]
            lost = None if a["lost_pkts"] is None or b["lost_pkts"] is None else a["lost_pkts"] + b["lost_pkts"]
            out["size_loss"][size] = {"sent_pkts": n, "received_pkts": rx, "lost_pkts": lost,
                                      "loss_ratio": lost / n if n and lost is not None else None}
    out["flags"] = sorted(set(fwd["flags"]) | set(rev["flags"]))
    out["valid"] = fwd["valid"] and rev["valid"]
    out["directions"] = {name: {k: d.get(k) for k in DIRECTION_KEYS}
                         for name, d in (("forward", fwd), ("reverse", rev))}
    return TrialResult(**out)


def sut_thread_cpu(raw: dict, sink: dict) -> dict | None:
    """The SUT's kthreads' CPU time over the whole trial (nothing else runs in
    them, so warm-up and drain included) per packet the sink received."""
    b, a = raw["before"].get("sut_thread_runtime_ns"), raw["after"].get("sut_thread_runtime_ns")
    if not b or not a or set(a) != set(b) or any(v is None for v in (*a.values(), *b.values())):
        return None
    ns = sum(a[pid] - b[pid] for pid in a)
    forwarded = sink["rx_window_pkts"] + sink["rx_warmup_pkts"]
    return {"ns": ns, "forwarded_pkts": forwarded, "ns_per_pkt": ns / forwarded if forwarded else None,
            "threads": len(a)}


def evaluate(raw: dict, spec: TrialSpec | None = None) -> TrialResult:
    """The result of a raw trial (softnet.campaign.trial.measure), as JSON or
    as measured. ``spec`` defaults to the one the raw trial records."""
    raw_version = raw.get("raw_schema_version")
    if raw_version not in KNOWN_RAW_SCHEMA_VERSIONS:
        raise InputError("raw trial", f"raw schema version {raw_version!r}: this softnet reads versions "
                         f"{', '.join(map(str, KNOWN_RAW_SCHEMA_VERSIONS))}")
    if raw.get("testbed", {}).get("sink_hop") is None:  # as read (a reverse way's is made here, checked)
        check_raw(raw)
    spec = spec or TrialSpec.from_dict(raw["spec"], "raw trial: spec")
    if raw.get("reverse") is not None:
        return both_directions(raw, spec)
    tb, gen, sink = raw["testbed"], raw["generator"], raw["sink"]
    warmup, window_pkts = spec.warmup_pkts, spec.window_pkts
    before, after = _int_keys(raw["before"]["procfs"]), _int_keys(raw["after"]["procfs"])
    w0 = _int_keys(raw["window"]["start"]) if raw["window"]["start"] is not None else before
    window = counters.delta(w0, _int_keys(raw["window"]["end"]))

    sent = max(gen["sent_pkts"] - warmup, 0)
    received = sink["rx_window_pkts"]
    span_s = (gen["last_send_ns"] - gen["window_start_ns"]) / 1e9 if sent > 1 else 0.0
    achieved = achieved_rate(spec, gen, sent, span_s)
    other_runs = list(raw.get("other_runs", []))
    found = flags(spec, gen, sent, received, achieved, sink, other_runs)
    lost = sent - received if received <= sent else None  # negative loss is never a result
    place = placement(tb, gen, sink, window)
    if not place["as_requested"]:
        found.append("placement_not_as_requested")
    diag = diagnosis(raw, counters.delta(before, after))
    if sink_limited(diag, tb, lost):
        found.append("sink_limited")
    fields = dict(
        # a raw trial of version 1 (log2 histogram) gives the result it always gave
        schema_version=RESULT_SCHEMA_OF_RAW[raw_version],
        sut=tb["sut"], ip_version=tb["ip_version"],
        intended_rate_pps=spec.rate_pps, duration_s=spec.duration_s, warmup_s=spec.warmup_s,
        frame_bytes=spec.frame_bytes, flows=spec.flows,
        intended_pkts=window_pkts, sent_pkts=sent, warmup_sent_pkts=min(gen["sent_pkts"], warmup),
        achieved_rate_pps=achieved, achieved_ratio=achieved / spec.rate_pps,
        send_span_s=span_s, received_pkts=received,
        lost_pkts=lost, loss_ratio=(lost / sent if sent and lost is not None else None),
        reordered_pkts=sink["reordered_pkts"], duplicate_pkts=sink["duplicate_pkts"],
        out_of_range_pkts=sink["out_of_range_pkts"], warmup_received_pkts=sink["rx_warmup_pkts"],
        **(latency(sink) if raw_version >= 2 else latency_v1(sink)),
        drain_s=raw["drain_s"],
        generator={k: gen[k] for k in ("calls", "batch", "window_lag_mean_ns", "window_lag_max_ns",
                                       "window_late_pkts", "cpu")},
        diagnosis=diag,
        placement=place,
        other_runs=other_runs,
        flags=found, valid=not found,
        started_unix_s=raw["started_unix_s"],
    )
    if raw_version >= 3:
        fields.update(host_stalls_in_time(raw, window, sent, lost, "generator_limited" not in found))
        if fields.get("loss_explained_by_host_stalls") and fields.pop(loss_time.HOST_INTERFERENCE):
            found.append(loss_time.HOST_INTERFERENCE)
        fields["valid"] = not set(found) - INFORMATIONAL_FLAGS
    if raw.get("series") is not None:
        series = Series.from_json(raw["series"])
        if "start" in series.marks:
            series.marks.setdefault("window_start", series.marks["start"])
        if {"window_start", "window_end"} <= set(series.marks):
            fields["kernel"] = trial_kernel_stats(series, tb["placement"]["sut_cpus"], received, spec.frame_bytes,
                                                  raw["host"]["cpu_freq_hz"], raw["host"]["sysctls"])
        else:
            fields["kernel"] = {"missing": dict(series.missing), "sampler": dict(series.sampler)}
        fields["kernel_samples"] = series.to_json()
    if raw.get("profile") is not None:
        fields["profile"] = profile(raw["profile"], tb["interface_ids"], window, received)
    if "arrivals" in raw["spec"]:  # a raw trial from before traffic shapes evaluates as it always did
        fields.update(traffic_shape(spec, gen, sink, sent, received, span_s))
    fields["provenance"] = raw["provenance"]
    if raw.get("path") is not None:
        fields["path"] = raw["path"]
    cpu = sut_thread_cpu(raw, sink)
    if cpu is not None:
        fields["sut_thread_cpu"] = cpu
    if raw.get("hosts") is not None:  # an inventory's hosts
        fields["hosts"], fields["window_skew_ms"] = raw["hosts"], raw.get("window_skew_ms")
    b, a = raw["before"].get("path_counters"), raw["after"].get("path_counters")
    if b is not None and a is not None:  # the personality's proof of path, over the trial
        # counters as differences; gauges (named *_entries: FDB, conntrack) as found after the trial
        fields["path_counters"] = {k: a[k] if k.endswith("_entries") else a[k] - b[k] for k in a if k in b}
    return TrialResult(**fields)
