"""Host stalls end to end on the real testbed: the injector takes the SUT CPU
during real trials, the probe finds its stalls, the attribution sets the loss
they cause apart, and the methods count the SUT's loss only."""
from __future__ import annotations

import json
import subprocess

import pytest

from softnet.analysis.campaigns import analyze_campaign
from softnet.campaign.runner import run_campaign
from softnet.campaign.spec import CampaignSpec
from softnet.results.store import Store
from tests.conftest import needs_root, softnet_cmd

pytestmark = [needs_root, pytest.mark.netns]


def test_softnet_trial_finds_injected_stalls_and_says_so(tmp_path, host_unchanged):
    raw = tmp_path / "raw.json"
    out = subprocess.run(softnet_cmd("trial", "--rate", "150kpps", "--duration", "2", "--warmup", "0.3",
                                     "--sample-interval", "0", "--inject-stall", "5/250", "--raw", str(raw),
                                     "--json"), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    inj = r["host_stalls"]["injected"]
    assert inj["injected"] >= 6 and inj["found"] == inj["injected"], inj
    # 5 ms at 150 kpps is 750 packets into a 256-packet ring: every injected stall loses packets
    assert r["lost_pkts"] >= 400 * inj["injected"]
    a = r["loss_attribution"]
    # the injected stalls' loss is explained (each overflows the ring by >= 400 packets); on a VM whose
    # own vCPU stalls add loss, what is left is named as stalls the probe did not see, not as the SUT's
    assert a["explained_pkts"] >= 400 * inj["injected"], a["words"]
    assert a["explained_pkts"] + a["unseen_stall_pkts"] >= 0.8 * a["lost_pkts"], a["words"]
    # valid, unless the host also kept the generator from its schedule (a busy host: its own flag says so)
    assert "host_interference" in r["flags"] and (r["valid"] or any(f.startswith("generator") for f in r["flags"]))
    assert r["sut_lost_pkts"] == r["lost_pkts"] - a["explained_pkts"]
    # the injector is a host change like any other, and it is gone (host_unchanged)
    assert any(c.startswith("stall injector: CPU 1, 5 ms every 250 ms") for c in
               r["provenance"]["host_changes_applied"])
    # the same trial for people: the words, the stall table
    text = subprocess.run(softnet_cmd("evaluate", str(raw)), capture_output=True, text=True, timeout=60,
                          env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"})
    assert text.returncode == 0, text.stderr
    assert (f"injected on CPU 1: 5 ms every 250 ms, {inj['found']} of {inj['injected']} found, "
            f"{inj['delivered_pct']:.0f}% delivered") in text.stdout
    assert "lost packets fell in" in text.stdout
    assert max(len(line) for line in text.stdout.splitlines()) <= 80


def test_a_sweep_sets_host_stall_loss_apart_and_keeps_the_other_verdict(tmp_path, host_unchanged):
    spec = CampaignSpec.model_validate({
        "name": "stalls", "testbed": {"sut": "ipv4-fwd"},
        "collect": {"sample": False, "inject_busy_ms": 5, "inject_every_ms": 250},
        "method": {"kind": "sweep", "loads": ["100kpps", "150kpps"], "runs": 2, "duration_s": 1.0,
                   "warmup_s": 0.3}})
    cid = run_campaign(spec, tmp_path)
    with Store(tmp_path, read_only=True) as store:
        [apart] = analyze_campaign(store, cid)
        [counted] = analyze_campaign(store, cid, host_stall_loss="count")
        trials = store.trials(cid)
    h = apart.meta.host_stalls
    assert h.trials_probed == 4 and h.lost_pkts > 0 and h.explained_pkts > 0
    assert h.lost_pkts == sum(t["lost_pkts"] for t in trials)
    assert h.explained_pkts == sum(t["host_stall_lost_pkts"] for t in trials)
    # the SUT's loss is what the verdict counts; counting all loss gives more
    sut = {ls.load_pps: ls.plr_ratio.mean for ls in apart.analysis.stats.loads}
    everything = {ls.load_pps: ls.plr_ratio.mean for ls in counted.analysis.stats.loads}
    assert all(sut[k] <= everything[k] for k in sut) and any(sut[k] < everything[k] for k in sut)
    assert apart.meta.counting_all_loss.verdict == counted.analysis.report.verdict.value
    assert counted.meta.counting_all_loss is None and "counting_all_loss" not in counted.to_dict()["meta"]
