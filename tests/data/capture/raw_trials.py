"""Capture raw trials (softnet.campaign.trial.measure) for the evaluate tests:
`python tests/data/capture/raw_trials.py` as root on a quiet host writes
tests/data/raw_trials/<name>.json, each with the result evaluated at capture."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import softnet.campaign.trial as trial_mod  # noqa: E402
from softnet.analysis.trial_eval import evaluate  # noqa: E402
from softnet.campaign.trial import TrialSpec, measure  # noqa: E402
from softnet.hosts.this_host import ThisHost  # noqa: E402
from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "raw_trials"

CASES = {
    # name: (placement, spec)
    "ipv4fwd_100kpps_sampled": (Placement(gen_cpu=0, sut_cpus=[1]),
                                TrialSpec(rate_pps=100e3, duration_s=2, warmup_s=0.5, sample_interval_s=0.5)),
    "ipv4fwd_50kpps_profiled": (Placement(gen_cpu=0, sut_cpus=[1]),
                                TrialSpec(rate_pps=50e3, duration_s=1, warmup_s=0.5, sample_interval_s=0.5,
                                          profile=True, profile_duty=1)),
    # beyond what the generator paces on one CPU: generator_limited
    "ipv4fwd_20Mpps_flood": (Placement(gen_cpu=0, sut_cpus=[1]),
                             TrialSpec(rate_pps=20e6, duration_s=0.5, warmup_s=0.2, sample_interval_s=None)),
    # the SUT's NAPI kthread moved to CPU 0 behind softnet's back: placement_not_as_requested
    "ipv4fwd_30kpps_napi_moved": (Placement(gen_cpu=0, sut_cpus=[1]),
                                  TrialSpec(rate_pps=30e3, duration_s=0.5, warmup_s=0.1, sample_interval_s=None)),
    # the generator stopped far behind schedule: interrupted
    "ipv4fwd_10kpps_interrupted": (Placement(gen_cpu=0, sut_cpus=[1]),
                                   TrialSpec(rate_pps=10e3, duration_s=3, warmup_s=0.0, sample_interval_s=None)),
    # the sink also keeps every delay (--exact): the histogram checked against them
    "ipv4fwd_20kpps_exact": (Placement(gen_cpu=0, sut_cpus=[1]),
                             TrialSpec(rate_pps=20e3, duration_s=0.5, warmup_s=0.1, sample_interval_s=None)),
    # the injector takes the SUT CPU 5 ms every 500 ms at a load far below capacity
    "ipv4fwd_150kpps_injected": (Placement(gen_cpu=0, sut_cpus=[1]),
                                 TrialSpec(rate_pps=150e3, duration_s=3, warmup_s=0.5, sample_interval_s=None,
                                           inject_busy_ms=5, inject_every_ms=500)),
    # the same load without injection: what this host's own stalls do
    "ipv4fwd_150kpps_quiet": (Placement(gen_cpu=0, sut_cpus=[1]),
                              TrialSpec(rate_pps=150e3, duration_s=3, warmup_s=0.5, sample_interval_s=None)),
    # near the NDR of this VM (~440 kpps); the kept file is one whose loss went on after a
    # stall for longer than POST_NS while the queue drained (the host decides which trial shows it)
    "ipv4fwd_440kpps_drain": (Placement(gen_cpu=0, sut_cpus=[1]),
                              TrialSpec(rate_pps=440e3, duration_s=1, warmup_s=1.0, sample_interval_s=1.0)),
    # the SUT CPU reads >= 90% busy (threaded NAPI) at a third of capacity; kept: one with a lost
    # run after the queue went undrained with no stall the probe saw
    "ipv4fwd_300kpps_busy": (Placement(gen_cpu=0, sut_cpus=[1]),
                             TrialSpec(rate_pps=300e3, duration_s=1, warmup_s=1.0, sample_interval_s=1.0)),
    # about twice kernel forwarding's capacity here: steady overload, loss everywhere
    "ipv4fwd_1800kpps_overload": (Placement(gen_cpu=0, sut_cpus=[1]),
                                  TrialSpec(rate_pps=1.8e6, duration_s=0.5, warmup_s=0.2, sample_interval_s=0.25)),
}
EXACT_PKTS = {"ipv4fwd_20kpps_exact": 10_000}


def move_napi_threads(tb) -> None:
    for pids in tb.napi_threads.values():
        for pid in pids:
            os.sched_setaffinity(pid, [0])


def capture(name: str) -> None:
    placement, spec = CASES[name]
    overtime = trial_mod.OVERTIME_FACTOR, trial_mod.OVERTIME_S
    with HostChanges() as ch:
        tb = LocalTestbed(ch, "ipv4-fwd", placement)
        ep = tb.build()
        if name.endswith("napi_moved"):
            move_napi_threads(tb)
        if name.endswith("interrupted"):
            trial_mod.OVERTIME_FACTOR, trial_mod.OVERTIME_S = 0.2, 0.0
        try:
            raw = measure(ThisHost(tb, ep, ch), spec, exact_pkts=EXACT_PKTS.get(name, 0))
        finally:
            trial_mod.OVERTIME_FACTOR, trial_mod.OVERTIME_S = overtime
    result = evaluate(raw, spec).to_dict()
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps({"raw": raw, "result": result}, default=str) + "\n")
    print(name, result["flags"], f"loss {result['loss_ratio']}")


if __name__ == "__main__":
    for n in sys.argv[1:] or CASES:
        capture(n)
