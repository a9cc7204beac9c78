"""SUT personalities on real namespaces with real packets: each one's data
path carries a short trial without loss, its counters prove the packets took
that path, and the host is as before afterwards; bad input is refused with
the field named before anything changes."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from softnet.campaign.spec import load_spec
from softnet.campaign.trial import TrialSpec, run_trial
from softnet.errors import InputError, TestbedError
from softnet.testbed.local import LocalTestbed
from softnet.testbed.personalities import PERSONALITIES, names, parse_sut
from softnet.testbed.personalities.nsread import forw_datagrams
from softnet.tools import hostcmd
from softnet.tools.changes import HostChanges
from tests.conftest import needs_root, softnet_cmd, valid_or_held

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "custom-sut" / "sut.toml"
DURATION_S, WARMUP_S = 0.5, 0.2


def trial(sut: str, rate: int, flows: int = 1, extra: dict | None = None, during=None):
    """One short trial; returns (result, counters before, counters after,
    Ip ForwDatagrams delta, whatever ``during(tb)`` returned)."""
    with HostChanges() as ch:
        tb = LocalTestbed(ch, parse_sut(sut, "--sut", extra))
        ep = tb.build()
        seen = during(tb) if during else None
        before, fwd0 = tb.personality.counters(tb), forw_datagrams(tb.ns["sut"])
        r = run_trial(tb, ep, TrialSpec(rate_pps=rate, duration_s=DURATION_S, warmup_s=WARMUP_S, flows=flows,
                                        sample_interval_s=None), ch)  # the stall probe sets host stalls apart
        after, fwd1 = tb.personality.counters(tb), forw_datagrams(tb.ns["sut"])
    print(sut, flows, "flows:", {k: after[k] - before.get(k, 0) for k in after}, "after:", after)
    return r, before, after, fwd1 - fwd0, seen


def total(rate: int) -> int:
    """What the generator sends, warm-up included (counters see it all)."""
    return round(rate * (DURATION_S + WARMUP_S))


def delta(before: dict, after: dict, key: str) -> int:
    return after[key] - before[key]


def ring_drops(r: dict) -> int:
    """Frames the veth rings of the path dropped (a VM hiccup, another
    process on the CPUs), warm-up included: the SUT's ingress ring (before
    any personality sees them) and the sink's."""
    d = r["diagnosis"]
    return d["ingress_ring_full_pkts"] + d["interface_deltas"]["sut_out"]["tx_dropped"]


def reached(r: dict, n: int, got: int, extra: int = 0) -> None:
    """A counter on the path saw every packet the SUT's ingress ring took."""
    lost = r["diagnosis"]["ingress_ring_full_pkts"]
    assert n - lost <= got <= n + extra, (got, n, lost)


def no_loss(r: dict) -> None:
    """Nothing lost at this low rate but what the rings dropped (counted),
    and of that at most 1% the SUT's: a vCPU stall of ~13 ms overflows a
    256-slot ring at 20 kpps, and the stall probe sets such loss apart."""
    assert valid_or_held(r) and r["sent_pkts"] == r["intended_pkts"]
    assert r["received_pkts"] + r["lost_pkts"] == r["sent_pkts"]
    assert r["lost_pkts"] <= ring_drops(r), r["diagnosis"]
    assert r["sut_lost_pkts"] <= r["sent_pkts"] // 100, (r["diagnosis"], r.get("loss_attribution"))


