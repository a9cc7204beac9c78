"""One trial: warm-up, a measurement window of T seconds, drain, read.

A trial is the unit everything above consumes. Its result carries the counts,
the achieved load, the SUT-side drop counters (diagnosis only), the placement
actually observed, validity flags and provenance. Loss is computed over the
window packets only (sequence numbers >= the warm-up count), so packets still
in flight at the window edges are neither lost nor double counted.
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

from softnet.analysis.cpu_audit import audit_cpu, cpu_profile
from softnet.analysis.stages import stage_breakdown
from softnet.analysis.kernel_stats import cpu_freq_hz, trial_kernel_stats
from softnet.collect import procfs
from softnet.collect.profiler import Profiler
from softnet.collect.profiler import delta as profiler_delta
from softnet.collect.profiler import name_drops
from softnet.collect.sampler import INTERVAL_RANGE_S, KernelSampler
from softnet.errors import InputError
from softnet.provenance import provenance
from softnet.tools.changes import HostChanges
from softnet.testbed.local import LocalTestbed
from softnet.traffic.native import MAX_TRIAL_PKTS, GeneratorJob, Sink

PLACEMENT_MIN_SHARE = 0.99  # of sink packets counted on the requested CPUs
PACING_TOLERANCE = 0.005  # achieved load within +-0.5% of intended, or the trial is flagged
DRAIN_STABLE_READS = 3
DRAIN_POLL_S = 0.02
DRAIN_MAX_S = 2.0
MTU_FRAME_BYTES = 1518  # 1500 B MTU + 14 B Ethernet header + 4 B FCS
PAYLOAD_BYTES = 16  # sequence number + send timestamp
DURATION_RANGE_S = (0.1, 3600.0)
OVERTIME_FACTOR, OVERTIME_S = 1.5, 10.0  # a generator this far behind schedule is stopped
WARMUP_RANGE_S = (0.0, 60.0)


def min_frame_bytes(ip_version: int) -> int:
    """64 B (the Ethernet minimum), or more when IPv6 + UDP + payload need it."""
    return max(64, 14 + (20 if ip_version == 4 else 40) + 8 + PAYLOAD_BYTES + 4)


@dataclass
class TrialSpec:
    rate_pps: float
    duration_s: float = 5.0
    warmup_s: float = 1.0
    frame_bytes: int = 64
    flows: int = 1
    sample_interval_s: float | None = 1.0  # kernel statistics sampler; None: off
    profile: bool = False  # eBPF packet-path profiler (softnet-profile) and the CPU accounting audit
    profile_per_packet: bool = True  # its once-per-packet tracepoints (stages, drop reasons); off: cheaper
    profile_duty: float = 0.02  # share of time the stage events are attached (1: every packet; bench/profile_bench.py)

    def validate(self, ip_version: int) -> None:
        lo = min_frame_bytes(ip_version)
        if not (lo <= self.frame_bytes <= MTU_FRAME_BYTES):
            raise InputError("--size", f"{self.frame_bytes} B is outside [{lo}, {MTU_FRAME_BYTES}] B accepted "
                             f"for IPv{ip_version} (frame incl. FCS; the maximum is the 1500 B MTU)")
        if not (DURATION_RANGE_S[0] <= self.duration_s <= DURATION_RANGE_S[1]):
            raise InputError("--duration", f"{self.duration_s} s is outside [{DURATION_RANGE_S[0]}, "
                             f"{DURATION_RANGE_S[1]:.0f}] s")
        if not (WARMUP_RANGE_S[0] <= self.warmup_s <= WARMUP_RANGE_S[1]):
            raise InputError("--warmup", f"{self.warmup_s} s is outside [0, {WARMUP_RANGE_S[1]:.0f}] s")
        if not (1 <= self.flows <= 64511):
            raise InputError("--flows", f"{self.flows} is outside [1, 64511] (UDP source ports 1024..65534)")
        lo, hi = INTERVAL_RANGE_S
        if not 0.01 <= self.profile_duty <= 1:
            raise InputError("--duty", f"{self.profile_duty} is not a share between 0.01 and 1")
        if self.sample_interval_s is not None and not lo <= self.sample_interval_s <= hi:
            raise InputError("--sample-interval", f"{self.sample_interval_s} s is outside [{lo}, {hi:.0f}] s")
        if not (self.rate_pps > 0 and math.isfinite(self.rate_pps)):
            raise InputError("--rate", f"{self.rate_pps} pps: a positive rate is needed")
        total = self.warmup_pkts + self.window_pkts
        if self.window_pkts < 1:
            raise InputError("--duration", f"{self.duration_s} s at {self.rate_pps:.0f} pps sends no packet")
        if total > MAX_TRIAL_PKTS:
            raise InputError("--duration", f"rate x (warm-up + duration) = {total} packets; at most "
                             f"{MAX_TRIAL_PKTS} per trial (the sink keeps one bit per packet)")

    @property
    def warmup_pkts(self) -> int:
        return round(self.rate_pps * self.warmup_s)

    @property
    def window_pkts(self) -> int:
        return round(self.rate_pps * self.duration_s)


def drain_sink(sink: Sink) -> tuple[dict, float]:
    """Read the sink until its counters stop moving: nothing left in flight."""
    start = time.monotonic()
    last, stable = sink.read(), 0
    while stable < DRAIN_STABLE_READS and time.monotonic() - start < DRAIN_MAX_S:
        time.sleep(DRAIN_POLL_S)
        cur = sink.read()
        stable = stable + 1 if cur["rx_test_pkts"] == last["rx_test_pkts"] else 0
        last = cur
    return last, time.monotonic() - start


def _latency(sink: dict) -> dict:
    n = sink["rx_window_pkts"]
    hist = sink["latency_log2_hist"]
    out = {"latency_min_ns": sink["latency_min_ns"] if n else None,
           "latency_mean_ns": sink["latency_sum_ns"] / n if n else None,
           "latency_max_ns": sink["latency_max_ns"] if n else None}
    # Percentiles from a log2 histogram are only known to a factor of two:
    # report the upper edge of the bucket that holds them.
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


def _placement(tb: LocalTestbed, gen: dict, sink: dict, window: dict) -> dict:
    p = tb.placement
    threads = {dev: {str(pid): procfs.thread_cpu(pid) for pid in pids} for dev, pids in tb.napi_threads.items()}
    busy = {str(c): procfs.busy_ratio(t) for c, t in window["cpu_ticks"].items()}
    per_cpu = sink["rx_test_pkts_per_cpu"]
    sink_cpus = [c for c, n in enumerate(per_cpu) if n]
    receive_cpus = set(p.sut_cpus) | ({p.sink_cpu} if p.sink_cpu is not None else set())
    on_requested = sum(n for c, n in enumerate(per_cpu) if c in receive_cpus) / max(sum(per_cpu), 1)
    # Evidence over configuration: the generator reports the CPU it ran on,
    # the sink counts per CPU, and NET_RX softirqs show where receive work ran.
    # A few stray packets elsewhere (seen: 9 in 150000) do not make a trial
    # invalid; a real misplacement moves most of them.
    ok = gen["cpu"] == p.gen_cpu and on_requested >= PLACEMENT_MIN_SHARE
    if p.steering == "threaded":
        def wanted(dev: str) -> list[int]:  # the sink's own NAPI thread (sink_cpu) sits apart from the SUT's
            return [p.sink_cpu] if dev == tb.ifs["sink"] and p.sink_cpu is not None else p.sut_cpus
        ok = ok and all(cpu in wanted(dev) for dev, t in threads.items() for cpu in t.values() if cpu is not None)
    return {
        "requested": {"gen_cpu": p.gen_cpu, "sut_cpus": p.sut_cpus, "sink_cpu": p.sink_cpu, "steering": p.steering},
        "observed": {"gen_cpu": gen["cpu"], "sink_cpus": sink_cpus, "sink_share_on_requested_cpus": on_requested,
                     "sink_rx_pkts_per_cpu": sink["rx_test_pkts_per_cpu"], "napi_thread_cpus": threads,
                     "net_rx_softirqs_per_cpu": {str(c): n for c, n in window["softirqs"].get("NET_RX", {}).items()},
                     "cpu_busy_ratio_per_cpu": busy},
        "as_requested": ok,
    }


def _diagnosis(tb: LocalTestbed, links0, links1, eth0, eth1, trial_delta, qdisc0: int, qdisc1: int) -> dict:
    links = {role: {k: links1[role][k] - links0[role][k] for k in links1[role]} for role in links1}
    return {
        # Frames the generator's XDP transmit could not put into the peer
        # veth's 256-entry ring: the SUT's ingress, or the sink's without a SUT.
        "ingress_ring_of": "sink" if tb.sut == "none" else "SUT",
        "qdisc_dropped_pkts": qdisc1 - qdisc0,
        "ingress_ring_full_pkts": eth1.get("tx_queue_0_xdp_xmit_errors", 0) - eth0.get("tx_queue_0_xdp_xmit_errors", 0),
        "softnet_dropped_pkts": sum(v["dropped"] for v in trial_delta["softnet"].values()),
        "softnet_time_squeeze": sum(v["time_squeeze"] for v in trial_delta["softnet"].values()),
        "interface_deltas": links,
        "interface_rx_dropped_pkts": sum(v["rx_dropped"] for v in links.values()),
        "interface_tx_dropped_pkts": sum(v["tx_dropped"] for v in links.values()),
    }


def _profile(tb: LocalTestbed, profiler: Profiler, reads: dict, window: dict, packets: int) -> dict:
    """Per-CPU eBPF times over the window, drops by reason and device (host-wide:
    the sink's XDP drops of skbs count too, on its device), and the audit
    against the same window's /proc/stat ticks."""
    d = profiler_delta(reads.get("window_start", reads["start"]), reads["window_end"])
    per_cpu = {cpu: cpu_profile(d, cpu) for cpu in range(len(d["cpus"])) if cpu in window["cpu_ticks"]}
    transitions = {cpu: [[profiler.events[f], profiler.events[t], ns, n] for f, t, ns, n in d["cpus"][cpu]["transitions"]]
                   for cpu in per_cpu}
    polled, polled_sampled = (sum(c["napi_work"] for c in d[k]) for k in ("cpus", "sampled_cpus"))
    return {
        "plan": profiler.plan, "window_s": d["wall_ns"] / 1e9, "window_monotonic_ns": d["monotonic_ns"],
        "per_cpu": per_cpu,
        # drops: counted while sampled (all the window at duty 1), and estimated over the window by the
        # packets polled then against in all (not by time: the CPU drains a backlog faster in sampled periods)
        "drops": name_drops(d["drops"], profiler.drop_reasons, tb.interface_ids(), polled / polled_sampled
                            if polled_sampled else 0.0),
        "sampled_time_share": d["sampled_ns"] / d["wall_ns"] if d["wall_ns"] else None,
        "sampled_packet_share": polled_sampled / polled if polled else None,
        "drop_keys_full": sum(c["drop_keys_full"] for c in d["cpus"]),
        "audit": {cpu: audit_cpu(m, window["cpu_ticks"][cpu]) for cpu, m in per_cpu.items()},
        # the stage clock's raw (from event, to event, ns, count), named, and the stages
        "transitions": transitions,
        "duty": profiler.duty,
        "stages": {cpu: stage_breakdown(d["cpus"][cpu], d["sampled_cpus"][cpu], transitions[cpu], d["wall_ns"] / 1e9,
                                        d["sampled_ns"] / 1e9, packets) for cpu in per_cpu} if d["sampled_ns"] else {},
        "stages_missing": None if d["sampled_ns"] else (
            "no stage events: the light plan (no per-packet tracepoints)" if profiler.duty == 0 else
            f"no sampled period fell inside the {d['wall_ns'] / 1e9:.2f} s window (stage events attached "
            f"{100 * profiler.duty:g}% of every {profiler.period_ms} ms): use a longer window or duty 1"),
    }


def _sampler(tb: LocalTestbed, spec: TrialSpec):
    """The kernel statistics sampler, pinned away from the SUT's CPUs (or a no-op)."""
    if spec.sample_interval_s is None:
        return contextlib.nullcontext()
    return KernelSampler(spec.sample_interval_s, avoid_cpus=tb.placement.sut_cpus, links=tb.sample_links())


def run_trial(tb: LocalTestbed, ep, spec: TrialSpec, changes: HostChanges,
              progress: Callable[[float], None] | None = None) -> dict:
    """Run one trial on a built testbed (whose changes are in `changes`); what
    the trial itself starts (sink, generator) is stopped when it returns."""
    spec.validate(tb.ip_version)
    warmup, window = spec.warmup_pkts, spec.window_pkts
    total = warmup + window
    # The sink and the generator live for this trial only: their own registry
    # stops them when it ends, however it ends.
    with HostChanges() as trial_changes, _sampler(tb, spec) as sampler:
        sink = Sink(trial_changes, ep.sink_ns, ep.sink_if, total, warmup)
        profiler = Profiler(trial_changes, spec.profile_per_packet, spec.profile_duty,
                            avoid_cpus=tb.placement.sut_cpus) if spec.profile else None
        prof = {"start": profiler.read()} if profiler else {}
        if profiler and sampler:
            sampler.add_source("ebpf", profiler.series_values)  # the profiler's times at every sample too
        links0, eth0, q0, k0 = tb.link_stats(), tb.ethtool_stats("gen"), tb.qdisc_drops(), procfs.snapshot()
        started = time.time()
        gen_job = GeneratorJob.start(trial_changes, ep, spec.rate_pps, total, warmup, spec.frame_bytes,
                                     spec.flows, tb.placement.gen_cpu)
        expected_s = total / spec.rate_pps
        # Kernel counters for the measurement window: sampled at its nominal edges.
        kw0 = kw1 = None
        while gen_job.proc.poll() is None:
            elapsed = time.time() - started
            if kw0 is None and elapsed >= spec.warmup_s:
                kw0 = procfs.snapshot()
                if profiler:
                    prof["window_start"] = profiler.read()
                if sampler:
                    sampler.sample_now("window_start")
            if progress:
                progress(min(elapsed / expected_s, 1.0))
            if elapsed > expected_s * OVERTIME_FACTOR + OVERTIME_S:
                # Far behind schedule (its CPU starved, e.g. by receive work
                # steered onto it): stop it; the trial is flagged, not lost.
                gen_job.interrupt()
                break
            time.sleep(0.05)
        kw1 = procfs.snapshot()
        if profiler:
            prof["window_end"] = profiler.read()
        if sampler:
            sampler.sample_now("window_end")
        gen = gen_job.wait(timeout=5)
        counts, drain_s = drain_sink(sink)
        links1, eth1, q1, k1 = tb.link_stats(), tb.ethtool_stats("gen"), tb.qdisc_drops(), procfs.snapshot()
    window_delta = procfs.delta(kw0 or k0, kw1)

    sent = max(gen["sent_pkts"] - warmup, 0)
    received = counts["rx_window_pkts"]
    span_s = (gen["last_send_ns"] - gen["window_start_ns"]) / 1e9 if sent > 1 else 0.0
    achieved = (sent - 1) / span_s if span_s > 0 else 0.0
    flags = []
    if gen["sent_pkts"] < total or achieved < (1 - PACING_TOLERANCE) * spec.rate_pps:
        flags.append("generator_limited")
    elif achieved > (1 + PACING_TOLERANCE) * spec.rate_pps:
        # Behind schedule at the window start, then catching up back to back:
        # the SUT saw a higher load than intended.
        flags.append("generator_overshoot")
    if received > sent or counts["out_of_range_pkts"]:
        flags.append("counters_inconsistent")
    if gen["interrupted"]:
        flags.append("interrupted")
    lost = sent - received if received <= sent else None  # negative loss is never a result
    result = {
        "sut": tb.sut, "ip_version": tb.ip_version,
        "intended_rate_pps": spec.rate_pps, "duration_s": spec.duration_s, "warmup_s": spec.warmup_s,
        "frame_bytes": spec.frame_bytes, "flows": spec.flows,
        "intended_pkts": window, "sent_pkts": sent, "warmup_sent_pkts": min(gen["sent_pkts"], warmup),
        "achieved_rate_pps": achieved, "achieved_ratio": achieved / spec.rate_pps,
        "send_span_s": span_s, "received_pkts": received,
        "lost_pkts": lost, "loss_ratio": (lost / sent if sent and lost is not None else None),
        "reordered_pkts": counts["reordered_pkts"], "duplicate_pkts": counts["duplicate_pkts"],
        "out_of_range_pkts": counts["out_of_range_pkts"], "warmup_received_pkts": counts["rx_warmup_pkts"],
        **_latency(counts),
        "drain_s": drain_s,
        "generator": {k: gen[k] for k in ("calls", "batch", "window_lag_mean_ns", "window_lag_max_ns",
                                           "window_late_pkts", "cpu")},
        "diagnosis": _diagnosis(tb, links0, links1, eth0, eth1, procfs.delta(k0, k1), q0, q1),
        "placement": None,
        "flags": flags, "valid": not flags,
        "started_unix_s": started,
    }
    result["placement"] = _placement(tb, gen, counts, window_delta)
    if not result["placement"]["as_requested"]:
        result["flags"].append("placement_not_as_requested")
        result["valid"] = False
    if sampler:
        series = sampler.series
        if "start" in series.marks:
            series.marks.setdefault("window_start", series.marks["start"])
        if {"window_start", "window_end"} <= set(series.marks):
            result["kernel"] = trial_kernel_stats(series, tb.placement.sut_cpus, received, spec.frame_bytes,
                                                  cpu_freq_hz())
        else:
            result["kernel"] = {"missing": dict(series.missing), "sampler": dict(series.sampler)}
        result["kernel_samples"] = series.to_json()
    if profiler:
        result["profile"] = _profile(tb, profiler, prof, window_delta, result["received_pkts"])
    result["provenance"] = provenance(changes, spec=asdict(spec), sut=tb.sut)
    result["provenance"]["host_changes_applied"] += trial_changes.applied
    return result
