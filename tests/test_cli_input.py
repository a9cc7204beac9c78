"""Bad input: one clear error naming the option, non-zero exit, nothing created."""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import host_state, needs_root, softnet_cmd

pytestmark = needs_root

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


@pytest.mark.parametrize("args, option", CASES)
def test_bad_trial_input_is_rejected_before_touching_the_host(args, option):
    before = host_state()
    r = subprocess.run(softnet_cmd("trial", *args), capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r.stderr
    assert option in r.stderr and "Traceback" not in r.stderr
    assert host_state() == before


def test_trial_json_keys_carry_units():
    r = subprocess.run(softnet_cmd("trial", "--rate", "50kpps", "--duration", "0.5", "--warmup", "0.1", "--json"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("intended_rate_pps", "achieved_rate_pps", "duration_s", "warmup_s", "sent_pkts", "received_pkts",
                "lost_pkts", "frame_bytes", "latency_mean_ns"):
        assert key in out
    assert out["intended_rate_pps"] == 50_000 and out["sent_pkts"] == 25_000
