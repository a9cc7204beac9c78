"""The commands about real hosts: inventory check (and the remote trial's output)."""
from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict
from rich.table import Table

from softnet.cli.output import console, print_json


class View(BaseModel):
    """What these commands show of softnet.hosts' findings (--json prints
    the findings as they came); read from dicts or from objects."""

    model_config = ConfigDict(frozen=True, from_attributes=True)


class Problem(View):
    field: str  # the inventory field that does not match, e.g. hosts.sut.interfaces.0.mac
    error: str


class HostKernel(View):
    kernel: str


class PortFound(View):
    name: str
    driver: str | None = None
    nic_knobs: list[str] | None = None


class HostFound(View):
    reachable: bool
    host: HostKernel | None = None  # None: unreachable, or refused at hello
    softnet_version: str | None = None
    clock_offset_ms: float | None = None
    interfaces: dict[str, PortFound | None] | None = None  # port index -> facts (None: no such interface)


class InventoryFound(View):
    hosts: dict[str, HostFound]
    problems: list[Problem]


class JournalFound(View):
    pending: list[str]


class HostCleaned(View):
    journals: list[JournalFound]
    errors: list[str]


class Prepared(View):
    dir: str
    steps: list[str]
    seconds: float
    softnet_version: str


def inventory_check(path: Path, doctor: bool, as_json: bool) -> int:
    """Exit code 1 when any field of the inventory does not match its host."""
    from softnet.hosts.check import check_inventory
    from softnet.hosts.inventory import load

    inv = load(path)
    found = check_inventory(inv, doctor)
    seen = InventoryFound.model_validate(found)
    if as_json:
        print_json(found)
        return 1 if seen.problems else 0
    table = Table(title=f"inventory {path}", title_justify="left")
    for col in ("host", "reached", "kernel", "softnet", "clock", "ifaces"):
        table.add_column(col, no_wrap=col != "kernel", overflow="fold")
    for name, h in seen.hosts.items():
        if h.host is None:  # unreachable, or refused at hello
            table.add_row(name, "yes" if h.reachable else "no", "-", "-", "-", "-")
            continue
        n_if = len(inv.hosts[name].interfaces)
        bad = {p.field.split(".")[3] for p in seen.problems if p.field.startswith(f"hosts.{name}.interfaces.")}
        table.add_row(name, "yes", h.host.kernel, h.softnet_version, f"{h.clock_offset_ms:+.1f} ms",
                      f"{n_if - len(bad)}/{n_if} ok")
    console.print(table)
    for name, h in seen.hosts.items():  # which NIC knobs (testbed.nic) each interface takes
        for f in (h.interfaces or {}).values():
            if f is not None:
                knobs = ", ".join(f.nic_knobs or []) or "none"
                console.print(f"{name} {f.name} ({f.driver or '?'}) takes NIC knobs: {knobs}",
                              markup=False, highlight=False)
    for p in seen.problems:
        console.print(f"[red]{p.field}[/]: {p.error}", soft_wrap=False, highlight=False)
    if not seen.problems:
        console.print("inventory check: every host and interface matches")
    return 1 if seen.problems else 0


def clean_hosts(path: Path, check: bool, as_json: bool) -> int:
    """Exit 1 when a host has (or, after cleaning, still has) a journal to replay."""
    import textwrap

    from softnet.hosts.inventory import load
    from softnet.hosts.remote_clean import clean_hosts as clean

    found = clean(load(path), check)
    seen = {name: HostCleaned.model_validate(h) for name, h in found.items()}
    bad = any(h.errors or (check and h.journals) for h in seen.values())
    if as_json:
        print_json(found)
        return 1 if bad else 0
    for name, h in seen.items():
        if not h.journals and not h.errors:
            console.print(f"{name}: nothing left by softnet", highlight=False)
        for j in h.journals:
            console.print(f"{name}: {'found' if check else 'replayed'} journal of a dead agent, "
                          f"{len(j.pending)} changes:", markup=False, highlight=False)
            console.print(textwrap.fill("; ".join(j.pending), width=78, initial_indent="  ",
                                        subsequent_indent="  "), markup=False, highlight=False)
        for err in h.errors:
            console.print(f"{name}: not restored: {err}", markup=False, highlight=False)
    return 1 if bad else 0


def prepare_hosts(path: Path, names: str | None, steps: str) -> int:
    from softnet.errors import InputError
    from softnet.hosts.inventory import load
    from softnet.hosts.prepare import prepare

    inv = load(path)
    chosen = [n.strip() for n in names.split(",")] if names else list(inv.hosts)
    unknown = [n for n in chosen if n not in inv.hosts]
    if unknown:
        raise InputError("--hosts", f"'{unknown[0]}' is not in {path}; accepted: {', '.join(inv.hosts)}")
    for name in chosen:
        console.print(f"[bold]{name}[/]: preparing {inv.hosts[name].address}", highlight=False)
        done = Prepared.model_validate(prepare(
            name, inv.hosts[name], tuple(s.strip() for s in steps.split(",") if s.strip()),
            say=lambda line: console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)))
        console.print(f"{name}: softnet {done.softnet_version} in {done.dir} "
                      f"({', '.join(done.steps)}, {done.seconds:.0f} s)", highlight=False)
    return 0
