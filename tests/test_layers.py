"""The layer contracts of ../shared/DESIGN.md (pyproject.toml [tool.importlinter]):
a lower layer importing a higher one fails the suite."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is missing: it is in the test extra (make setup installs it)"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_contract_catches_a_back_edge(tmp_path):
    """The contract is not vacuous: a results module importing the CLI breaks it."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    pkg = tmp_path / "softnet"
    shutil.copytree(ROOT / "softnet", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "results" / "back_edge.py").write_text("import softnet.cli.main  # noqa\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    r = subprocess.run([exe, "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "softnet.results.back_edge -> softnet.cli.main" in r.stdout


@pytest.mark.parametrize("module, heavy", [
    ("softnet.report.web", "sklearn"),  # serve's pages: scikit-learn only when a latency study clusters
    ("softnet.cli.campaign_cmd", "softnet.campaign.runner"),  # analyze: no testbeds, no remote hosts
    ("softnet.cli.campaign_cmd", "asyncssh"),
    ("softnet.campaign.runner", "asyncssh"),  # a campaign on this host: no SSH stack (0.2 s)
])
def test_a_command_loads_what_it_uses_only(module, heavy):
    """Each of these costs a command half a second to a second at start-up."""
    code = (f"import sys, {module}; "
            f"print(sorted(m for m in sys.modules if m == {heavy!r} or m.startswith({heavy!r} + '.')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr[-2000:]
