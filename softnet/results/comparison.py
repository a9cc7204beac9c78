"""A comparison's typed result: each candidate's differences from the
baseline, metric by metric, and how the experiment ended
(softnet.analysis.paired computes them; the store keeps them as JSON)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, field_validator

from softnet.errors import InputError
from softnet.specfile import spec_error

COMPARISON_SCHEMA_VERSION = 1
Better = Literal["higher", "lower"]
Scale = Literal["ratio", "difference"]
Verdict = Literal["slower", "faster", "equivalent", "undecided"]
VERDICTS = ("slower", "faster", "equivalent", "undecided")


@dataclass(frozen=True)
class PairedDifference:
    """One metric of a candidate against the baseline, over paired rounds.
    ``estimate`` and ``ci`` are a relative change (0.05: B is 5% above A)
    for ratio metrics, an absolute difference b - a for the others."""

    metric: str
    unit: str
    better: Better
    scale: Scale
    n_pairs: int
    baseline_mean: float | None
    candidate_mean: float | None
    estimate: float | None
    ci: tuple[float, float] | None
    confidence: float
    margin: float
    p_value: float | None
    verdict: Verdict
    significant: bool = False  # the interval excludes zero (also when equivalent: a change inside the margin)
    dropped_pairs: int = 0  # rounds where either side had no value (an invalid trial, a missing counter)
    kind: str = ""  # the metric's family as specs name it: capacity, cpu, loss, latency, search
    configuration: str = ""  # stored campaigns of several cells: the cell's knobs, which prefix the metric
    load_pps: float | None = None  # the offered load of a per-load metric (cpu, loss, latency)
    # the host's pace taken out by regression: the slope of the change on the pace's change (None: not)
    covariate_beta: float | None = None
    # the interval equivalence reads: TOST's, at 1 - 2 (1 - confidence) (90% for 95%; None: none reached)
    tost_ci: tuple[float, float] | None = None

    # read back from stored JSON by pydantic: a key this softnet does not write is an error
    __pydantic_config__ = ConfigDict(extra="forbid")

    @property
    def family(self) -> str:
        """The metric's family (capacity, cpu, loss, ...), or its name where none was given: a gate counts
        each family once, however many loads it has rows at."""
        return self.kind or self.metric

    @property
    def worse_by(self) -> float | None:
        """How much worse B is (positive: worse), in the metric's scale."""
        if self.estimate is None:
            return None
        return self.estimate if self.better == "lower" else -self.estimate

    def to_dict(self) -> dict:
        return {**asdict(self), "worse_by": self.worse_by}

    @classmethod
    def from_dict(cls, d: dict) -> "PairedDifference":
        return TypeAdapter(cls).validate_python(_as_written(d))


@dataclass(frozen=True)
class FunctionChange:
    """One kernel function's change in ns per packet: its own time (self: it
    was the innermost frame) and with what it calls (incl)."""

    function: str
    self: PairedDifference
    incl: PairedDifference

    __pydantic_config__ = ConfigDict(extra="forbid")

    @property
    def significant(self) -> bool:
        return self.self.significant or self.incl.significant

    def to_dict(self) -> dict:
        return {"function": self.function, "self": self.self.to_dict(), "incl": self.incl.to_dict()}


@dataclass(frozen=True)
class FunctionChanges:
    """Which kernel functions account for a candidate's CPU change at one
    load (profiled trials with stacks): each function's time per forwarded
    packet, paired by round, against the busy time's change."""

    load_pps: float
    busy: PairedDifference  # the sampled CPUs' busy ns per packet: the change to account for
    # each tested function, the largest change of its own time first; its two intervals are each read at
    # Bonferroni's share of the error rate, 1 - (1 - family_confidence) / (2 tested), so no interval in the
    # table excludes zero falsely at more than 1 - family_confidence
    functions: list[FunctionChange]
    family_confidence: float
    tested: int  # functions tested: those with at least min_share of the busy time on either side
    min_share: float

    __pydantic_config__ = ConfigDict(extra="forbid")

    def share_of_busy(self, d: PairedDifference) -> float | None:
        """The part of the busy time's change this function's change accounts for."""
        if d.estimate is None or not self.busy.estimate:
            return None
        return d.estimate / self.busy.estimate

    def to_dict(self) -> dict:
        return {"load_pps": self.load_pps, "busy": self.busy.to_dict(),
                "functions": [f.to_dict() for f in self.functions], "family_confidence": self.family_confidence,
                "tested": self.tested, "min_share": self.min_share}


