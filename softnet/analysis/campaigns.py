"""Turn stored trials (or published PASTRAMI files) into PASTRAMI analyses.

One `Configuration` per campaign cell or per PASTRAMI file: its label, knob
values, the runs, and the `Analysis` (statistics per load, TIR, PDR/NDR,
verdict and flags) from softnet.analysis.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from softnet.analysis.loss_stats import RunPolicy
from softnet.analysis.loss_time import counted_received
from softnet.analysis.pastrami_files import (DiscardShare, PastramiName, discard_shares, list_pastrami_files,
                                             pastrami_name, read_pastrami_file)
from softnet.analysis.saturation import Analysis, analyze_rows
from softnet.analysis.trial_eval import INFORMATIONAL_FLAGS
from softnet.errors import InputError
from softnet.results import readers
from softnet.results.readers import CellRecord, StoredResult, StoredTrial
from softnet.results.stored import knobs_label
from softnet.results.store import DB_NAME, Store, is_store_dir


@dataclass(frozen=True)
class SoftnetRun:
    """A softnet trial seen as one run of the PASTRAMI method."""

    offered_load_pps: float
    run_index: int
    tx_pkts: int
    rx_pkts: int
    duration_s: float
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class FlagPolicy(RunPolicy):
    """softnet trials carry their own validity flags: a flagged trial is
    excluded with its first flag as the reason (generator_limited, ...)."""

    def exclusion_reason(self, run) -> str | None:
        flags = getattr(run, "flags", ())
        return flags[0] if flags else super().exclusion_reason(run)


LOW_LOSS_RATIO = 0.01  # trials losing less than this are below overload: where host stalls matter


@dataclass(frozen=True)
class StallTotals:
    """Trials' loss and the part host stalls explain."""

    trials: int
    lost_pkts: int
    explained_pkts: int
    explained_share: float | None
    trials_with_host_interference: int


@dataclass(frozen=True)
class BelowOverload(StallTotals):
    loss_ratio_under: float


@dataclass(frozen=True)
class HostStallSummary(StallTotals):
    """Over a configuration's trials probed for stalls (``trials``: all of
    them), and over those below overload."""

    trials_probed: int
    below_overload: BelowOverload

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class OtherVerdict:
    """The verdict of the same trials counting all loss (host stalls' too)."""

    verdict: str
    reason: str
    ndr_load_pps: float | None
    pdr_load_pps: float | None


@dataclass(frozen=True)
class SoftnetMeta:
    """Where a softnet configuration comes from, and what host stalls did to it."""

    campaign_id: str
    cell_id: int
    probe_max_rate_pps: float | None
    spec: dict  # the cell's campaign spec as stored
    host_stall_loss: str  # "set_apart" or "count"
    host_stalls: HostStallSummary
    counting_all_loss: OtherVerdict | None = None  # with host-stall loss set apart and some explained

    def to_dict(self) -> dict:
        other = {} if self.counting_all_loss is None else {"counting_all_loss": asdict(self.counting_all_loss)}
        return {"campaign_id": self.campaign_id, "cell_id": self.cell_id, "probe_max_rate_pps": self.probe_max_rate_pps,
                "spec": self.spec, "host_stall_loss": self.host_stall_loss, "host_stalls": self.host_stalls.to_dict(),
                **other}


@dataclass(frozen=True)
class PastramiMeta:
    path: str  # the PASTRAMI file
    name: PastramiName  # what its name says
    discards: list[DiscardShare] = field(default_factory=list)  # per load with loss: the NIC's share of it

    def to_dict(self) -> dict:
        return {"path": self.path}


