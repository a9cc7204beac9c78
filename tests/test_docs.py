"""The docs hold together: every relative link and image in them (and in
the README) resolves, every `docs/...` path the code names exists, no page
is longer than a reader can take in, and the layers page matches the
import contract."""
from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# every page of the repository: docs/, the READMEs beside the code and the data, the changelog
PAGES = sorted(p for p in (ROOT / f for f in subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT,
                                                             capture_output=True, text=True).stdout.split())
               if p.exists())
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
MAX_LINES = 400


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    return [ROOT / f for f in out]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_links_resolve_and_the_page_is_short(page):
    text = page.read_text()
    local = [t for t in LINK.findall(text) if "://" not in t and not t.startswith("mailto:")]
    broken = [t for t in local if not (page.parent / t).exists()]
    outside = [t for t in local if not (page.parent / t).resolve().is_relative_to(ROOT)]
    assert not broken and not outside, (broken, outside)  # outside: resolves here, not in a clone
    assert len(text.splitlines()) <= MAX_LINES or page.name == "CHANGELOG.md"  # history grows


def test_every_docs_path_the_code_names_exists():
    named = {}
    for f in tracked():
        if f.name == "CHANGELOG.md":  # history names pages as they were
            continue
        if f.suffix in (".py", ".toml", ".c", ".h", ".md") or f.name == "Makefile":
            for m in re.findall(r"(?<![\w/.-])(docs/[\w./-]+\.(?:md|png|json))", f.read_text(errors="replace")):
                named.setdefault(m, f.relative_to(ROOT))
    missing = {m: str(f) for m, f in named.items() if not (ROOT / m).exists()}
    assert not missing, missing


def test_the_layers_page_matches_the_import_contract():
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    page = (ROOT / "docs/explanation/architecture.md").read_text()
    block = page.split("```")[1]
    for layer in contract["layers"]:
        for pkg in layer.split("|"):
            name = pkg.strip().replace(".", "/")
            assert re.search(rf"^{re.escape(name)}\b", block, re.M), f"{name} is not in the layers block"
    tools = sorted(p.name for p in (ROOT / "native").iterdir() if p.name != "common" and any(p.glob("*.c")))
    listed = re.search(r"native/\{([^}]*)\}", block).group(1).split(",")
    assert sorted(x.strip() for x in listed) == tools


def test_no_issue_numbers_in_code_or_docs():
    """A reader of the repository cannot look an issue number up: comments and
    pages say what is asked or why instead."""
    pattern = re.compile(r"\bissues? ?#?\d+\b", re.I)
    hits = [f"{f.relative_to(ROOT)}:{n}" for f in tracked() if f.suffix in (".py", ".c", ".h", ".md", ".toml")
            and f.name != "CHANGELOG.md" and "vmlinux" not in f.name
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1) if pattern.search(line)]
    assert not hits, hits


def test_tutorials_and_how_tos_speak_to_users_not_of_the_lab():
    """Pages a newcomer follows talk about their host, not the machine the
    project was measured on or the issues it was built from."""
    pattern = re.compile(r"this VM|the issue|before the fix|when the issue", re.I)
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()[:60]}" for p in PAGES
            if p.parent.name in ("tutorials", "how-to")
            for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, hits


def test_every_result_field_says_what_it_is():
    empty = [f"{p.name}: {line.split('|')[1].strip()}" for p in (ROOT / "docs/reference").glob("results*.md")
             for line in p.read_text().splitlines()
             if line.startswith("| `") and not line.rstrip("|").rstrip().split("|")[-1].strip()]
    assert not empty, empty
