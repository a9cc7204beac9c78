"""Capture the sink's timeline and the generator's report of real runs, for
unit tests of loss attribution: `python tests/data/timeline/capture.py [CASE]...`
as root writes tests/data/timeline/<case>.{generator,sink,timeline}.json
(README.md in this folder)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from softnet.testbed.local import LocalTestbed, Placement  # noqa: E402
from softnet.tools.changes import HostChanges  # noqa: E402
from softnet.traffic.native import GeneratorJob, Sink, timeline_bin_pkts  # noqa: E402

OUT = Path(__file__).resolve().parent

CASES = {
    # name: (rate_pps, total_pkts, warmup_pkts); IPv4 forwarding SUT, 64 B, 1 flow,
    # generator on CPU 0, SUT (threaded NAPI) on CPU 1
    # far below the SUT's capacity: what is lost, VM stalls lost
    "ipv4fwd_300kpps": (300e3, 1_500_000, 300_000),
    # beyond what the kernel forwards on one CPU (~0.8 Mpps): the SUT's ring overflows all along
    "ipv4fwd_3Mpps_overload": (3e6, 1_500_000, 300_000),
}


def capture(name: str) -> None:
    rate, total, warmup = CASES[name]
    with HostChanges() as ch:
        tb = LocalTestbed(ch, "ipv4-fwd", Placement(gen_cpu=0, sut_cpus=[1]))
        ep = tb.build()
        with HostChanges() as tc:
            sink = Sink(tc, ep.sink_ns, ep.sink_if, total, warmup, bin_pkts=timeline_bin_pkts(rate, total))
            gen = GeneratorJob.start(tc, ep, rate, total, warmup, 64, 1, tb.placement.gen_cpu).wait(
                timeout=total / rate * 2 + 10)
            counts, _ = sink.drain()
            timeline = sink.timeline(gen["sent_pkts"])
    for part, doc in (("generator", gen), ("sink", counts), ("timeline", timeline)):
        (OUT / f"{name}.{part}.json").write_text(json.dumps(doc) + "\n")
    print(f"{name}: sent {gen['sent_pkts']}, lost {timeline['lost_pkts']} in {timeline['runs_total']} runs, "
          f"{gen['late_episodes_total']} late episodes")


if __name__ == "__main__":
    for case in sys.argv[1:] or CASES:
        capture(case)
