"""A comparison's typed result: each candidate's differences from the
baseline, metric by metric, and how the experiment ended
(softnet.analysis.paired computes them; the store keeps them as JSON)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from softnet.errors import InputError

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
        d = {k: v for k, v in d.items() if k != "worse_by"}
        if d.get("ci") is not None:
            d["ci"] = tuple(d["ci"])
        return cls(**d)


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

    def to_dict(self) -> dict:
        return {"schema_version": COMPARISON_SCHEMA_VERSION, "baseline": self.baseline,
                "candidates": self.candidates, "rounds": self.rounds, "stop_reason": self.stop_reason,
                "paired": self.paired, "labels": self.labels,
                "differences": {k: [d.to_dict() for d in v] for k, v in self.differences.items()},
                "explain": {k: [d.to_dict() for d in v] for k, v in self.explain.items()},
                "provenance": self.provenance, "unusable": self.unusable}

    @classmethod
    def from_dict(cls, d: dict, where: str = "comparison") -> "ComparisonSummary":
        if d.get("schema_version") != COMPARISON_SCHEMA_VERSION:
            raise InputError(where, f"comparison schema version {d.get('schema_version')!r}: this softnet "
                             f"reads {COMPARISON_SCHEMA_VERSION}")
        return cls(baseline=d["baseline"], candidates=list(d["candidates"]), rounds=d["rounds"],
                   stop_reason=d["stop_reason"], paired=d.get("paired", True), labels=d.get("labels") or {},
                   differences={k: [PairedDifference.from_dict(x) for x in v]
                                for k, v in d["differences"].items()},
                   explain={k: [PairedDifference.from_dict(x) for x in v] for k, v in (d.get("explain") or {}).items()},
                   provenance=d.get("provenance") or {}, unusable=d.get("unusable") or {})

    def all_differences(self) -> list[tuple[str, PairedDifference]]:
        return [(c, d) for c in self.candidates for d in self.differences.get(c, [])]
