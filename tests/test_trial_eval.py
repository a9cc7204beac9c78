"""evaluate(raw, spec) and the flag rules, without root, on raw trials captured
on this machine (tests/data/raw_trials/, tests/data/capture/raw_trials.py).
A rule is exercised by changing the one read it depends on in a captured raw."""
from __future__ import annotations

import copy
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from softnet.analysis import latency_hist
from softnet.analysis.trial_eval import INFORMATIONAL_FLAGS, PACING_TOLERANCE, evaluate
from softnet.errors import InputError
from softnet.results.raw import check_raw
from softnet.results.trial import RESULT_SCHEMA_OF_RAW, TrialResult, TrialSpec, check_schema

DATA = Path(__file__).parent / "data" / "raw_trials"
CAPTURED = sorted(DATA.glob("*.json"))


def load(name: str) -> tuple[dict, dict]:
    d = json.loads((DATA / f"{name}.json").read_text())
    return d["raw"], d["result"]


def quiet(raw: dict) -> dict:
    """The same raw trial as if no other softnet run had been on the host."""
    raw = copy.deepcopy(raw)
    raw["other_runs"] = []
    return raw


def flags(raw: dict) -> list[str]:
    return evaluate(raw).flags


def test_captures_are_present():
    assert {p.stem for p in CAPTURED} >= {"ipv4fwd_100kpps_sampled", "ipv4fwd_50kpps_profiled",
                                         "ipv4fwd_20Mpps_flood", "ipv4fwd_30kpps_napi_moved",
                                         "ipv4fwd_10kpps_interrupted"}


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.stem)
def test_reevaluating_a_raw_trial_reproduces_its_result_exactly(path):
    d = json.loads(path.read_text())
    again = evaluate(d["raw"]).to_dict()
    assert json.dumps(again, sort_keys=True, default=str) == json.dumps(d["result"], sort_keys=True, default=str)


@pytest.mark.parametrize("path", [*CAPTURED, *sorted((DATA.parent / "raw_trials_v1").glob("*.json"))],
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_stored_raw_trial_reads_as_the_typed_raw_and_back(path):
    """The typed raw trial (softnet.results.raw) holds every raw trial kept
    here, of every raw schema version, and gives back the same JSON (CPU
    numbers, ints in the model, are JSON's strings again)."""
    raw = json.loads(path.read_text())["raw"]
    typed = check_raw(raw, path.name)
    assert typed.raw_schema_version == raw["raw_schema_version"]
    assert typed.model_dump(mode="json", exclude_unset=True) == raw


def test_a_raw_trial_of_another_shape_names_its_field():
    raw, _ = load("ipv4fwd_100kpps_sampled")
    bad = copy.deepcopy(raw)
    bad["testbed"]["placement"]["sut_cpus"] = "1"
    with pytest.raises(InputError) as err:
        evaluate(bad)
    assert err.value.field == "raw trial: testbed.placement.sut_cpus" and "list" in err.value.message
    bad = copy.deepcopy(raw)
    bad["before"]["colour"] = "red"  # a key softnet does not write
    with pytest.raises(InputError) as err:
        evaluate(bad)
    assert err.value.field == "raw trial: before.colour"


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.stem)
def test_result_validates_against_its_schema(path):
    d = json.loads(path.read_text())
    r = TrialResult.model_validate(d["result"])
    assert r.schema_version == RESULT_SCHEMA_OF_RAW[d["raw"]["raw_schema_version"]]
    assert r.valid == (not set(r.flags) - INFORMATIONAL_FLAGS)


def test_loss_is_sent_minus_received_over_the_window():
    raw, _ = load("ipv4fwd_100kpps_sampled")
    r = evaluate(raw)
    spec = TrialSpec(**raw["spec"])
    assert r.sent_pkts == raw["generator"]["sent_pkts"] - spec.warmup_pkts
    assert r.received_pkts == raw["sink"]["rx_window_pkts"]
    assert r.lost_pkts == r.sent_pkts - r.received_pkts
    assert r.loss_ratio == pytest.approx(r.lost_pkts / r.sent_pkts)
    assert r.intended_pkts == spec.window_pkts


def test_a_quiet_trial_at_the_intended_rate_is_valid():
    raw, _ = load("ipv4fwd_100kpps_sampled")
    r = evaluate(quiet(raw))
    assert r.flags == [] and r.valid
    assert abs(r.achieved_ratio - 1) < PACING_TOLERANCE
    assert r.kernel is not None and r.kernel.per_cpu


@pytest.mark.parametrize("ratio, flag", [(0.99, "generator_limited"), (1.01, "generator_overshoot"),
                                         (0.996, None), (1.004, None)])
def test_pacing_rule_at_half_a_percent(ratio, flag):
    """achieved < 99.5% of intended: generator_limited; > 100.5%: overshoot."""
    raw = quiet(load("ipv4fwd_100kpps_sampled")[0])
    g, spec = raw["generator"], TrialSpec(**raw["spec"])
    sent = g["sent_pkts"] - spec.warmup_pkts
    g["last_send_ns"] = g["window_start_ns"] + round((sent - 1) / (ratio * spec.rate_pps) * 1e9)
    r = evaluate(raw)
    assert r.achieved_ratio == pytest.approx(ratio, rel=1e-6)
    assert r.flags == ([flag] if flag else [])


