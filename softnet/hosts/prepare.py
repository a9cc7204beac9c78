"""`softnet host prepare`: make a fresh host ready for its agent.

The controller's own softnet (this source tree: package, native tools'
sources, Makefile) goes to the host over SFTP and `make` builds it there:
the Debian packages (apt), the virtualenv, and the native tools compiled for
the host's own kernel (CO-RE against its BTF). The host's `softnet` entry of
the inventory says where: DIR/.venv/bin/softnet installs into DIR.
"""
from __future__ import annotations

import asyncio
import shlex
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Callable

import asyncssh

from softnet import __version__
from softnet.errors import InputError, TestbedError
from softnet.hosts.inventory import Host
from softnet.hosts.session import check_key_files, connect, run

SOURCE_ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("pyproject.toml", "Makefile", "README.md", "softnet", "native")
STEPS = ("apt", "venv", "native")  # targets of the Makefile, in this order
PREPARE_TIMEOUT_S = 1800.0


def install_dir(name: str, host: Host) -> Path:
    path = Path(host.softnet)
    if path.parts[-3:] != (".venv", "bin", "softnet") or not path.is_absolute():
        raise InputError(f"hosts.{name}.softnet", f"'{host.softnet}': prepare installs into DIR and runs "
                         "DIR/.venv/bin/softnet; give an absolute path of that form")
    return path.parents[2]


def source_files(root: Path = SOURCE_ROOT) -> list[Path]:
    """The files a host needs to build softnet: git's list where there is one
    (no build products, caches or results), else the shipped folders."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", *SHIPPED], capture_output=True, text=True,
                             check=True, timeout=30).stdout
        files = [root / line for line in out.splitlines() if line]
    except (OSError, subprocess.SubprocessError):
        files = [p for top in SHIPPED for p in ([root / top] if (root / top).is_file() else
                                                (root / top).rglob("*"))
                 if p.is_file() and "__pycache__" not in p.parts and "build" not in p.parts]
    return sorted(f for f in files if f.is_file())


def tarball(dest: Path, root: Path = SOURCE_ROOT) -> Path:
    path = dest / f"softnet-{__version__}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for f in source_files(root):
            tar.add(f, arcname=str(f.relative_to(root)), recursive=False)
    return path


def prepare(name: str, host: Host, steps: tuple[str, ...] = STEPS,
            say: Callable[[str], None] = lambda line: None) -> dict:
    """Ship this softnet to the host and build it there; returns where, what
    ran and how long. ``say`` gets the build's output line by line."""
    bad = [s for s in steps if s not in STEPS]
    if bad or not steps:
        raise InputError("--steps", f"'{','.join(bad) or ''}': accepted: {', '.join(STEPS)}")
    target = install_dir(name, host)
    check_key_files(name, host)
    with tempfile.TemporaryDirectory(prefix="softnet-prepare-") as tmp:
        tar = tarball(Path(tmp))
        return run(_prepare(name, host, target, tar, [s for s in STEPS if s in steps], say), PREPARE_TIMEOUT_S)


async def _prepare(name: str, host: Host, target: Path, tar: Path, steps: list[str], say) -> dict:
    loop = asyncio.get_running_loop()
    started = loop.time()
    q = shlex.quote(str(target))
    try:
        async with await connect(host) as conn:
            # The tarball through the session's stdin: no SFTP subsystem needed.
            unpacked = await conn.run(f"mkdir -p {q} && tar -xzf - -C {q}", input=tar.read_bytes(),
                                      encoding=None)
            if unpacked.exit_status != 0:
                raise TestbedError(f"host {name}: unpacking into {target} failed: "
                                   f"{unpacked.stderr.decode(errors='replace').strip()}")
            proc = await conn.create_process(f"make -C {q} {' '.join(steps)} 2>&1", encoding="utf-8")
            tail: list[str] = []
            async for line in proc.stdout:
                say(line.rstrip())
                tail = (tail + [line.rstrip()])[-20:]
            result = await proc.wait()
    except (OSError, asyncssh.Error) as exc:
        raise TestbedError(f"host {name} ({host.address}): {type(exc).__name__}: {exc}") from None
    if result.exit_status != 0:
        raise TestbedError(f"host {name}: `make {' '.join(steps)}` in {target} failed "
                           f"({result.exit_status}): " + " | ".join(tail[-5:]))
    return {"host": name, "dir": str(target), "steps": steps, "seconds": loop.time() - started,
            "softnet_version": __version__}
