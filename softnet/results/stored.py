"""A stored trial result as read back: typed, whatever softnet wrote it.

The trials table's result JSON holds results of several shapes: a real
trial's (softnet.results.trial.TrialResult, of any known schema version), the
synthetic SUT's counts-only one, and hand-made ones in tests. ``StoredResult``
is what the methods, the store's columns and the report read of all of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from softnet.errors import InputError
from softnet.results.trial import (BackToBackResult, HostStalls, KernelSamples, LossAttribution, Number, ResetResult,
                                  RecoveryResult, Rfc8219Latency, StallLoss, VictimCheck)


class LatencyAt(BaseModel):
    """What a latency-under-load trial after a search was measured at
    (softnet.results.search.LATENCY_AT): a fraction of a goal's lower bound."""

    model_config = ConfigDict(extra="forbid")

    goal: str
    loss_ratio: Number
    goal_status: str | None = None
    fraction: Number
    of_pps: Number


class StoredProvenance(BaseModel):
    """The provenance fields the report shows; the rest of a stored
    provenance (a remote trial's hosts, a synthetic SUT's model) is not read here."""

    model_config = ConfigDict(extra="ignore")

    hostname: str | None = None
    kernel: str | None = None
    cpu_model: str | None = None
    softnet_version: str | None = None
    spec_hash: str | None = None
    host_changes_applied: list[str] = []

    @field_validator("host_changes_applied", mode="before")
    @classmethod
    def _none_is_empty(cls, v):
        return [] if v is None else v


class RingCounts(BaseModel):
    """Of a result's diagnosis (softnet.results.trial.Diagnosis), what the
    trials table keeps; the synthetic SUT's is empty."""

    model_config = ConfigDict(extra="ignore")

    ingress_ring_full_pkts: int | None = None


class StoredResult(BaseModel):
    """A stored trial result as the methods and the report read it, whatever
    wrote it: a real trial (softnet.results.trial.TrialResult, any known schema
    version), the synthetic SUT's counts-only result, or a test's. The figures
    every such result has are required; what only some carry is None when absent.
    The rest of a result (placement, the kernel's time series...) is not read
    through this view: ``StoredTrial.document`` has it as stored."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = 1
    sut: str | None = None
    intended_rate_pps: Number
    duration_s: Number
    achieved_rate_pps: Number | None = None
    sent_pkts: int | None = None
    received_pkts: int | None = None
    lost_pkts: int | None = None
    loss_ratio: Number | None = None
    sut_lost_pkts: int | None = None  # schema 4: the loss less what host stalls explain
    flags: list[str] = []
    valid: bool | None = None
    latency_p50_ns: Number | None = None
    latency_p90_ns: Number | None = None
    latency_p99_ns: Number | None = None
    latency_p99_9_ns: Number | None = None
    rfc8219: Rfc8219Latency | None = None
    latency_p99_upper_ns: Number | None = None  # schema 2: the log2 bucket's upper edge
    loss_attribution: LossAttribution | None = None
    host_stalls: HostStalls | None = None  # schema 4: the stall probe's findings
    reset: ResetResult | None = None  # a reset trial's interruption
    victim: VictimCheck | None = None  # the profiler's cross-check against a pinned victim
    back_to_back: BackToBackResult | None = None  # a back-to-back trial's bursts
    recovery: RecoveryResult | None = None  # a recovery trial's
    kernel: dict | None = None  # per-CPU tables keyed by the host's CPUs (softnet.analysis.kernel_stats)
    profile: dict | None = None
    provenance: StoredProvenance | None = None
    latency_at: LatencyAt | None = None  # a latency trial after a search (not one of its own)
    # what else the trials table keeps in columns (softnet.results.store)
    ip_version: int | None = None  # None: the synthetic SUT
    frame_bytes: int | None = None
    flows: int | None = None
    warmup_s: Number | None = None
    reordered_pkts: int | None = None
    duplicate_pkts: int | None = None
    latency_mean_ns: Number | None = None
    started_unix_s: Number | None = None
    diagnosis: RingCounts | None = None
    loss_explained_by_host_stalls: StallLoss | None = None
    frame_mix: str | None = None
    arrivals: str | None = None
    # a measurer's result and a raw file's have the sampler's series; the stored result JSON leaves it out
    kernel_samples: KernelSamples | None = None

    @field_validator("flags", mode="before")
    @classmethod
    def _no_flags(cls, v):
        return [] if v is None else v

    @field_validator("diagnosis", "kernel_samples", mode="before")
    @classmethod
    def _empty_is_none(cls, v):
        return v or None  # the synthetic SUT's diagnosis is {}

    @classmethod
    def parse(cls, document: dict, where: str) -> "StoredResult":
        """A result document (stored, or a measurer's), or an InputError naming the field."""
        try:
            return cls.model_validate(document)
        except ValidationError as exc:
            e = exc.errors()[0]
            raise InputError(where, f"stored trial result: {'.'.join(map(str, e['loc']))}: {e['msg']}") from None


def knobs_label(knobs: dict) -> str:
    """A configuration's name from its cell's knobs: "sut=ipv4-fwd, frame_bytes=64" ("" without knobs)."""
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in knobs.items())


@dataclass(frozen=True)
class StoredTrial:
    """One stored trial: its row's key and its result. ``document`` is the
    result JSON as stored, for the analyses that read more of it (kernel
    statistics, the CPU audit, stages)."""

    campaign_id: str
    cell_id: int
    load_index: int
    run_index: int
    result: StoredResult
    document: dict = field(repr=False, compare=False)

    @property
    def is_latency_trial(self) -> bool:
        """A latency-under-load trial taken after a search, not one of its own."""
        return self.result.latency_at is not None


def by_cell_load(trials: Sequence[StoredTrial], part: str) -> list[tuple[tuple[int, int], list[StoredResult]]]:
    """The results that have ``part`` (a result field: reset, recovery...),
    grouped by (cell, load), in that order: a benchmark summarizes each."""
    groups: dict[tuple[int, int], list[StoredResult]] = {}
    for t in trials:
        if getattr(t.result, part) is not None:
            groups.setdefault((t.cell_id, t.load_index), []).append(t.result)
    return sorted(groups.items())

