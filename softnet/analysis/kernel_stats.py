"""Per-trial kernel metrics from a sampler series, and the WiFi-AP paper's
normalized costs (../shared/papers/wifi-ap-packet-switching.md, Obs. 3,
Tables I-III).

Rates are taken between the series' window marks (samples taken at the
measurement window's edges), never between arbitrary interval ticks.

Two CPU measures are kept apart on purpose:

- ``utilization_pct``: non-idle ticks over all ticks of /proc/stat, what
  mpstat and the paper's "utilization" report. The categories are sampled by
  the tick, so short softirqs run in the idle task's context are missed.
- ``cpu_time_pct``: 100 x (1 - idle time / wall time). With NO_HZ idle
  accounting (this kernel) /proc/stat's idle is measured at idle entry and
  exit, and interrupt and softirq work interrupts it; so this counts the
  packet work the tick misses. It stands in for cycles when the host has no
  cycle counter, and the result says which basis was used.
"""
from __future__ import annotations

import os
from dataclasses import replace

from softnet.analysis import power as rapl
from softnet.analysis.nic_counters import nic_counters
from softnet.analysis.counters import IDLE_TICKS, SOFTNET_GAUGES, STAT_FIELDS, busy_ratio, counter_delta, tick_total
from softnet.results.live import LiveCpu, LiveSample
from softnet.results.series import Series
from softnet.results.trial import (IrqRate, KernelCpu, KernelStats, NormalizedCost, PowerRead, ProfiledTrial,
                                   StoredKernel, StoredNormalized)

USER_HZ = os.sysconf("SC_CLK_TCK")
U32_SOURCES = ("irq", "softirq", "softnet")  # unsigned int counters in the kernel
IDLE_EDGE_S = 0.05  # a sample this close to the traffic's start may already see it


def normalized_utilization(util_pct: list[float], mbps: float) -> float:
    """Paper, Obs. 3: sum of the packet-switching cores' utilization (%) per Mbps.
    (6.38 + 11.63) / 500 = 0.0360."""
    return sum(util_pct) / mbps


def normalized_cycles(cycles_per_s: list[float], freq_hz: float, mbps: float) -> float:
    """Paper, Obs. 3: sum of the cores' cycles as a percentage of one core's
    frequency, per Mbps. ((182747814 + 926181648) / 1.5e9) x 100 / 500 = 0.1479."""
    return sum(cycles_per_s) / freq_hz * 100 / mbps


def normalized_cpu_time(cpu_time_pct: list[float], mbps: float) -> float:
    """The cycles formula with CPU time for cycles: sum of busy % per Mbps."""
    return sum(cpu_time_pct) / mbps


def normalized_power_mw(watts: float, mbps: float) -> float:
    """Paper, Table II: mW per Mbps."""
    return watts * 1000 / mbps


def frame_mbps(pkts: float, frame_bytes: int, seconds: float) -> float:
    """Throughput in Mbit/s of Ethernet frames incl. FCS (no preamble or gap)."""
    return pkts * frame_bytes * 8 / seconds / 1e6


def pkts_per_rx_softirq(processed: float, net_rx: float, budget: int | None) -> float | None:
    """Packets through the stack per NET_RX softirq (the paper's 73000/1140).
    None when the softirqs cannot have carried them: one NET_RX run handles at
    most netdev_budget packets, so fewer runs than processed / budget means
    the packets were polled elsewhere (threaded NAPI kthreads), and the ratio
    would only divide unrelated counts."""
    if net_rx <= 0 or (budget and processed / net_rx > budget):
        return None
    return processed / net_rx


def window_deltas(series: Series, start: str = "window_start", end: str = "window_end") -> tuple[dict, float]:
    """({key: counter difference over the window}, window seconds). Gauges
    (softnet queue lengths) are the value at the end."""
    i, j = series.marks[start], series.marks[end]
    a, b = series.samples[i], series.samples[j]
    out = {}
    for key, v in b.items():
        src, item, _ = key
        if src == "softnet" and item in SOFTNET_GAUGES:
            out[key] = v
        elif key in a:
            if src == "power" and v < a[key]:
                continue  # RAPL energy wrapped (at max_energy_range_uj): this window has no power figure
            out[key] = counter_delta(a[key], v, 32 if src in U32_SOURCES else None)
    return out, series.t_s[j] - series.t_s[i]


