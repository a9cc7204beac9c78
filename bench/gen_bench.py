"""Generator benchmark: softnet-gen and trafgen straight into the sink (no SUT).

The target: "Generator straight into the sink (no SUT): maximum rate at 64 B on one
CPU, and pacing accuracy (achieved vs intended) at 10 kpps, 100 kpps, 500 kpps
and at its maximum. In the same run, trafgen (-b rate) on the same testbed and
CPU. Targets: achieved load within +-0.5% of intended at every rate up to the
maximum; at least 1 Mpps at 64 B on one CPU."

Per generator: a probe at a rate it cannot reach (20 Mpps) gives its maximum;
then 10k, 100k, 500k, 1M (those below the maximum) and 95% of the maximum,
REPEATS runs each. If 95% does not pace within +-0.5%, 80%, 60%, 40% follow
until one does: the highest rate paced within tolerance in every repeat is
`max_paced_rate_pps`.
- softnet-gen: each run is a softnet trial (achieved rate from the generator's
  own send timestamps, per-packet schedule lag, sink counts).
- trafgen: it reports only a total, so its achieved rate is the sink's count
  over the measurement window; its sent count against the sink's gives loss.
- Regularity, measured the same way for both: the sink's counter read every
  10 ms; coefficient of variation (CV) and peak/mean of deliveries per 10 ms
  in the window. softnet-gen gets one extra sampled run per rate for it
  (a trial owns its sink), trafgen's REPEATS runs are all sampled.

Writes bench/results/gen_bench-<UTC>.json (ignored by git).
Run as root: .venv/bin/python bench/gen_bench.py
"""
from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from softnet.provenance import provenance  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.traffic import trafgen  # noqa: E402
from softnet.traffic.native import GeneratorJob, Sink  # noqa: E402
from softnet.campaign.trial import TrialSpec, run_trial  # noqa: E402
import results_file  # noqa: E402

FRAME_BYTES = 64
GEN_CPU, SINK_CPU = 0, 1
RATES_PPS = {"10k": 10e3, "100k": 100e3, "500k": 500e3, "1M": 1e6}  # each if below the probed maximum
UNREACHABLE_PPS = 20e6
# Fractions of the probed maximum: 95% is "at its maximum"; lower ones only run
# while the one above missed the tolerance, to find the highest paced rate.
MAX_FRACTIONS = (0.95, 0.8, 0.6, 0.4)
REPEATS = 3
DURATION_S, WARMUP_S = 2.0, 0.5
PROBE_DURATION_S, PROBE_WARMUP_S = 1.0, 0.2
SAMPLE_PERIOD_S = 0.01
START_TIMEOUT_S = 5.0  # a generator whose first frame has not reached the sink by then failed to start
SLOW_READ_S = 0.0005  # a sink read slower than this (and 3x the run's median) has an uncertain timestamp: dropped
SAMPLER_RT_PRIORITY = 10
TOLERANCE = 0.005  # +-0.5%
TARGET_MAX_PPS = 1e6
QUIET_RATIO = 0.02  # other processes' user CPU time above 2% of all CPUs: the host was busy
console = Console(width=None if sys.stdout.isatty() else 150)


