"""Clusters of AF_XDP configurations and what explains them (shared/papers/
af-xdp-delays.md sec. VI-1, Tables I and II), over ``latency_stats.ConfigStats``.

* ``cluster_configurations``: k-means on the standardised (mean, median, std,
  Q1, Q3) of each configuration (the study left min and max out: with them
  k-means did not separate good from bad); k by silhouette over 2..8 (capped
  at n-1) or fixed (the study: 6 on mlx5, 4 on i40e). Outliers (stalled,
  worse than the kernel, no RTT) are left out as the study did (label -1).
  Clusters are numbered by mean latency, 0 the fastest; each has the mean and
  std of its configurations' means and the knob values always present.
* ``cluster_stability``: adjusted Rand index between two clusterings of the
  same campaign, ``stable`` at >= 0.8 (the campaign's acceptance bar), else ``unstable``.
* ``explain_clusters``: a depth-3 decision tree on the knobs, as rules.
* ``knob_effects``: per knob and value, the change of median RTT against the
  knob's reference value, over pairs of configurations that differ in that
  knob only (a full factorial has them), else between the two groups; with a
  seeded bootstrap CI.
* ``study_findings``: the study's three findings, each held / not held / not
  testable (``Finding``; the rules are in its docstring).

Every random step is seeded (``seed``), so a result repeats.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .latency_stats import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, ConfigStats, knob_key

FEATURES = ("mean_ns", "median_ns", "std_ns", "q1_ns", "q3_ns")
STUDY_K = {"mlx5": 6, "i40e": 4}
K_RANGE = (2, 8)
STABLE_ARI = 0.8
EXCLUDE_FLAGS = ("stalled", "worse_than_kernel", "no_rtt")
# Finding (a): a knob "barely matters" when changing it moves the median RTT by
# at most 10% (median over matched configuration pairs) - well inside the
# run-to-run spread of a VM, and what "no significant impact" can mean here.
NEGLIGIBLE_EFFECT = 0.10
UNSUPPORTED = "unsupported"  # a knob value the device refused: not a level to compare
TREE_DEPTH = 3
HELD, NOT_HELD, NOT_TESTABLE = "held", "not held", "not testable"


@dataclass(frozen=True)
class Cluster:
    index: int                  # 0 = lowest mean latency
    members: tuple[int, ...]    # indices into the configurations given
    mean_ns: float              # mean of the members' mean RTTs
    std_ns: float               # std (ddof=1) of the members' mean RTTs; NaN for one member
    always_present: dict        # knob -> the value every member has (knobs that vary in the campaign)

    def to_dict(self, configs: Sequence[ConfigStats] | None = None) -> dict:
        labels = {} if configs is None else {"member_labels": [configs[i].label for i in self.members]}
        return {"cluster": self.index, "n": len(self.members), "mean_ns": _num(self.mean_ns),
                "std_ns": _num(self.std_ns), "always_present": dict(self.always_present),
                "members": list(self.members), **labels}


@dataclass(frozen=True, eq=False)
class Clustering:
    k: int
    chosen_by: str              # "silhouette" | "fixed"
    labels: np.ndarray          # per configuration given; -1 = left out
    clusters: tuple[Cluster, ...]
    silhouette: dict            # k -> silhouette score, for each k tried
    excluded: dict              # configuration index -> the flags that left it out
    constant_knobs: dict        # knob -> its one value over the clustered configurations
    seed: int

    def to_dict(self, configs: Sequence[ConfigStats] | None = None) -> dict:
        return {"k": self.k, "chosen_by": self.chosen_by, "labels": [int(x) for x in self.labels],
                "clusters": [c.to_dict(configs) for c in self.clusters],
                "silhouette": {str(k): _num(v) for k, v in self.silhouette.items()},
                "excluded": {str(i): list(f) for i, f in self.excluded.items()},
                "constant_knobs": dict(self.constant_knobs), "seed": self.seed}


@dataclass(frozen=True)
class Stability:
    ari: float
    verdict: str                # "stable" | "unstable"
    n_common: int               # configurations clustered in both

    def to_dict(self) -> dict:
        return {"ari": _num(self.ari), "verdict": self.verdict, "n_common": self.n_common,
                "threshold": STABLE_ARI}


@dataclass(frozen=True)
class KnobRules:
    rules: tuple[str, ...]      # one per leaf: "busy_poll = true and need_wakeup = false -> cluster 0 (8 configs, 100%)"
    text: str                   # sklearn's export_text of the same tree
    accuracy: float             # share of the clustered configurations the tree puts in their cluster
    features: tuple[str, ...]


@dataclass(frozen=True)
class KnobEffect:
    knob: str
    reference: object           # the value compared against
    value: object
    method: str                 # "paired" (configurations differing in this knob only) | "groups"
    n: int                      # pairs, or the smaller group's size
    diff_ns: float              # median RTT with ``value`` minus with ``reference``
    ci_low_ns: float
    ci_high_ns: float
    relative: float             # diff as a fraction of the reference's median RTT
    rel_ci_low: float
    rel_ci_high: float

    def to_dict(self) -> dict:
        return {k: (_num(v) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Finding:
    key: str
    claim: str
    verdict: str                # HELD | NOT_HELD | NOT_TESTABLE
    detail: str
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"key": self.key, "claim": self.claim, "verdict": self.verdict, "detail": self.detail,
                "evidence": self.evidence}


@dataclass(frozen=True)
class StudyKnobs:
    """The knob names the findings look for (the campaign's spec names)."""

    cstate: str = "cstate_limit"
    coalescing: str = "coalescing"
    busy_poll: str = "busy_poll"
    need_wakeup: str = "need_wakeup"
    poll: tuple[str, ...] = ("poll_sender", "poll_forwarder", "poll_receiver")
    poll_receiver: str = "poll_receiver"


def _num(x):
    return float(x) if x is not None and math.isfinite(x) else None


def is_on(value) -> bool:
    """A knob value read as on/off: True, 'on', 'true', 'yes', 'enabled', a non-zero number."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "on", "yes", "enabled")
    return bool(value) if value is not None else False


def _fmt(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# ---- k-means -------------------------------------------------------------------

def feature_matrix(configs: Sequence[ConfigStats]) -> np.ndarray:
    """(n, 5): each configuration's run-averaged FEATURES (ns)."""
    return np.array([[c.averaged[f] for f in FEATURES] for c in configs], dtype=float).reshape(-1, len(FEATURES))


# sklearn is imported where it is used: it costs a second at start-up, and
# every page of `softnet serve` and every report import this module.
def _kmeans(z: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans

    return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(z)


def choose_k(z: np.ndarray, k_range: tuple[int, int] = K_RANGE, seed: int = 0) -> tuple[int, dict]:
    """The k of best silhouette over k_range (inclusive, capped at n-1 and at the
    number of distinct rows); ties go to the smaller k. -> (k, {k: score})."""
    from sklearn.metrics import silhouette_score

    n_distinct = np.unique(z, axis=0).shape[0]
    ks = range(k_range[0], min(k_range[1], z.shape[0] - 1, n_distinct) + 1)
    if not ks:
        raise ValueError(f"{z.shape[0]} configurations ({n_distinct} distinct): too few to choose k by "
                         f"silhouette (needs at least 3 distinct); give k")
    scores = {k: float(silhouette_score(z, _kmeans(z, k, seed))) for k in ks}
    best = max(scores, key=lambda k: (scores[k], -k))
    return best, scores


def cluster_configurations(configs: Sequence[ConfigStats], k: int | None = None, *,
                           k_range: tuple[int, int] = K_RANGE, exclude: Sequence[str] = EXCLUDE_FLAGS,
                           seed: int = 0) -> Clustering:
    """k-means of the configurations (module docstring); ``k`` None: by silhouette."""
    from sklearn.metrics import silhouette_score
    from sklearn.preprocessing import StandardScaler

    configs = list(configs)
    x_all = feature_matrix(configs)
    excluded = {}
    for i, c in enumerate(configs):
        why = tuple(f for f in c.flags if f in exclude)
        if not why and not np.isfinite(x_all[i]).all():
            why = ("incomplete_stats",)
        if why:
            excluded[i] = why
    idx = np.array([i for i in range(len(configs)) if i not in excluded], dtype=int)
    if idx.size == 0:
        raise ValueError("no configuration left to cluster (all are outliers or lack statistics)")
    z = StandardScaler().fit_transform(x_all[idx])
    if k is None:
        k, scores = choose_k(z, k_range, seed)
        chosen_by = "silhouette"
    else:
        if not 1 <= k <= idx.size:
            raise ValueError(f"k = {k}: must be between 1 and the {idx.size} configurations clustered")
        chosen_by = "fixed"
    raw = _kmeans(z, k, seed)
    if chosen_by == "fixed":
        scores = {k: float(silhouette_score(z, raw)) if 2 <= len(set(raw)) < idx.size else math.nan}
    means = x_all[idx, 0]
    order = sorted(set(raw), key=lambda c: means[raw == c].mean())  # cluster 0 = fastest
    rank = {c: r for r, c in enumerate(order)}
    labels = np.full(len(configs), -1, dtype=int)
    labels[idx] = [rank[c] for c in raw]
    constant = _constant_knobs([configs[i].knobs for i in idx])
    clusters = []
    for r in range(len(order)):
        members = tuple(int(i) for i in np.flatnonzero(labels == r))
        m = x_all[list(members), 0]
        clusters.append(Cluster(r, members, float(m.mean()), float(m.std(ddof=1)) if m.size > 1 else math.nan,
                                _always_present([configs[i].knobs for i in members], constant)))
    return Clustering(len(order), chosen_by, labels, tuple(clusters), scores, excluded, constant, seed)


def _constant_knobs(knob_dicts: Sequence[Mapping]) -> dict:
    if not knob_dicts:
        return {}
    first = knob_dicts[0]
    return {k: v for k, v in first.items() if all(k in d and d[k] == v for d in knob_dicts)}


def _always_present(knob_dicts: Sequence[Mapping], constant: Mapping) -> dict:
    return {k: v for k, v in _constant_knobs(knob_dicts).items() if k not in constant}


# ---- stability -----------------------------------------------------------------

def cluster_stability(a: Clustering, configs_a: Sequence[ConfigStats],
                      b: Clustering, configs_b: Sequence[ConfigStats]) -> Stability:
    """ARI of two clusterings of the same campaign's configurations, matched by
    knobs, over those clustered in both (an outlier in either is left out)."""
    from sklearn.metrics import adjusted_rand_score

    where_b = {knob_key(c.knobs): i for i, c in enumerate(configs_b)}
    pairs = [(a.labels[i], b.labels[where_b[knob_key(c.knobs)]]) for i, c in enumerate(configs_a)
             if knob_key(c.knobs) in where_b]
    pairs = [(x, y) for x, y in pairs if x >= 0 and y >= 0]
    if len(pairs) < 2:
        raise ValueError(f"{len(pairs)} configurations clustered in both: too few to compare")
    ari = float(adjusted_rand_score([p[0] for p in pairs], [p[1] for p in pairs]))
    return Stability(ari, "stable" if ari >= STABLE_ARI else "unstable", len(pairs))


# ---- what explains the clusters -------------------------------------------------

def _encode(knob_dicts: Sequence[Mapping]) -> tuple[np.ndarray, list[tuple[str, object | None]]]:
    """Knobs that vary as 0/1 columns: a two-valued on/off knob as one column
    (``(knob, None)``), any other knob one column per value (``(knob, value)``)."""
    names = []
    for k in dict.fromkeys(k for d in knob_dicts for k in d):
        values = sorted({repr(d.get(k)): d.get(k) for d in knob_dicts}.items())
        if len(values) < 2:
            continue
        raw = [v for _, v in values]
        if len(raw) == 2 and {is_on(v) for v in raw} == {True, False}:
            names.append((k, None))
        else:
            names.extend((k, v) for v in raw)
    cols = [[float(is_on(d.get(k))) if v is None else float(d.get(k) == v) for (k, v) in names]
            for d in knob_dicts]
    return np.array(cols, dtype=float).reshape(len(knob_dicts), len(names)), names


def _condition(name: tuple[str, object | None], on: bool) -> str:
    knob, value = name
    if value is None:
        return f"{knob} = {'on' if on else 'off'}"
    return f"{knob} {'=' if on else '!='} {_fmt(value)}"


def explain_clusters(configs: Sequence[ConfigStats], clustering: Clustering, *,
                     max_depth: int = TREE_DEPTH, seed: int = 0) -> KnobRules:
    """A decision tree (depth ``max_depth``) from knob values to cluster, as one rule per leaf."""
    from sklearn.tree import DecisionTreeClassifier, export_text

    idx = np.flatnonzero(clustering.labels >= 0)
    y = clustering.labels[idx]
    x, names = _encode([configs[i].knobs for i in idx])
    features = tuple(_condition(n, True).replace(" = on", "") for n in names)
    if not names:
        return KnobRules((f"(no knob varies) -> cluster {int(np.bincount(y).argmax())}",), "",
                         float(np.bincount(y).max() / y.size), ())
    tree = DecisionTreeClassifier(max_depth=max_depth, random_state=seed).fit(x, y)
    t = tree.tree_
    rules = []

    def walk(node: int, conds: list[str]) -> None:
        if t.children_left[node] == -1:
            counts = t.value[node][0]
            cls = int(tree.classes_[int(np.argmax(counts))])
            share = float(counts.max() / counts.sum())
            n = int(t.n_node_samples[node])
            rules.append(f"{' and '.join(conds) or '(all)'} -> cluster {cls} "
                         f"({n} config{'s' if n != 1 else ''}, {share:.0%})")
            return
        name = names[t.feature[node]]
        walk(t.children_left[node], conds + [_condition(name, False)])   # column <= 0.5: off / not this value
        walk(t.children_right[node], conds + [_condition(name, True)])

    walk(0, [])
    return KnobRules(tuple(rules), export_text(tree, feature_names=list(features)),
                     float(tree.score(x, y)), features)


def _pairs(configs: Sequence[ConfigStats], knob: str, ref, value) -> list[tuple[int, int]]:
    """(i, j): configurations equal but for ``knob``, i with ``ref``, j with ``value``."""
    def rest(c):
        return knob_key({k: v for k, v in c.knobs.items() if k != knob})
    refs = {rest(c): i for i, c in enumerate(configs) if knob in c.knobs and c.knobs[knob] == ref}
    return [(refs[rest(c)], j) for j, c in enumerate(configs)
            if knob in c.knobs and c.knobs[knob] == value and rest(c) in refs]


def _boot_ci(stat, samples: Sequence[np.ndarray], confidence: float, n_resamples: int, seed: int):
    """Percentile-bootstrap CI of ``stat(*samples)``, each sample resampled on its
    own; ``stat`` reduces the last axis (all resamples at once)."""
    if min(s.size for s in samples) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    boot = stat(*(s[rng.integers(0, s.size, (n_resamples, s.size))] for s in samples))
    a = (1 - confidence) / 2
    lo, hi = np.percentile(boot, [100 * a, 100 * (1 - a)])
    return float(lo), float(hi)


def _median(x):
    return np.median(x, axis=-1)


def _diff(x, y):
    return np.median(y, axis=-1) - np.median(x, axis=-1)


def _rel(x, y):
    return np.median(y, axis=-1) / np.median(x, axis=-1) - 1.0


def knob_effect(configs: Sequence[ConfigStats], knob: str, ref, value, *, confidence: float = DEFAULT_CONFIDENCE,
                n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> KnobEffect | None:
    """The change of median RTT from ``knob = ref`` to ``knob = value`` (None: no data for one side)."""
    med = np.array([c.median_ns for c in configs], dtype=float)
    pairs = [(i, j) for i, j in _pairs(configs, knob, ref, value) if np.isfinite(med[[i, j]]).all()]
    kw = dict(confidence=confidence, n_resamples=n_resamples, seed=seed)
    if pairs:
        a, b = med[[p[0] for p in pairs]], med[[p[1] for p in pairs]]
        d, r = b - a, b / a - 1.0
        return KnobEffect(knob, ref, value, "paired", len(pairs), float(np.median(d)),
                          *_boot_ci(_median, [d], **kw), float(np.median(r)), *_boot_ci(_median, [r], **kw))
    ga = med[[i for i, c in enumerate(configs) if c.knobs.get(knob, object()) == ref and np.isfinite(med[i])]]
    gb = med[[i for i, c in enumerate(configs) if c.knobs.get(knob, object()) == value and np.isfinite(med[i])]]
    if ga.size == 0 or gb.size == 0:
        return None
    return KnobEffect(knob, ref, value, "groups", int(min(ga.size, gb.size)), float(_diff(ga, gb)),
                      *_boot_ci(_diff, [ga, gb], **kw), float(_rel(ga, gb)), *_boot_ci(_rel, [ga, gb], **kw))


def knob_levels(configs: Sequence[ConfigStats], knob: str) -> list:
    """The knob's values in the campaign, ``unsupported`` left out, in first-seen order."""
    seen = {}
    for c in configs:
        if knob in c.knobs and c.knobs[knob] != UNSUPPORTED:
            seen.setdefault(repr(c.knobs[knob]), c.knobs[knob])
    return list(seen.values())


def knob_effects(configs: Sequence[ConfigStats], *, confidence: float = DEFAULT_CONFIDENCE,
                 n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[KnobEffect]:
    """``knob_effect`` of each value of each knob that varies against its first
    value (for on/off knobs: on against off)."""
    out = []
    for knob in dict.fromkeys(k for c in configs for k in c.knobs):
        levels = knob_levels(configs, knob)
        if len(levels) < 2:
            continue
        if len(levels) == 2 and {is_on(v) for v in levels} == {True, False}:
            levels = sorted(levels, key=is_on)
        for v in levels[1:]:
            e = knob_effect(configs, knob, levels[0], v, confidence=confidence, n_resamples=n_resamples, seed=seed)
            if e is not None:
                out.append(e)
    return out


# ---- the study's findings --------------------------------------------------------

def study_findings(configs: Sequence[ConfigStats], clustering: Clustering, *, knobs: StudyKnobs = StudyKnobs(),
                   tolerance: float = NEGLIGIBLE_EFFECT, seed: int = 0) -> list[Finding]:
    """The study's findings on this campaign:

    (a) ``cstates_coalescing_negligible``: for the C-state and the coalescing
        knob, every value against the first moves the median RTT by at most
        ``tolerance`` (10%; median over matched pairs, ``knob_effect``). A knob
        with fewer than two supported values is not testable; held/not held
        come from the testable ones.
    (b) ``poll_receiver_worse``: in every pair of configurations differing
        only in poll() at the receiver, the one with poll() has the higher
        median RTT. Not testable without such a pair.
    (c) ``best_cluster_busy_poll``: every configuration of cluster 0 has busy
        polling on, need_wakeup off and no poll() (each poll knob present
        off). Not testable when busy polling or need_wakeup does not vary
        among the clustered configurations.

    Outliers count in (a) and (b), as the study kept them for its conclusions."""
    return [_finding_a(configs, knobs, tolerance, seed), _finding_b(configs, knobs),
            _finding_c(configs, clustering, knobs)]


def _finding_a(configs, knobs: StudyKnobs, tolerance: float, seed: int) -> Finding:
    claim = f"C-states and interrupt coalescing barely matter (median RTT within {tolerance:.0%})"
    parts, verdicts, evidence = [], [], {}
    for knob in (knobs.cstate, knobs.coalescing):
        levels = knob_levels(configs, knob)
        if len(levels) < 2:
            why = "absent" if not any(knob in c.knobs for c in configs) else \
                f"one supported value ({', '.join(_fmt(v) for v in levels) or UNSUPPORTED})"
            parts.append(f"{knob}: not testable, {why}")
            continue
        effects = [e for v in levels[1:] if (e := knob_effect(configs, knob, levels[0], v, seed=seed))]
        worst = max(effects, key=lambda e: abs(e.relative))
        ok = all(abs(e.relative) <= tolerance for e in effects)
        verdicts.append(ok)
        evidence[knob] = [e.to_dict() for e in effects]
        parts.append(f"{knob}: {'within' if ok else 'beyond'} {tolerance:.0%}, largest {_fmt(worst.value)} vs "
                     f"{_fmt(worst.reference)}: {worst.relative:+.1%} (95% CI {worst.rel_ci_low:+.1%} .. "
                     f"{worst.rel_ci_high:+.1%}, {worst.method}, n={worst.n})")
    verdict = NOT_TESTABLE if not verdicts else HELD if all(verdicts) else NOT_HELD
    return Finding("cstates_coalescing_negligible", claim, verdict, "; ".join(parts), evidence)


def _finding_b(configs, knobs: StudyKnobs) -> Finding:
    claim = "poll() at the receiver is always worse"
    knob = knobs.poll_receiver
    levels = knob_levels(configs, knob)
    offs = [v for v in levels if not is_on(v)]
    ons = [v for v in levels if is_on(v)]
    pairs = [(i, j) for off in offs for on in ons for i, j in _pairs(configs, knob, off, on)
             if math.isfinite(configs[i].median_ns) and math.isfinite(configs[j].median_ns)]
    if not pairs:
        return Finding("poll_receiver_worse", claim, NOT_TESTABLE,
                       f"no two configurations differ only in {knob}")
    better = [(i, j) for i, j in pairs if configs[j].median_ns <= configs[i].median_ns]
    detail = f"poll() worse in {len(pairs) - len(better)} of {len(pairs)} pairs"
    if better:
        i, j = better[0]
        detail += (f"; not worse e.g. {configs[j].label}: {configs[j].median_ns / 1e3:.4g} us vs "
                   f"{configs[i].median_ns / 1e3:.4g} us without")
    return Finding("poll_receiver_worse", claim, NOT_HELD if better else HELD, detail,
                   {"pairs": len(pairs), "not_worse": [(configs[i].label, configs[j].label) for i, j in better]})


def _finding_c(configs, clustering: Clustering, knobs: StudyKnobs) -> Finding:
    claim = "the best cluster has busy polling on, need_wakeup off and no poll()"
    clustered = [configs[i] for i in np.flatnonzero(clustering.labels >= 0)]
    for knob in (knobs.busy_poll, knobs.need_wakeup):
        if len({is_on(c.knobs[knob]) for c in clustered if knob in c.knobs}) < 2:
            return Finding("best_cluster_busy_poll", claim, NOT_TESTABLE,
                           f"{knob} does not take both on and off among the clustered configurations")
    best = clustering.clusters[0]
    wrong = []
    for i in best.members:
        k = configs[i].knobs
        bad = [f"{knobs.busy_poll} off"] if not is_on(k.get(knobs.busy_poll)) else []
        bad += [f"{knobs.need_wakeup} on"] if is_on(k.get(knobs.need_wakeup)) else []
        bad += [f"{p} on" for p in knobs.poll if p in k and is_on(k[p])]
        if bad:
            wrong.append((configs[i].label, bad))
    present = ", ".join(f"{k}={_fmt(v)}" for k, v in best.always_present.items()) or "none"
    detail = f"cluster 0 ({len(best.members)} configurations, mean {best.mean_ns / 1e3:.4g} us); always present: {present}"
    if wrong:
        detail += f"; {len(wrong)} do not fit, e.g. {wrong[0][0]} ({', '.join(wrong[0][1])})"
    return Finding("best_cluster_busy_poll", claim, NOT_HELD if wrong else HELD, detail,
                   {"always_present": dict(best.always_present), "not_fitting": [w[0] for w in wrong]})