def trial_kernel_stats(series: Series, sut_cpus: list[int], forwarded_pkts: int, frame_bytes: int,
                       freq_hz: float | None = None, sysctls: dict | None = None,
                       idle_s: float = 0.0, warmup_s: float = 0.0) -> KernelStats:
    """Per-CPU rates, IRQ sources, packets per RX softirq, and normalized costs
    over the SUT's CPUs for one trial's measurement window. ``idle_s``: the
    sampler ran that long before the traffic (which began ``warmup_s``
    before the window): the host's idle power is taken over those samples."""
    d, secs = window_deltas(series)
    if secs <= 0:
        raise ValueError("kernel samples: the measurement window has no duration")
    cpus = sorted({k[2] for k in d if k[0] == "stat" and k[2] >= 0})
    # a raw trial carries its host's (sysctl name -> value); without them, unknown: analysis reads no host
    sysctls = {"dev_weight": None, "netdev_budget": None} if sysctls is None else sysctls
    weight, budget = sysctls["dev_weight"], sysctls["netdev_budget"]
    per_cpu = {}
    for c in cpus:
        ticks = {k: d.get(("stat", k, c), 0) for k in STAT_FIELDS}
        total, util = tick_total(ticks), busy_ratio(ticks)
        idle = sum(ticks[k] for k in IDLE_TICKS)
        net_rx = d.get(("softirq", "NET_RX", c), 0)
        processed = d.get(("softnet", "processed", c), 0)
        row = KernelCpu(
            utilization_pct=None if util is None else 100 * util,
            cpu_time_pct=max(0.0, 100 * (1 - idle / USER_HZ / secs)),
            softirq_tick_pct=100 * ticks["softirq"] / total if total > 0 else None,
            irqs_per_s=sum(v for (s, _, cc), v in d.items() if s == "irq" and cc == c) / secs,
            net_rx_softirqs_per_s=net_rx / secs,
            net_tx_softirqs_per_s=d.get(("softirq", "NET_TX", c), 0) / secs,
            softirqs_per_s={k[1]: v / secs for k, v in d.items() if k[0] == "softirq" and k[2] == c and v},
            softnet_processed_per_s=processed / secs,
            pkts_per_rx_softirq=pkts_per_rx_softirq(processed, net_rx, budget),
            time_squeeze_per_s=d.get(("softnet", "time_squeeze", c), 0) / secs,
            softnet_dropped=d.get(("softnet", "dropped", c), 0),
            context_switches_per_s=(d[("perf", "context_switches", c)] / secs
                                    if ("perf", "context_switches", c) in d else None),
        )
        if ("perf", "cycles", c) in d:
            row.cycles_per_s = d[("perf", "cycles", c)] / secs
        if ("perf", "cache_misses", c) in d:
            row.cache_misses_per_s = d[("perf", "cache_misses", c)] / secs
        per_cpu[c] = row
    irqs: dict[str, IrqRate] = {}
    for (src, item, c), v in d.items():
        if src == "irq" and v:
            rec = irqs.setdefault(item, IrqRate(name=series.irq_names.get(item, ""), per_s=0.0, per_cpu_per_s={}))
            rec.per_s += v / secs
            if c >= 0:
                rec.per_cpu_per_s[c] = v / secs
    mbps = frame_mbps(forwarded_pkts, frame_bytes, secs)
    sut = [c for c in sut_cpus if c in per_cpu]
    norm = NormalizedCost(cpus=sut, throughput_mbps=mbps)
    if mbps > 0 and sut:
        norm.utilization_per_mbps = normalized_utilization([per_cpu[c].utilization_pct or 0 for c in sut], mbps)
        norm.cpu_time_per_mbps = normalized_cpu_time([per_cpu[c].cpu_time_pct for c in sut], mbps)
        cycles = [per_cpu[c].cycles_per_s for c in sut]
        if all(v is not None for v in cycles) and freq_hz:
            norm.cycles_per_mbps = normalized_cycles(cycles, freq_hz, mbps)
            norm.cost_basis = "cycles"
        else:
            norm.cycles_per_mbps = norm.cpu_time_per_mbps
            norm.cost_basis = "cpu_time"
            norm.cost_basis_why = series.missing.get("perf.cycles", "no cycle counter") + \
                "; cycles per Mbps is CPU time (100 x (1 - idle / wall)) per Mbps"
        misses = [per_cpu[c].cache_misses_per_s for c in sut]
        if all(v is not None for v in misses):
            norm.cache_misses_per_mbps = sum(misses) / mbps
    power = power_read(series, d, secs, idle_s, warmup_s)
    if mbps > 0 and sut:
        watts = power.watts if power else None
        norm.power_mw_per_mbps = normalized_power_mw(watts, mbps) if watts is not None else None
        if power and power.traffic_watts is not None:
            norm.traffic_power_mw_per_mbps = normalized_power_mw(power.traffic_watts, mbps)
    ctxt = d.get(("stat", "ctxt", -1))
    return KernelStats(
        window_s=secs, interval_s=series.interval_s, samples=len(series.samples),
        per_cpu=per_cpu, irqs=irqs, dev_weight=weight, netdev_budget=budget,
        context_switches_per_s=ctxt / secs if ctxt is not None else None,
        normalized=norm,
        # bstats of a qdisc count bypassed packets too: the split needs the
        # qdisc:qdisc_enqueue tracepoint (the eBPF profiler), not counters.
        qdisc_enqueued_share=None,
        qdisc={k[1]: v for k, v in d.items() if k[0] == "qdisc"},
        **({"power": power} if power else {}),
        **({"nic": nic} if (nic := nic_counters({k[1]: v for k, v in d.items() if k[0] == "ethtool"})) else {}),
        missing=dict(series.missing), sampler=dict(series.sampler),
    )