# ---- data paths ------------------------------------------------------------
@needs_root
@pytest.mark.netns
def test_bridge_switches_at_l2_and_routes_nothing(locked_host_unchanged):
    def during(tb):
        return {k: hostcmd.sysctl_get(tb.ns["sut"], k) for k in ("net.bridge.bridge-nf-call-iptables",
                                                                  "net.bridge.bridge-nf-call-ip6tables")}

    rate = 20_000
    r, c0, c1, fwd, sysctls = trial("bridge", rate, during=during)
    no_loss(r)
    n = total(rate)
    reached(r, n, delta(c0, c1, "sut_in_rx_packets"), extra=5)  # a few IPv6 ND frames of the ports
    # the out port also sends the bridge's and the ports' own IPv6 control frames (router
    # solicitations, DAD, MLD reports repeated at random intervals): 11 were seen once
    reached(r, n, delta(c0, c1, "sut_out_tx_packets"), extra=20)
    assert c1["fdb_gen_mac_entries"] == 1  # learned from the generator's frames on sut_in
    assert fwd == 0 and c1["ip_forw_datagrams"] == 0  # bridged, never routed
    assert set(sysctls.values()) == {"0"}  # no netfilter detour for bridged frames


@needs_root
@pytest.mark.netns
@pytest.mark.parametrize("rules,conntrack,rate", [(1, False, 20_000), (1, True, 20_000),
                                                  (10_000, False, 2_000), (10_000, True, 2_000)])
def test_nft_fw_last_rule_counts_every_packet(rules, conntrack, rate, locked_host_unchanged):
    """10000 rules walked per packet cost ~150 us here (~6 kpps at most): a low rate."""
    spec = f"nft-fw:rules={rules},conntrack={'on' if conntrack else 'off'}"
    r, c0, c1, fwd, _ = trial(spec, rate)
    no_loss(r)
    n = total(rate)
    reached(r, n, delta(c0, c1, "nft_match_packets"))  # the last rule saw all of them
    assert fwd == delta(c0, c1, "nft_match_packets")
    assert c1["conntrack_entries"] == (1 if conntrack else 0)  # off: conntrack never engaged


@needs_root
@pytest.mark.netns
def test_nft_fw_ruleset_has_the_rules_and_loads_quickly(locked_host_unchanged):
    from softnet.testbed.personalities.nft_fw import ruleset

    text = ruleset(10_000, False)
    assert text.count("\n    ip saddr") == 10_000 and "198.18" not in text.split("ip saddr 198.18")[0]
    with HostChanges() as ch:
        tb = LocalTestbed(ch, "nft-fw:rules=10000")
        t0 = time.monotonic()
        tb.build()
        build_s = time.monotonic() - t0
        listed = hostcmd.in_netns(tb.ns["sut"], ["nft", "list", "chain", "inet", "softnet_fw", "forward"])
        load_s = tb.personality.load_s
    print(f"10000 rules: nft -f {load_s:.2f} s, testbed build {build_s:.2f} s")
    assert listed.count("ip saddr") == 10_000 and "policy drop" in listed
    assert load_s < 10


@needs_root
@pytest.mark.netns
@pytest.mark.parametrize("flows,mode", [(1, "masquerade"), (16, "snat")])
def test_nat_one_conntrack_entry_per_flow(flows, mode, locked_host_unchanged):
    rate = 20_000
    r, c0, c1, fwd, _ = trial(f"nat:mode={mode}", rate, flows=flows)
    no_loss(r)  # the sink counts the translated frames: their checksums were fixed up
    n = total(rate)
    # one entry per flow: the generator's UDP checksums were good (a bad one is INVALID, never tracked)
    assert c1["conntrack_entries"] == flows
    reached(r, n, delta(c0, c1, "nft_forwarded_packets"))
    assert fwd == delta(c0, c1, "nft_forwarded_packets")
    # the nat rule sees new connections only; packets of a flow's first NAPI poll all pass
    # prerouting (listified) before the first is confirmed, so each is new: at most one poll's budget
    assert flows <= delta(c0, c1, "nft_nat_first_packets") <= flows + 64


