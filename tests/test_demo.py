"""`softnet demo`, the main job, end to end: the probe, the sweep around
the probed maximum, the verdict, the summary a person reads and the report,
with the host as it was after."""
from __future__ import annotations

import os
import re
import subprocess

import duckdb
import pytest

from tests.conftest import needs_root, softnet_cmd


def test_bad_options_are_refused_by_name_before_anything_runs(tmp_path):
    for args, field in ((["--runs", "0"], "--runs"), (["--duration", "-1"], "--duration")):
        r = subprocess.run(softnet_cmd("demo", "--results", str(tmp_path / "r"), *args), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and f"error: {field}:" in r.stderr, r.stderr
    assert not (tmp_path / "r").exists()


@needs_root
@pytest.mark.netns
def test_the_demo_sweeps_around_the_probed_maximum_and_says_what_it_found(tmp_path, host_unchanged):
    r = subprocess.run(softnet_cmd("demo", "--runs", "2", "--duration", "0.2", "--results", str(tmp_path)),
                       capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert re.search(r"SUT maximum ~[\d.]+ [kM]pps", r.stdout + r.stderr)
    assert "PASTRAMI verdicts" in out and "kernel IPv4 forwarding on this machine, loads" in out
    for line in ("NDR (no loss): ", "PDR0.5% (the last load before mean loss first exceeds 0.5%): ",
                 "saturation: ", "verdict "):
        assert f"\n  {line}" in out, out[-2000:]
    assert max(len(x) for x in out.splitlines()) <= 80
    (report,) = tmp_path.glob("demo-*.html")
    assert "\nreport: " in out and report.stat().st_size > 10_000
    with duckdb.connect(str(tmp_path / "softnet.duckdb"), read_only=True) as c:
        loads, runs, trials = c.execute("SELECT count(DISTINCT load_index), max(run_index) + 1, count(*) "
                                        "FROM trials").fetchone()
    assert (loads, runs, trials) == (12, 2, 24)  # 0.1x to 2.5x the probed maximum, K = 2