# ---- statistics ------------------------------------------------------------
def summary(values) -> dict:
    """mean, sample std, min, max and the Student-t 95% CI half width."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None, "ci95_half": None}
    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    half = float(stats.t.ppf(0.975, v.size - 1) * std / np.sqrt(v.size)) if v.size > 1 else None
    return {"n": int(v.size), "mean": float(v.mean()), "std": std, "min": float(v.min()),
            "max": float(v.max()), "ci95_half": half}


def sample_sink(sink: Sink, keep_going) -> list[tuple[float, int, float]]:
    """(monotonic s, sink rx_test_pkts, read duration s) every SAMPLE_PERIOD_S while keep_going(samples).

    The sink CPU is busy with receive processing (the NAPI kthread), so a
    read could wait milliseconds for it. For the length of the sampling only,
    this process and the sink's helper run SCHED_FIFO (about 0.3 ms of work
    per 10 ms); RESET_ON_FORK keeps the policy from reaching anything we start."""
    rt = os.sched_param(SAMPLER_RT_PRIORITY)
    try:
        os.sched_setscheduler(sink.proc.pid, os.SCHED_FIFO, rt)
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, rt)
    except PermissionError:  # no CAP_SYS_NICE: sample anyway; slow reads get dropped
        pass
    samples, due = [], time.monotonic()
    try:
        while keep_going(samples):
            t0 = time.monotonic()
            n = sink.read()["rx_test_pkts"]
            t1 = time.monotonic()
            samples.append(((t0 + t1) / 2, n, t1 - t0))
            due += SAMPLE_PERIOD_S
            time.sleep(max(0.0, due - time.monotonic()))
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        if sink.proc.poll() is None:
            os.sched_setscheduler(sink.proc.pid, os.SCHED_OTHER, os.sched_param(0))
    return samples


def window_figures(samples, intended_pps: float, warmup_s: float, duration_s: float) -> dict:
    """Sink-side rate and regularity in [first packet + warm-up, + duration].

    Samples whose read took longer than SLOW_READ_S and 3x the median are dropped (when in that
    span the counters were read is unknown). The count is interpolated onto a
    regular 10 ms grid, so that two reads close together (after an oversleep)
    do not blow up a per-interval rate."""
    # a read is slow against this run's own reads: under a flood every read of
    # the busy sink CPU may take a millisecond (trafgen's), and dropping them
    # all would leave no window; a 2 s window's rate barely feels 1 ms
    typical = float(np.median([s[2] for s in samples])) if samples else 0.0
    slow = np.array([s[2] > max(SLOW_READ_S, 3 * typical) for s in samples], dtype=bool)
    t = np.array([s[0] for s in samples])[~slow]
    c = np.array([s[1] for s in samples], dtype=float)[~slow]
    first = t[np.argmax(c > 0)] if c.size and c[-1] > 0 else None
    lo = first + warmup_s if first is not None else 0.0
    hi = min(lo + duration_s, t[-1]) if first is not None else 0.0
    if hi - lo < duration_s / 2:  # the generator stopped early or never started, or no read was timely
        return {"sink_rate_pps": None, "sink_ratio": None, "window_s": max(hi - lo, 0.0), "intervals": 0,
                "cv_per_10ms": None, "peak_to_mean_per_10ms": None, "idle_intervals_ratio": None,
                "samples": len(samples), "slow_reads_dropped": int(slow.sum())}
    rate = (np.interp(hi, t, c) - np.interp(lo, t, c)) / (hi - lo)
    grid = np.arange(lo, hi + 1e-9, SAMPLE_PERIOD_S)
    per_bin = np.diff(np.interp(grid, t, c))  # deliveries per 10 ms
    mean = per_bin.mean() if per_bin.size else 0.0
    return {"sink_rate_pps": float(rate), "sink_ratio": float(rate / intended_pps),
            "window_s": float(hi - lo), "intervals": int(per_bin.size),
            "cv_per_10ms": float(per_bin.std(ddof=1) / mean) if mean > 0 and per_bin.size > 1 else None,
            "peak_to_mean_per_10ms": float(per_bin.max() / mean) if mean > 0 else None,
            "idle_intervals_ratio": float(np.mean(per_bin == 0)) if per_bin.size else None,
            "slow_reads_dropped": int(slow.sum()), "read_s_median": typical}


def within(ratio) -> bool:
    return ratio is not None and abs(ratio - 1) <= TOLERANCE


def sweep(name: str, max_pps: float, measure) -> dict:
    """measure(rate) at RATES_PPS and at fractions of the maximum (see MAX_FRACTIONS)."""
    plan = [(label, rate) for label, rate in RATES_PPS.items() if rate <= max_pps]
    out = {}
    while plan:
        label, rate = plan.pop(0)
        console.print(f"{name}: {label} ({rate:,.0f} pps)")
        out[label] = measure(rate)
        out[label]["paced_within_tolerance"] = all(within(x) for x in out[label]["ratios"])
        if not plan:  # after the fixed rates: 95% of max, then lower while it misses
            done = [k for k in out if k.endswith("of max")]
            fractions = MAX_FRACTIONS[len(done):]
            if fractions and (not done or not out[done[-1]]["paced_within_tolerance"]):
                plan.append((f"{fractions[0]:.0%} of max", fractions[0] * max_pps))
    return out


def max_paced(rates: dict) -> float | None:
    ok = [r["intended_rate_pps"] for r in rates.values() if r["paced_within_tolerance"]]
    return max(ok) if ok else None


# ---- softnet-gen -----------------------------------------------------------
def gen_trial(tb, ep, ch, rate_pps: float, duration_s=DURATION_S, warmup_s=WARMUP_S) -> dict:
    r = run_trial(tb, ep, TrialSpec(rate_pps=rate_pps, duration_s=duration_s, warmup_s=warmup_s,
                                    frame_bytes=FRAME_BYTES), ch)
    return {
        "intended_rate_pps": r["intended_rate_pps"], "achieved_rate_pps": r["achieved_rate_pps"],
        "achieved_ratio": r["achieved_ratio"], "sent_pkts": r["sent_pkts"], "received_pkts": r["received_pkts"],
        "lost_pkts": r["lost_pkts"], "loss_ratio": r["loss_ratio"],
        "delivered_rate_pps": r["received_pkts"] / r["send_span_s"] if r["send_span_s"] else None,
        "sink_ring_full_pkts": r["diagnosis"]["ingress_ring_full_pkts"],
        "window_lag_mean_ns": r["generator"]["window_lag_mean_ns"],
        "window_lag_max_ns": r["generator"]["window_lag_max_ns"],
        "window_late_pkts": r["generator"]["window_late_pkts"],
        "latency_p50_ns": r["latency_p50_ns"], "latency_p99_ns": r["latency_p99_ns"],
        "gen_cpu_observed": r["generator"]["cpu"], "sink_cpus_observed": r["placement"]["observed"]["sink_cpus"],
        "placement_as_requested": r["placement"]["as_requested"], "flags": r["flags"],
    }


def gen_sampled(ep, ch, rate_pps: float) -> dict:
    """softnet-gen without a trial around it, the sink read every 10 ms."""
    warmup = round(rate_pps * WARMUP_S)
    total = warmup + round(rate_pps * (DURATION_S + 0.3))  # runs past the window end
    sink = Sink(ch, ep.sink_ns, ep.sink_if, total, warmup)
    job = GeneratorJob.start(ch, ep, rate_pps, total, warmup, FRAME_BYTES, 1, GEN_CPU)
    try:
        samples = sample_sink(sink, lambda _: job.proc.poll() is None)
        report = job.wait(timeout=10)
        received = sink.drain()[0]["rx_test_pkts"]
    finally:
        job.stop()
        sink.close()
    return {**window_figures(samples, rate_pps, WARMUP_S, DURATION_S),
            "sent_pkts": report["sent_pkts"], "received_pkts": received}


def bench_softnet_gen(tb, ep, ch) -> dict:
    console.print(f"softnet-gen: probing the maximum at {UNREACHABLE_PPS / 1e6:.0f} Mpps")
    probe = gen_trial(tb, ep, ch, UNREACHABLE_PPS, PROBE_DURATION_S, PROBE_WARMUP_S)

    def measure(rate: float) -> dict:
        trials = [gen_trial(tb, ep, ch, rate) for _ in range(REPEATS)]
        sampled = gen_sampled(ep, ch, rate)
        return {
            "intended_rate_pps": rate, "ratios": [t["achieved_ratio"] for t in trials],
            "trials": trials, "sampled_run": sampled,
            "achieved_ratio": summary(t["achieved_ratio"] for t in trials),
            "achieved_rate_pps": summary(t["achieved_rate_pps"] for t in trials),
            "received_ratio": summary(t["received_pkts"] / t["sent_pkts"] for t in trials),
            "window_lag_mean_ns": summary(t["window_lag_mean_ns"] for t in trials),
            "window_lag_max_ns": summary(t["window_lag_max_ns"] for t in trials),
            "sink_ratio": summary([sampled["sink_ratio"]]),
            "cv_per_10ms": summary([sampled["cv_per_10ms"]]),
            "peak_to_mean_per_10ms": summary([sampled["peak_to_mean_per_10ms"]]),
        }

    rates = sweep("softnet-gen", probe["achieved_rate_pps"], measure)
    return {"max_probe": probe, "max_rate_pps": probe["achieved_rate_pps"], "max_paced_rate_pps": max_paced(rates),
            "rates": rates}


# ---- trafgen ---------------------------------------------------------------
def trafgen_run(ep, ch, rate_pps: float | None, duration_s=DURATION_S, warmup_s=WARMUP_S) -> dict:
    """One trafgen run, sink sampled every 10 ms; rate_pps=None: fast path (TX_RING)."""
    sink = Sink(ch, ep.sink_ns, ep.sink_if, 1, 1)  # every trafgen frame has seq 0: see trafgen.py
    job = trafgen.TrafgenJob.start(ch, ep, rate_pps, GEN_CPU, FRAME_BYTES)
    def keep_going(samples) -> bool:
        # the window runs from the first frame at the sink: trafgen may take a
        # while to start sending, which a window from its start would miss
        first = next((t for t, n, _ in samples if n > 0), None)
        end = (job.started + START_TIMEOUT_S) if first is None else first + warmup_s + duration_s + 0.3
        return time.monotonic() < end and job.running()

    try:
        samples = sample_sink(sink, keep_going)
    finally:
        report = job.stop()
    try:
        received = sink.drain()[0]["rx_test_pkts"]
        per_cpu = sink.read()["rx_test_pkts_per_cpu"]
    finally:
        sink.close()
    sent = report["sent_pkts"]
    return {**window_figures(samples, rate_pps or UNREACHABLE_PPS, warmup_s, duration_s),
            "intended_rate_pps": rate_pps, "sent_pkts": sent, "received_pkts": received,
            "lost_pkts": sent - received if sent is not None else None,
            "trafgen": report, "sink_cpus_observed": [c for c, n in enumerate(per_cpu) if n],
            "placement_as_requested": report["worker_cpu"] == GEN_CPU
            and all(c == SINK_CPU for c, n in enumerate(per_cpu) if n)}


def bench_trafgen(ep, ch) -> dict:
    try:
        version = trafgen.trafgen_version()
    except Exception as exc:  # not installed: the rest of the bench still runs
        return {"skipped": str(exc)}
    console.print("trafgen: fast path (TX_RING, unpaced) attempt")
    ring = trafgen_run(ep, ch, None, duration_s=1.0, warmup_s=0.2)
    console.print(f"trafgen: probing the maximum at -b {UNREACHABLE_PPS / 1e6:.0f} Mpps")
    probe = trafgen_run(ep, ch, UNREACHABLE_PPS)
    if not probe["sink_rate_pps"]:
        why = (f"the sink counted {probe['received_pkts']:,} of {probe['sent_pkts'] or 0:,} frames sent, but "
               f"over a window of {probe['window_s']:.2f} s (of {DURATION_S} s): {probe['slow_reads_dropped']} of "
               f"{probe['samples']} sink reads were dropped as slow"
               if probe["received_pkts"] else "trafgen's frames did not reach the sink")
        return {"version": version, "failed": f"no maximum at -b {UNREACHABLE_PPS / 1e6:.0f} Mpps: {why}",
                "max_probe": probe}

    def measure(rate: float) -> dict:
        runs = [trafgen_run(ep, ch, rate) for _ in range(REPEATS)]
        return {
            "intended_rate_pps": rate, "ratios": [r["sink_ratio"] for r in runs], "runs": runs,
            "achieved_ratio": summary(r["sink_ratio"] for r in runs),
            "achieved_rate_pps": summary(r["sink_rate_pps"] for r in runs),
            "received_ratio": summary(r["received_pkts"] / r["sent_pkts"] if r["sent_pkts"] else None
                                      for r in runs),
            "sink_ratio": summary(r["sink_ratio"] for r in runs),
            "cv_per_10ms": summary(r["cv_per_10ms"] for r in runs),
            "peak_to_mean_per_10ms": summary(r["peak_to_mean_per_10ms"] for r in runs),
        }

    rates = sweep("trafgen", probe["sink_rate_pps"], measure)
    return {
        "version": version,
        "command": "ip netns exec NS taskset -c CPU trafgen --dev IF --conf FILE --cpus 1 --no-sock-mem -Q -b RATEpps",
        "sequence_numbers": "not carried: every frame has seq 0 and no timestamp; loss = trafgen's sent count - "
                            "sink rx_test_pkts; achieved rate from the sink's count",
        "tx_ring_attempt": ring, "max_probe": probe, "max_rate_pps": probe["sink_rate_pps"],
        "max_paced_rate_pps": max_paced(rates), "rates": rates}


# ---- verdicts, table, files ------------------------------------------------
def verdicts(name: str, res: dict) -> list[dict]:
    """Pacing: every repeat at every fixed rate below the maximum and at 95% of it.
    1 Mpps: the highest rate paced within tolerance (not merely reached)."""
    if "rates" not in res:
        return []
    judged = {label: r for label, r in res["rates"].items()
              if label == f"{MAX_FRACTIONS[0]:.0%} of max"
              or (label in RATES_PPS and r["intended_rate_pps"] <= res["max_rate_pps"])}
    pairs = [(label, x) for label, r in judged.items() for x in r["ratios"]]
    worst = max(pairs, key=lambda p: abs(p[1] - 1) if p[1] is not None else float("inf"), default=(None, None))
    paced = res["max_paced_rate_pps"]
    return [
        {"generator": name, "target": "achieved load within +-0.5% of intended at every rate up to the maximum "
                                      "(every repeat)",
         "pass": bool(pairs) and all(within(x) for _, x in pairs), "rates_judged": list(judged), "worst_rate": worst[0],
         "worst_achieved_ratio": worst[1], "tolerance_ratio": TOLERANCE},
        {"generator": name, "target": "at least 1 Mpps at 64 B on one CPU, paced within +-0.5%",
         "pass": paced is not None and paced >= TARGET_MAX_PPS, "max_paced_rate_pps": paced,
         "max_rate_pps": res["max_rate_pps"], "target_rate_pps": TARGET_MAX_PPS},
    ]


def fmt(s: dict, f: str) -> str:
    if not s or s.get("mean") is None:
        return "-"
    if s["n"] == 1:
        return format(s["mean"], f)
    return f"{format(s['mean'], f)} [{format(s['min'], f)}..{format(s['max'], f)}]"


def print_table(result: dict) -> None:
    table = Table(title=f"Generators into the sink, {FRAME_BYTES} B, generator on CPU {GEN_CPU}, sink on CPU "
                        f"{SINK_CPU} (mean \\[min..max] of {REPEATS} repeats)")
    for col in ("generator", "rate", "intended pps", "achieved/intended", "delivered/sent",
                "lag mean / max ns", "CV per 10 ms", "peak/mean per 10 ms"):
        table.add_column(col, justify="left" if col in ("generator", "rate") else "right")
    for name in ("softnet_gen", "trafgen"):
        res = result[name]
        for label, r in res.get("rates", {}).items():
            lag = (f"{r['window_lag_mean_ns']['mean']:,.0f} / {r['window_lag_max_ns']['max']:,.0f}"
                   if "window_lag_mean_ns" in r else "n/a")
            table.add_row(name, label, f"{r['intended_rate_pps']:,.0f}", fmt(r["achieved_ratio"], ".5f"),
                          fmt(r["received_ratio"], ".4f"), lag, fmt(r["cv_per_10ms"], ".3f"),
                          fmt(r["peak_to_mean_per_10ms"], ".2f"))
    for name in ("softnet_gen", "trafgen"):  # a generator that could not be measured has its row too
        if "rates" not in result[name]:
            why = result[name].get("failed") or result[name].get("skipped") or "not measured"
            table.add_row(name, "-", "-", f"[red]failed: {why}[/]", "", "", "", "")
    console.print(table)
    for name in ("softnet_gen", "trafgen"):
        if "rates" not in result[name]:
            console.print(f"[red]FAIL[/] {name}: not measured: "
                          f"{result[name].get('failed') or result[name].get('skipped')}")
        if "max_rate_pps" in result[name]:
            paced = result[name]["max_paced_rate_pps"]
            paced_text = f"{paced:,.0f} pps" if paced else "no rate"
            console.print(f"{name}: at {FRAME_BYTES} B on one CPU reached {result[name]['max_rate_pps']:,.0f} pps, "
                          f"paced within +-0.5%: {paced_text}")
    for v in result["verdicts"]:
        console.print(f"[{'green' if v['pass'] else 'red'}]{'PASS' if v['pass'] else 'FAIL'}[/] "
                      f"{v['generator']}: {v['target']}")


def host_activity() -> dict:
    """Other work on this host while we measure: the figures are only as quiet as the host was."""
    netns = Path("/run/netns")
    cpu = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    hz, own = os.sysconf("SC_CLK_TCK"), os.times()
    return {"loadavg": Path("/proc/loadavg").read_text().split()[:3],
            "softnet_namespaces": sorted(p.name for p in netns.iterdir()) if netns.exists() else [],
            "user_cpu_s": (int(cpu[0]) + int(cpu[1])) / hz, "steal_cpu_s": int(cpu[7]) / hz,
            "own_user_cpu_s": own.user + own.children_user}


def foreign_load(before: dict, after: dict, elapsed_s: float) -> dict:
    """User CPU time spent by processes not ours (all CPUs, tick-sampled), and steal time."""
    foreign = (after["user_cpu_s"] - before["user_cpu_s"]) - (after["own_user_cpu_s"] - before["own_user_cpu_s"])
    return {"foreign_user_cpu_s": foreign, "foreign_user_cpu_ratio": foreign / (elapsed_s * os.cpu_count()),
            "steal_cpu_s": after["steal_cpu_s"] - before["steal_cpu_s"]}


def main() -> int:
    if os.geteuid() != 0:
        console.print("gen_bench needs root (namespaces, XDP)")
        return 2
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    config = {"frame_bytes": FRAME_BYTES, "gen_cpu": GEN_CPU, "sink_cpu": SINK_CPU, "rates_pps": RATES_PPS,
              "max_rate_fractions": MAX_FRACTIONS, "unreachable_rate_pps": UNREACHABLE_PPS, "repeats": REPEATS,
              "duration_s": DURATION_S, "warmup_s": WARMUP_S, "probe_duration_s": PROBE_DURATION_S,
              "sample_period_s": SAMPLE_PERIOD_S, "slow_read_s": SLOW_READ_S,
              "sampler_policy": f"SCHED_FIFO {SAMPLER_RT_PRIORITY} for the bench process and the sink helper, "
                                "during sampled runs only", "tolerance_ratio": TOLERANCE,
              "orchestrator_cpu": SINK_CPU, "sut": "none"}
    activity_before = host_activity()
    with HostChanges() as ch:
        tb = LocalTestbed(ch, sut="none", placement=Placement(gen_cpu=GEN_CPU, sut_cpus=[SINK_CPU]))
        ep = tb.build()
        # Keep this Python process (and the sink's user-space helper it starts)
        # off the generator's CPU.
        old = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {SINK_CPU})
        ch.record(f"affinity of gen_bench (pid {os.getpid()}) -> [{SINK_CPU}]",
                  lambda: os.sched_setaffinity(0, old))
        result = {"bench": "gen_bench", "started_utc": started.isoformat(), "config": config,
                  "softnet_gen": bench_softnet_gen(tb, ep, ch), "trafgen": bench_trafgen(ep, ch)}
        result["verdicts"] = verdicts("softnet_gen", result["softnet_gen"]) + verdicts("trafgen", result["trafgen"])
        result["elapsed_s"] = time.monotonic() - t0
        own = {tb.ns["gen"], tb.ns["sink"]}
        after = host_activity()
        foreign = sorted(set(activity_before["softnet_namespaces"] + after["softnet_namespaces"]) - own)
        load = foreign_load(activity_before, after, result["elapsed_s"])
        result["host_activity"] = {"before": activity_before, "after": after, "own_namespaces": sorted(own),
                                   "foreign_softnet_namespaces": foreign, **load,
                                   "host_quiet": not foreign and load["foreign_user_cpu_ratio"] < QUIET_RATIO}
        result["provenance"] = provenance(ch, bench="gen_bench", **config)
        result["provenance"]["trafgen"] = result["trafgen"].get("version")
    result["undo_errors"] = ch.undo_errors
    path = results_file.write("gen_bench", result, started)
    print_table(result)
    act = result["host_activity"]
    console.print(f"host: other processes used {max(act['foreign_user_cpu_ratio'], 0):.1%} of all CPUs (user time), "
                  f"steal {act['steal_cpu_s']:.1f} s, other softnet testbeds: "
                  f"{', '.join(act['foreign_softnet_namespaces']) or 'none'}")
    if not act["host_quiet"]:
        console.print("[yellow]warning:[/] the host was busy with other work during this run: figures may be disturbed")
    console.print(f"results: {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    # a peer that could not be measured fails the bench: the comparison is its point
    return 0 if all("rates" in result[n] for n in ("softnet_gen", "trafgen")) else 1


if __name__ == "__main__":
    sys.exit(main())
