"""Data paths side by side: which SUT personality forwards most here, how sure
that ranking is, and what each forwarded packet costs in SUT CPU time.

A sweep tests a grid of loads, so a PDR is known only to lie between the
highest load that met the loss target and the next load tested (its
bracket); the capacity (the largest mean throughput over the loads) has a
t-interval over runs. Two data paths are told apart only when their PDR
brackets or their capacity intervals do not overlap; otherwise they share a
rank.

CPU per packet is the SUT CPUs' busy time (the kernel sampler's CPU time,
100 x (1 - idle / wall) summed over the SUT's CPUs) over the packets
forwarded in the window, at a reference load every data path carries without
loss (the lowest load of the sweep), so the paths are compared at equal work.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from softnet.analysis.loss_stats import MeanCI

CPU_KEY = "cpu_time_pct"


@dataclass(frozen=True)
class DataPathRow:
    label: str
    verdict: str
    ndr_pps: float | None
    pdr_pps: float | None  # highest tested load meeting the loss target
    pdr_next_pps: float | None  # the next tested load (the bracket's open top); None: none above
    capacity_pps: float | None  # largest mean throughput over the loads
    capacity_ci: tuple[float, float] | None
    ref_load_pps: float | None
    cpu_ns_per_pkt: float | None  # at ref_load_pps, mean over valid runs
    cpu_ns_ci: tuple[float, float] | None
    cpu_runs: int
    rank: int = 0
    tied_with: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


def cpu_ns_per_packet(trial: dict) -> float | None:
    """SUT CPU ns per packet received in the window of one trial result
    (None without kernel statistics or with nothing forwarded)."""
    k = trial.get("kernel") or {}
    cpus = (k.get("normalized") or {}).get("cpus")
    per_cpu = k.get("per_cpu") or {}
    rx, dur = trial.get("received_pkts"), trial.get("duration_s")
    if not cpus or not rx or not dur:
        return None
    rows = [per_cpu.get(c, per_cpu.get(str(c))) for c in cpus]
    if any(r is None or r.get(CPU_KEY) is None for r in rows):
        return None
    busy_s = sum(r[CPU_KEY] for r in rows) / 100 * k.get("window_s", dur)
    return busy_s * 1e9 / rx


def _overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def _bracket(r: DataPathRow) -> tuple[float, float] | None:
    if r.pdr_pps is None:
        return None
    return (r.pdr_pps, r.pdr_next_pps if r.pdr_next_pps is not None else float("inf"))


def compare(configs: Sequence, trials: dict[str, list[dict]]) -> list[DataPathRow]:
    """One row per configuration (analysis.campaigns.Configuration), ranked.
    ``trials``: label -> the configuration's full trial results (with their
    kernel statistics)."""
    rows = []
    for c in configs:
        a, r = c.analysis, c.analysis.report
        loads = sorted(a.stats.loads, key=lambda s: s.load_pps)
        above = [s.load_pps for s in loads if r.pdr_load_pps is not None and s.load_pps > r.pdr_load_pps]
        best = max(loads, key=lambda s: s.throughput_pps.mean, default=None)
        cap_ci = None
        if best is not None and best.throughput_pps.n > 1:
            cap_ci = (best.throughput_pps.ci_lower, best.throughput_pps.ci_upper)
        ref = loads[0].load_pps if loads else None
        costs = [x for t in trials.get(c.label, []) if t.get("valid") and t.get("intended_rate_pps") == ref
                 and (x := cpu_ns_per_packet(t)) is not None]
        m = MeanCI.of(costs) if len(costs) > 1 else None
        rows.append(DataPathRow(
            c.label, r.verdict.value, r.ndr_load_pps, r.pdr_load_pps, min(above, default=None),
            best.throughput_pps.mean if best else None, cap_ci, ref,
            (m.mean if m else costs[0]) if costs else None, (m.ci_lower, m.ci_upper) if m else None, len(costs)))
    return rank(rows)


def rank(rows: list[DataPathRow]) -> list[DataPathRow]:
    """Order by PDR (then capacity); a row shares the rank of the one above
    when neither their PDR brackets nor their capacity intervals separate
    them."""
    order = sorted(rows, key=lambda r: (r.pdr_pps or 0.0, r.capacity_pps or 0.0), reverse=True)
    out: list[DataPathRow] = []
    for i, r in enumerate(order):
        ties = tuple(o.label for o in order if o is not r and _overlap(_bracket(o), _bracket(r))
                     and (_overlap(o.capacity_ci, r.capacity_ci) or o.capacity_ci is None or r.capacity_ci is None))
        prev = out[-1] if out else None
        same = prev is not None and prev.label in ties
        out.append(DataPathRow(**{**asdict(r), "rank": prev.rank if same else i + 1, "tied_with": ties}))
    return out