@dataclass
class Configuration:
    label: str
    knobs: dict
    analysis: Analysis
    source: str  # "softnet" or "pastrami"
    trials: list[StoredTrial] = field(default_factory=list)
    meta: SoftnetMeta | PastramiMeta | None = None

    @property
    def campaign_id(self) -> str | None:
        return self.meta.campaign_id if isinstance(self.meta, SoftnetMeta) else None

    @property
    def cell_id(self) -> int | None:
        return self.meta.cell_id if isinstance(self.meta, SoftnetMeta) else None

    def to_dict(self) -> dict:
        analysis = self.analysis.to_dict()  # its meta: what a PASTRAMI file's name says
        out = {"label": self.label, "knobs": self.knobs, "source": self.source, **analysis,
               "meta": {**analysis.get("meta", {}), **(self.meta.to_dict() if self.meta is not None else {})}}
        if isinstance(self.meta, PastramiMeta) and self.meta.discards:  # where the loss happened, per load
            out["nic_discards"] = [d.to_dict() for d in self.meta.discards]
        return out


def cell_label(cell: CellRecord) -> str:
    if cell.knobs:
        return knobs_label(cell.knobs)
    sut = cell.settings.testbed.sut
    return "cell" if sut is None else sut


def host_stall_summary(trials: Sequence[StoredResult]) -> HostStallSummary:
    """A configuration's loss and the part host stalls explain, over its
    trials (trials without a stall probe are counted apart), and
    over its trials below overload (loss under LOW_LOSS_RATIO), where the
    NDR and the PDR are decided and overload's loss does not drown them."""
    probed = [t for t in trials if t.sut_lost_pkts is not None and t.lost_pkts is not None]

    def totals(sel: list[StoredResult]) -> dict:
        lost = sum(t.lost_pkts for t in sel)
        explained = sum(t.lost_pkts - t.sut_lost_pkts for t in sel)
        return dict(trials=len(sel), lost_pkts=lost, explained_pkts=explained,
                    explained_share=explained / lost if lost else None,
                    trials_with_host_interference=sum("host_interference" in t.flags for t in sel))

    low = [t for t in probed if (t.loss_ratio or 0) < LOW_LOSS_RATIO]
    return HostStallSummary(**{**totals(probed), "trials": len(trials)}, trials_probed=len(probed),
                            below_overload=BelowOverload(**totals(low), loss_ratio_under=LOW_LOSS_RATIO))


def host_stall_sentence(meta: SoftnetMeta | PastramiMeta | None, rate=lambda v: f"{v:,.0f} pps") -> str | None:
    """What host stalls did to a configuration's loss, and the verdict counting all loss, in words."""
    if not isinstance(meta, SoftnetMeta) or not meta.host_stalls.trials_probed:
        return None
    h = meta.host_stalls
    if not h.lost_pkts:
        return f"no loss in {h.trials_probed} trials watched for host stalls"
    low = h.below_overload
    if low.trials < h.trials_probed and low.lost_pkts:  # overload's loss would drown the share
        text = (f"below overload (trials losing < {100 * low.loss_ratio_under:g}%: {low.trials} of "
                f"{h.trials_probed}) host stalls explain {low.explained_pkts:,} of {low.lost_pkts:,} "
                f"lost packets ({100 * low.explained_share:.0f}%); over all trials "
                f"{100 * h.explained_share:.1f}%")
    else:
        text = (f"host stalls explain {h.explained_pkts:,} of {h.lost_pkts:,} lost packets "
                f"({100 * h.explained_share:.1f}%)")
    text += f"; {h.trials_with_host_interference} of {h.trials_probed} trials flagged host_interference"
    if meta.host_stall_loss == "set_apart" and h.explained_pkts:
        o = meta.counting_all_loss
        ndr = "none" if o.ndr_load_pps is None else rate(o.ndr_load_pps)
        text += f"; the verdict sets them apart (counting all loss: {o.verdict}, NDR {ndr})"
    return text


def _runs(trials: list[StoredTrial], mode: str) -> list[SoftnetRun]:
    # counted_received reads the result document (softnet.analysis.loss_time)
    return [SoftnetRun(t.result.intended_rate_pps, t.run_index, t.result.sent_pkts, counted_received(t.document, mode),
                       t.result.duration_s, tuple(f for f in t.result.flags if f not in INFORMATIONAL_FLAGS))
            for t in trials]


