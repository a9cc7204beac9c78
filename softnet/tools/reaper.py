"""The reaper: a detached process that outlives an agent and, when the agent
exits (even by SIGKILL), replays what the agent's journal still holds.

    python -m softnet.tools.reaper --pid AGENT --journal PATH   wait, then replay
    python -m softnet.tools.reaper --journal PATH --netns NSPATH
        replay now inside that network namespace (journal.replay uses this to
        restore another namespace without leaving its own); prints the errors
        as one JSON line
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from softnet.tools import journal

_spawned: list[subprocess.Popen] = []  # kept referenced: no "still running" warning on collection

CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000
MS_REC, MS_SLAVE, MNT_DETACH, PR_SET_NAME = 0x4000, 1 << 19, 2, 15


def spawn_reaper(agent_pid: int, journal_path: Path) -> int:
    """Start the reaper of agent_pid's journal; returns its pid. In its own
    session (a hangup of the agent's SSH session does not reach it), cwd /,
    stdio on /dev/null and a log in the state dir: it holds none of the
    agent's pipes, so the controller still sees the agent's EOF."""
    journal_path = Path(journal_path).resolve()
    with open(journal_path.parent / "reaper.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "softnet.tools.reaper", "--pid", str(agent_pid), "--journal", str(journal_path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True, start_new_session=True,
            cwd="/", env=journal.reaper_env())
    _spawned.append(proc)
    return proc.pid


def wait_for_exit(pid: int, start: int | None) -> None:
    """Until that process (not a later one with its pid) has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (OSError, AttributeError):  # kernel < 5.3
        fd = None
    try:
        if not journal.running(pid, start):  # checked after pidfd_open: it cannot be reused now
            return
        if fd is not None:
            poll = select.poll()
            poll.register(fd, select.POLLIN)
            while not poll.poll():
                pass
        else:
            while journal.running(pid, start):
                time.sleep(0.2)
    finally:
        if fd is not None:
            os.close(fd)


def enter_netns(handle: str) -> None:
    """Join a network namespace as `ip netns exec` does, with a private mount
    namespace and a fresh /sys: sysfs shows the devices of the namespace that
    mounted it."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(rc: int, what: str) -> None:
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    fd = os.open(handle, os.O_RDONLY)
    check(libc.setns(fd, CLONE_NEWNET), f"setns {handle}")
    os.close(fd)
    check(libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    check(libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None), "make / a slave mount")
    libc.umount2(b"/sys", MNT_DETACH)  # may not be mounted at all
    check(libc.mount(b"sysfs", b"/sys", b"sysfs", 0, None), "mount sysfs")


def log(msg: str) -> None:
    print(time.strftime("%Y-%m-%dT%H:%M:%S"), f"reaper {os.getpid()}:", msg, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="softnet.tools.reaper")
    p.add_argument("--pid", type=int)
    p.add_argument("--journal", type=Path, required=True)
    p.add_argument("--netns")
    args = p.parse_args(argv)
    if args.netns:
        enter_netns(args.netns)
        header, _ = journal.read_journal(args.journal)
        gone = header.netns_cookie not in (None, journal.netns_cookie())  # an inode reused
        print(json.dumps(journal.ReaperAnswer(errors=journal.replay_here(args.journal, netns_gone=gone)).model_dump()))
        return 0
    # Named for ps and for the tests' check that nothing softnet started lingers.
    ctypes.CDLL(None).prctl(PR_SET_NAME, b"softnet-reaper", 0, 0, 0)
    # What ends the agent (a hangup, Ctrl-C, SIGTERM to its session) must not
    # end us: the agent's death is what we wait for.
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    if args.pid is not None:
        try:
            header, _ = journal.read_journal(args.journal)
        except FileNotFoundError:
            return 0  # finished before we started
        start = header.pid_start if header.pid == args.pid else None
        wait_for_exit(args.pid, start)
    try:
        _, pending = journal.read_journal(args.journal)
    except FileNotFoundError:
        return 0  # the agent undid everything itself
    if not pending:
        return 0
    log(f"agent {args.pid} exited leaving {len(pending)} changes; replaying {args.journal}")
    errors = journal.replay(args.journal)
    for err in errors:
        log(err)
    log("host restored" if not errors else f"{len(errors)} undo errors: run `softnet clean`")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
