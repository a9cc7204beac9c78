"""One registry of every change softnet makes to the host, undone in reverse.

Each change is recorded *before* the call that makes it returns control, with
the callable that undoes it. `HostChanges` is a context manager: leaving it by
success, exception, Ctrl-C (KeyboardInterrupt) or SIGTERM (turned into
`Terminated` while it is active) undoes everything. A kill -9 cannot be caught:
everything softnet creates carries the `sn-` prefix so `softnet clean` finds it.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

from softnet import interrupts
from softnet.errors import HostNotRestored
from softnet.interrupts import Terminated

log = logging.getLogger("softnet.changes")
NAME_PREFIX = "sn-"


__all__ = ["HostChanges", "Change", "Terminated", "NAME_PREFIX", "deferred_signals"]


@dataclass
class Change:
    what: str
    undo: Callable[[], None]


@dataclass
class HostChanges:
    changes: list[Change] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)  # provenance: every change ever made
    undo_errors: list[str] = field(default_factory=list)
    # A signal's exception raised where Python swallows it (an at-fork hook,
    # a __del__: "Exception ignored in ...") is raised again at the next
    # change, or after the undo: a Ctrl-C is never lost. Code that catches
    # it on purpose inside the block clears this.
    signalled: int | None = None

    def record(self, what: str, undo: Callable[[], None]) -> None:
        self._raise_signalled()
        self.changes.append(Change(what, undo))
        self.applied.append(what)

    def _raise_signalled(self) -> None:
        """Kept until the exception reaches __exit__."""
        if self.signalled is not None:
            raise KeyboardInterrupt() if self.signalled == signal.SIGINT else Terminated()

    def journalled(self, what: str, op: str, undo: Callable[[], None], **args) -> None:
        """A change softnet's namespaces do not hold (a host-wide sysctl, a
        process outside them): recorded as above, and first in this process's
        journal (softnet.tools.journal.this_process), so that a kill -9 leaves
        `softnet clean` the undo data. Call before making the change."""
        from softnet.tools import journal

        own = journal.this_process()
        i = own.record(what, op, **args)

        def undo_then_mark() -> None:
            undo()
            own.done(i)

        self.record(what, undo_then_mark)

    def undo_all(self) -> None:
        # Signals must not interrupt the undo itself (a Ctrl-C during a teardown is not lost).
        with deferred_signals():
            while self.changes:
                change = self.changes.pop()
                try:
                    change.undo()
                except Exception as exc:  # keep undoing the rest, report at the end
                    self.undo_errors.append(f"undo '{change.what}': {exc}")
                    log.error("undo '%s' failed: %s", change.what, exc)

    def __enter__(self) -> "HostChanges":
        interrupts.check()  # a signal swallowed before: nothing is changed yet, nothing to undo
        owner = os.getpid()

        def on_signal(signum, frame):
            # Forked helpers (pyroute2 opens namespace sockets from a child)
            # inherit this handler; only the owner unwinds and undoes.
            if os.getpid() != owner:
                os._exit(128 + signum)
            interrupts.note(signum)
            self.signalled = signum
            self._raise_signalled()

        # Installed explicitly: a process started in the background by a
        # non-interactive shell inherits SIGINT ignored, and Ctrl-C must still
        # undo what we changed.
        self._old = _install(on_signal)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.undo_all()
        finally:
            _restore(self._old)
        if exc_type is not None and issubclass(exc_type, (KeyboardInterrupt, Terminated)):
            self.signalled = None  # it reached us
        self._raise_signalled()  # one that was swallowed on its way
        if self.undo_errors and exc_type is None:  # a failed undo is never silent: the command exits non-zero
            raise HostNotRestored(self.undo_errors)


@contextmanager
def deferred_signals():
    """SIGINT and SIGTERM wait for the block's end, then go to the handler they
    would have met: for what must not be cut in half (an undo; a namespace that
    a forked helper is still making, which an undo run meanwhile would miss)."""
    pending: list[int] = []

    def later(signum, frame):
        interrupts.note(signum)
        pending.append(signum)
    old = _install(later)
    try:
        yield
    finally:
        _restore(old)
        for signum in pending[:1]:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.raise_signal(signum)


def _install(handler) -> dict:
    """SIGINT and SIGTERM to ``handler``; the old handlers. Only the main
    thread may: in another (a fleet worker's cell) the process's owner
    handles signals, and a lost worker's hosts are restored by their agents."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}


def _restore(old: dict) -> None:
    for sig, handler in old.items():
        signal.signal(sig, handler)
