"""`softnet doctor`'s summary, from what the real probes answered on this VM
(tests/data/doctor/this_vm.json, `softnet doctor --json`)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from softnet.doctor.checks import Check
from softnet.doctor.summary import render_summary, short_name

CAPTURED = [Check(**c) for c in json.loads((Path(__file__).parent / "data/doctor/this_vm.json").read_text())]


def shown(checks: list[Check]) -> list[str]:
    console = Console(width=80, record=True)
    console.print(render_summary(checks))
    return console.export_text().splitlines()


def test_this_vms_answers_fit_a_screen_and_name_what_each_failure_disables():
    lines = shown(CAPTURED)
    text = " ".join(" ".join(lines).split())
    assert len(lines) <= 40 and max(len(x) for x in lines) <= 80 and "…" not in text
    failing = [c for c in CAPTURED if c.ok is False]
    assert failing and lines[0].startswith(f"softnet doctor: {len(CAPTURED) - len(failing)} of {len(CAPTURED)} "
                                           f"checks work; {len(failing)} do not")
    for c in failing:  # each failure by name with what it disables, whole
        assert f" {c.name} " in text and " ".join(c.enables.split()) in text, c.name
    works = text[text.index("works"):text.index("does not work")]
    assert all(short_name(c.name) in works for c in CAPTURED if c.ok)
    assert "softnet doctor --verbose" in text


def test_a_host_that_answers_little_is_summed_up_by_group():
    """Without root nearly every check is unknown: one line per group, not
    one per check, and the advice to run it as root."""
    checks = [c if c.name.startswith("tool:") else replace(c, ok=None) for c in CAPTURED]
    lines = shown(checks)
    text = "\n".join(lines)
    assert len(lines) <= 40 and "run softnet doctor as root" in text
    assert "could not be told (--verbose: what each disables)" in text
    assert any(x.split()[:1] == ["qdiscs"] and "fq_codel" in x for x in lines)
