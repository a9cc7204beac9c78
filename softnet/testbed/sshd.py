"""An OpenSSH server inside a network namespace, started through the change
registry: what makes a namespace look like a remote host to an SSH client.

Keys are throwaway ed25519 keys made for one run. The server runs in the
foreground (-D) as our child, logging to a file (-e): a pipe nobody drains
could block it, and the log is what we show when it fails to start.
"""
from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from softnet.errors import TestbedError
from softnet.testbed.netns import processes_in, stop_pids
from softnet.tools import hostcmd
from softnet.tools.changes import HostChanges
from softnet.tools.process import terminate

SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")  # compiled into Debian's sshd; it refuses to start without it
START_TIMEOUT_S = 10.0


def keygen(path: Path, comment: str) -> str:
    """A fresh ed25519 key pair at path (path.pub); returns the public key line."""
    for p in (path, path.with_name(path.name + ".pub")):
        p.unlink(missing_ok=True)  # ssh-keygen would ask before overwriting
    hostcmd.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], input="")
    return path.with_name(path.name + ".pub").read_text().strip()


def ensure_privsep_dir(changes: HostChanges) -> None:
    if PRIVSEP_DIR.is_dir():
        return
    changes.record(f"directory {PRIVSEP_DIR}", _rmdir_if_empty)
    PRIVSEP_DIR.mkdir(mode=0o755, parents=True)


def _rmdir_if_empty() -> None:
    try:
        PRIVSEP_DIR.rmdir()
    except OSError:
        pass  # gone already, or a system sshd put something there since


def write_config(path: Path, addr: str, host_key: Path, authorized_keys: Path, env: dict[str, str]) -> None:
    lines = [
        f"ListenAddress {addr}",
        "Port 22",
        f"HostKey {host_key}",
        "PermitRootLogin prohibit-password",
        f"AuthorizedKeysFile {authorized_keys}",
        "PidFile none",
        "UsePAM no",
        "StrictModes no",  # the keys live in a workdir whose modes we do not police
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "ClientAliveInterval 0",  # the remote mode's lease, not sshd, decides when a controller is gone
        "LogLevel ERROR",
        "MaxStartups 50",
        "MaxSessions 50",
    ]
    if env:
        lines.append("SetEnv " + " ".join(f"{k}={v}" for k, v in env.items()))
    path.write_text("\n".join(lines) + "\n")


def start(changes: HostChanges, ns: str, config: Path, log: Path) -> subprocess.Popen:
    """sshd -D inside ns; its undo stops it and every session it spawned."""
    holder: list[subprocess.Popen] = []
    changes.record(f"sshd in {ns} ({config})", lambda: stop(holder[0] if holder else None, ns))
    with open(log, "wb") as out:
        # `ip netns exec` execs sshd, so the child's pid is sshd's; it also
        # gives sshd and its sessions the namespace's view of /sys.
        holder.append(subprocess.Popen(["ip", "netns", "exec", ns, str(SSHD), "-D", "-e", "-f", str(config)],
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=out))
    return holder[0]


def stop(proc: subprocess.Popen | None, ns: str) -> None:
    terminate(proc)
    # Sessions outlive the listening sshd (an agent started over SSH, say);
    # left running they would keep the namespace and its links alive.
    kill_all_in(ns)


def kill_all_in(ns: str) -> None:
    stop_pids(list(processes_in([ns])))


def wait_listening(proc: subprocess.Popen | None, addr: str, log: Path | None,
                   timeout: float = START_TIMEOUT_S, port: int = 22) -> None:
    """Return once addr:port answers with an SSH banner, else TestbedError with sshd's log."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise TestbedError(f"sshd for {addr} exited ({proc.returncode}): {_log_text(log)}")
        try:
            with socket.create_connection((addr, port), timeout=1) as s:
                s.settimeout(2)
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.05)
    raise TestbedError(f"sshd on {addr}:{port} not answering after {timeout:g} s ({last}): {_log_text(log)}")


def _log_text(log: Path | None) -> str:
    text = log.read_text(errors="replace").strip() if log is not None and log.exists() else ""
    return text or "(sshd wrote nothing)"