@needs_root
@pytest.mark.netns
def test_custom_example_xdp_wire_end_to_end(locked_host_unchanged):
    """examples/custom-sut: the user's XDP program, built and attached by its
    setup script, carries the packets; the kernel forwards none of them."""
    def during(tb):
        link = json.loads(hostcmd.in_netns(tb.ns["sut"], ["ip", "-j", "link", "show", "dev", tb.ifs["sut_in"]]))
        return tb.ns["sut"], link[0].get("xdp", {}).get("prog", {}).get("name")

    rate = 20_000
    r, c0, c1, fwd, (ns, prog) = trial(f"custom:file={EXAMPLE.relative_to(ROOT)}", rate, during=during)
    no_loss(r)
    assert prog == "wire"
    n = total(rate)
    reached(r, n, delta(c0, c1, "xdp_redirected"))
    assert fwd == 0  # XDP took them all, the kernel routed none
    assert not Path(f"/tmp/{ns}-wire.bpf.o").exists()  # the teardown ran


@needs_root
@pytest.mark.netns
def test_custom_failing_setup_shows_its_stderr_and_restores_the_host(tmp_path, locked_host_unchanged):
    table = {"setup": ["touch made-by-setup", "echo boom from setup >&2; exit 3", "touch never"],
             "teardown": ["rm made-by-setup", "echo $SN_NS > torn-down"], "l3": True}
    with pytest.raises(TestbedError) as err:
        with HostChanges() as ch:
            LocalTestbed(ch, parse_sut("custom", "testbed.sut", {**table, "workdir": str(tmp_path)})).build()
    msg = str(err.value)
    assert "echo boom from setup" in msg and "exit 3" in msg and "boom from setup" in msg
    assert (tmp_path / "torn-down").read_text().startswith("sn-")  # torn down in the SUT namespace
    assert not (tmp_path / "made-by-setup").exists() and not (tmp_path / "never").exists()


# ---- bad input ---------------------------------------------------------------
@pytest.mark.parametrize("text,says", [
    ("bridgee", "unknown SUT personality 'bridgee'; accepted: "),
    ("nft-fw:rulez=3", "nft-fw has no parameter 'rulez'; accepted: rules, conntrack"),
    ("nft-fw:rules=0", "rules=0 is outside [1, 100000]"),
    ("nft-fw:rules=many", "rules=many: expected a whole number"),
    ("nft-fw:conntrack=maybe", "conntrack=maybe: expected on or off"),
    ("nat:mode=dnat", "mode=dnat: accepted: masquerade, snat"),
    ("bridge:x=1", "bridge has no parameter 'x'; accepted: none"),
])
def test_bad_sut_strings_name_the_field(text, says):
    with pytest.raises(InputError) as err:
        parse_sut(text, "--sut")
    assert err.value.field == "--sut" and says in err.value.message


