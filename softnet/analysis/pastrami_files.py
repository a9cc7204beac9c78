"""Reader for the PASTRAMI measurement files (netgroup/pastrami data set).

Format (one JSON array per line, one line per offered load)::

    [[rate_pps, rx_discards_at_start], [tx_pkts, rx_pkts, rx_discards_cum], ...]

Each run record starts with tx and rx packet counts of one run of T seconds.
A 3-field record carries the NIC's cumulative rx discard counter as third
field; records of any other length keep fields 3.. uninterpreted in
``TrialRow.extra`` (their meaning differs between files). The run metadata
(testbed, kernel, duration T, ...) lives in the file name only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from numbers import Integral, Real
from pathlib import Path
from typing import Any

from pydantic import BaseModel

# The one place that knows where the shared copy of the data lives.
DEFAULT_PASTRAMI_DATA = Path("/work/shared/data/pastrami")
PASTRAMI_DATA_ENV = "SOFTNET_PASTRAMI_DATA"

DEFAULT_DURATION_S = 10  # README: "T the run duration in seconds (10 when absent)"


class DataFormatError(ValueError):
    """Input file (or file name) does not follow the PASTRAMI format.

    The message starts with ``file:line`` (line 0 = the file name itself)
    and says what was expected.
    """

    def __init__(self, path: str | os.PathLike, line: int, problem: str):
        self.path = str(path)
        self.line = line
        super().__init__(f"{self.path}:{line}: {problem}")


def pastrami_data_dir() -> Path:
    """Folder with the PASTRAMI files: $SOFTNET_PASTRAMI_DATA or the shared copy."""
    return Path(os.environ.get(PASTRAMI_DATA_ENV) or DEFAULT_PASTRAMI_DATA)


def list_pastrami_files(root: str | os.PathLike | None = None) -> list[Path]:
    """All measurement files (*.txt) below ``root``, sorted for stable order."""
    base = Path(root) if root is not None else pastrami_data_dir()
    return sorted(p for p in base.rglob("*.txt") if p.is_file())


# {site}[_{testbed}][_class_ebpf]_raw_{runs}[_exp_t_{T}]_k{kernel}_{nic}_{env}_
#   {as-is | nic_buf_N[_irq_{pf|vf}0-X_{pf|vf}1-Y]}[_date_YYYY-MM-DD_ver_NN][_Nth_exec[_note]].txt
_NAME_RE = re.compile(
    r"^(?P<site>[a-z0-9]+)"
    r"(?:_(?P<testbed>tb\d+))?"
    r"(?P<ebpf>_class_ebpf)?"
    r"_raw_(?P<runs>\d+)"
    r"(?:_exp_t_(?P<duration>\d+))?"
    r"_k(?P<kernel>\d+(?:\.\d+)*)"
    r"_(?P<nic>[a-z0-9]+)"
    r"_(?P<env>[a-z][a-z-]*)"
    r"_(?:(?P<as_is>as-is)"
    r"|nic_buf_(?P<nic_buf>\d+)"
    r"(?:_irq_(?P<irq_kind0>pf|vf)0-(?P<irq_cpu0>\d+)_(?P<irq_kind1>pf|vf)1-(?P<irq_cpu1>\d+))?)"
    r"(?:_date_(?P<date>\d{4}-\d{2}-\d{2})_ver_(?P<ver>\d+))?"
    r"(?:_(?P<exec>\d+)(?:st|nd|rd|th)_exec(?:_(?P<exec_note>[A-Za-z0-9-]+))?)?"
    r"\.txt$"
)

_NAME_GRAMMAR = (
    "{site}[_tbN][_class_ebpf]_raw_{runs}[_exp_t_{T}]_k{kernel}_{nic}_{env}_"
    "{as-is|nic_buf_N[_irq_pf0-X_pf1-Y]}[_date_YYYY-MM-DD_ver_NN][_Nth_exec[_note]].txt"
)


class _NameGroups(BaseModel):
    """The groups of _NAME_RE as matched (None: the optional part is absent)."""

    site: str
    testbed: str | None
    ebpf: str | None
    runs: int
    duration: int | None
    kernel: str
    nic: str
    env: str
    as_is: str | None
    nic_buf: int | None
    irq_kind0: str | None
    irq_cpu0: int | None
    irq_kind1: str | None
    irq_cpu1: int | None
    date: str | None
    ver: int | None
    exec: int | None
    exec_note: str | None


@dataclass(frozen=True)
class IrqPinning:
    kind: str  # pf | vf
    port0_cpu: int
    port1_cpu: int


@dataclass(frozen=True)
class PastramiName:
    """What a PASTRAMI file name says (see module docstring); ``to_meta``
    gives it as the analyses' metadata dict, in this field order."""

    file: str
    folder: str
    site: str
    testbed: str | None
    ebpf_router: bool
    runs: int
    duration_s: int
    kernel: str
    nic: str
    env: str
    nic_ring: str  # "default" or "large"
    nic_buf: int | None  # ring size; None: the default ring
    irq_pinning: IrqPinning | None
    pinning: str  # the paper's label: unpinned / pin-1cpu / pin-2cpu
    date: str | None
    ver: int | None
    exec_ordinal: int  # 1 unless _Nth_exec
    exec_note: str | None

    def to_meta(self) -> dict[str, Any]:
        return asdict(self)


