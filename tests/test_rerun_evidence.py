"""A host_noise test that fails and then passes leaves the failed attempt's
figures and the host's steal and load during it in the log: the suite's own
hooks (tests/conftest.py) on a test that fails once, in a pytest of its own."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FLIPS = '''
import os, pytest
@pytest.mark.host_noise
def test_flips():
    flag = os.path.join(os.path.dirname(__file__), "failed_once")
    if not os.path.exists(flag):
        open(flag, "w").close()
        assert 16.3 == pytest.approx(40, abs=8), {"figure": 16.3}
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_rerun_that_passes_still_shows_why_the_first_attempt_failed(tmp_path, workers):
    (tmp_path / "test_flips.py").write_text(FLIPS)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rR", "-p", "tests.conftest", "-p", "no:randomly",
                        "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestUnknownMarkWarning", *workers, str(tmp_path / "test_flips.py")],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "1 passed, 1 rerun" in r.stdout, r.stdout + r.stderr
    assert "host_noise attempts that failed: their evidence" in r.stdout
    line = next(x for x in r.stdout.splitlines() if "test_flips (rerun, call)" in x)
    assert "{'figure': 16.3}" in line and "Obtained: 16.3" in line
    assert "CPU0 steal" in r.stdout and "load average" in r.stdout
