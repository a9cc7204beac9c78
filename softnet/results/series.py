"""A kernel statistics time series as the sampler records it and a raw
trial keeps it (softnet.collect.sampler writes it; analysis reads it)."""
from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

INTERVAL_RANGE_S = (0.1, 10.0)  # the sampler's accepted interval
Key = tuple[str, str, int]  # (source, item, cpu); cpu -1: host-wide


@dataclass
class Series:
    """What a sampler recorded: sample times (s since the sampler started, on
    the monotonic clock), one {key: value} per sample, and the sources it lacked."""

    interval_s: float
    t_s: list[float] = field(default_factory=list)
    samples: list[dict[Key, float]] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)  # name -> sample index (window edges)
    irq_names: dict[str, str] = field(default_factory=dict)
    qdiscs: dict[str, str] = field(default_factory=dict)  # role -> root qdisc kind
    missing: dict[str, str] = field(default_factory=dict)
    sampler: dict = field(default_factory=dict)  # its own cost and pinning
    power_zones: dict[str, str] = field(default_factory=dict)  # RAPL zone directory -> its name

    def to_json(self) -> dict:
        keys = sorted({k for s in self.samples for k in s})
        return {"interval_s": self.interval_s, "t_s": self.t_s, "marks": self.marks,
                "keys": [list(k) for k in keys],
                "values": [[s.get(k) for s in self.samples] for k in keys],
                "irq_names": self.irq_names, "qdiscs": self.qdiscs, "missing": self.missing, "sampler": self.sampler,
                **({"power_zones": self.power_zones} if self.power_zones else {})}

    @classmethod
    def from_json(cls, d: dict) -> "Series":
        j = SeriesJson.model_validate(d)
        keys = [tuple(k) for k in j.keys]
        samples = [{k: col[i] for k, col in zip(keys, j.values) if col[i] is not None} for i in range(len(j.t_s))]
        return cls(j.interval_s, list(j.t_s), samples, dict(j.marks), j.irq_names, j.qdiscs, j.missing, j.sampler,
                   j.power_zones)


class SeriesJson(BaseModel):
    """``Series.to_json()`` as read back; a raw trial from before marks,
    IRQ names, qdiscs or the sampler's own figures lacks them."""

    model_config = ConfigDict(extra="forbid")

    interval_s: float | int
    t_s: list
    keys: list[list]  # [source, item, cpu]
    values: list[list]  # per key, one value per sample (None: not read then)
    marks: dict = {}
    irq_names: dict = {}
    qdiscs: dict = {}
    missing: dict = {}
    sampler: dict = {}
    power_zones: dict[str, str] = {}
