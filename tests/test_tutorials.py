"""Every tutorial in docs/tutorials is run as written: each `$ ` command of
its console blocks in a fresh folder, in order, and each output it shows
is checked for shape (every word it shows is in what the command printed;
numbers vary from run to run, words do not). A tutorial that needs root
says so on its first line (`<!-- needs: root -->`) and runs with the
netns tests; the real-hosts one runs on emulated hosts (netns + sshd),
its inventory written where the tutorial's is.

SOFTNET_RECORD_TUTORIALS=1 writes what each command printed back into the
page (then trim what varies: a line of the page may be `...`)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import host_state, wait_host_state

# long end-to-end tests: `make test` runs them, `make check` does not
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "docs/tutorials").glob("*.md"))
WORD = re.compile(r"[A-Za-z][A-Za-z_]{2,}")
RECORD = os.environ.get("SOFTNET_RECORD_TUTORIALS") == "1"


@dataclass
class Step:
    command: str
    shown: list[str] = field(default_factory=list)  # the output lines the page shows
    line: int = 0  # where the command is in the page


def steps(page: Path) -> list[Step]:
    out: list[Step] = []
    lines = page.read_text().splitlines()
    i, in_block = 0, False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            in_block = line.strip() == "```console" if not in_block else False
        elif in_block and line.startswith("$ "):
            cmd, n = [line[2:]], i
            heredoc = re.search(r"<<'?(\w+)'?", line)
            while cmd[-1].endswith("\\") or (heredoc and lines[i].strip() != heredoc.group(1)):
                i += 1
                cmd.append(lines[i])
                if heredoc and lines[i].strip() == heredoc.group(1):
                    break
            out.append(Step("\n".join(cmd), line=n + 1))
        elif in_block and out:
            out[-1].shown.append(line)
        i += 1
    return out


def needs_root(page: Path) -> bool:
    return page.read_text().startswith("<!-- needs: root")


def run_page(page: Path, folder: Path) -> list[tuple[Step, str]]:
    env = {**os.environ, "COLUMNS": "80", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = []
    for step in steps(page):
        r = subprocess.run(["bash", "-c", step.command], cwd=folder, env=env, capture_output=True, text=True,
                           timeout=600)
        # as a terminal shows them: the progress (stderr) while it runs, a few lines of it kept, then the tables
        progress = r.stderr.rstrip("\n").splitlines()
        if len(progress) > 4:
            progress = progress[:2] + ["..."] + progress[-1:]
        printed = "\n".join(progress + r.stdout.rstrip("\n").splitlines())
        assert r.returncode == 0, f"{page.name}:{step.line}: `{step.command}` exited {r.returncode}:\n{printed}"
        done.append((step, printed))
    return done


def check_shape(page: Path, done: list[tuple[Step, str]]) -> None:
    for step, printed in done:
        have = set(WORD.findall(printed))
        missing = [w for x in step.shown if x.strip() != "..." for w in WORD.findall(x) if w not in have]
        assert not missing, f"{page.name}:{step.line}: `{step.command}` did not print {missing[:8]}:\n{printed}"


def record(page: Path, done: list[tuple[Step, str]]) -> None:
    lines = page.read_text().splitlines()
    for step, printed in reversed(done):
        start = step.line + step.command.count("\n")
        end = start + len(step.shown)
        lines[start:end] = printed.rstrip("\n").splitlines()
    page.write_text("\n".join(lines) + "\n")


def try_page(page: Path, folder: Path) -> None:
    done = run_page(page, folder)
    if RECORD:
        record(page, done)
    else:
        check_shape(page, done)


PLAIN = [p for p in TUTORIALS if not needs_root(p)]
ROOTED = [p for p in TUTORIALS if needs_root(p) and p.stem != "real-hosts"]


def test_there_are_the_tutorials_a_newcomer_needs():
    assert {p.stem for p in TUTORIALS} >= {"first-trial", "first-campaign", "first-search", "first-comparison",
                                          "real-hosts", "af-xdp-lab"}


@pytest.mark.parametrize("page", PLAIN, ids=[p.stem for p in PLAIN])
def test_a_tutorial_without_root(page, tmp_path):
    try_page(page, tmp_path)


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, XDP)")
@pytest.mark.parametrize("page", ROOTED, ids=[p.stem for p in ROOTED])
def test_a_tutorial_on_this_host(page, tmp_path, host_unchanged):
    try_page(page, tmp_path)


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, sshd)")
def test_the_real_hosts_tutorial_on_emulated_hosts(tmp_path):
    from softnet.testbed import lock
    from softnet.testbed.emulated_hosts import EmulatedHosts
    from softnet.tools.changes import HostChanges

    page = ROOT / "docs/tutorials/real-hosts.md"
    with lock.testbed_lock(wait_s=float(os.environ.get("SOFTNET_WAIT") or 0)):
        before = host_state()
        with HostChanges() as changes:
            inventory = EmulatedHosts(changes, testbeds=1).build()
            (tmp_path / "lab.toml").write_text(inventory.read_text())
            try_page(page, tmp_path)
        assert wait_host_state(before) == before
