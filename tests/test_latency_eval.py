"""Stored AF_XDP latency runs (tests/data/latency/runs: real raw runs and their
results from a latency campaign on the three-namespace testbed) re-evaluate to
the JSON stored for them, and the typed models read them back unchanged."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from softnet.analysis.latency_eval import evaluate_run
from softnet.campaign.spec import LatencySpec
from softnet.results.latency import (LatencyConfigKnobs, LatencyRunResult, RawLatencyRun, StoredLatencyRun,
                                     read_records)

RUNS = Path(__file__).parent / "data" / "latency" / "runs"
STORED = sorted(RUNS.glob("*.json"))
PLAIN = RUNS / "poll_wakeup_run0.json"  # a valid run: no flag


def stored(path: Path) -> tuple[dict, dict]:
    d = json.loads(path.read_text())
    return d["raw"], d["result"]


def test_there_are_stored_runs_of_every_phase():
    phases = {stored(p)[1]["phase"] for p in STORED}
    assert phases == {"base", "fast", "flood"}
    assert any(stored(p)[1]["kernel_baseline"] for p in STORED) and any(stored(p)[1]["flags"] for p in STORED)


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_a_stored_raw_run_re_evaluates_to_its_stored_result(path):
    raw, result = stored(path)
    again = evaluate_run(raw, read_records(path.with_suffix(".bin"))).to_dict()
    assert json.dumps(again, default=str) == json.dumps(result)  # same keys, same order, same values
    typed = RawLatencyRun.model_validate(raw)
    assert evaluate_run(typed, read_records(path.with_suffix(".bin"))).to_dict() == again


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_a_stored_result_reads_typed_and_dumps_as_stored(path):
    _, result = stored(path)
    r = LatencyRunResult.model_validate(result)
    assert json.dumps(r.to_dict()) == json.dumps(result)
    assert r.config_knobs.bind_mode == "copy" and r.tool.ping.sent_pkts == r.sent
    assert (r.baseline is None) == (result["kernel_baseline"] is None)
    row = {"cell_id": 3, "run_index": 1, **result}
    assert StoredLatencyRun.of(row).to_dict() == row


def test_a_result_stored_before_later_knobs_and_fields_reads_their_defaults():
    _, result = stored(STORED[0])
    old = result | {"knobs": {"busy_poll": True, "bind_mode": "copy"},
                    "tool": {k: v for k, v in result["tool"].items() if k != "observed"}}
    r = LatencyRunResult.model_validate(old)
    assert r.config_knobs.busy_poll and r.config_knobs.ring_size == 2048 and r.tool.observed is None
    assert json.dumps(r.to_dict()) == json.dumps(old)


def test_the_knobs_model_has_the_spec_s_latency_fields_and_defaults():
    spec = LatencySpec()
    assert list(LatencyConfigKnobs.model_fields) == list(LatencySpec.model_fields)
    assert LatencyConfigKnobs.model_validate(spec.model_dump()).to_dict() == spec.model_dump()
    assert {k: getattr(LatencyConfigKnobs(), k) for k in LatencySpec.model_fields} == dict(spec)


def test_a_raw_run_with_an_unknown_part_is_refused():
    raw, _ = stored(STORED[0])
    with pytest.raises(ValueError, match="surprise"):
        RawLatencyRun.model_validate(raw | {"surprise": 1})
    with pytest.raises(ValueError, match="unknown_knob"):
        RawLatencyRun.model_validate(raw | {"knobs": {"unknown_knob": True}})


def test_the_tool_s_own_count_of_packets_sent_is_checked_against_the_records():
    raw, result = stored(PLAIN)
    records = read_records(PLAIN.with_suffix(".bin"))
    assert result["flags"] == [] and raw["ping"]["sent_pkts"] == len(records)
    short = raw | {"ping": raw["ping"] | {"sent_pkts": len(records) + 1}}
    assert evaluate_run(short, records).flags == ["counters_inconsistent"]


def test_what_the_raw_run_says_of_the_run_becomes_flags():
    raw, _ = stored(PLAIN)
    records = read_records(PLAIN.with_suffix(".bin"))
    elsewhere = raw["requested_cpus"]["b"] + 1
    odd = raw | {"ping": raw["ping"] | {"interrupted": True}, "other_runs": ["sn-0000aa"],
                 "observed": raw["observed"] | {"forward_cpu": elsewhere}}
    assert evaluate_run(odd, records).flags == ["overlapped_other_run", "interrupted", "placement_not_as_requested"]
