"""Find and remove what a killed softnet run left behind.

Everything softnet creates is named with the `sn-` prefix (namespaces) or
`sn` + six hex digits (interfaces), so leftovers are recognizable by name. A
live run claims its namespaces in /run/softnet/<run id>.owner (its pid): those
are not leftovers while that process lives. Processes still running inside those namespaces (a generator or
sink whose parent was killed) are stopped first, or the namespace would live on.
Journals of dead agents (softnet.tools.journal) are replayed before anything
else: they know exactly what to undo, in which namespace.
"""
from __future__ import annotations

import contextlib
import dataclasses
import re
import shutil
from typing import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import IPRoute

from softnet.errors import SoftnetError
from softnet.tools import journal
from softnet.tools.changes import NAME_PREFIX
from softnet.testbed.netns import OWNERS_DIR, processes_in, remove_netns, stop_pids

NETNS_DIR = Path("/run/netns")
IFNAME_RE = re.compile(r"^sn[0-9a-f]{6}[a-z]$")


def live_owner(ns_name: str) -> int | None:
    """PID of the live softnet run that owns this namespace, if any."""
    run_id = ns_name[len(NAME_PREFIX):].split("-")[0]
    try:
        pid = int((OWNERS_DIR / f"{run_id}.owner").read_text())
    except (OSError, ValueError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None


def leftover_namespaces() -> list[str]:
    """softnet namespaces whose run is gone (a live run's are not leftovers)."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir()
                  if p.name.startswith(NAME_PREFIX) and live_owner(p.name) is None)


def stale_owner_files() -> list[Path]:
    if not OWNERS_DIR.is_dir():
        return []
    return [p for p in OWNERS_DIR.glob("*.owner") if live_owner(f"{NAME_PREFIX}{p.stem}-x") is None]


def leftover_links() -> list[str]:
    """softnet-named interfaces in the root namespace whose run is gone (a live
    run's are not leftovers: emulated hosts put their management links there)."""
    with IPRoute() as ipr:
        return sorted(name for link in ipr.get_links() if IFNAME_RE.match(name := link.get("ifname") or "")
                      and live_owner(f"{NAME_PREFIX}{name[2:8]}-x") is None)


@dataclass(frozen=True)
class StaleJournal:
    path: Path
    pending: list[str]  # what each pending entry changed


@dataclass(frozen=True)
class Leftovers:
    namespaces: list[str]
    processes: dict[int, str]  # pid -> its namespace
    root_links: list[str]
    journals: list[StaleJournal]
    journal_errors: list[str] = field(default_factory=list)  # clean(): undo steps that failed (left pending)

    def any(self) -> bool:
        return bool(self.namespaces or self.processes or self.root_links or self.journals)

    def counts(self) -> list[str]:
        """"2 namespaces", ...: what there is, for one line."""
        return [f"{len(v)} {k}" for k, v in (("namespaces", self.namespaces), ("processes", self.processes),
                                             ("root links", self.root_links), ("journals", self.journals)) if v]

    def to_json(self) -> dict:
        return {"namespaces": self.namespaces, "processes": {str(pid): ns for pid, ns in self.processes.items()},
                "root_links": self.root_links,
                "journals": [{"path": str(j.path), "pending": j.pending} for j in self.journals]}


def stale_journals() -> list[StaleJournal]:
    """Journals of dead agents: path and what each pending entry changed."""
    found = []
    for path in journal.stale_journals():
        try:
            pending = journal.read_journal(path)[1]
        except (OSError, SoftnetError):
            continue  # finished meanwhile
        found.append(StaleJournal(path, [e.what or e.op for e in pending]))
    return found


def _leftovers() -> Leftovers:
    namespaces = leftover_namespaces()
    return Leftovers(namespaces, processes_in(namespaces), leftover_links(), stale_journals())


def find_leftovers() -> Leftovers:
    return _leftovers()


def clean() -> Leftovers:
    """Remove all leftovers; returns what was removed, and in journal_errors
    the undo steps of journals that failed (those stay pending)."""
    found = _leftovers()
    errors = [err for j in found.journals for err in journal.replay(j.path)]
    for d in journal.finished_local_dirs():  # a killed process's own journal, replayed: its folder goes
        shutil.rmtree(d, ignore_errors=True)
    stop_pids(list(found.processes))
    for name in found.namespaces:
        remove_netns(name)
    for owner in stale_owner_files():
        owner.unlink(missing_ok=True)
    if found.root_links:
        with IPRoute() as ipr:
            for name in found.root_links:
                for idx in ipr.link_lookup(ifname=name):
                    ipr.link("del", index=idx)
    return dataclasses.replace(found, journal_errors=errors)


@contextlib.contextmanager
def restoring(lock, on_restored: Callable[[list[str]], None] = lambda counts: None) -> Iterator[object]:
    """Hold the testbed ``lock``; once held, undo what a killed run left
    (only a dead run's: a live one holds the lock or owns its namespaces),
    ``on_restored`` told what it was."""
    with lock as holder:
        found = find_leftovers()
        if found.any():
            errors = clean().journal_errors
            on_restored(found.counts())
            if errors:
                raise SoftnetError("a killed run's changes could not be undone: " + "; ".join(errors))
        yield holder