def is_pastrami_name(name: str) -> bool:
    """Whether a file name is in the pattern of PASTRAMI's measurement files."""
    return _NAME_RE.match(name) is not None


def pastrami_name(path: str | os.PathLike) -> PastramiName:
    """The metadata encoded in a PASTRAMI file name, typed."""
    p = Path(path)
    m = _NAME_RE.match(p.name)
    if not m:
        raise DataFormatError(p, 0, f"file name does not match {_NAME_GRAMMAR}")
    g = _NameGroups.model_validate(m.groupdict())
    irq = None
    if g.irq_cpu0 is not None:
        if g.irq_kind0 != g.irq_kind1:
            raise DataFormatError(p, 0, "irq ports must both be pf or both be vf")
        irq = IrqPinning(g.irq_kind0, g.irq_cpu0, g.irq_cpu1)
    # The paper's labels: pin-1cpu = both ports on one CPU, pin-2cpu = two CPUs.
    if irq is None:
        pinning = "unpinned"
    else:
        pinning = "pin-1cpu" if irq.port0_cpu == irq.port1_cpu else "pin-2cpu"
    return PastramiName(
        file=p.name, folder=p.parent.name, site=g.site, testbed=g.testbed, ebpf_router=g.ebpf is not None,
        runs=g.runs, duration_s=g.duration if g.duration is not None else DEFAULT_DURATION_S,
        kernel=g.kernel, nic=g.nic, env=g.env, nic_ring="default" if g.as_is else "large", nic_buf=g.nic_buf,
        irq_pinning=irq, pinning=pinning, date=g.date, ver=g.ver,
        exec_ordinal=g.exec if g.exec is not None else 1, exec_note=g.exec_note)


def parse_filename(path: str | os.PathLike) -> dict[str, Any]:
    """Metadata encoded in a PASTRAMI file name (see module docstring), as
    a dict: PastramiName's fields (irq_pinning: None or {kind, port0_cpu,
    port1_cpu})."""
    return pastrami_name(path).to_meta()


@dataclass(frozen=True)
class TrialRow:
    """One run at one offered load. Counts are raw; nothing is clamped here."""

    offered_load_pps: float
    run_index: int  # 0-based position within its load line
    tx_pkts: int
    rx_pkts: int
    duration_s: float
    source: str = ""
    line_no: int = 0
    rx_discards_cum: int | None = None
    rx_discards_pkts: int | None = None  # this run's: the NIC dropped them (receive ring full)
    extra: tuple = ()
    meta: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def counters_inconsistent(self) -> bool:
        """rx > tx: impossible for a router, a counter artefact of the generator."""
        return self.rx_pkts > self.tx_pkts


def _is_count(v: Any) -> bool:
    # bool is an Integral in Python; a true/false in a counter slot is a format error.
    return isinstance(v, Integral) and not isinstance(v, bool) and v >= 0


