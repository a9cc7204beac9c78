"""Run host tools as argv lists (never through a shell) with clear failures."""
from __future__ import annotations

import subprocess

from softnet.errors import TestbedError


def run(argv: list[str], input: str | None = None, check: bool = True, timeout: float = 30) -> str:
    try:
        proc = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise TestbedError(f"{argv[0]} not found: run `make setup`") from None
    if check and proc.returncode != 0:
        raise TestbedError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def in_netns(ns: str, argv: list[str], **kw) -> str:
    """Run argv inside namespace ns; `ip netns exec` also gives it that namespace's /sys."""
    return run(["ip", "netns", "exec", ns, *argv], **kw)


def run_in(ns: str | None, argv: list[str], **kw) -> str:
    """argv inside namespace ns, or here for None (a remote agent's own host)."""
    return in_netns(ns, argv, **kw) if ns else run(argv, **kw)


def read_ns_file(ns: str | None, path: str) -> str:
    """A file as namespace ns sees it (None: this process's own)."""
    return run_in(ns, ["cat", path]).strip()


def write_ns_file(ns: str, path: str, value: str) -> None:
    in_netns(ns, ["tee", path], input=value + "\n")


def sysctl_get(ns: str, key: str) -> str:
    return in_netns(ns, ["sysctl", "-n", key]).strip()


def sysctl_set(ns: str, key: str, value: str) -> None:
    in_netns(ns, ["sysctl", "-qw", f"{key}={value}"])
