"""`softnet stacks`: the kernel stacks a profiled trial or comparison
sampled on the SUT's CPUs, as a flame graph (SVG; against another variant: a
differential one), Brendan Gregg's folded format, or a speedscope file."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from softnet.analysis.kernel_functions import Trial, folded_per_packet
from softnet.errors import InputError
from softnet.report.flamegraph import speedscope, svg
from softnet.results import readers
from softnet.results.raw import RawStacks
from softnet.units import format_rate, parse_rate

FORMATS = ("svg", "folded", "speedscope")


@dataclass
class Picked:
    """The stacks chosen: a title, and (stacks, forwarded packets, own threads) per trial."""

    title: str
    trials: list[Trial]


def from_raw_file(path: Path) -> Picked:
    """A raw trial file (softnet trial --profile --raw FILE, or a store's raw/...)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(str(path), f"not a readable JSON file: {exc}") from None
    # as `softnet trial --raw` writes it, or a store's raw file ("raw_trial"), or a kept pair ("raw")
    raw = (doc.get("raw_trial") or doc.get("raw") or doc) if isinstance(doc, dict) else None
    stacks = ((raw or {}).get("profile") or {}).get("stacks") if isinstance(raw, dict) else None
    if not stacks:
        raise InputError(str(path), "no kernel stacks in this raw trial: measure with --profile (and --stack-hz "
                         "above 0)")
    forwarded = int(((raw.get("sink") or {}).get("rx_window_pkts")) or 0)
    rate = (raw.get("spec") or {}).get("rate_pps")
    # a trial that took turns: its own SUT kthreads' samples (as its result counts them)
    own = {int(t) for t in (raw.get("before") or {}).get("sut_thread_runtime_ns") or {}} \
        if raw.get("interleave") else None
    sut = (raw.get("testbed") or {}).get("sut") or "trial"
    return Picked(f"{sut} at {format_rate(rate) if rate else '?'}",
                  [(RawStacks.model_validate(stacks), forwarded, own)])


def from_store(results: Path, campaign: str | None, variant: str | None, load: str | None) -> Picked:
    """A variant's trials (one load) in a results folder; a compare
    campaign names its variants, other campaigns their cells by number."""
    with readers.open_results(results) as store:
        camps = readers.campaigns(store)
        if not camps:
            raise InputError(str(results), "no campaign in this results folder")
        ids = [c.campaign_id for c in camps]
        cid = campaign or ids[-1]
        if cid not in ids:
            raise InputError("--campaign", f"'{cid}': not in {results} (there: {', '.join(ids)})")
        summary = store.comparison(cid, finished_only=False)
        names = [summary.baseline, *summary.candidates] if summary else [str(c.cell_id)
                                                                          for c in readers.cells(store, cid)]
        name = variant if variant is not None else names[0]
        if name not in names:
            raise InputError("--variant", f"'{name}': campaign {cid} has {', '.join(names)}")
        cell = names.index(name)
        found = readers.trial_stacks(store, cid, cell)
    if not found:
        raise InputError(str(results), f"campaign {cid}, {name}: no trial with kernel stacks (profile with "
                         "--profile and --stack-hz above 0)")
    rates = sorted({t.intended_rate_pps for t in found})
    want = rates[0] if load is None else parse_rate(load, "--load")
    pick = [t for t in found if abs(t.intended_rate_pps - want) <= 0.001 * want]
    if not pick:
        raise InputError("--load", f"'{load}': the profiled loads are {', '.join(format_rate(r) for r in rates)}")
    return Picked(f"{name} at {format_rate(want)}, {len(pick)} trials",
                  [(t.stacks, t.forwarded_pkts, t.threads) for t in pick])


def run(source: Path, fmt: str, out: Path | None, campaign: str | None, variant: str | None,
        against: str | None, load: str | None) -> None:
    if fmt not in FORMATS:
        raise InputError("--format", f"'{fmt}': accepted {', '.join(FORMATS)}")
    if against is not None and fmt != "svg":
        raise InputError("--against", "a differential flame graph is an SVG: give --format svg")
    is_file = source.is_file()
    if is_file and (campaign or variant or against):
        raise InputError("--campaign/--variant/--against", f"{source} is one raw trial: these pick from a results "
                         "folder")
    picked = from_raw_file(source) if is_file else from_store(source, campaign, variant, load)
    folded = folded_per_packet(picked.trials)
    if fmt == "folded":  # integer sample counts, as flamegraph.pl and speedscope read the format
        text = "".join(f"{stack} {n}\n" for stack, n in sorted(_samples(picked).items()))
    elif fmt == "speedscope":
        text = json.dumps(speedscope(folded, f"softnet: {picked.title} (ns per forwarded packet)"))
    else:
        base = from_store(source, campaign, against, load) if against is not None else None
        title = f"{picked.title}: kernel stacks, ns per forwarded packet"
        if base is not None:
            title = f"{picked.title} against {base.title}"
        text = svg(folded, title, folded_per_packet(base.trials) if base else None)
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.write_text(text)
    except OSError as exc:
        raise InputError("--out", f"cannot write {out}: {exc}") from None


def _samples(picked: Picked) -> dict[str, int]:
    """Busy samples per stack over the chosen trials (the folded format counts samples)."""
    from softnet.analysis.kernel_functions import folded

    out: dict[str, int] = {}
    for raw, _, threads in picked.trials:
        for stack, n in folded(raw, threads).items():
            out[stack] = out.get(stack, 0) + n
    return out
