"""The controller's end of an agent: one SSH connection per host (asyncssh),
`softnet agent --stdio` started on it, requests answered in order.

asyncssh runs on one event loop in a background thread, so the synchronous
trial code calls `session.call(...)` and several hosts are connected at once
(`open_sessions`). Keepalives detect a dead management link within about
keepalive_interval x keepalive_count_max; the agent, for its part, undoes
everything when its lease lapses.
"""
from __future__ import annotations

import asyncio
import getpass
import json
import os
import shlex
import socket
import sys
import threading
import time
from collections import deque
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

import asyncssh
from pydantic import BaseModel, ValidationError

from softnet.errors import InputError, TestbedError
from softnet.hosts.agent import PROTOCOL_VERSION
from softnet.hosts.agent_protocol import Answer, CleanReply, Clock, Hello, TimeReply, Undone
from softnet.hosts.inventory import Host

KEEPALIVE_S, KEEPALIVE_MAX = 2.0, 3
CONNECT_TIMEOUT_S = 15.0
CLOCK_ROUNDS = 5
R = TypeVar("R", bound=BaseModel)
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def loop() -> asyncio.AbstractEventLoop:
    """The process's asyncio loop for SSH, running in a daemon thread."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="softnet-ssh", daemon=True).start()
        return _loop


def run(coro, timeout: float):
    fut = asyncio.run_coroutine_threadsafe(coro, loop())
    try:
        return fut.result(timeout)
    except FutureTimeout:
        fut.cancel()
        raise


def controller_id() -> str:
    """Who is asking: user@host pid N (what a second user is told)."""
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"


def check_key_files(name: str, h: Host) -> None:
    """The identity and known_hosts files the inventory names exist here."""
    for key in ("identity", "known_hosts"):
        value = getattr(h, key)
        if value and not os.path.isfile(os.path.expanduser(value)):
            raise InputError(f"hosts.{name}.{key}", f"{value}: no such file on this controller")


async def connect(h: Host) -> asyncssh.SSHClientConnection:
    """An SSH connection to an inventory host, with keepalives."""
    opts = {"port": h.port, "username": h.user, "keepalive_interval": KEEPALIVE_S,
            "keepalive_count_max": KEEPALIVE_MAX, "connect_timeout": CONNECT_TIMEOUT_S}
    if h.identity:  # this key only, not whatever an SSH agent offers
        opts |= {"client_keys": [os.path.expanduser(h.identity)], "agent_path": None}
    if h.known_hosts:
        opts["known_hosts"] = os.path.expanduser(h.known_hosts)
    return await asyncssh.connect(h.address, **opts)


class AgentSession:
    """``call(op, **args)`` -> the agent's reply (a dict; ``ask`` parses it
    into a reply model); a refusal raises InputError naming the inventory
    field, any other failure TestbedError."""

    def __init__(self, name: str, host: Host):
        self.name, self.host = name, host
        self.conn = self.proc = None
        self.stderr: deque[str] = deque(maxlen=50)
        self.next_id = 0
        self.hello = Hello()
        self.clock = Clock()

    # ---- connection -----------------------------------------------------
    def open(self) -> "AgentSession":
        check_key_files(self.name, self.host)
        try:
            run(self._open(), CONNECT_TIMEOUT_S + 10)
        except (OSError, asyncssh.Error, FutureTimeout) as exc:
            raise TestbedError(f"host {self.name} ({self.target()}): cannot start the agent over SSH: "
                               f"{type(exc).__name__}: {exc}") from None
        try:
            self.hello = self.ask(Hello, "hello", version=PROTOCOL_VERSION, controller=controller_id(),
                                  housekeeping_cpus=self.host.housekeeping_cpus)
        except InputError as exc:  # the inventory's field, with the host it belongs to
            self.close(undo=False)
            raise InputError(f"hosts.{self.name}.{exc.field}", exc.message) from None
        self.clock = self.measure_clock()
        return self

    def measure_clock(self, rounds: int = CLOCK_ROUNDS) -> Clock:
        """Its clock against ours, NTP-style: each answer was stamped within
        the round trip [t0, t1]; the shortest round trip bounds it best."""
        best = None
        for _ in range(rounds):
            t0 = time.time()
            there = self.ask(TimeReply, "time").time_unix_s
            t1 = time.time()
            if best is None or t1 - t0 < best[1] - best[0]:
                best = (t0, t1, there)
        t0, t1, there = best
        return Clock(offset_s=there - (t0 + t1) / 2, uncertainty_s=(t1 - t0) / 2)

    def target(self) -> str:
        return f"{self.host.user}@{self.host.address}:{self.host.port}"

    async def _open(self) -> None:
        h = self.host
        self.conn = await connect(h)
        cmd = shlex.join([h.softnet, "agent", "--stdio", "--lease-s", f"{h.lease_s:g}"])
        self.proc = await self.conn.create_process(cmd, encoding="utf-8")
        asyncio.ensure_future(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        try:
            async for line in self.proc.stderr:
                self.stderr.append(line.rstrip())
        except (asyncssh.Error, OSError):
            pass

    # ---- requests -------------------------------------------------------------
    async def _call(self, req: dict) -> str:
        self.proc.stdin.write(json.dumps(req) + "\n")
        line = await self.proc.stdout.readline()
        if not line:
            raise TestbedError(f"host {self.name}: the agent ended ({self._why()})")
        return line

    def ask(self, reply: type[R], op: str, timeout: float = 60.0, **args) -> R:
        """call(), its reply parsed into ``reply``."""
        body = self.call(op, timeout, **args)
        try:
            return reply.model_validate(body)
        except ValidationError as exc:
            raise TestbedError(f"host {self.name}: {op}: unexpected reply: {' '.join(str(exc).split())}") from None

    def call(self, op: str, timeout: float = 60.0, **args) -> dict:
        """The agent's reply to ``op``, without its envelope (id, ok)."""
        if self.proc is None:
            raise TestbedError(f"host {self.name}: not connected")
        self.next_id += 1
        req = {"id": self.next_id, "op": op, **args}
        try:
            line = run(self._call(req), timeout)
        except FutureTimeout:
            raise TestbedError(f"host {self.name}: no answer to {op} within {timeout:g} s "
                               f"(management link down?)") from None
        except (asyncssh.Error, OSError, BrokenPipeError) as exc:
            if self.proc.exit_status is not None or self.stderr:
                raise TestbedError(f"host {self.name}: {op}: the agent ended ({self._why()})") from None
            raise TestbedError(f"host {self.name}: {op}: the SSH connection failed: {exc}") from None
        try:
            answer = Answer.model_validate_json(line)
        except ValidationError:
            raise TestbedError(f"host {self.name}: {op}: not an answer: {line.strip()[:200]}") from None
        if answer.id != self.next_id:
            raise TestbedError(f"host {self.name}: answer {answer.id} to request {self.next_id} ({op})")
        if not answer.ok:
            if answer.field:
                raise InputError(answer.field, f"host {self.name}: {answer.error}")
            raise TestbedError(f"host {self.name}: {op}: {answer.error}")
        return answer.body()

    def _why(self) -> str:
        tail = " | ".join(list(self.stderr)[-3:])
        return tail or "no message"

    def close(self, undo: bool = True) -> Undone:
        """Undo everything on the host (bye), then close; returns what was undone."""
        out = Undone()
        if self.proc is not None and undo:
            try:
                out = self.ask(Undone, "bye", timeout=60)
            except TestbedError as exc:  # the agent undoes by itself on EOF or lease
                out = Undone(lost=str(exc))
        if self.conn is not None:
            try:
                run(self._close(), 10)
            except (FutureTimeout, asyncssh.Error, OSError):
                pass
        self.conn = self.proc = None
        return out

    async def _close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.write_eof()
            try:
                await asyncio.wait_for(self.proc.wait_closed(), 5)
            except asyncio.TimeoutError:
                pass
        self.conn.close()
        await self.conn.wait_closed()


