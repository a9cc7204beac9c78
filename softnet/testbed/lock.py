"""One measuring run per testbed host: an flock(2) on a lock file naming its holder.

Two runs at once disturb each other's measurements, so every measuring
command holds this lock for its whole run. flock belongs to the open file:
the kernel drops it when the holder exits, however it exits (kill -9
included), so a lock left by a dead run is simply taken over. The holder
(pid, command line, start time, results directory) is written into the file
for whoever is refused.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from pydantic import BaseModel, ConfigDict

from softnet.errors import SoftnetError

LOCK_DIR = Path("/run/softnet")
LOCK_NAME = "testbed.lock"
POLL_S = 0.1


class Holder(BaseModel):
    """Who holds the lock, as written into its file: a softnet command (pid,
    command line, start, results) or, through its agent, a remote controller
    (who: "user@host pid N", and its command). Only the keys it was made with
    are written (and any a newer softnet adds are kept)."""
    model_config = ConfigDict(frozen=True, extra="allow")

    pid: int | None = None
    command: str = "?"
    started_unix_s: float = 0.0
    results_dir: str | None = None
    who: str | None = None

    def line(self) -> dict:
        return self.model_dump(exclude_unset=True)


_held: list[Holder] = []  # this process's holder while it holds the lock (nested takes are free)


class TestbedBusy(SoftnetError):
    """Another run holds the testbed (exit 1: nothing wrong with the input)."""

    __test__ = False
    exit_code = 1

    def __init__(self, holder: Holder, wait_s: float):
        self.holder, self.wait_s = holder, wait_s
        waited = f" after waiting {wait_s:g} s" if wait_s else ""
        super().__init__(f"the testbed is in use by {describe(holder)}{waited}; one measuring run at a time "
                         "(wait for it, or give --wait SECONDS)")


def describe(holder: Holder) -> str:
    if not holder.pid:
        return "another softnet run (holder not yet written)"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.started_unix_s))
    where = f", results in {holder.results_dir}" if holder.results_dir else ""
    if holder.who:  # a remote controller, through its agent on this host
        return f"{holder.who} `{holder.command}` since {since}{where} (agent pid {holder.pid})"
    return f"pid {holder.pid} `{holder.command}` since {since}{where}"


def read_holder(path: Path) -> Holder:
    """The holder written in the lock file; an empty one if none is (yet)."""
    try:
        return Holder.model_validate_json(path.read_text() or "{}")
    except (OSError, ValueError):  # ValidationError is a ValueError
        return Holder()


@contextmanager
def testbed_lock(results_dir: str | Path | None = None, wait_s: float = 0.0, lock_dir: Path | None = None,
                 on_wait: Callable[[Holder], None] = lambda holder: None,
                 on_behalf: dict | None = None) -> Iterator[Holder]:
    """Hold the testbed lock for the body; wait up to ``wait_s`` for a holder
    to finish (``on_wait(holder)`` once), else raise TestbedBusy naming it.
    ``on_behalf``: who holds it, when not this process's command (the agent
    takes it for a remote controller: {"who": "user@host pid N", "command": ...})."""
    if _held:  # the command holds it and its testbed takes it again: one process, one run
        yield _held[0]
        return
    lock_dir = lock_dir or Path(os.environ.get("SOFTNET_LOCK_DIR", LOCK_DIR))
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / LOCK_NAME
    # O_CLOEXEC (Python's default): the native tools do not inherit the lock and keep it past our exit.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        started, told = time.monotonic(), False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
            holder, waited = read_holder(path), time.monotonic() - started
            if waited >= wait_s:
                raise TestbedBusy(holder, wait_s)
            if not told:
                on_wait(holder)
                told = True
            time.sleep(min(POLL_S, max(wait_s - waited, 0.0)))
        # a softnet command by its arguments; a library user (bench, tests) by its own command line
        cmd = (["softnet", *sys.argv[1:]] if Path(sys.argv[0]).name in ("softnet", "__main__.py") else sys.argv)
        holder = Holder.model_validate({"pid": os.getpid(), "command": " ".join(cmd), "started_unix_s": time.time(),
                                        "results_dir": None if results_dir is None else str(results_dir),
                                        **(on_behalf or {})})
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder.line()).encode(), 0)
        _held.append(holder)
        try:
            yield holder
        finally:
            _held.clear()
            os.ftruncate(fd, 0)  # the next reader sees no stale holder; the lock goes with close()
    finally:
        os.close(fd)
