"""What a comparison compares: the figures of each trial (capacity, SUT CPU
per packet, loss, latency) at each load, and the differences of candidates
from the baseline, paired round by round (softnet.analysis.paired).

A trial gives:

* capacity, at the overload: the packets the SUT delivered per second of
  the send span (received / span), higher is better;
* cpu, at each fixed load: the SUT's CPU ns per forwarded packet, from its
  NAPI kthreads' exact run time (sut_thread_cpu), else from the sampler's
  tick-counted busy share (analysis.data_paths); lower is better;
* loss, at each fixed load: the SUT's loss ratio with host-stall loss set
  apart (``loss``) and all loss (``loss_all``), as absolute differences;
* latency, at each fixed load: the median and 99th percentile one-way delay.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, NamedTuple, Sequence

from pydantic import BaseModel, ConfigDict

from softnet.analysis.data_paths import cpu_ns_per_packet
from softnet.analysis.paired import (StopRule, decide, look_schedule, paired_difference, per_look_confidence,
                                     tost_confidence, unpaired_difference)
from softnet.analysis.kernel_functions import Side, function_changes
from softnet.results.comparison import Better, ComparisonSummary, FunctionChanges, PairedDifference, Scale
from softnet.results.search import SearchGoalRow
from softnet.results.trial import Number
from softnet.units import format_rate

# Flags that leave a trial's figures usable for a comparison: the host's
# doing, the same for both sides of a pair, and set apart by the loss metric.
# what the host did, and bursts that ran into a partner's slot (alike for every variant of a round)
TOLERATED_FLAGS = {"host_interference", "turns_overlapped"}


class _Read(BaseModel):
    """What a comparison reads of a record: only these fields (the rest of a
    trial result is not its business), from a dict or from a typed result."""

    model_config = ConfigDict(extra="ignore", from_attributes=True)


class _ThreadCpu(_Read):
    ns_per_pkt: Number | None = None
    window_ns_per_pkt: Number | None = None


class _Requested(_Read):
    sut_cpus: list[int] | None = None


class _Placement(_Read):
    requested: _Requested | None = None


class _StageRow(_Read):
    stage: str | None = None
    ns_per_packet: Number | None = None


class _CpuStages(_Read):
    ebpf_profile: list[_StageRow] | None = None


class _DropRow(_Read):
    reason: str | None = None
    estimated_skbs: Number | None = None


class _FunctionRow(_Read):
    function: str
    self_ns_per_pkt: Number | None = None
    incl_ns_per_pkt: Number | None = None


class _Functions(_Read):
    busy_ns_per_pkt: Number | None = None
    functions: list[_FunctionRow] = []


class _Profile(_Read):
    stages: dict[int | str, _CpuStages | None] | None = None  # CPU (a string once stored) -> its stages
    drops: list[_DropRow] | None = None
    functions: _Functions | None = None


class _Interleave(_Read):
    duty: Number  # the trial's share of the time on (softnet.campaign.interleave)


class _Pace(_Read):
    ips: Number | None = None


class ComparedTrial(_Read):
    """The figures of one trial result a comparison uses, parsed once."""

    intended_rate_pps: Number | None = None
    send_span_s: Number | None = None
    duration_s: Number | None = None
    sent_pkts: int | None = None
    received_pkts: int | None = None
    loss_ratio: Number | None = None
    sut_loss_ratio: Number | None = None
    latency_p50_ns: Number | None = None
    latency_p99_ns: Number | None = None
    flags: list[str] | None = None
    provenance: dict[str, Any] | None = None
    sut_thread_cpu: _ThreadCpu | None = None
    placement: _Placement | None = None
    profile: _Profile | None = None
    # the sampler's CPU per packet (analysis.data_paths), where the kthreads' exact figure is missing
    sampled_cpu_ns_per_pkt: Number | None = None
    host_pace: _Pace | None = None  # the pace probe's covariate (TrialSpec.pace_probe)
    interleave: _Interleave | None = None  # it took turns with its partners' trials

    @classmethod
    def of(cls, trial) -> "ComparedTrial":
        """A trial result as stored (a dict), as evaluated (TrialResult), or already parsed."""
        if isinstance(trial, ComparedTrial):
            return trial
        raw = trial if isinstance(trial, dict) else trial.to_dict()
        out = cls.model_validate(raw)
        if not (out.sut_thread_cpu and out.sut_thread_cpu.ns_per_pkt):
            out.sampled_cpu_ns_per_pkt = cpu_ns_per_packet(raw)
        return out


def compared(trial) -> ComparedTrial | None:
    return None if trial is None else ComparedTrial.of(trial)


@dataclass(frozen=True)
class MetricDef:
    """One figure of a trial: how to read it, which way is better, and its scale."""

    kind: str  # capacity | cpu | loss | latency
    name: str  # as shown: capacity, cpu, loss, loss_all, latency_p50, latency_p99
    unit: str
    better: Better
    scale: Scale
    read: Callable[[ComparedTrial], float | None]


def _capacity(t: ComparedTrial) -> float | None:
    """The forwarded rate; for a trial that took turns, while its bursts
    lasted: the share it forwarded of the rate inside them."""
    if t.interleave is not None:
        rate, rx, sent = t.intended_rate_pps, t.received_pkts, t.sent_pkts
        return rx / sent * rate / t.interleave.duty if rate and rx and sent else None
    span, rx = t.send_span_s or t.duration_s, t.received_pkts
    return rx / span if span and rx else None


def _cpu(t: ComparedTrial) -> float | None:
    c = t.sut_thread_cpu
    return c.ns_per_pkt if c and c.ns_per_pkt else t.sampled_cpu_ns_per_pkt


CAPACITY = MetricDef("capacity", "capacity", "pps", "higher", "ratio", _capacity)
METRICS: dict[str, list[MetricDef]] = {
    "capacity": [CAPACITY],
    "cpu": [MetricDef("cpu", "cpu", "ns/pkt", "lower", "ratio", _cpu)],
    "loss": [MetricDef("loss", "loss", "ratio", "lower", "difference", lambda t: t.sut_loss_ratio
                       if t.sut_loss_ratio is not None else t.loss_ratio),
             MetricDef("loss", "loss_all", "ratio", "lower", "difference", lambda t: t.loss_ratio)],
    "latency": [MetricDef("latency", "latency_p50", "ns", "lower", "ratio", lambda t: t.latency_p50_ns),
                MetricDef("latency", "latency_p99", "ns", "lower", "ratio", lambda t: t.latency_p99_ns)],
}


PROVENANCE_KEYS = ("kernel", "cpu_model", "softnet_version", "hostname")


def where_measured(trials) -> dict:
    """The provenance that tells two sides apart, from the first trial that has one."""
    for t in trials:
        prov = (t.provenance if t is not None else None) or {}
        if prov:
            return {k: prov.get(k) for k in PROVENANCE_KEYS}
    return {}


# A flood that the generator could not pace exactly (on two vCPUs it shares them with the SUT) still
# measures capacity when the SUT dropped this share of it: the SUT, not the generator, set the rate.
GENERATOR_FLAGS = {"generator_limited", "generator_overshoot"}
SATURATED_LOSS = 0.1


def usable(trial: ComparedTrial, kind: str = "") -> bool:
    """A trial whose figures a comparison may use (valid, or flagged only
    for what the host did); for capacity, also a flood the generator paced
    off its rate where the SUT was saturated (lost SATURATED_LOSS or more)."""
    left = set(trial.flags or ()) - TOLERATED_FLAGS
    if kind == "capacity" and trial.loss_ratio is not None and trial.loss_ratio >= SATURATED_LOSS:
        left -= GENERATOR_FLAGS
    return not left


def metric_points(kinds: Sequence[str], loads: Sequence[tuple[str, float]]) -> list[tuple[int, MetricDef]]:
    """(load index, metric) for every figure measured: capacity at the
    overload, the others at each fixed load."""
    out = []
    for kind in kinds:
        for li, (role, _) in enumerate(loads):
            if (role == "overload") == (kind == "capacity"):
                out.extend((li, m) for m in METRICS[kind])
    return out


def metric_label(m: MetricDef, load_pps: float) -> str:
    return f"{m.name}@{format_rate(load_pps)}"


# the figures a host's pace moves with it: the time per packet, the rate a flood gets through
PACED = ("cpu", "capacity")


def pace_of(trials: dict, v: int, li: int, rounds: Sequence[int]) -> list[float | None]:
    """The host pace for variant v at load li in each of these rounds (None where not probed)."""
    out = []
    for r in rounds:
        t = trials.get((v, li, r))
        out.append(t.host_pace.ips if t is not None and t.host_pace is not None else None)
    return out


def loss_set_apart(trials: Sequence[ComparedTrial]) -> bool:
    """Whether any trial set loss apart (host stalls): only then do "loss"
    (the data path's) and "loss_all" (every lost packet) differ, and both
    are shown."""
    return any(t.sut_loss_ratio is not None and t.loss_ratio is not None and t.sut_loss_ratio != t.loss_ratio
               for t in trials)


def value(trial: ComparedTrial | None, m: MetricDef) -> float | None:
    return m.read(trial) if trial is not None and usable(trial, m.kind) else None


class _Planned(NamedTuple):
    """One row of a paired comparison before it is read: both sides' values per round."""

    label: str
    a: list[float | None]
    b: list[float | None]
    better: Better
    scale: Scale
    unit: str
    kind: str
    margin: float
    load_pps: float | None
    covariate: tuple[list[float | None], list[float | None]] | None


def paired_summary(names: list[str], labels: dict[str, str], trials: dict[tuple[int, int, int], dict],
                   loads: Sequence[tuple[str, float]], kinds: Sequence[str], rounds: int, confidence: float,
                   margin: float, loss_margin: float, stop_reason: str = "",
                   searches: dict[tuple[int, int], dict[str, float | None]] | None = None,
                   decide_on: Sequence[str] | None = None) -> ComparisonSummary:
    """Each candidate (variant 1..) against the baseline (variant 0), over
    ``rounds`` complete rounds. ``trials``: (variant, load index, round) ->
    result; ``searches``: (variant, round) -> {goal: conditional throughput pps}.
    ``confidence``: each look's, for the metrics the experiment decides on
    (``decide_on``; None: all of them). The others are reported: their
    intervals are Bonferroni's over them all (at 1 - (1 - confidence) / m for
    m reported metrics), so no verdict in the table is a false one at more
    than the experiment's error rate, however many rows it has."""
    trials = {k: compared(t) for k, t in trials.items()}
    out = ComparisonSummary(baseline=names[0], candidates=names[1:], rounds=rounds, stop_reason=stop_reason,
                            labels=labels)
    set_apart = loss_set_apart([t for t in trials.values() if t is not None])
    for v in range(1, len(names)):
        planned: list[_Planned] = []
        for li, m in metric_points(kinds, loads):
            if m.name == "loss_all" and not set_apart:
                continue
            # the rounds that measured this load (a decided one is left out of later rounds)
            rs = [r for r in range(rounds) if (0, li, r) in trials and (v, li, r) in trials]
            a = [value(trials[(0, li, r)], m) for r in rs]
            b = [value(trials[(v, li, r)], m) for r in rs]
            planned.append(_Planned(metric_label(m, loads[li][1]), a, b, m.better, m.scale, m.unit, m.kind,
                                    margin if m.scale == "ratio" else loss_margin,
                                    None if m.kind == "capacity" else loads[li][1],
                                    (pace_of(trials, 0, li, rs), pace_of(trials, v, li, rs))
                                    if m.kind in PACED else None))
        if searches is not None and "search" in kinds:
            goals = sorted({g for (_, r), gs in searches.items() if r < rounds for g in gs})
            for g in goals:
                a = [searches.get((0, r), {}).get(g) for r in range(rounds)]
                b = [searches.get((v, r), {}).get(g) for r in range(rounds)]
                planned.append(_Planned(f"search {g}", a, b, "higher", "ratio", "pps", "search", margin, None, None))
        reported = sum(1 for p in planned if decide_on is not None and p.kind not in decide_on)
        diffs = []
        for p in planned:
            conf = confidence if decide_on is None or p.kind in decide_on or reported < 2 else \
                1 - (1 - confidence) / reported
            d = paired_difference(p.label, p.a, p.b, better=p.better, scale=p.scale, unit=p.unit, confidence=conf,
                                  kind=p.kind, margin=p.margin, covariate=p.covariate)
            diffs.append(replace(d, load_pps=p.load_pps))
        out.differences[names[v]] = diffs
    out.explain = explain(names, trials, loads, rounds, confidence)
    out.functions = explain_functions(names, trials, loads, rounds, confidence)
    for (v, li, r), t in trials.items():
        if r < rounds and t is not None and not usable(t, "capacity" if loads[li][0] == "overload" else ""):
            counts = out.unusable.setdefault(names[v], {})
            for f in set(t.flags or ()) - TOLERATED_FLAGS:
                counts[f] = counts.get(f, 0) + 1
        if r < rounds and t is not None and "turns_overlapped" in (t.flags or ()):
            out.overlapped[names[v]] = out.overlapped.get(names[v], 0) + 1
    out.provenance = {n: where_measured(t for (v, _, _), t in sorted(trials.items(), key=lambda kv: kv[0][2])
                                        if v == i) for i, n in enumerate(names)}
    return out


def stage_ns(trial: ComparedTrial) -> dict[str, float]:
    """The eBPF profile's stages on the SUT's CPUs, ns per forwarded packet
    (the receive-path study's stages; empty when the trial was not profiled)."""
    stages = (trial.profile.stages if trial.profile else None) or {}
    req = trial.placement.requested if trial.placement else None
    out: dict[str, float] = {}
    for cpu in (req.sut_cpus if req else None) or []:
        at = stages.get(str(cpu)) or stages.get(cpu)
        for row in (at.ebpf_profile if at else None) or []:
            if row.ns_per_packet is not None:
                out[row.stage] = out.get(row.stage, 0.0) + row.ns_per_packet
    return out


def function_side(trial: ComparedTrial) -> Side | None:
    """A profiled trial's busy ns per packet and each kernel function's own
    and inclusive ns per packet (None: no stacks sampled)."""
    f = trial.profile.functions if trial.profile else None
    if f is None or f.busy_ns_per_pkt is None:
        return None
    return f.busy_ns_per_pkt, {r.function: (r.self_ns_per_pkt or 0.0, r.incl_ns_per_pkt) for r in f.functions
                               if r.incl_ns_per_pkt is not None}


def explain_functions(names: list[str], trials: dict[tuple[int, int, int], ComparedTrial | None],
                      loads: Sequence[tuple[str, float]], rounds: int,
                      confidence: float) -> dict[str, list[FunctionChanges]]:
    """Per candidate and fixed load, the kernel functions behind the CPU change (analysis.kernel_functions)."""
    out: dict[str, list[FunctionChanges]] = {}
    for v in range(1, len(names)):
        for li, (kind, load) in enumerate(loads):
            if kind == "overload":  # saturated: time per packet there is the capacity's story, not the path's
                continue
            sides = [(trials.get((0, li, r)), trials.get((v, li, r))) for r in range(rounds)]
            pairs = [(function_side(a), function_side(b)) for a, b in sides
                     if a is not None and b is not None and usable(a) and usable(b)]
            pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
            if (fc := function_changes(pairs, load, confidence)) is not None:
                out.setdefault(names[v], []).append(fc)
    return out


def drop_rates(trial: ComparedTrial) -> dict[str, float]:
    """Packets dropped per packet sent, by the kernel's drop reason (profiled trials)."""
    sent = trial.sent_pkts or 0
    out: dict[str, float] = {}
    if not sent:
        return out
    for row in (trial.profile.drops if trial.profile else None) or []:
        out[row.reason] = out.get(row.reason, 0.0) + row.estimated_skbs / sent
    return out


def explain(names: list[str], trials: dict[tuple[int, int, int], ComparedTrial | None],
            loads: Sequence[tuple[str, float]],
            rounds: int, confidence: float) -> dict[str, list[PairedDifference]]:
    """Where the trials were profiled: each stage's ns per packet and each drop
    reason's rate, candidate against baseline, paired by round, per load.
    Absolute differences (a stage can take 0 ns), shown with their intervals."""
    out: dict[str, list[PairedDifference]] = {}
    for v in range(1, len(names)):
        rows = []
        for li, (_, load) in enumerate(loads):
            pairs = [(trials.get((0, li, r)), trials.get((v, li, r))) for r in range(rounds)]
            pairs = [(a, b) for a, b in pairs if a is not None and b is not None and usable(a) and usable(b)]
            for what, read, unit in (("stage", stage_ns, "ns/pkt"), ("drops", drop_rates, "ratio")):
                per = [(read(a), read(b)) for a, b in pairs]
                keys = sorted({k for x, y in per for k in (*x, *y)})
                for k in keys:
                    a_vals = [x.get(k, 0.0) if x else None for x, _ in per]
                    b_vals = [y.get(k, 0.0) if y else None for _, y in per]
                    base = [x for x in a_vals if x is not None]
                    margin = max(0.02 * (sum(base) / len(base)), 1e-12) if base else 1e-12
                    rows.append(paired_difference(f"{what} {k}@{format_rate(load)}", a_vals, b_vals, better="lower",
                                                  scale="difference", unit=unit, confidence=confidence,
                                                  margin=margin))
        if rows:
            out[names[v]] = rows
    return out


def stop_rule(max_rounds: int, min_rounds: int, decide_on: Sequence[str], confidence: float) -> tuple[StopRule, float]:
    """The looks of a sequential comparison and the confidence each look uses."""
    looks = look_schedule(max_rounds, min_rounds, confidence=confidence)
    return StopRule(tuple(decide_on), tuple(looks)), per_look_confidence(confidence, len(looks))


def stored_difference(metric: str, unit: str, better: Better, scale: Scale, a: list[float | None],
                      b: list[float | None], confidence: float, margin: float) -> PairedDifference:
    """Stored results measured apart: Welch's t (analysis.paired.unpaired_difference)."""
    return unpaired_difference(metric, a, b, better=better, scale=scale, unit=unit, confidence=confidence,
                               margin=margin)


# ---- stored results: a baseline directory against candidates --------------

class _CampaignRow(_Read):
    campaign_id: str
    spec_json: str | None = None


class _Method(_Read):
    kind: str = "sweep"


class _Testbed(_Read):
    sut: Any = ""


class _StoredSpec(_Read):
    """What a stored comparison reads of a campaign's spec (as it was stored)."""

    method: _Method = _Method()
    testbed: _Testbed = _Testbed()


class StoredCell(_Read):
    cell_id: int
    knobs: dict[str, Any]  # knob -> value


class _Rtt(_Read):
    median_ns: Number | None = None
    p99_ns: Number | None = None


class _LatencyRun(_Read):
    cell_id: int
    rtt: _Rtt | None = None


@dataclass(frozen=True)
class StoredCampaign:
    """The campaign of a results directory a stored comparison reads."""

    path: str
    campaign_id: str
    kind: str  # sweep | search | latency | compare
    sut: Any  # its spec's testbed.sut
    cells: list[StoredCell]


KIND_WORDS = {"sweep": "a load sweep", "search": "an NDR/PDR search", "latency": "a latency campaign",
              "compare": "a paired comparison", "soak": "a soak"}
LOAD_MATCH_PPS = 0.5


def latest_campaign(store, path: str, campaign_id: str | None = None) -> StoredCampaign:
    """The newest campaign of a results directory (or ``campaign_id``)."""
    from softnet.errors import InputError

    rows = [_CampaignRow.model_validate(r) for r in store.campaigns()]
    if not rows:
        raise InputError(path, "holds no campaign: nothing to compare")
    if campaign_id is not None:
        rows = [r for r in rows if r.campaign_id == campaign_id]
        if not rows:
            raise InputError(path, f"has no campaign {campaign_id}")
    row = rows[-1]
    spec = _StoredSpec.model_validate_json(row.spec_json)
    return StoredCampaign(path, row.campaign_id, spec.method.kind, spec.testbed.sut,
                          [StoredCell.model_validate(c) for c in store.cells(row.campaign_id)])


def config_key(knobs: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(knobs.items())) or "-"


def common_cells(a: StoredCampaign, b: StoredCampaign) -> list[tuple[StoredCell, StoredCell]]:
    """Cells of ``a`` and ``b`` with the same knobs (the same configuration);
    an InputError naming both sides' configurations when none is shared."""
    from softnet.errors import InputError

    by_key = {config_key(c.knobs): c for c in b.cells}
    pairs = [(c, by_key[config_key(c.knobs)]) for c in a.cells if config_key(c.knobs) in by_key]
    if not pairs:
        left = "; ".join(sorted({config_key(c.knobs) for c in a.cells}))
        right = "; ".join(sorted(by_key))
        raise InputError(b.path, f"no configuration in common with {a.path}: its cells are [{right}], the "
                         f"baseline's [{left}] (cells match by their matrix knobs)")
    return pairs


def _by_load(trials: list[ComparedTrial]) -> dict[float, list[ComparedTrial]]:
    out: dict[float, list[ComparedTrial]] = {}
    for t in trials:
        load = t.intended_rate_pps
        key = next((k for k in out if abs(k - load) < LOAD_MATCH_PPS), load)
        out.setdefault(key, []).append(t)
    return out


def sweep_differences(prefix: str, a_trials: list, b_trials: list, confidence: float, margin: float,
                      loss_margin: float) -> list[PairedDifference]:
    """Per load both swept: cpu, loss and latency; the throughput at the
    highest common load as capacity. Trials: results as stored, or parsed.
    Every row is reported (nothing decides when to stop): each is read at
    Bonferroni's share of the error rate, 1 - (1 - confidence) / rows, so
    the table as a whole holds no false verdict at more than that rate."""
    la, lb = _by_load([ComparedTrial.of(t) for t in a_trials]), _by_load([ComparedTrial.of(t) for t in b_trials])
    common = sorted(k for k in la if any(abs(k - j) < LOAD_MATCH_PPS for j in lb))
    if not common:
        return []
    lb = {k: next(v for j, v in lb.items() if abs(k - j) < LOAD_MATCH_PPS) for k in common}
    top = common[-1]
    set_apart = loss_set_apart([t for k in common for t in (*la[k], *lb[k])])
    rows = [(CAPACITY, top)] + [(m, load) for load in common for kind in ("cpu", "loss", "latency")
                                for m in METRICS[kind] if m.name != "loss_all" or set_apart]
    sides = [(m, load, [value(t, m) for t in la[load]], [value(t, m) for t in lb[load]]) for m, load in rows]
    measured = [s for s in sides if any(v is not None for v in s[2]) and any(v is not None for v in s[3])]
    share = 1 - (1 - confidence) / max(1, len(measured))
    out = []
    for m, load, a, b in measured:
        d = stored_difference(f"{prefix}{metric_label(m, load)}", m.unit, m.better, m.scale, a, b, share,
                              margin if m.scale == "ratio" else loss_margin)
        out.append(replace(d, kind=m.kind, load_pps=None if m.kind == "capacity" else load))
    return [d for d in out if d.n_pairs]


def search_differences(prefix: str, a_rows: list[SearchGoalRow], b_rows: list[SearchGoalRow], confidence: float,
                       margin: float) -> list[PairedDifference]:
    """Each goal's conditional throughput (RFC 9971) over the repeated searches (higher is better)."""
    out = []
    for goal in sorted({r.goal for r in a_rows} & {r.goal for r in b_rows}):
        a = [r.throughput_pps for r in a_rows if r.goal == goal]
        b = [r.throughput_pps for r in b_rows if r.goal == goal]
        out.append(stored_difference(f"{prefix}{goal}", "pps", "higher", "ratio", a, b, confidence, margin))
    return out


def latency_differences(prefix: str, a_runs: list[_LatencyRun], b_runs: list[_LatencyRun], confidence: float,
                        margin: float) -> list[PairedDifference]:
    """The AF_XDP lab's round-trip median and 99th percentile over its runs."""
    rtts = [[r.rtt or _Rtt() for r in runs] for runs in (a_runs, b_runs)]
    return [stored_difference(f"{prefix}rtt_median", "ns", "lower", "ratio", *[[x.median_ns for x in side]
                                                                              for side in rtts], confidence, margin),
            stored_difference(f"{prefix}rtt_p99", "ns", "lower", "ratio", *[[x.p99_ns for x in side]
                                                                           for side in rtts], confidence, margin)]


def _searches(store, campaign_id: str, cell_id: int) -> list[SearchGoalRow]:
    rows = [SearchGoalRow.model_validate(r, from_attributes=True) for r in store.searches(campaign_id)]
    return [r for r in rows if r.cell_id == cell_id]


def _latency_runs(store, campaign_id: str, cell_id: int) -> list[_LatencyRun]:
    rows = [_LatencyRun.model_validate(r) for r in store.latency_runs(campaign_id)]
    return [r for r in rows if r.cell_id == cell_id]


def soak_differences(prefix: str, a, b, confidence: float, margin: float) -> list[PairedDifference]:
    """Two soaks' critical loads (results.soak.SoakSummary): each posterior
    taken as normal on the log of the load, its spread from its interval,
    the difference's interval from both. Measured apart: the host's drift
    between the soaks is in it."""
    from scipy import stats

    if a is None or b is None or a.estimate is None or b.estimate is None:
        return []
    ea, eb = a.estimate, b.estimate

    def log_se(e) -> float:
        z = float(stats.norm.ppf(0.5 + e.confidence / 2))
        return (math.log(e.upper_pps) - math.log(e.lower_pps)) / (2 * z) if e.lower_pps > 0 else math.inf
    diff = math.log(eb.median_pps) - math.log(ea.median_pps)
    se = math.hypot(log_se(ea), log_se(eb))

    def interval(conf: float) -> tuple[float, float]:
        half = float(stats.norm.ppf(0.5 + conf / 2)) * se
        return math.expm1(diff - half), math.expm1(diff + half)
    ci, tost = interval(confidence), interval(tost_confidence(confidence))
    verdict, significant = decide(ci, margin, "higher", tost)
    p = float(2 * stats.norm.sf(abs(diff) / se)) if se > 0 else None
    return [PairedDifference(metric=f"{prefix}soak critical load at loss {ea.target_loss_ratio:g}", unit="pps",
                             better="higher", scale="ratio", n_pairs=min(ea.trials, eb.trials),
                             baseline_mean=ea.median_pps, candidate_mean=eb.median_pps, estimate=math.expm1(diff),
                             ci=ci, confidence=confidence, margin=margin, p_value=p, verdict=verdict,
                             significant=significant, kind="soak", tost_ci=tost)]


def compare_stored(paths: Sequence[str], confidence: float = 0.95, margin: float = 0.02,
                   loss_margin: float = 0.001, campaign_ids: Sequence[str] = ()) -> ComparisonSummary:
    """The first results directory (its newest campaign, or the first of
    ``campaign_ids``, which name one per path in order; a lab's Parquet
    export may be given twice) against each of the
    others, configuration by configuration and load by load. The groups were
    measured apart, so the differences are unpaired (Welch) and any drift of
    the host between the runs is in them."""
    from contextlib import ExitStack

    from softnet.errors import InputError
    from softnet.results.readers import open_results, trial_results

    if len(paths) < 2:
        raise InputError("PATHS", "give a baseline results directory and at least one candidate")
    if campaign_ids and len(campaign_ids) != len(paths):
        raise InputError("--campaign", f"give one per results directory ({len(paths)}), in their order; "
                         f"got {len(campaign_ids)}")
    with ExitStack() as stack:
        stores = [stack.enter_context(open_results(p)) for p in paths]
        ids = campaign_ids or [None] * len(paths)  # None: each path's newest
        camps = [latest_campaign(s, str(p), cid) for s, p, cid in zip(stores, paths, ids)]
        base = camps[0]
        for c in camps[1:]:
            if c.kind != base.kind:
                raise InputError(c.path, f"holds {KIND_WORDS.get(c.kind, c.kind)} ({c.campaign_id}), the baseline "
                                 f"{base.path} {KIND_WORDS.get(base.kind, base.kind)} ({base.campaign_id}): "
                                 "compare results of one method")
        if base.kind == "compare":
            raise InputError(base.path, "holds a paired comparison: show it with softnet compare "
                             f"{base.path} alone (its variants were measured interleaved)")
        names = [f"{p} ({c.campaign_id})" for p, c in zip(paths, camps)]
        out = ComparisonSummary(baseline=names[0], candidates=names[1:], paired=False, stop_reason="stored",
                                labels={n: c.sut for n, c in zip(names, camps)})
        for i, cand in enumerate(camps[1:], start=1):
            diffs: list[PairedDifference] = []
            pairs = common_cells(base, cand)
            for ca, cb in pairs:
                prefix = f"{config_key(ca.knobs)} " if len(pairs) > 1 else ""
                first = len(diffs)
                if base.kind == "sweep":
                    diffs += sweep_differences(prefix, trial_results(stores[0], base.campaign_id, ca.cell_id),
                                               trial_results(stores[i], cand.campaign_id, cb.cell_id),
                                               confidence, margin, loss_margin)
                elif base.kind == "soak":
                    diffs += soak_differences(prefix, stores[0].soaks(base.campaign_id).get(ca.cell_id),
                                              stores[i].soaks(cand.campaign_id).get(cb.cell_id), confidence, margin)
                elif base.kind == "search":
                    diffs += search_differences(prefix, _searches(stores[0], base.campaign_id, ca.cell_id),
                                                _searches(stores[i], cand.campaign_id, cb.cell_id), confidence, margin)
                else:
                    diffs += latency_differences(prefix, _latency_runs(stores[0], base.campaign_id, ca.cell_id),
                                                 _latency_runs(stores[i], cand.campaign_id, cb.cell_id),
                                                 confidence, margin)
                diffs[first:] = [replace(d, configuration=prefix.strip()) for d in diffs[first:]]
            if not diffs:
                raise InputError(cand.path, f"shares configurations with {base.path} but no load measured in both")
            out.differences[names[i]] = diffs
        for i, (store, camp) in enumerate(zip(stores, camps)):
            out.provenance[names[i]] = where_measured(ComparedTrial.of(t) for c in camp.cells[:1]
                                                      for t in trial_results(store, camp.campaign_id, c.cell_id))
        out.rounds = min(d.n_pairs for ds in out.differences.values() for d in ds)
        return out


def stored_paired(path: str, campaign_id: str | None = None) -> ComparisonSummary:
    """A paired comparison stored in one results directory: its result when
    it finished, else what its complete rounds say so far."""
    from softnet.errors import InputError
    from softnet.results.readers import open_results

    with open_results(path) as store:
        camp = latest_campaign(store, path, campaign_id) if campaign_id else None
        if camp is None:
            rows = [_CampaignRow.model_validate(c) for c in store.campaigns()]
            camps = [c for c in rows if '"kind": "compare"' in (c.spec_json or "")]
            if not camps:
                raise InputError(path, "holds no paired comparison; give two results directories to compare "
                                 "them (a baseline, then candidates)")
            camp = latest_campaign(store, path, camps[-1].campaign_id)
        if camp.kind != "compare":
            raise InputError(path, f"campaign {camp.campaign_id} is {KIND_WORDS.get(camp.kind, camp.kind)}, "
                             "not a paired comparison")
        done = store.comparison(camp.campaign_id, finished_only=False)
        if done is None:
            raise InputError(path, f"paired comparison {camp.campaign_id} has no complete round yet")
        return done
