"""How tests/data/profile_reads_*.json were captured (run as root from the
repository: .venv/bin/python tests/data/capture/profile_reads.py): one real
profiled trial per steering, the profiler's raw window reads kept."""
import json
import sys
from pathlib import Path

from softnet.collect import profiler
from softnet.tools.changes import HostChanges
from softnet.testbed.local import LocalTestbed, Placement
from softnet.campaign.trial import TrialSpec, run_trial

reads, events = [], []
_read = profiler.Profiler.read


def keep(self):
    events[:] = self.events
    reads.append(_read(self))
    return reads[-1]


profiler.Profiler.read = keep

# every packet timed (duty 1) for threaded NAPI; the default sampling (duty 0.1) for RPS
for steering, rate, duty in (("threaded", 20_000, 1.0), ("rps", 100_000, 0.1)):
    reads.clear()
    with HostChanges() as ch:
        tb = LocalTestbed(ch, "ipv4-fwd", Placement(gen_cpu=0, sut_cpus=[1], steering=steering))
        r = run_trial(tb, tb.build(), TrialSpec(rate_pps=rate, duration_s=2.0, profile=True, profile_duty=duty), ch)
    out = Path(__file__).parent.parent / f"profile_reads_ipv4fwd_{steering}_{rate // 1000}kpps.json"
    out.write_text(json.dumps({
        "note": f"softnet trial ipv4-fwd {rate // 1000} kpps 2 s, SUT on CPU 1 ({steering}), generator on CPU 0, "
                f"stage duty {duty:g}",
        "events": events,
        "read_window_start": reads[1], "read_window_end": reads[2], "received_pkts": r["received_pkts"],
        "stages": r["profile"]["stages"], "audit": r["profile"]["audit"]}, indent=1))
    print(out, r["received_pkts"], file=sys.stderr)
