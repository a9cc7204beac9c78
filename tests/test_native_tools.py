"""The native tools' command lines: one parser for all (--help, -v, one-line
errors with exit 2), and libbpf's log on stderr."""
from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import needs_root

NATIVE = Path(os.environ.get("SOFTNET_NATIVE_DIR") or Path(__file__).resolve().parents[1] / "native" / "build")

# Each tool's long options, and one bad value the parser must name.
TOOLS = {
    "gen": (["netns", "ifname", "src-mac", "dst-mac", "src-ip", "dst-ip", "size", "rate", "count", "warmup",
             "flows", "src-ips", "streams", "stream", "t0-ns", "cpu", "batch", "anchor", "verbose", "help"],
            ["--rate", "fast"]),
    "sink": (["netns", "ifname", "count", "warmup", "exact", "bin-pkts", "streams", "verbose", "help"],
             ["--count", "-5"]),
    "profile": (["no-per-packet", "duty", "base-duty", "period-ms", "cpu", "verbose", "help"], ["--duty", "2"]),
    "victim": (["cpu", "seconds", "help"], ["--seconds", "0"]),
    "udprelay": (["bind", "to", "netns", "cpu", "rcvbuf", "help"], ["--bind", "nowhere"]),
}


def run(tool: str, *args: str, stdin: str = "", timeout: float = 30, prefix: list[str] | None = None):
    path = NATIVE / f"softnet-{tool}"
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not built (make -C native)")
    return subprocess.run([*(prefix or []), str(path), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_names_every_option(tool, flag):
    r = run(tool, flag)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: softnet-{tool}")
    for name in TOOLS[tool][0]:
        assert f"--{name}" in r.stdout, f"--{name} missing from softnet-{tool} --help"
    assert all(len(line) <= 80 for line in r.stdout.splitlines()), "help wider than 80 columns"
    assert not r.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_unknown_option_is_one_line_naming_it(tool):
    r = run(tool, "--no-such-option")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "'--no-such-option'" in r.stderr, r.stderr
    assert r.stderr.startswith(f"softnet-{tool}: ")
    assert not r.stdout


@pytest.mark.parametrize("tool", TOOLS)
def test_bad_value_names_option_and_what_was_expected(tool):
    opt, value = TOOLS[tool][1]
    r = run(tool, opt, value)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1, r.stderr
    assert opt in r.stderr and f"'{value}'" in r.stderr and "expected" in r.stderr, r.stderr


@pytest.mark.parametrize("tool,opt", [("sink", "--count"), ("gen", "--rate"), ("profile", "--duty"),
                                      ("victim", "--cpu")])
def test_missing_value_names_option(tool, opt):
    r = run(tool, opt)
    assert r.returncode == 2
    assert f"{opt} needs a value" in r.stderr, r.stderr


def test_missing_required_option_and_stray_argument():
    r = run("sink", "--count", "10")
    assert r.returncode == 2 and "--ifname DEV is required" in r.stderr, r.stderr
    r = run("victim", "1", "2")  # the old positional form
    assert r.returncode == 2 and "unexpected argument '1'" in r.stderr, r.stderr
    r = run("victim", "-v")  # no BPF in the victim: no -v either
    assert r.returncode == 2 and "'-v'" in r.stderr, r.stderr


def test_gen_checks_addresses_before_anything_else():
    base = ["--ifname", "lo", "--src-mac", "02:00:00:00:00:01", "--size", "64", "--rate", "1000", "--count", "10"]
    r = run("gen", *base, "--dst-mac", "02:00:00:00:00:02x", "--src-ip", "198.18.0.1", "--dst-ip", "198.18.0.2")
    assert r.returncode == 2 and "--dst-mac" in r.stderr, r.stderr
    r = run("gen", *base, "--dst-mac", "02:00:00:00:00:02", "--src-ip", "198.18.0.1", "--dst-ip", "2001:2::1")
    assert r.returncode == 2 and "--src-ip/--dst-ip" in r.stderr, r.stderr


def test_victim_reports_iterations():
    r = run("victim", "--cpu", "0", "--seconds", "1", timeout=10)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    assert len(rows) >= 10 and int(rows[-1][1]) > int(rows[0][1])


@needs_root
def test_verbose_prints_libbpf_log(host_unchanged):
    """-v: libbpf's debug log (the object's sections and programs) on stderr;
    without it a load that succeeds prints nothing there."""
    quiet = run("profile", "--no-per-packet")
    assert quiet.returncode == 0, quiet.stderr
    assert json.loads(quiet.stdout.splitlines()[0])["ready"]
    assert "libbpf:" not in quiet.stderr

    loud = run("profile", "--no-per-packet", "-v")
    assert loud.returncode == 0, loud.stderr
    assert json.loads(loud.stdout.splitlines()[0])["ready"]
    lines = loud.stderr.splitlines()
    assert lines and all(line.startswith("libbpf: ") for line in lines)
    assert any("sn_softirq_entry" in line for line in lines)


@needs_root
def test_sink_verbose_in_a_namespace(host_unchanged):
    ns = f"snopt-{uuid.uuid4().hex[:8]}"  # not "sn-": that prefix marks a softnet run
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        r = run("sink", "--netns", ns, "--ifname", "lo", "--count", "64", "--verbose", stdin="read\nquit\n")
        assert r.returncode == 0, r.stderr
        hello, counters = (json.loads(line) for line in r.stdout.splitlines())
        assert hello["ready"] and counters["rx_test_pkts"] == 0
        assert hello["xdp_mode"] == counters["xdp_mode"] == "generic"  # lo has no native XDP
        assert "libbpf: " in r.stderr and "sn_sink" in r.stderr
        r = run("sink", "--netns", ns, "--ifname", "nosuch", "--count", "64")
        assert r.returncode == 2 and "--ifname: no interface 'nosuch'" in r.stderr, r.stderr
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)


@needs_root
def test_failed_load_shows_libbpf_reason_without_verbose():
    """Warnings and errors are printed even without -v: a load refused by the
    kernel (here: no privilege) says why, not only "load BPF program"."""
    r = run("sink", "--ifname", "lo", "--count", "64",
            prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    assert r.returncode != 0
    assert "libbpf: " in r.stderr and "softnet-sink: load BPF program" in r.stderr, r.stderr


def test_profile_refuses_a_base_duty_below_the_per_packet_one():
    # the per-packet events need the others attached: refused before anything loads
    r = run("profile", "--duty", "0.5", "--base-duty", "0.2")
    assert r.returncode != 0 and "--base-duty 0.2" in r.stderr and "--duty 0.5" in r.stderr, r.stderr