def power_read(series: Series, d: dict, secs: float, idle_s: float, warmup_s: float) -> PowerRead | None:
    """The window's RAPL power, and the idle power over the samples taken
    before the traffic when the trial paused for them (None without RAPL)."""
    energy = {item: v for (src, item, _), v in d.items() if src == "power"}
    if not energy:
        return None
    total, zones = rapl.watts(energy, secs, series.power_zones)
    out = PowerRead(watts=total, zones_w=zones)
    if idle_s > 0:
        traffic_t = series.t_s[series.marks["window_start"]] - warmup_s
        idle = [i for i, t in enumerate(series.t_s) if t < traffic_t - IDLE_EDGE_S]
        if len(idle) >= 2 and series.t_s[idle[-1]] - series.t_s[idle[0]] >= idle_s / 2:
            # the same counter differences as the window's (wraps left out), over the idle samples
            d_idle, dt = window_deltas(replace(series, marks={"a": idle[0], "b": idle[-1]}), "a", "b")
            used = {item: v for (src, item, _), v in d_idle.items() if src == "power"}
            idle_w, _ = rapl.watts(used, dt, series.power_zones) if used.keys() == energy.keys() else (None, {})
            if idle_w is not None and total is not None:
                out.idle_watts, out.idle_s, out.traffic_watts = idle_w, dt, total - idle_w
    return out