def open_sessions(hosts: dict[str, Host]) -> dict[str, AgentSession]:
    """Connect to several hosts at once; on any failure the others are closed."""
    sessions = {name: AgentSession(name, h) for name, h in hosts.items()}
    errors = []
    threads = [threading.Thread(target=_open_one, args=(s, errors)) for s in sessions.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        for s in sessions.values():
            s.close()
        raise errors[0]
    return sessions


def reserve(sessions: list[AgentSession], command: str, wait_s: float) -> None:
    """Each host's testbed lock, then `softnet clean --check` there: a killed
    run's leftovers its reaper did not undo stop us before anything changes."""
    holder = {"who": controller_id(), "command": command}
    for s in sessions:
        s.call("reserve", holder=holder, wait_s=wait_s, timeout=wait_s + 30)
        left = s.ask(CleanReply, "clean", check=True).journals
        if left:
            raise TestbedError(f"host {s.name}: a killed run left changes its reaper did not undo "
                               f"({'; '.join(left[0].pending[:3])}): run `softnet clean` there")


def _open_one(session: AgentSession, errors: list) -> None:
    try:
        session.open()
    except Exception as exc:  # reported by the caller
        errors.append(exc)


if __name__ == "__main__":  # pragma: no cover - a manual probe: python -m softnet.hosts.session INVENTORY HOST
    from softnet.hosts.inventory import load

    inv = load(sys.argv[1])
    s = AgentSession(sys.argv[2], inv.hosts[sys.argv[2]]).open()
    print(json.dumps(s.hello.model_dump(), indent=1))
    s.close()
