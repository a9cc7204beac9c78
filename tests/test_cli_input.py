"""Bad input: one clear error naming the option, non-zero exit, nothing created."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import host_state, needs_root, softnet_cmd

PASTRAMI = Path("/work/shared/data/pastrami/bare-metal/clab_tb1_raw_50_k6.8_intel_bare-metal_nic_buf_4096.txt")
SYNTH_SPEC = 'name = "s"\n[testbed]\nsut = "synthetic"\n[method]\nloads = ["100kpps"]\nruns = 1\n'

CASES = [
    (["--rate", "-5kpps"], "--rate"),
    (["--rate", "0pps"], "--rate"),
    (["--rate", "5 furlongs"], "--rate"),
    (["--rate", "500Mpps"], "--rate"),
    (["--rate", "100kpps", "--size", "2000"], "--size"),
    (["--rate", "100kpps", "--size", "63"], "--size"),
    (["--rate", "100kpps", "--sut", "ipv6-fwd", "--size", "64"], "--size"),
    (["--rate", "100kpps", "--sut", "bogus"], "--sut"),
    (["--rate", "100kpps", "--sut-cpus", "64"], "--sut-cpus"),
    (["--rate", "100kpps", "--sut-cpus", "one"], "--sut-cpus"),
    (["--rate", "100kpps", "--gen-cpu", "99"], "--gen-cpu"),
    (["--rate", "100kpps", "--duration", "0"], "--duration"),
    (["--rate", "100kpps", "--duration", "99999"], "--duration"),
    (["--rate", "100kpps", "--warmup", "-1"], "--warmup"),
    (["--rate", "100kpps", "--flows", "0"], "--flows"),
    (["--rate", "100kpps", "--steering", "magic"], "--steering"),
    (["--rate", "10Mpps", "--duration", "3000"], "--duration"),  # beyond the sink's bitmap
    (["--rate", "100kpps", "--profile", "--duty", "0"], "--duty"),
]


@needs_root
@pytest.mark.parametrize("args, option", CASES)
def test_bad_trial_input_is_rejected_before_touching_the_host(args, option):
    before = host_state()
    r = subprocess.run(softnet_cmd("trial", *args), capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert option in r.stderr and "Traceback" not in r.stderr
    assert host_state() == before


@needs_root
@pytest.mark.netns
def test_trial_json_keys_carry_units():
    r = subprocess.run(softnet_cmd("trial", "--rate", "50kpps", "--duration", "0.5", "--warmup", "0.1", "--json"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("intended_rate_pps", "achieved_rate_pps", "duration_s", "warmup_s", "sent_pkts", "received_pkts",
                "lost_pkts", "frame_bytes", "latency_mean_ns"):
        assert key in out
    assert out["intended_rate_pps"] == 50_000 and out["sent_pkts"] == 25_000


def softnet(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(softnet_cmd(*args), capture_output=True, text=True, timeout=timeout, **kw)


def assert_clear_error(r: subprocess.CompletedProcess, *names: str) -> None:
    """Exit 2, no traceback, and the message names each of ``names``."""
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "Error:" not in r.stderr.split("error:", 1)[0], r.stderr
    for name in names:
        assert name in r.stderr, (name, r.stderr)


def test_binary_spec_file_is_a_clear_error(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_bytes(bytes(range(256)) * 4)
    assert_clear_error(softnet("run", str(spec), "--results", str(tmp_path / "r")), str(spec))


def test_folder_given_as_spec_is_a_clear_error(tmp_path):
    assert_clear_error(softnet("run", str(tmp_path), "--results", str(tmp_path / "r")), str(tmp_path))


def test_empty_spec_names_every_missing_field(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text("")
    r = softnet("run", str(spec), "--results", str(tmp_path / "r"))
    assert_clear_error(r, str(spec), "name", "method")
    assert "name: Field required" in r.stderr and "method: Field required" in r.stderr


def corrupt_store(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    results.mkdir()
    (results / "softnet.duckdb").write_bytes(b"this is not a DuckDB file\n" * 200)
    return results


@pytest.mark.parametrize("command", ["analyze", "report", "export", "run"])
def test_corrupt_store_is_a_clear_error(tmp_path, command):
    results = corrupt_store(tmp_path)
    if command == "run":
        spec = tmp_path / "spec.toml"
        spec.write_text(SYNTH_SPEC)
        args = ["run", str(spec), "--results", str(results)]
    else:
        args = [command, str(results)]
    assert_clear_error(softnet(*args), str(results / "softnet.duckdb"))


def test_analyze_folder_of_garbage_names_the_file(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    assert_clear_error(softnet("analyze", str(tmp_path)), str(tmp_path / "notes.txt") + ":0")


def test_analyze_truncated_pastrami_file_names_file_and_line(tmp_path):
    text = PASTRAMI.read_text()
    cut = tmp_path / PASTRAMI.name
    cut.write_text(text[: text.index("\n", len(text) // 2) - 40])  # mid-line
    n_lines = cut.read_text().count("\n") + 1
    assert_clear_error(softnet("analyze", str(cut)), f"{cut}:{n_lines}")


def test_export_into_unwritable_folder_is_a_clear_error(tmp_path):
    """As root nothing is unwritable by mode bits: a path below a regular file is."""
    from softnet.campaign.runner import run_campaign
    from softnet.campaign.spec import CampaignSpec

    import tomllib

    results = tmp_path / "results"
    run_campaign(CampaignSpec.model_validate(tomllib.loads(SYNTH_SPEC)), results)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_clear_error(softnet("export", str(results), "--out", str(blocker / "export")), "--out",
                       str(blocker / "export"))


@pytest.mark.skipif(not shutil.which("chattr"), reason="no chattr")
def test_export_into_immutable_folder_is_a_clear_error(tmp_path):
    from softnet.campaign.runner import run_campaign
    from softnet.campaign.spec import CampaignSpec

    import tomllib

    results = tmp_path / "results"
    run_campaign(CampaignSpec.model_validate(tomllib.loads(SYNTH_SPEC)), results)
    out = tmp_path / "frozen"
    out.mkdir()
    if subprocess.run(["chattr", "+i", str(out)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i not supported here")
    try:
        assert_clear_error(softnet("export", str(results), "--out", str(out)), "--out", str(out))
    finally:
        subprocess.run(["chattr", "-i", str(out)])


@pytest.mark.parametrize("loads", ["", ",,", " , "])
def test_profile_with_no_loads_names_loads(tmp_path, loads):
    r = softnet("profile", "--loads", loads, "--results", str(tmp_path / "r"))
    assert_clear_error(r, "--loads")
    assert not (tmp_path / "r").exists()


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a runaway expansion dies, not the VM


def test_huge_matrix_is_refused_at_load_naming_cells_and_knobs(tmp_path):
    spec = tmp_path / "spec.toml"
    values = ", ".join(str(1000 + i) for i in range(1000))
    spec.write_text(SYNTH_SPEC + f'[matrix]\n"synthetic.seed" = [{values}]\n"traffic.flows" = [{values}]\n')
    started = time.monotonic()
    r = softnet("run", str(spec), "--results", str(tmp_path / "r"), timeout=30, preexec_fn=_limit_memory)
    assert time.monotonic() - started < 20
    assert_clear_error(r, "1,000,000", "synthetic.seed", "traffic.flows")


def test_matrix_cells_are_expanded_lazily():
    from softnet.campaign.spec import MAX_CELLS, CampaignSpec

    spec = CampaignSpec.model_validate({
        "name": "x", "testbed": {"sut": "synthetic"}, "method": {"loads": ["1kpps"]},
        "matrix": {"synthetic.seed": list(range(100)), "traffic.flows": list(range(1, 101))}})
    cells = spec.cells()
    assert len(cells) == 10_000 <= MAX_CELLS
    knobs, cell = next(iter(cells))
    assert knobs == {"synthetic.seed": 0, "traffic.flows": 1} and cell.traffic.flows == 1
    assert cells[-1][0] == {"synthetic.seed": 99, "traffic.flows": 100}


def test_ctrl_c_inside_an_exec_still_exits_130(tmp_path):
    """A Ctrl-C that lands in exec() of a string (scipy's lazy imports run
    some) leaves CPython's 'unhandled KeyboardInterrupt' flag set; softnet
    still ends with its 130 and one line, not killed by SIGINT. Run with -m,
    as the softnet script is: only that path checks the flag at exit."""
    code = ("import sys\n"
            "from softnet.cli import main as m\n"
            "@m.app.command('boom')\n"
            "def boom():\n"
            "    exec('raise KeyboardInterrupt')\n"
            "sys.argv = ['softnet', 'boom']\n"
            "m.main()\n")
    (tmp_path / "boom_cli.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{Path(__file__).parent.parent}"}
    r = subprocess.run([sys.executable, "-m", "boom_cli"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert "interrupted" in r.stderr and "Traceback" not in r.stderr


def test_every_option_of_every_command_says_what_it_does():
    import click
    import typer.main

    from softnet.cli.main import app

    silent = []

    def walk(c, path):
        if isinstance(c, click.Group):
            for n, sub in c.commands.items():
                walk(sub, [*path, n])
        else:
            silent.extend(f"{' '.join(path)} {p.opts[0]}" for p in c.params
                          if isinstance(p, click.Option) and not (p.help or "").strip())

    walk(typer.main.get_command(app), ["softnet"])
    assert not silent, silent


def test_version_is_an_option_too():
    r = subprocess.run(softnet_cmd("--version"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("softnet 0.") and r.stdout.count("\n") == 1, r.stdout
