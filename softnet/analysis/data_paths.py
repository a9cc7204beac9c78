"""Data paths side by side: which SUT personality forwards most here, how sure
that ranking is, and what each forwarded packet costs in SUT CPU time.

A sweep tests a grid of loads, so a PDR is known only to lie between the
highest load that met the loss target and the next load tested (its
bracket, half-open); the capacity (the largest mean throughput over the
loads) has a t-interval over runs. Two data paths are told apart when their
PDR brackets do not overlap or their capacity intervals do not; otherwise
they share a rank.

CPU per packet is the slope of the SUT CPUs' busy share (the kernel
sampler's CPU time, 1 - idle / wall, summed over the SUT's CPUs) against the
packets forwarded per second, fitted over the valid trials at loads up to
the PDR (below saturation, where cost grows linearly with load: the eBPF
receive-path study's linear model). The slope is the marginal cost of a
packet; the intercept is what the path costs with no traffic (a NAPI kthread
woken per packet at low rates, timers). The plain ratio busy time / packets
at the lowest load is kept beside it: at low rates it is dominated by
per-wakeup costs, not by the path.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence


from softnet.analysis.loss_stats import t_critical
from softnet.results.readers import StoredResult, StoredTrial

CPU_KEY = "cpu_time_pct"
MIN_FIT_LOADS = 2


@dataclass(frozen=True)
class DataPathRow:
    label: str
    verdict: str
    ndr_pps: float | None
    pdr_pps: float | None  # highest tested load meeting the loss target
    pdr_next_pps: float | None  # the next tested load (the bracket's open top); None: none above
    capacity_pps: float | None  # largest mean throughput over the loads
    capacity_ci: tuple[float, float] | None
    cpu_ns_per_pkt: float | None  # marginal: the fit's slope
    cpu_ns_ci: tuple[float, float] | None
    cpu_fixed_pct: float | None  # the fit's intercept: busy % of the SUT CPUs at no traffic
    cpu_fit_trials: int
    cpu_fit_max_load_pps: float | None
    ref_load_pps: float | None  # the lowest load
    cpu_ns_at_ref: float | None  # busy time / packets there (mean over valid runs)
    rank: int = 0
    tied_with: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


def busy_share(trial: StoredResult) -> float | None:
    """The SUT CPUs' busy share over a trial's window (1.0: one CPU busy)."""
    k = trial.kernel or {}  # kernel statistics (softnet.analysis.kernel_stats): keyed by the host's CPUs
    cpus = (k.get("normalized") or {}).get("cpus")
    per_cpu = k.get("per_cpu") or {}
    if not cpus:
        return None
    rows = [per_cpu.get(c, per_cpu.get(str(c))) for c in cpus]
    if any(r is None or r.get(CPU_KEY) is None for r in rows):
        return None
    return sum(r[CPU_KEY] for r in rows) / 100


def forwarded_pps(trial: StoredResult) -> float | None:
    rx, dur = trial.received_pkts, trial.duration_s
    return rx / dur if rx and dur else None


def cpu_ns_per_packet(trial: StoredResult | dict) -> float | None:
    """SUT CPU ns per packet received in the window of one trial result
    (None without kernel statistics or with nothing forwarded). A result
    document (dict) is read as a StoredResult."""
    if not isinstance(trial, StoredResult):
        trial = StoredResult.parse(trial, "trial result")
    share, rx = busy_share(trial), trial.received_pkts
    if share is None or not rx:
        return None
    # busy time over the sampler's window (its edges are the trial window's, to a sample)
    return share * (trial.kernel.get("window_s") or trial.duration_s) * 1e9 / rx


@dataclass(frozen=True)
class CostFit:
    ns: float  # the slope: SUT CPU ns per forwarded packet
    ci: tuple[float, float]  # its t-interval
    fixed_pct: float  # the intercept: busy % of the SUT CPUs at no traffic
    n: int  # trials fitted


def cost_fit(trials: list[StoredResult], max_load_pps: float | None, confidence: float = 0.95) -> CostFit | None:
    """Busy share = fixed + slope x forwarded pps over the valid trials at
    loads up to ``max_load_pps``: slope in ns per packet with its t-interval,
    fixed in % of a CPU. None with fewer than MIN_FIT_LOADS loads."""
    if max_load_pps is None:
        return None
    pts = [(x, y) for t in trials if t.valid and t.intended_rate_pps <= max_load_pps
           and (x := forwarded_pps(t)) is not None and (y := busy_share(t)) is not None]
    if len({round(x, -3) for x, _ in pts}) < MIN_FIT_LOADS or len(pts) < 3:
        return None
    from scipy import stats  # here: its import is 0.6 s, paid only where it is used

    f = stats.linregress([x for x, _ in pts], [y for _, y in pts])
    half = t_critical(confidence, len(pts) - 2) * f.stderr
    return CostFit(f.slope * 1e9, ((f.slope - half) * 1e9, (f.slope + half) * 1e9), f.intercept * 100, len(pts))


def _overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def _brackets_overlap(a: "DataPathRow", b: "DataPathRow") -> bool:
    """[pdr, next load) intervals: half-open, so [350k, 500k) and [500k, 700k) are apart."""
    if a.pdr_pps is None or b.pdr_pps is None:
        return a.pdr_pps is None and b.pdr_pps is None
    a_top = a.pdr_next_pps if a.pdr_next_pps is not None else math.inf
    b_top = b.pdr_next_pps if b.pdr_next_pps is not None else math.inf
    return a.pdr_pps < b_top and b.pdr_pps < a_top


def compare(configs: Sequence, trials: dict[str, list[StoredTrial]]) -> list[DataPathRow]:
    """One row per configuration (analysis.campaigns.Configuration), ranked.
    ``trials``: label -> the configuration's stored trials (with their
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
        ts = [t.result for t in trials.get(c.label, [])]
        # below the PDR; with no saturation in the sweep every load is below it
        top = r.pdr_load_pps if r.pdr_load_pps is not None else (
            loads[-1].load_pps if loads and r.verdict.value == "NO-SATURATION" else None)
        fit = cost_fit(ts, top)
        ref = loads[0].load_pps if loads else None
        at_ref = [x for t in ts if t.valid and t.intended_rate_pps == ref
                  and (x := cpu_ns_per_packet(t)) is not None]
        rows.append(DataPathRow(
            c.label, r.verdict.value, r.ndr_load_pps, r.pdr_load_pps, min(above, default=None),
            best.throughput_pps.mean if best else None, cap_ci,
            fit.ns if fit else None, fit.ci if fit else None, fit.fixed_pct if fit else None,
            fit.n if fit else 0, top if fit else None,
            ref, sum(at_ref) / len(at_ref) if at_ref else None))
    return rank(rows)


