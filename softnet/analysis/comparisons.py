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

from dataclasses import dataclass
from typing import Callable, Sequence

from softnet.analysis.data_paths import cpu_ns_per_packet
from softnet.analysis.paired import (StopRule, look_schedule, paired_difference, per_look_confidence,
                                     unpaired_difference)
from softnet.results.comparison import Better, ComparisonSummary, PairedDifference, Scale
from softnet.units import format_rate

# Flags that leave a trial's figures usable for a comparison: the host's
# doing, the same for both sides of a pair, and set apart by the loss metric.
TOLERATED_FLAGS = {"host_interference"}


@dataclass(frozen=True)
class MetricDef:
    """One figure of a trial: how to read it, which way is better, and its scale."""

    kind: str  # capacity | cpu | loss | latency
    name: str  # as shown: capacity, cpu, loss, loss_all, latency_p50, latency_p99
    unit: str
    better: Better
    scale: Scale
    read: Callable[[dict], float | None]


def _capacity(t: dict) -> float | None:
    span, rx = t.get("send_span_s") or t.get("duration_s"), t.get("received_pkts")
    return rx / span if span and rx else None


def _cpu(t: dict) -> float | None:
    c = t.get("sut_thread_cpu") or {}
    return c.get("ns_per_pkt") if c.get("ns_per_pkt") else cpu_ns_per_packet(t)


METRICS: dict[str, list[MetricDef]] = {
    "capacity": [MetricDef("capacity", "capacity", "pps", "higher", "ratio", _capacity)],
    "cpu": [MetricDef("cpu", "cpu", "ns/pkt", "lower", "ratio", _cpu)],
    "loss": [MetricDef("loss", "loss", "ratio", "lower", "difference", lambda t: t.get("sut_loss_ratio")
                       if t.get("sut_loss_ratio") is not None else t.get("loss_ratio")),
             MetricDef("loss", "loss_all", "ratio", "lower", "difference", lambda t: t.get("loss_ratio"))],
    "latency": [MetricDef("latency", "latency_p50", "ns", "lower", "ratio", lambda t: t.get("latency_p50_ns")),
                MetricDef("latency", "latency_p99", "ns", "lower", "ratio", lambda t: t.get("latency_p99_ns"))],
}


PROVENANCE_KEYS = ("kernel", "cpu_model", "softnet_version", "hostname")


def where_measured(trials) -> dict:
    """The provenance that tells two sides apart, from the first trial that has one."""
    for t in trials:
        prov = (t or {}).get("provenance") or {}
        if prov:
            return {k: prov.get(k) for k in PROVENANCE_KEYS}
    return {}


def usable(trial: dict) -> bool:
    """A trial whose figures a comparison may use (valid, or flagged only
    for what the host did)."""
    return not set(trial.get("flags") or ()) - TOLERATED_FLAGS


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


def value(trial: dict | None, m: MetricDef) -> float | None:
    return m.read(trial) if trial is not None and usable(trial) else None


def paired_summary(names: list[str], labels: dict[str, str], trials: dict[tuple[int, int, int], dict],
                   loads: Sequence[tuple[str, float]], kinds: Sequence[str], rounds: int, confidence: float,
                   margin: float, loss_margin: float, stop_reason: str = "",
                   searches: dict[tuple[int, int], dict[str, float | None]] | None = None) -> ComparisonSummary:
    """Each candidate (variant 1..) against the baseline (variant 0), over
    ``rounds`` complete rounds. ``trials``: (variant, load index, round) ->
    result; ``searches``: (variant, round) -> {goal: lower bound pps}."""
    out = ComparisonSummary(baseline=names[0], candidates=names[1:], rounds=rounds, stop_reason=stop_reason,
                            labels=labels)
    for v in range(1, len(names)):
        diffs = []
        for li, m in metric_points(kinds, loads):
            a = [value(trials.get((0, li, r)), m) for r in range(rounds)]
            b = [value(trials.get((v, li, r)), m) for r in range(rounds)]
            diffs.append(paired_difference(metric_label(m, loads[li][1]), a, b, better=m.better, scale=m.scale,
                                           unit=m.unit, confidence=confidence, kind=m.kind,
                                           margin=margin if m.scale == "ratio" else loss_margin))
        if searches is not None and "search" in kinds:
            goals = sorted({g for (_, r), gs in searches.items() if r < rounds for g in gs})
            for g in goals:
                a = [searches.get((0, r), {}).get(g) for r in range(rounds)]
                b = [searches.get((v, r), {}).get(g) for r in range(rounds)]
                diffs.append(paired_difference(f"search {g}", a, b, better="higher", scale="ratio", unit="pps",
                                               confidence=confidence, margin=margin, kind="search"))
        out.differences[names[v]] = diffs
    out.explain = explain(names, trials, loads, rounds, confidence)
    for (v, _, r), t in trials.items():
        if r < rounds and t is not None and not usable(t):
            counts = out.unusable.setdefault(names[v], {})
            for f in set(t.get("flags") or ()) - TOLERATED_FLAGS:
                counts[f] = counts.get(f, 0) + 1
    out.provenance = {n: where_measured(t for (v, _, _), t in sorted(trials.items(), key=lambda kv: kv[0][2])
                                        if v == i) for i, n in enumerate(names)}
    return out


