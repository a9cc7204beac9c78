"""A stored campaign's RFC 2544 benchmarks beyond throughput: back-to-back
frames, system recovery and reset, summarized per configuration, as
softnet run, softnet analyze and the report show them."""
from __future__ import annotations

from dataclasses import dataclass, field

from softnet.analysis.back_to_back import BackToBackSummary, summarize_back_to_back
from softnet.analysis.campaigns import cell_label
from softnet.analysis.recovery import RecoverySummary, summarize_recoveries
from softnet.analysis.reset import ResetSummary, summarize_resets
from softnet.results import readers
from softnet.units import parse_rate

KINDS = ("back-to-back", "recovery", "reset")


@dataclass
class RfcBenchmarks:
    back_to_back: list[BackToBackSummary] = field(default_factory=list)
    recovery: list[RecoverySummary] = field(default_factory=list)
    reset: list[ResetSummary] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.back_to_back or self.recovery or self.reset)

    def __add__(self, other: "RfcBenchmarks") -> "RfcBenchmarks":
        return RfcBenchmarks(self.back_to_back + other.back_to_back, self.recovery + other.recovery,
                             self.reset + other.reset)


def stored_rfc_benchmarks(store, campaign_id: str) -> RfcBenchmarks:
    """Each cell of those kinds, with the throughput its spec gave (RFC 9004's corrected buffer time)."""
    out = RfcBenchmarks()
    for c in readers.cells(store, campaign_id):
        kind, label = c.method_kind, {c.cell_id: cell_label(c)}
        if kind not in KINDS:
            continue
        trials = readers.stored_trials(store, campaign_id, c.cell_id)
        if kind == "reset":
            out.reset += summarize_resets(trials, label)
        elif kind == "recovery":
            out.recovery += summarize_recoveries(trials, label)
        else:
            m, t = c.settings.method, c.settings.traffic
            tput = parse_rate(str(m.throughput), t.frame_bytes, t.rate_layer, "method.throughput") \
                if m.throughput is not None else None
            out.back_to_back += summarize_back_to_back(trials, label, tput)
    return out