def test_generator_that_sent_too_few_packets_is_limited():
    raw = quiet(load("ipv4fwd_100kpps_sampled")[0])
    raw["generator"]["sent_pkts"] -= 1
    assert "generator_limited" in flags(raw)


def test_flood_beyond_the_generator_is_limited():
    raw, result = load("ipv4fwd_20Mpps_flood")
    r = evaluate(quiet(raw))
    assert "generator_limited" in r.flags and not r.valid
    assert r.achieved_ratio < 1 - PACING_TOLERANCE


@pytest.mark.parametrize("change", ["more_received", "out_of_range"])
def test_counters_inconsistent(change):
    raw = quiet(load("ipv4fwd_100kpps_sampled")[0])
    if change == "more_received":
        raw["sink"]["rx_window_pkts"] = raw["generator"]["sent_pkts"] + 1
    else:
        raw["sink"]["out_of_range_pkts"] = 3
    r = evaluate(raw)
    assert "counters_inconsistent" in r.flags
    if change == "more_received":
        assert r.lost_pkts is None and r.loss_ratio is None  # negative loss is never a result


def test_interrupted_generator_is_flagged():
    r = evaluate(quiet(load("ipv4fwd_10kpps_interrupted")[0]))
    assert {"interrupted", "generator_limited"} <= set(r.flags)


def test_placement_from_evidence():
    raw = quiet(load("ipv4fwd_30kpps_napi_moved")[0])
    r = evaluate(raw)
    assert "placement_not_as_requested" in r.flags
    assert r.placement.observed.sink_share_on_requested_cpus < 0.5
    # the same trial whose generator reports another CPU than requested
    ok = quiet(load("ipv4fwd_100kpps_sampled")[0])
    assert "placement_not_as_requested" not in flags(ok)
    ok["generator"]["cpu"] = 1
    assert "placement_not_as_requested" in flags(ok)


def test_overlap_with_another_softnet_run_is_flagged():
    raw, _ = load("ipv4fwd_100kpps_sampled")
    raw = copy.deepcopy(raw)
    raw["other_runs"] = ["abc123"]
    r = evaluate(raw)
    assert "overlapped_other_run" in r.flags and r.other_runs == ["abc123"]


def test_latency_percentiles_are_midpoints_of_log_linear_buckets():
    raw = quiet(load("ipv4fwd_100kpps_sampled")[0])
    sink = raw["sink"]
    n = sink["latency_pkts"]
    # 98.95% at 200 ns (a bucket of its own: exact), the rest in [16384, 16512) ns
    low = n - n * 105 // 10_000
    sink["latency_hist"]["buckets"] = [[latency_hist.index(200), low], [latency_hist.index(16_400), n - low]]
    sink["latency_min_ns"], sink["latency_max_ns"] = 200, 16_500
    r = evaluate(raw)
    assert r.latency_p50_ns == r.latency_p90_ns == 200
    assert r.latency_p99_ns == r.latency_p99_9_ns == 16384 + 127 / 2
    assert r.latency_percentile_rel_error == latency_hist.rel_error_bound() < 0.01
    assert r.latency_p99_upper_ns is None and "latency_p99_upper_ns" not in r.to_dict()


def test_percentiles_never_leave_the_exact_min_and_max():
    raw = quiet(load("ipv4fwd_100kpps_sampled")[0])
    sink = raw["sink"]
    sink["latency_hist"]["buckets"] = [[latency_hist.index(20_000), sink["latency_pkts"]]]
    sink["latency_min_ns"] = sink["latency_max_ns"] = 20_001
    r = evaluate(raw)
    assert r.latency_p50_ns == r.latency_p99_9_ns == 20_001


def test_histogram_agrees_with_the_exact_delays_of_the_same_packets():
    r = evaluate(load("ipv4fwd_20kpps_exact")[0])
    raw = load("ipv4fwd_20kpps_exact")[0]
    exact = raw["sink"]["latency_exact_ns"]
    assert r.latency_exact.complete and len(exact) == r.latency_pkts == r.received_pkts
    # the BPF's bucket of every packet is the Python index of its delay
    assert dict(Counter(latency_hist.index(v) for v in exact)) == {i: c for i, c in r.latency_hist.buckets}
    assert r.latency_exact.max_rel_error <= r.latency_percentile_rel_error
    xs = np.sort(exact)
    for q in latency_hist.PERCENTILES:  # nearest rank; numpy's inverted_cdf can be one off (0.999 * 10^4 > 9990)
        key = latency_hist.percentile_key(q)
        assert getattr(r.latency_exact, key) == xs[math.ceil(q * len(xs) / 100 - 1e-9) - 1]


def test_a_negative_delay_is_flagged_not_reported():
    raw = quiet(load("ipv4fwd_100kpps_sampled")[0])
    raw["sink"]["latency_negative_pkts"] = 1
    r = evaluate(raw)
    assert "counters_inconsistent" in r.flags and r.latency_negative_pkts == 1


