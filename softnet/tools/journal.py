"""An on-host journal of undo data, so that a host is restored even if the
process changing it (the agent) is killed with SIGKILL.

Before each change, its undo data is appended as one JSON line and fsync'ed;
only then is the change made. A killed agent's journal is replayed by its
reaper (softnet.tools.reaper) or by `softnet clean`. Lines::

    {"journal": 1, "pid": P, "pid_start": T, "started_unix_s": S,
     "netns_ino": I, "netns_cookie": C, **owner}          header
    {"i": n, "op": "sysctl", "what": "...", **args}       a change to undo
    {"undone": n} | {"undone": n, "skipped": "..."}       undone (or moot)
    {"undo_failed": n, "error": "..."}                    still pending

A failed undo stays pending, so that the next replay tries it again and
`softnet clean --check` keeps reporting the host as not restored. Undo ops are
idempotent: replaying an entry twice is harmless. They act on the network
namespace the journal was written in (see replay()).
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from softnet.errors import TestbedError
from softnet.tools.undo_ops import (NETNS_GONE, Affinity, Kill, UndoEntry, new_entry, parse_entry, pid_start,
                                    running, undo_entry)

__all__ = ["Journal", "NETNS_GONE", "default_state_dir", "pid_start", "read_journal", "replay", "running",
           "stale_journals"]

AGENT_BASE = Path("/run/softnet/agent")
JOURNAL_NAME = "journal.jsonl"
KEEP_DONE = 5
SO_NETNS_COOKIE = 71  # Linux >= 5.14; not in Python 3.11's socket module


# ---- where journals live --------------------------------------------------
def agent_base() -> Path:
    """Parent of the per-namespace state dirs (SOFTNET_AGENT_BASE: tests)."""
    return Path(os.environ.get("SOFTNET_AGENT_BASE") or AGENT_BASE)


def netns_ino() -> int:
    # thread-self: a thread may have joined another namespace (pyroute2 pushns)
    return os.stat("/proc/thread-self/ns/net").st_ino


def netns_cookie() -> int | None:
    """Never reused, unlike namespace inodes: tells a namespace from a later one
    that got the same inode."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            return struct.unpack("Q", s.getsockopt(socket.SOL_SOCKET, SO_NETNS_COOKIE, 8))[0]
    except OSError:
        return None


def default_state_dir() -> Path:
    """Keyed by network namespace: emulated hosts in tests are namespaces sharing
    one filesystem; on a real host this is the root namespace."""
    env = os.environ.get("SOFTNET_AGENT_STATE")
    return Path(env) if env else agent_base() / f"net-{netns_ino()}"