def _tied(a: DataPathRow, b: DataPathRow) -> bool:
    return _brackets_overlap(a, b) and (a.capacity_ci is None or b.capacity_ci is None
                                        or _overlap(a.capacity_ci, b.capacity_ci))


def rank(rows: list[DataPathRow]) -> list[DataPathRow]:
    """Order by PDR (then capacity). Rows this sweep cannot tell apart (PDR
    brackets overlap and capacity intervals overlap), directly or through
    others, form a group that shares one rank: the group's place, its rows
    together."""
    order = sorted(rows, key=lambda r: (r.pdr_pps or 0.0, r.capacity_pps or 0.0), reverse=True)
    group = list(range(len(order)))  # union-find over the tie relation

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for i, a in enumerate(order):
        for j in range(i + 1, len(order)):
            if _tied(a, order[j]):
                group[root(j)] = root(i)
    members: dict[int, list[int]] = {}
    for i in range(len(order)):
        members.setdefault(root(i), []).append(i)
    out: list[DataPathRow] = []
    for head in sorted(members, key=lambda g: min(members[g])):  # groups in the order of their best row
        ids = members[head]
        for i in ids:
            r = order[i]
            ties = tuple(order[j].label for j in ids if j != i)
            out.append(DataPathRow(**{**asdict(r), "rank": len(out) + 1 - ids.index(i), "tied_with": ties}))
    return out


def capacity_disagrees(rows: list[DataPathRow]) -> list[tuple[str, str]]:
    """(lower, higher) pairs where a row ranked lower has a capacity interval
    wholly above a higher-ranked row's: the PDR and the capacity order them
    differently (e.g. loss from host stalls setting a PDR below what the path
    can carry)."""
    out = []
    for i, hi in enumerate(rows):
        for lo in rows[i + 1:]:
            if lo.rank > hi.rank and lo.capacity_ci and hi.capacity_ci and lo.capacity_ci[0] > hi.capacity_ci[1]:
                out.append((lo.label, hi.label))
    return out


def short_label(label: str) -> str:
    """A configuration's label for a narrow table: "sut=" dropped, a file
    param by its name only (custom:file=/x/y/sut.toml -> custom:file=sut.toml)."""
    text = label[4:] if label.startswith("sut=") else label
    name, sep, rest = text.partition(":")
    if not sep:
        return text
    items = [f"file={v.rsplit('/', 1)[-1]}" if k == "file" else f"{k}={v}"
             for k, _, v in (item.partition("=") for item in rest.split(","))]
    return f"{name}:{','.join(items)}"