def test_a_raw_trial_of_version_1_gives_its_schema_2_result_again():
    d = json.loads((DATA.parent / "raw_trials_v1" / "ipv4fwd_100kpps_sampled.json").read_text())
    assert d["raw"]["raw_schema_version"] == 1
    r = evaluate(d["raw"])
    assert r.schema_version == 2
    assert json.dumps(r.to_dict(), sort_keys=True, default=str) == json.dumps(d["result"], sort_keys=True, default=str)
    assert r.latency_p99_upper_ns is not None and r.latency_p99_ns is None


def test_profile_is_evaluated_from_its_reads():
    raw, _ = load("ipv4fwd_50kpps_profiled")
    r = evaluate(quiet(raw))
    assert r.profile is not None and set(r.profile.per_cpu) <= {0, 1}
    assert r.profile.audit and r.profile.duty == 1


def test_unknown_raw_schema_names_the_version():
    raw = copy.deepcopy(load("ipv4fwd_20Mpps_flood")[0])
    raw["raw_schema_version"] = 99
    with pytest.raises(InputError, match="raw schema version 99"):
        evaluate(raw)


def test_unknown_result_schema_names_the_version():
    _, result = load("ipv4fwd_20Mpps_flood")
    assert check_schema(result, "x") == result["schema_version"]
    assert check_schema({k: v for k, v in result.items() if k != "schema_version"}, "x") == 1
    with pytest.raises(InputError, match="schema version 7"):
        check_schema(dict(result, schema_version=7), "file.duckdb")


def test_evaluate_command_reproduces_a_captured_result(tmp_path):
    import subprocess

    from tests.conftest import softnet_cmd

    path = DATA / "ipv4fwd_50kpps_profiled.json"
    r = subprocess.run(softnet_cmd("evaluate", str(path), "--json"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(json.dumps(json.loads(path.read_text())["result"]))
    people = subprocess.run(softnet_cmd("evaluate", str(path)), capture_output=True, text=True, timeout=60,
                            env={**__import__("os").environ, "COLUMNS": "80"})
    assert people.returncode == 0 and "valid" in people.stdout
    assert max(len(line) for line in people.stdout.splitlines()) <= 80


@pytest.mark.parametrize("content, why", [("{not json", "not a raw trial JSON file"),
                                          ('{"a": 1}', "no raw trial in it"),
                                          ('{"raw_schema_version": 1, "spec": {}}', "raw trial")])
def test_evaluate_command_on_bad_files_names_the_file(tmp_path, content, why):
    import subprocess

    from tests.conftest import softnet_cmd

    path = tmp_path / "bad.json"
    path.write_text(content)
    r = subprocess.run(softnet_cmd("evaluate", str(path)), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and str(path) in r.stderr and why in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_sink_ring_overflow_is_not_the_suts_loss():
    """Captured on this VM with placement "split" on 2 CPUs (the sink's NAPI
    kthread on the busy generator's CPU): ipv4-fwd at 200 kpps lost 32,033
    window packets, 38,879 of them (whole trial) dropped by sut_out into the
    full sink ring and only 1,151 at the SUT's ingress. The trial is flagged
    sink_limited and not valid; with the drops below 10% of the loss it is not."""
    d = json.loads((DATA / "ipv4fwd_200kpps_sink_limited.json").read_text())
    r = evaluate(d["raw"])
    assert "sink_limited" in r.flags and not r.valid
    assert r.diagnosis.interface_deltas["sut_out"]["tx_dropped"] > r.lost_pkts
    raw = copy.deepcopy(d["raw"])
    for side in ("before", "after"):
        raw[side]["links"]["sut_out"]["tx_dropped"] = 0
    assert "sink_limited" not in evaluate(raw).flags


def test_rfc8219_figures_from_a_captured_trial():
    """RFC 8219: TL the median, WCL the 99.9th percentile, PDV WCL less the
    minimum; IPDV from the delays the sink kept one by one (consecutive
    differences), and named as missing where it kept none."""
    raw, _ = load("ipv4fwd_20kpps_exact")
    r = evaluate(raw)
    f = r.rfc8219
    assert f.typical_ns == r.latency_p50_ns and f.worst_case_ns == r.latency_p99_9_ns
    assert f.pdv_ns == r.latency_p99_9_ns - r.latency_min_ns > 0
    kept = raw["sink"]["latency_exact_ns"]
    diffs = [b - a for a, b in zip(kept, kept[1:])]
    assert f.ipdv_pkts == len(diffs) == len(kept) - 1
    assert (f.ipdv_min_ns, f.ipdv_max_ns) == (min(diffs), max(diffs))
    assert f.ipdv_median_ns == sorted(diffs)[len(diffs) // 2] or len(diffs) % 2 == 0
    assert f.ipdv_min_ns < 0 < f.ipdv_max_ns  # delays rise and fall: IPDV takes both signs
    other, _ = load("ipv4fwd_150kpps_quiet")
    g = evaluate(other).rfc8219
    assert g.ipdv_median_ns is None and "exact_delays" in g.ipdv_missing and g.pdv_ns > 0