def _parse_line(path: Path, line_no: int, text: str) -> tuple[float, int | None, list[list]]:
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(
            path, line_no,
            f"invalid JSON ({e.msg}, column {e.colno}); expected one array "
            "[[rate_pps, rx_discards_at_start], [tx_pkts, rx_pkts, ...], ...] per line",
        ) from None
    if not isinstance(rec, list) or len(rec) < 2:
        raise DataFormatError(path, line_no, "expected a JSON array with a header and at least one run")
    head = rec[0]
    if (not isinstance(head, list) or not head or isinstance(head[0], bool)
            or not isinstance(head[0], Real) or not head[0] > 0):
        raise DataFormatError(path, line_no,
                              f"expected header [rate_pps > 0, rx_discards_at_start], got {head!r}")
    runs = rec[1:]
    for i, run in enumerate(runs):
        if not isinstance(run, list) or len(run) < 2 or not (_is_count(run[0]) and _is_count(run[1])):
            raise DataFormatError(
                path, line_no,
                f"run {i}: expected [tx_pkts, rx_pkts, ...] with non-negative integer counts, got {run!r}",
            )
    return float(head[0]), int(head[1]) if len(head) > 1 and _is_count(head[1]) else None, runs


def read_pastrami_file(path: str | os.PathLike, *, check_runs: bool = True) -> list[TrialRow]:
    """Rows (one per load and run) of a PASTRAMI file, with its file-name metadata.

    Blank lines are ignored. Raises DataFormatError (naming file:line) for a
    malformed line, a repeated offered load, or - with ``check_runs`` - a load
    whose run count differs from the ``raw_{runs}`` of the file name.
    """
    p = Path(path)
    name = pastrami_name(p)
    meta = name.to_meta()
    try:
        with open(p, encoding="utf-8-sig", newline="") as fh:  # tolerate a BOM, keep "\r"
            text = fh.read()
    except UnicodeDecodeError as e:
        raise DataFormatError(p, 0, f"expected UTF-8 text ({e.reason})") from None
    rows: list[TrialRow] = []
    seen: dict[float, int] = {}
    # Split on "\n" only, so line numbers match what editors show; json ignores a trailing "\r".
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        load, discards, runs = _parse_line(p, line_no, line)
        if load in seen:
            raise DataFormatError(p, line_no, f"offered load {load:g} pps already given on line "
                                              f"{seen[load]}; expected one line per load")
        seen[load] = line_no
        if check_runs and len(runs) != name.runs:
            raise DataFormatError(p, line_no, f"expected {name.runs} runs (raw_{name.runs} "
                                              f"in the file name), found {len(runs)}")
        for i, run in enumerate(runs):
            three = len(run) == 3 and _is_count(run[2])
            cum = int(run[2]) if three else None
            # the run's own discards: the counter is cumulative from the line's header value
            own = cum - discards if cum is not None and discards is not None and cum >= discards else None
            discards = cum
            rows.append(TrialRow(
                offered_load_pps=load, run_index=i, tx_pkts=int(run[0]), rx_pkts=int(run[1]),
                duration_s=float(name.duration_s), source=str(p), line_no=line_no,
                rx_discards_cum=cum, rx_discards_pkts=own,
                extra=() if three else tuple(run[2:]), meta=meta,
            ))
    if not rows:
        raise DataFormatError(p, 0, "expected at least one load line, file has none")
    return rows


@dataclass(frozen=True)
class DiscardShare:
    """Where one load's loss happened: the packets the NIC's receive side
    discarded (its ring was full) against all lost (tx - rx), over the runs."""

    load_pps: float
    lost_pkts: int
    discarded_pkts: int

    @property
    def share(self) -> float | None:
        return self.discarded_pkts / self.lost_pkts if self.lost_pkts > 0 else None

    def to_dict(self) -> dict:
        return {"load_pps": self.load_pps, "lost_pkts": self.lost_pkts, "nic_discarded_pkts": self.discarded_pkts,
                "nic_share": self.share}


def discard_shares(rows: list[TrialRow]) -> list[DiscardShare]:
    """Per load with loss, over the runs whose discards are known (files with
    the third field); none for files without it."""
    out = []
    for load in sorted({r.offered_load_pps for r in rows}):
        known = [r for r in rows if r.offered_load_pps == load and r.rx_discards_pkts is not None]
        lost = sum(max(r.tx_pkts - r.rx_pkts, 0) for r in known)
        if known and lost:
            out.append(DiscardShare(load, lost, sum(r.rx_discards_pkts for r in known)))
    return out