def live_sample(series: Series, elapsed_s: float) -> LiveSample | None:
    """A running trial's figures over its sampler's last interval, by the
    same definitions as the trial's window figures (None before two samples).
    Loss over one interval is approximate: packets in flight at its edges."""
    if len(series.samples) < 2:
        return None
    last = Series(series.interval_s, series.t_s[-2:], series.samples[-2:], {"window_start": 0, "window_end": 1},
                  series.irq_names)
    k = trial_kernel_stats(last, [], 0, 64, sysctls={"dev_weight": None, "netdev_budget": None})
    d, secs = window_deltas(last)

    def pps(*names: str) -> float | None:
        got = [d[("link", n, -1)] for n in names if ("link", n, -1) in d]
        return sum(got) / secs if got else None

    offered = pps("gen.tx_packets") or pps("sut_in.rx_packets", "sut_in.rx_dropped")
    received = pps("sink.rx_packets")
    forwarded = pps("sut_out.tx_packets")
    out = received if received is not None else forwarded
    return LiveSample(
        elapsed_s=elapsed_s, interval_s=secs, offered_pps=offered, forwarded_pps=forwarded, received_pps=received,
        loss_ratio=min(1.0, max(0.0, 1 - out / offered)) if offered and out is not None else None,
        per_cpu={c: LiveCpu(busy_pct=r.cpu_time_pct, net_rx_softirqs_per_s=r.net_rx_softirqs_per_s,
                            net_tx_softirqs_per_s=r.net_tx_softirqs_per_s, softirq_tick_pct=r.softirq_tick_pct)
                 for c, r in k.per_cpu.items()})


def summarize_by_load(trials: list[dict]) -> list[dict]:
    """Mean over the valid runs of each load of a configuration's trials
    (result dicts with "kernel"): per-CPU rates and the normalized costs.
    One dict per load, ascending: {load_pps, runs, throughput_mbps, per_cpu
    {cpu: {metric: mean}}, normalized {metric: mean}, cost_basis, power}."""
    by_load: dict[float, list[StoredKernel]] = {}
    for t in map(ProfiledTrial.model_validate, trials):
        if t.valid and t.kernel and t.kernel.per_cpu:
            by_load.setdefault(t.intended_rate_pps, []).append(t.kernel)
    out = []
    for load, ks in sorted(by_load.items()):
        cpus = sorted({c for k in ks for c in k.per_cpu})
        per_cpu = {}
        for c in cpus:
            # every numeric per-CPU rate a result has, averaged by its name
            rows = [k.per_cpu[c].model_dump(exclude_unset=True) for k in ks if c in k.per_cpu]
            rows = [r for r in rows if r]
            metrics = {m for r in rows for m, v in r.items() if isinstance(v, (int, float))}
            per_cpu[c] = {m: mean_of([r.get(m) for r in rows]) for m in sorted(metrics)}
        norms = [k.normalized or StoredNormalized() for k in ks]
        nic = [{f"{role}.{c}": v / k.window_s for role, n in (k.nic or {}).items() for c, v in n.losses.items()}
               if k.window_s else {} for k in ks]
        out.append({
            "load_pps": load, "runs": len(ks),
            "throughput_mbps": mean_of([n.throughput_mbps for n in norms]),
            "sut_cpus": norms[0].cpus,
            "per_cpu": per_cpu,
            "normalized": {"utilization_per_mbps": mean_of([n.utilization_per_mbps for n in norms]),
                           "cycles_per_mbps": mean_of([n.cycles_per_mbps for n in norms]),
                           "cpu_time_per_mbps": mean_of([n.cpu_time_per_mbps for n in norms]),
                           "power_mw_per_mbps": mean_of([n.power_mw_per_mbps for n in norms]),
                           "traffic_power_mw_per_mbps": mean_of([n.traffic_power_mw_per_mbps for n in norms]),
                           "cache_misses_per_mbps": mean_of([n.cache_misses_per_mbps for n in norms])},
            "cost_basis": norms[0].cost_basis, "cost_basis_why": norms[0].cost_basis_why,
            # ethtool -S loss counters per second, by "role.counter", mean over the runs (0 where one did not move)
            "nic_losses_per_s": {key: sum(rates.get(key, 0.0) for rates in nic) / len(nic)
                                 for key in sorted({k for rates in nic for k in rates})},
            "dev_weight": ks[0].dev_weight,
            "missing": ks[0].missing,
        })
    return out


def mean_of(values) -> float | None:
    """Mean of the values that are not None (None when there are none)."""
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None
