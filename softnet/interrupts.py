"""A Ctrl-C or SIGTERM is never lost, from exec to exit.

``install()`` (the command's first act) routes SIGINT and SIGTERM to one
handler for the whole run: it notes the signal, then raises
KeyboardInterrupt or Terminated where the program is. Raised inside code
that swallows it (a library's bare ``except:``, a ``__del__`` or a callback
run by C code during an import: "Exception ignored in ..."), the exception is
lost but the note is not: ``check()`` raises it again, and the command calls
it after its imports, when the host-change registry opens, at every change
it records and before it reports success. Code that answers a signal on
purpose (the agent's loop) calls ``handled()``.

``checkpoint(name)`` is where a test pauses the command deterministically:
with SOFTNET_PAUSE_AT=name the process says "softnet: paused at NAME" on
stderr and waits there for a signal (SOFTNET_PAUSE_SWALLOW=1: inside code
that swallows it, as a library might).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable

_received: int | None = None
_owner: int | None = None
# what a signal also stops: work in C code that may swallow the signal's exception and go on
# (a DuckDB query: its own check can lose it; its connection's interrupt() cannot)
_stoppers: dict[int, Callable[[], object]] = {}


class Terminated(BaseException):
    """SIGTERM arrived; a BaseException so that broad `except Exception` blocks let it pass."""


def raise_for(signum: int) -> None:
    raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated()


def note(signum: int) -> None:
    """Remember a signal (the first one) until it is handled. Only in a
    process whose command installed the handler: softnet used as a library
    (a test, a bench) keeps its own ways with signals."""
    global _received
    if _received is None and _owner == os.getpid():
        _received = signum


def _handler(signum, frame) -> None:
    if _owner is not None and os.getpid() != _owner:
        os._exit(128 + signum)  # a forked helper: its parent unwinds and undoes
    note(signum)
    for stop in list(_stoppers.values()):
        try:
            stop()
        except Exception:  # noqa: BLE001 - a stopper that fails must not keep the signal from raising
            pass
    raise_for(signum)


def stop_on_signal(key: object, stop: Callable[[], object] | None) -> None:
    """Call ``stop`` too when a signal arrives, until ``stop_on_signal(key, None)``."""
    if stop is None:
        _stoppers.pop(id(key), None)
    else:
        _stoppers[id(key)] = stop


def _unraisable(info) -> None:
    """A signal's exception swallowed where Python cannot raise it (a __del__,
    a callback): noted already, raised again by check(); its traceback would
    only be noise after "interrupted". So would the errors of objects the
    signal left half made (an event loop cut short in its __init__, whose
    __del__ then fails) once a signal has arrived."""
    if isinstance(info.exc_value, (KeyboardInterrupt, Terminated)) or _received is not None:
        return
    sys.__unraisablehook__(info)


def _thread_error(args) -> None:
    """A thread's error once a signal arrived (its work cut short under it): noise after
    "interrupted", like _unraisable's."""
    if _received is not None or isinstance(args.exc_value, (KeyboardInterrupt, Terminated)):
        return
    threading.__excepthook__(args)


def install() -> None:
    """SIGINT and SIGTERM to the handler, for the rest of the process.
    Before it runs (the interpreter's own start-up, some 30 ms) Python's
    defaults apply: a Ctrl-C then ends the process with Python's traceback,
    unless the launcher held the signals back (the `softnet` command
    `make setup` writes does, with env --block-signal): they are let through here, once the
    handler is in place, and one that came meanwhile is raised now."""
    global _owner
    _owner = os.getpid()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _handler)
    sys.unraisablehook = _unraisable
    threading.excepthook = _thread_error
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def received() -> int | None:
    return _received


def check() -> None:
    """Raise the noted signal's exception (one that was swallowed on its way)."""
    if _received is not None:
        raise_for(_received)


def handled() -> None:
    """The signal was answered on purpose: nothing to raise again."""
    global _received
    _received = None


def checkpoint(name: str) -> None:
    """A test's pause point (SOFTNET_PAUSE_AT); nothing otherwise."""
    if os.environ.get("SOFTNET_PAUSE_AT") != name:
        return
    sys.stderr.write(f"softnet: paused at {name}\n")
    sys.stderr.flush()
    if os.environ.get("SOFTNET_PAUSE_SWALLOW") == "1":
        try:
            time.sleep(30)
        except BaseException:  # noqa: BLE001 - on purpose: a library that swallows the signal
            pass
        return
    time.sleep(30)