def stage_ns(trial: dict) -> dict[str, float]:
    """The eBPF profile's stages on the SUT's CPUs, ns per forwarded packet
    (the receive-path study's stages; empty when the trial was not profiled)."""
    stages = (trial.get("profile") or {}).get("stages") or {}
    cpus = ((trial.get("placement") or {}).get("requested") or {}).get("sut_cpus") or []
    out: dict[str, float] = {}
    for cpu in cpus:
        for row in (stages.get(str(cpu)) or stages.get(cpu) or {}).get("ebpf_profile") or []:
            if row.get("ns_per_packet") is not None:
                out[row["stage"]] = out.get(row["stage"], 0.0) + row["ns_per_packet"]
    return out


def drop_rates(trial: dict) -> dict[str, float]:
    """Packets dropped per packet sent, by the kernel's drop reason (profiled trials)."""
    prof, sent = trial.get("profile") or {}, trial.get("sent_pkts") or 0
    out: dict[str, float] = {}
    if not sent:
        return out
    for row in prof.get("drops") or []:
        out[row["reason"]] = out.get(row["reason"], 0.0) + row["estimated_skbs"] / sent
    return out


def explain(names: list[str], trials: dict[tuple[int, int, int], dict], loads: Sequence[tuple[str, float]],
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

@dataclass(frozen=True)
class StoredCampaign:
    """The campaign of a results directory a stored comparison reads."""

    path: str
    campaign_id: str
    kind: str  # sweep | search | latency | compare
    spec: dict
    cells: list[dict]  # store.cells rows: cell_id, knobs, spec


KIND_WORDS = {"sweep": "a load sweep", "search": "an NDR/PDR search", "latency": "a latency campaign",
              "compare": "a paired comparison"}
LOAD_MATCH_PPS = 0.5


def latest_campaign(store, path: str, campaign_id: str | None = None) -> StoredCampaign:
    """The newest campaign of a results directory (or ``campaign_id``)."""
    from softnet.errors import InputError

    rows = store.campaigns()
    if not rows:
        raise InputError(path, "holds no campaign: nothing to compare")
    if campaign_id is not None:
        rows = [r for r in rows if r["campaign_id"] == campaign_id]
        if not rows:
            raise InputError(path, f"has no campaign {campaign_id}")
    row = rows[-1]
    import json

    spec = json.loads(row["spec_json"])
    return StoredCampaign(path, row["campaign_id"], spec.get("method", {}).get("kind", "sweep"), spec,
                          store.cells(row["campaign_id"]))


def config_key(knobs: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(knobs.items())) or "-"


def common_cells(a: StoredCampaign, b: StoredCampaign) -> list[tuple[dict, dict]]:
    """Cells of ``a`` and ``b`` with the same knobs (the same configuration);
    an InputError naming both sides' configurations when none is shared."""
    from softnet.errors import InputError

    by_key = {config_key(c["knobs"]): c for c in b.cells}
    pairs = [(c, by_key[config_key(c["knobs"])]) for c in a.cells if config_key(c["knobs"]) in by_key]
    if not pairs:
        left = "; ".join(sorted({config_key(c["knobs"]) for c in a.cells}))
        right = "; ".join(sorted(by_key))
        raise InputError(b.path, f"no configuration in common with {a.path}: its cells are [{right}], the "
                         f"baseline's [{left}] (cells match by their matrix knobs)")
    return pairs


def _by_load(trials: list[dict]) -> dict[float, list[dict]]:
    out: dict[float, list[dict]] = {}
    for t in trials:
        load = t["intended_rate_pps"]
        key = next((k for k in out if abs(k - load) < LOAD_MATCH_PPS), load)
        out.setdefault(key, []).append(t)
    return out


def sweep_differences(prefix: str, a_trials: list[dict], b_trials: list[dict], confidence: float, margin: float,
                      loss_margin: float) -> list[PairedDifference]:
    """Per load both swept: cpu, loss and latency; the throughput at the
    highest common load as capacity."""
    la, lb = _by_load(a_trials), _by_load(b_trials)
    common = sorted(k for k in la if any(abs(k - j) < LOAD_MATCH_PPS for j in lb))
    if not common:
        return []
    lb = {k: next(v for j, v in lb.items() if abs(k - j) < LOAD_MATCH_PPS) for k in common}
    out = []

    def diff(m: MetricDef, load: float, label: str) -> None:
        out.append(stored_difference(f"{prefix}{label}", m.unit, m.better, m.scale,
                                     [value(t, m) for t in la[load]], [value(t, m) for t in lb[load]], confidence,
                                     margin if m.scale == "ratio" else loss_margin))

    top = common[-1]
    diff(METRICS["capacity"][0], top, f"throughput@{format_rate(top)}")
    for load in common:
        for kind in ("cpu", "loss", "latency"):
            for m in METRICS[kind]:
                diff(m, load, metric_label(m, load))
    return [d for d in out if d.n_pairs]


def search_differences(prefix: str, a_rows: list[dict], b_rows: list[dict], confidence: float,
                       margin: float) -> list[PairedDifference]:
    """Each goal's lower bound over the repeated searches (higher is better)."""
    out = []
    for goal in sorted({r["goal"] for r in a_rows} & {r["goal"] for r in b_rows}):
        a = [r["lower_bound_pps"] for r in a_rows if r["goal"] == goal]
        b = [r["lower_bound_pps"] for r in b_rows if r["goal"] == goal]
        out.append(stored_difference(f"{prefix}{goal}", "pps", "higher", "ratio", a, b, confidence, margin))
    return out


def latency_differences(prefix: str, a_runs: list[dict], b_runs: list[dict], confidence: float,
                        margin: float) -> list[PairedDifference]:
    """The AF_XDP lab's round-trip median and 99th percentile over its runs."""
    out = []
    for key, name in (("median_ns", "rtt_median"), ("p99_ns", "rtt_p99")):
        out.append(stored_difference(f"{prefix}{name}", "ns", "lower", "ratio",
                                     [(r.get("rtt") or {}).get(key) for r in a_runs],
                                     [(r.get("rtt") or {}).get(key) for r in b_runs], confidence, margin))
    return out


def compare_stored(paths: Sequence[str], confidence: float = 0.95, margin: float = 0.02,
                   loss_margin: float = 0.001) -> ComparisonSummary:
    """The first results directory (its newest campaign) against each of the
    others, configuration by configuration and load by load. The groups were
    measured apart, so the differences are unpaired (Welch) and any drift of
    the host between the runs is in them."""
    from contextlib import ExitStack

    from softnet.errors import InputError
    from softnet.results.readers import open_results, trial_results

    if len(paths) < 2:
        raise InputError("PATHS", "give a baseline results directory and at least one candidate")
    with ExitStack() as stack:
        stores = [stack.enter_context(open_results(p)) for p in paths]
        camps = [latest_campaign(s, str(p)) for s, p in zip(stores, paths)]
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
                                labels={n: c.spec.get("testbed", {}).get("sut", "") for n, c in zip(names, camps)})
        for i, cand in enumerate(camps[1:], start=1):
            diffs: list[PairedDifference] = []
            pairs = common_cells(base, cand)
            for ca, cb in pairs:
                prefix = f"{config_key(ca['knobs'])} " if len(pairs) > 1 else ""
                if base.kind == "sweep":
                    diffs += sweep_differences(prefix, trial_results(stores[0], base.campaign_id, ca["cell_id"]),
                                               trial_results(stores[i], cand.campaign_id, cb["cell_id"]),
                                               confidence, margin, loss_margin)
                elif base.kind == "search":
                    diffs += search_differences(
                        prefix, [r for r in stores[0].searches(base.campaign_id) if r["cell_id"] == ca["cell_id"]],
                        [r for r in stores[i].searches(cand.campaign_id) if r["cell_id"] == cb["cell_id"]],
                        confidence, margin)
                else:
                    diffs += latency_differences(
                        prefix, [r for r in stores[0].latency_runs(base.campaign_id) if r["cell_id"] == ca["cell_id"]],
                        [r for r in stores[i].latency_runs(cand.campaign_id) if r["cell_id"] == cb["cell_id"]],
                        confidence, margin)
            if not diffs:
                raise InputError(cand.path, f"shares configurations with {base.path} but no load measured in both")
            out.differences[names[i]] = diffs
        for i, (store, camp) in enumerate(zip(stores, camps)):
            out.provenance[names[i]] = where_measured(t for c in camp.cells[:1]
                                                      for t in trial_results(store, camp.campaign_id, c["cell_id"]))
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
            camps = [c for c in store.campaigns() if '"kind": "compare"' in (c.get("spec_json") or "")]
            if not camps:
                raise InputError(path, "holds no paired comparison; give two results directories to compare "
                                 "them (a baseline, then candidates)")
            camp = latest_campaign(store, path, camps[-1]["campaign_id"])
        if camp.kind != "compare":
            raise InputError(path, f"campaign {camp.campaign_id} is {KIND_WORDS.get(camp.kind, camp.kind)}, "
                             "not a paired comparison")
        done = store.comparison(camp.campaign_id, finished_only=False)
        if done is None:
            raise InputError(path, f"paired comparison {camp.campaign_id} has no complete round yet")
        return done