# ---- the lines ------------------------------------------------------------
class Header(BaseModel):
    """A journal's first line: who wrote it, in which network namespace; the
    owner's own keys (controller, agent_pid, command...) follow as extras."""
    model_config = ConfigDict(frozen=True, extra="allow")

    journal: Literal[1]
    pid: int
    pid_start: int | None = None
    started_unix_s: float | None = None
    netns_ino: int | None = None
    netns_cookie: int | None = None

    def owner(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def line(self) -> dict:
        return self.model_dump(exclude_unset=True)


class Undone(BaseModel):
    """{"undone": n} or {"undone": n, "skipped": why}: entry n needs no undo any more."""
    model_config = ConfigDict(frozen=True, extra="forbid")

    undone: int
    skipped: str | None = None


class UndoFailed(BaseModel):
    """{"undo_failed": n, "error": ...}: entry n stays pending."""
    model_config = ConfigDict(frozen=True, extra="forbid")

    undo_failed: int
    error: str


def _mark(obj: dict) -> Undone | UndoFailed | None:
    for model in (Undone, UndoFailed):
        try:
            return model.model_validate(obj)
        except ValidationError:
            continue
    return None


# ---- reading --------------------------------------------------------------
def owner_alive(header: Header) -> bool:
    return running(header.pid, header.pid_start)


def _parse(text: str, path: Path) -> tuple[Header, list[UndoEntry]]:
    header, entries, done = None, {}, set()
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue  # torn by a killed writer: its record() never returned, no change was made
        if not isinstance(obj, dict):
            continue
        if header is None:
            try:
                header = Header.model_validate(obj)
            except ValidationError:
                raise TestbedError(f"{path}: not a softnet journal (remove it if nothing is to be undone)") from None
            continue
        mark = _mark(obj)
        if isinstance(mark, Undone):
            done.add(mark.undone)
        elif mark is None:
            try:
                e = parse_entry(obj)
            except ValidationError:
                continue  # no entry number: not an entry
            entries[e.i] = e
    if header is None:
        raise TestbedError(f"{path}: empty journal (remove it)")
    return header, [entries[i] for i in sorted(entries) if i not in done]


def read_journal(path: Path) -> tuple[Header, list[UndoEntry]]:
    """(header, entries still to undo, oldest first)."""
    path = Path(path)
    return _parse(path.read_text(), path)


def stale_journals(base: Path | None = None) -> list[Path]:
    """Journals with pending entries whose owner is dead (or its pid reused)."""
    base = Path(base) if base else agent_base()
    stale = []
    for path in sorted(base.glob(f"*/{JOURNAL_NAME}")):
        try:
            header, pending = read_journal(path)
        except (OSError, TestbedError):
            continue
        if pending and not owner_alive(header):
            stale.append(path)
    return stale


# ---- replaying ------------------------------------------------------------
@contextlib.contextmanager
def signals_ignored():
    """Ctrl-C or SIGTERM must not interrupt an undo half way (as in HostChanges).
    Only the main thread may set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _append(fd: int, obj: BaseModel | dict) -> None:
    line = obj.line() if isinstance(obj, (UndoEntry, Header)) else \
        obj.model_dump(exclude_none=True) if isinstance(obj, BaseModel) else obj
    data = (json.dumps(line) + "\n").encode()
    if os.write(fd, data) != len(data):
        raise OSError(f"short write to journal fd {fd}")
    os.fsync(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _finish(path: Path) -> None:
    """Nothing left to undo: keep the journal as one of the last KEEP_DONE done files."""
    # named by the nanosecond, and never over another: two journals can finish within one millisecond
    stamp = time.time_ns()
    while (dest := path.with_name(f"journal-{stamp}.done.jsonl")).exists():
        stamp += 1
    path.rename(dest)
    done = sorted(path.parent.glob("journal-*.done.jsonl"), key=lambda p: p.stat().st_mtime)
    for old in done[:-KEEP_DONE]:
        old.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def replay_here(path: Path, netns_gone: bool = False) -> list[str]:
    """Undo the pending entries, newest first, in this process and namespace.
    Holds the journal's lock, so a reaper and `softnet clean` never replay at
    once; whoever comes second finds nothing pending."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    except FileNotFoundError:
        return []  # done already
    errors = []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino != os.fstat(fd).st_ino:
                return []  # finished and renamed while we waited for the lock
        except FileNotFoundError:
            return []
        with open(fd, "rb", closefd=False) as f:
            text = f.read().decode(errors="replace")
        header, pending = _parse(text, path)
        if text and not text.endswith("\n"):
            os.write(fd, b"\n")  # end a torn line so that our marks stay parseable
        for e in reversed(pending):
            try:
                skipped = undo_entry(e, netns_gone)
                _append(fd, Undone(undone=e.i, skipped=skipped or None))
            except Exception as exc:  # keep undoing the rest, report at the end
                errors.append(f"undo '{e.what}': {exc}")
                _append(fd, UndoFailed(undo_failed=e.i, error=str(exc)))
        if not errors:
            _finish(path)
    finally:
        os.close(fd)
    return errors


def find_netns(ino: int) -> str | None:
    """A path that opens the namespace with this inode: a name in /run/netns,
    else any process living in it."""
    for pattern, root in (("*", Path("/run/netns")), ("[0-9]*/ns/net", Path("/proc"))):
        for p in root.glob(pattern):
            try:
                if os.stat(p).st_ino == ino:
                    return str(p)
            except OSError:
                continue
    return None


def replay(path: Path) -> list[str]:
    """Undo a journal's pending entries in the namespace it was written in:
    here, or through a child that joins it; if that namespace is gone, its own
    entries (links, net sysctls) went with it and only the rest is undone."""
    path = Path(path)
    try:
        header, pending = read_journal(path)
    except FileNotFoundError:
        return []
    with signals_ignored():  # inherited by the child: it is not interrupted either
        cookie = header.netns_cookie
        if header.netns_ino == netns_ino() and cookie in (None, netns_cookie()):
            return replay_here(path)
        handle = find_netns(header.netns_ino if header.netns_ino is not None else -1)
        if handle is None:
            return replay_here(path, netns_gone=True)
        proc = subprocess.run([sys.executable, "-m", "softnet.tools.reaper", "--journal", str(path),
                               "--netns", handle], capture_output=True, text=True, timeout=300,
                              env=reaper_env())
        try:
            return ReaperAnswer.model_validate_json(proc.stdout.strip().splitlines()[-1]).errors
        except (ValueError, IndexError):
            return [f"replay of {path} in {handle} failed ({proc.returncode}): {proc.stderr.strip()}"]


class ReaperAnswer(BaseModel):
    """What `python -m softnet.tools.reaper --netns` prints last: its replay's errors."""
    errors: list[str]


def reaper_env() -> dict:
    """Lets `python -m softnet.tools.reaper` import this very softnet, from any cwd."""
    root = str(Path(__file__).resolve().parents[2])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))


# ---- this process's own ----------------------------------------------------
_own: "Journal | None" = None


def this_process() -> "Journal":
    """The journal of this softnet process's host-wide changes (a global sysctl,
    a process outside the testbed's namespaces), opened on first use beside
    the agents' journals: `softnet clean` replays it if this process is
    killed, and a resumed run first does (softnet.testbed.cleanup)."""
    global _own
    if _own is None:
        _own = Journal.open(agent_base() / f"local-{os.getpid()}",
                            {"command": " ".join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv[:3]))},
                            replay_stale=True)
        atexit.register(_close_own)
    return _own