@dataclass
class ComparisonSummary:
    """Every candidate's differences and how the experiment ended."""

    baseline: str
    candidates: list[str]
    differences: dict[str, list[PairedDifference]] = field(default_factory=dict)  # candidate -> metrics
    rounds: int = 0
    stop_reason: str = ""
    paired: bool = True  # False: groups measured apart (stored results), Welch's t
    labels: dict[str, str] = field(default_factory=dict)  # variant -> what it sets (knobs)
    # what explains a difference, where the trials were profiled: stages in ns per packet and drops per
    # packet by reason (no verdicts of their own: they never stop an experiment or fail a gate)
    explain: dict[str, list[PairedDifference]] = field(default_factory=dict)
    # variant or results folder -> where its trials ran (kernel, cpu_model, softnet_version, hostname), from
    # its first trial's provenance: a comparison of two kernels says which is which
    provenance: dict[str, dict] = field(default_factory=dict)
    # variant -> flag -> trials that carried it and so gave no figure (why a metric has no pairs)
    unusable: dict[str, dict[str, int]] = field(default_factory=dict)
    # how the pairs were measured: "sequential" (A B, B A, ...) or "interleaved" (in turns, in the same seconds)
    pairing: str = "sequential"
    # variant -> its interleaved trials whose bursts ran into a partner's slot (flag turns_overlapped)
    overlapped: dict[str, int] = field(default_factory=dict)
    # candidate -> per load, the kernel functions behind its CPU change (trials profiled with stacks)
    functions: dict[str, list[FunctionChanges]] = field(default_factory=dict)

    def pairing_words(self) -> str:
        """How each round paired its trials, as a reader's table says it."""
        return ("the variants in the same seconds, bursts taking turns" if self.pairing == "interleaved"
                else "A and B one after the other, ABBA")

    def to_dict(self) -> dict:
        return {"schema_version": COMPARISON_SCHEMA_VERSION, "baseline": self.baseline,
                "candidates": self.candidates, "rounds": self.rounds, "stop_reason": self.stop_reason,
                "paired": self.paired, "labels": self.labels,
                "differences": {k: [d.to_dict() for d in v] for k, v in self.differences.items()},
                "explain": {k: [d.to_dict() for d in v] for k, v in self.explain.items()},
                "provenance": self.provenance, "unusable": self.unusable, "pairing": self.pairing,
                "overlapped": self.overlapped,
                "functions": {k: [f.to_dict() for f in v] for k, v in self.functions.items()}}

    @classmethod
    def from_dict(cls, d: dict, where: str = "comparison") -> "ComparisonSummary":
        version = _Versioned.model_validate(d).schema_version
        if version != COMPARISON_SCHEMA_VERSION:
            raise InputError(where, f"comparison schema version {version!r}: this softnet "
                             f"reads {COMPARISON_SCHEMA_VERSION}")
        try:
            s = _StoredSummary.model_validate(d)
        except ValidationError as exc:
            raise spec_error(exc, f"{where}: ") from None
        return cls(baseline=s.baseline, candidates=s.candidates, rounds=s.rounds, stop_reason=s.stop_reason,
                   paired=s.paired, labels=s.labels or {}, differences=s.differences, explain=s.explain or {},
                   provenance=s.provenance or {}, unusable=s.unusable or {}, pairing=s.pairing,
                   overlapped=s.overlapped or {}, functions=s.functions or {})

    def all_differences(self) -> list[tuple[str, PairedDifference]]:
        return [(c, d) for c in self.candidates for d in self.differences.get(c, [])]


def _as_written(d: dict) -> dict:
    """A stored difference without what to_dict derives (worse_by)."""
    return {k: v for k, v in d.items() if k != "worse_by"}


class _Versioned(BaseModel):
    """The schema version of a stored summary, checked before the rest is read."""

    schema_version: Any = None


class _StoredSummary(BaseModel):
    """A summary as to_dict writes it (older ones lack the later keys)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int
    baseline: str
    candidates: list[str]
    rounds: int
    stop_reason: str
    paired: bool = True
    labels: dict[str, str] | None = None  # variant -> what it sets
    differences: dict[str, list[PairedDifference]]
    explain: dict[str, list[PairedDifference]] | None = None
    provenance: dict[str, dict] | None = None
    unusable: dict[str, dict[str, int]] | None = None
    pairing: str = "sequential"
    overlapped: dict[str, int] | None = None
    functions: dict[str, list[FunctionChanges]] | None = None

    @field_validator("differences", "explain", mode="before")
    @classmethod
    def _derived_keys_dropped(cls, v):
        return {k: [_as_written(x) for x in rows] for k, rows in v.items()} if isinstance(v, dict) else v

    @field_validator("functions", mode="before")
    @classmethod
    def _derived_function_keys_dropped(cls, v):
        if not isinstance(v, dict):
            return v
        def change(x):
            return {**x, "self": _as_written(x["self"]), "incl": _as_written(x["incl"])} \
                if isinstance(x, dict) and isinstance(x.get("self"), dict) and isinstance(x.get("incl"), dict) else x

        return {k: [{**f, "busy": _as_written(f["busy"]), "functions": [change(x) for x in f["functions"]]}
                    if isinstance(f, dict) and isinstance(f.get("functions"), list) and isinstance(f.get("busy"), dict)
                    else f for f in rows] for k, rows in v.items()}