def test_cli_refuses_an_unknown_param_with_the_input_error_code():
    p = subprocess.run(softnet_cmd("trial", "--sut", "nft-fw:rulez=3", "--rate", "1kpps"),
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == InputError.exit_code
    assert "--sut" in p.stderr and "rulez" in p.stderr and "accepted: rules, conntrack" in p.stderr


def test_cli_help_lists_the_personalities():
    p = subprocess.run(softnet_cmd("trial", "--help"), capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    flat = " ".join(p.stdout.split())
    for name in ("bridge", "nft-fw", "nat", "custom"):
        assert name in flat
    assert "name:key=value" in flat


@pytest.mark.parametrize("table,field,says", [
    ({"setup": ["true"], "stup": 1}, "testbed.custom.stup", "unknown key; accepted: setup, script"),
    ({"teardown": ["true"]}, "testbed.custom.setup", "missing"),
    ({"setup": "true"}, "testbed.custom.setup", "list"),
    ({"setup": ["true"], "script": "x.sh"}, "testbed.custom.setup", "not both"),
    ({"setup": ["true"], "timeout_s": 0}, "testbed.custom.timeout_s", "greater than 0"),
    ({"setup": ["true"], "l3": "sometimes"}, "testbed.custom.l3", "bool"),
])
def test_custom_table_errors_name_the_field(table, field, says):
    with pytest.raises(InputError) as err:
        parse_sut("custom", "testbed.sut", table)
    assert err.value.field == field and says in err.value.message


def test_custom_without_commands_is_refused_before_the_host_changes():
    from softnet.doctor.personalities import require

    with pytest.raises(InputError, match=r"--sut: custom needs its commands"):
        require(parse_sut("custom", "--sut"), "--sut")
    p = parse_sut(f"custom:file={EXAMPLE}", "--sut")
    require(p, "--sut")  # the example: all there
    assert p.table.l3 and p.next_hop_role == "sut_in" and p.workdir == EXAMPLE.parent
    assert parse_sut("custom", "--sut", {"setup": ["true"]}).next_hop_role == "sink"
    with pytest.raises(InputError, match="no such file"):
        parse_sut("custom:file=/nonexistent/sut.toml", "--sut")


def spec_file(tmp_path: Path, testbed: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(f'name = "p"\n{testbed}\n[method]\nloads = ["10kpps"]\n')
    return path


def test_campaign_spec_with_a_personality_loads(tmp_path):
    spec = load_spec(spec_file(tmp_path, '[testbed]\nsut = "bridge"'))
    assert spec.testbed.sut == "bridge" and spec.testbed.personality().next_hop_role == "sink"
    spec = load_spec(spec_file(tmp_path, '[testbed]\nsut = "nft-fw:conntrack=on,rules=100"'))
    assert spec.testbed.sut == "nft-fw:conntrack=on"  # canonical: defaults left out
    spec = load_spec(spec_file(tmp_path, '[testbed]\nsut = "custom"\n[testbed.custom]\nsetup = ["true"]'))
    p = spec.testbed.personality()
    assert p.table.setup == ["true"] and p.workdir == tmp_path.resolve()  # commands run in the spec's folder
    (tmp_path / "sub").mkdir()
    spec = load_spec(spec_file(tmp_path, '[testbed]\nsut = "custom"\n[testbed.custom]\nsetup = ["true"]\n'
                                         'workdir = "sub"'))
    assert spec.testbed.personality().workdir == (tmp_path / "sub").resolve()


def test_campaign_spec_refuses_what_the_personality_refuses(tmp_path):
    with pytest.raises(InputError) as err:
        load_spec(spec_file(tmp_path, '[testbed]\nsut = "custom"\n[testbed.custom]\nsetup = ["true"]\nl4 = true'))
    assert err.value.field == "testbed.custom.l4" and "unknown key" in err.value.message
    with pytest.raises(InputError, match="custom needs its commands"):
        load_spec(spec_file(tmp_path, '[testbed]\nsut = "custom"'))
    with pytest.raises(InputError, match="testbed.sut.*unknown SUT personality 'brigde'"):
        load_spec(spec_file(tmp_path, '[testbed]\nsut = "brigde"'))


def test_a_host_lacking_a_requirement_is_refused_at_load(tmp_path, monkeypatch):
    """The message format only: this host has everything, so what it lacks is simulated."""
    from softnet.doctor import personalities as doc

    monkeypatch.setattr(doc, "unmet", lambda req: "CONFIG_NFT_CT=n in /proc/config.gz"
                        if req.what == "CONFIG_NFT_CT" else None)
    path = spec_file(tmp_path, '[testbed]\nsut = "nft-fw:conntrack=on"')
    with pytest.raises(InputError) as err:
        load_spec(path)
    assert err.value.field == f"{path}: testbed.sut"
    assert err.value.message == ("nft-fw cannot run on this host: CONFIG_NFT_CT=n in /proc/config.gz "
                                 "(the ct state match)")
    load_spec(spec_file(tmp_path, '[testbed]\nsut = "nft-fw"'))  # conntrack off: CONFIG_NFT_CT not needed
    assert any(r.what == "CONFIG_NFT_CT" for r in PERSONALITIES["nft-fw"].requires)  # the class lists all


@pytest.mark.netns
def test_doctor_lists_every_personality_ok():
    p = subprocess.run(softnet_cmd("doctor", "--json"), capture_output=True, text=True, timeout=120, cwd=ROOT)
    checks = {c["name"]: c for c in json.loads(p.stdout)}
    for name in names():
        assert checks[f"sut:{name}"]["ok"], checks[f"sut:{name}"]