def finished_local_dirs(base: Path | None = None) -> list[Path]:
    """The folders of processes' own journals (local-PID) with nothing left
    to undo and their process gone: kept done files only."""
    base = Path(base) if base else agent_base()
    out = []
    for d in sorted(base.glob("local-*")):
        pid = d.name.partition("-")[2]
        if not (d / JOURNAL_NAME).exists() and pid.isdigit() and not running(int(pid), None):
            out.append(d)
    return out


def _close_own() -> None:
    """At exit with nothing pending: the journal goes, and its folder with it."""
    global _own
    if _own is not None and _own.close():
        with contextlib.suppress(OSError):
            for f in _own.path.parent.iterdir():
                f.unlink()
            _own.path.parent.rmdir()
        _own = None


# ---- writing --------------------------------------------------------------
class Journal:
    """The journal of one agent. record() before each change; undo_all() at the
    end (or leave it to the reaper). Usable as a context manager."""

    def __init__(self, path: Path, fd: int, header: Header):
        self.path, self.header = path, header
        self._fd: int | None = fd
        self._next = 0
        self._lock = threading.Lock()

    @classmethod
    def open(cls, state_dir: Path | None, owner: dict, replay_stale: bool = False) -> "Journal":
        state_dir = Path(state_dir) if state_dir else default_state_dir()
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = state_dir / JOURNAL_NAME
        if path.exists():
            cls._settle(path, replay_stale)
        me = os.getpid()
        if clash := set(owner) & set(Header.model_fields):
            raise ValueError(f"owner keys {sorted(clash)} are reserved by the journal header")
        header = Header(journal=1, pid=me, pid_start=pid_start(me), started_unix_s=round(time.time(), 3),
                        netns_ino=netns_ino(), netns_cookie=netns_cookie(), **owner)
        # Written whole before it appears: link() makes it visible atomically,
        # and fails if another agent created the journal meanwhile.
        tmp = state_dir / f".{JOURNAL_NAME}.{me}"
        tmp.write_text(json.dumps(header.line()) + "\n")
        with open(tmp) as f:
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise TestbedError(f"{path}: another agent opened it just now") from None
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(state_dir)
        return cls(path, os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC), header)

    @staticmethod
    def _settle(path: Path, replay_stale: bool) -> None:
        """An existing journal: refuse a live owner's; a dead owner's must be replayed."""
        header, pending = read_journal(path)
        if owner_alive(header):
            raise TestbedError(f"{path}: in use by pid {header.pid} (started at "
                               f"{header.started_unix_s}); one agent per host at a time")
        if pending and not replay_stale:
            raise TestbedError(f"{path}: pid {header.pid} died leaving {len(pending)} changes not undone; "
                               "run `softnet clean` on this host to restore it")
        if pending and (errors := replay(path)):
            raise TestbedError(f"{path}: host not restored: {'; '.join(errors)}; fix that, "
                               "then run `softnet clean` (or remove the journal)")
        with contextlib.suppress(FileNotFoundError):  # a reaper may have finished it meanwhile
            _finish(path)

    def record(self, what: str, op: str, **args) -> int:
        """Append the undo data of a change and fsync it: make the change only
        after this returns. Returns the entry number."""
        entry = new_entry(0, what, op, args)  # numbered below, under the lock
        if isinstance(entry, (Kill, Affinity)) and entry.pid_start is None:
            start = pid_start(entry.pid)
            if start is None:
                raise ValueError(f"no process {entry.pid}")
            entry = entry.model_copy(update={"pid_start": start})
        with self._lock:
            if self._fd is None:
                raise TestbedError(f"{self.path}: journal closed")
            i = self._next
            _append(self._fd, entry.model_copy(update={"i": i}))
            self._next += 1
        return i

    def done(self, i: int) -> None:
        """Entry i was undone by its owner itself (as a run ends its pieces one
        by one): nothing of it is left for a replay."""
        with self._lock:
            if self._fd is not None:
                _append(self._fd, Undone(undone=i))

    def close(self) -> bool:
        """Close it if nothing is pending (kept as a done file); True if closed."""
        with self._lock:
            if self._fd is None or self.pending():
                return self._fd is None
            os.close(self._fd)
            self._fd = None
            with contextlib.suppress(FileNotFoundError):
                _finish(self.path)
            return True

    def pending(self) -> list[UndoEntry]:
        try:
            return read_journal(self.path)[1]
        except FileNotFoundError:
            return []

    def undo_all(self) -> list[str]:
        """Undo every pending change, newest first; returns the errors. When all
        is undone the journal is closed and kept as a done file."""
        with self._lock, signals_ignored():
            if self._fd is None:
                return []
            errors = replay_here(self.path)
            if not errors:
                os.close(self._fd)
                self._fd = None
        return errors

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc) -> None:
        self.undo_all()