def analyze_campaign(store: Store, campaign_id: str, host_stall_loss: str | None = None) -> list[Configuration]:
    """PASTRAMI analyses of a campaign's sweep cells. ``host_stall_loss``:
    "set_apart" or "count" (default: the campaign's method.host_stall_loss).
    With loss set apart that host stalls explain, the analysis counting all
    loss is kept beside it (meta["counting_all_loss"])."""
    out = []
    for cell in readers.cells(store, campaign_id):
        if cell.method_kind in ("search", "compare", "reset", "back-to-back", "recovery", "soak"):
            continue  # searches are summarized by search_analysis, comparisons by analysis.comparisons
        trials = readers.stored_trials(store, campaign_id, cell.cell_id)
        if not trials:
            continue
        a = cell.settings.analysis
        if a is None:
            raise InputError(f"campaign {campaign_id} cell {cell.cell_id}", "its stored spec has no analysis section")
        mode = host_stall_loss or cell.settings.method.host_stall_loss

        def analyze(m: str) -> Analysis:
            return analyze_rows(_runs(trials, m), confidence=a.confidence, policy=FlagPolicy(),
                                pdr_loss_ratio=a.pdr_loss_ratio, eta=a.eta)

        stalls = host_stall_summary([t.result for t in trials])
        other = None
        if mode == "set_apart" and stalls.explained_pkts:
            o = analyze("count").report
            other = OtherVerdict(o.verdict.value, o.reason, o.ndr_load_pps, o.pdr_load_pps)
        meta = SoftnetMeta(campaign_id, cell.cell_id, cell.probe_max_rate_pps, cell.spec, mode, stalls, other)
        out.append(Configuration(cell_label(cell), cell.knobs, analyze(mode), "softnet",
                                 trials, meta))
    return out


def analyze_pastrami(paths: list[Path], pdr_loss_ratio: float, eta: float, confidence: float) -> list[Configuration]:
    out = []
    for path in paths:
        name = pastrami_name(path)
        meta = name.to_meta()
        rows = read_pastrami_file(path)
        analysis = analyze_rows(rows, confidence=confidence, meta=meta, pdr_loss_ratio=pdr_loss_ratio, eta=eta)
        out.append(Configuration(path.stem, {k: v for k, v in meta.items() if k not in ("path", "file")}, analysis,
                                 "pastrami", meta=PastramiMeta(str(path), name, discard_shares(rows))))
    return out


def analyze_path(path: str | Path, campaign_id: str | None = None, pdr_loss_ratio: float = 0.005,
                 eta: float = 0.1, confidence: float = 0.95) -> list[Configuration]:
    """A softnet results directory, a PASTRAMI file, or a folder of PASTRAMI files."""
    path = Path(path)
    if is_store_dir(path):
        with readers.open_results(path) as store:
            names = {c.campaign_id: c.name for c in readers.campaigns(store)}
            ids = list(names)
            if campaign_id:
                if campaign_id not in ids:
                    raise InputError("--campaign", f"'{campaign_id}' not in {path}; there: {', '.join(ids)}")
                ids = [campaign_id]
            out = [c for cid in ids for c in analyze_campaign(store, cid)]
            labels = [c.label for c in out]
            for c in out:  # several campaigns (a lab's exports) with like cells: name the campaign
                if labels.count(c.label) > 1:
                    c.label = f"{names[c.campaign_id] or c.campaign_id}: {c.label}"
            labels = [c.label for c in out]
            for c in out:  # campaigns of one name too: their ids (the name and a hash) tell them apart
                if labels.count(c.label) > 1:
                    rest = c.label.split(": ", 1)[-1]
                    c.label = c.campaign_id if rest == names[c.campaign_id] else f"{c.campaign_id}: {rest}"
            return out
    if path.is_file():
        return analyze_pastrami([path], pdr_loss_ratio, eta, confidence)
    if path.is_dir():
        files = list_pastrami_files(path)
        if not files:
            raise InputError(str(path), f"neither a softnet results directory ({DB_NAME}) nor PASTRAMI .txt files")
        return analyze_pastrami(files, pdr_loss_ratio, eta, confidence)
    raise InputError(str(path), "no such file or directory")
