"""`softnet demo`: the main job on one machine, in under five minutes."""
from __future__ import annotations

import time
from pathlib import Path

from softnet.campaign.spec import CampaignSpec
from softnet.cli import campaign_cmd
from softnet.cli.output import console, eng, print_json

# Fractions of the probed maximum: from a tenth (no loss: the NDR) through a
# grid densest around the probe (the knee, the PDR) to 2.5x (saturation). The
# probe floods the SUT, and under a flood the receive path forwards less than
# at moderate overload (figures in docs/reference/measurements.md): the knee can lie
# above 1.0x.
DEMO_RELATIVE_LOADS = [0.1, 0.25, 0.45, 0.65, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 2.5]

def demo_spec(runs: int = 5, duration_s: float = 2.0) -> dict:
    """The demo's campaign, as a spec's data (validated where the options are named)."""
    return {
        "name": time.strftime("demo-%Y%m%dT%H%M%S"),
        "testbed": {"sut": "ipv4-fwd"},
        "traffic": {"frame_bytes": 64, "flows": 1},
        "method": {"kind": "sweep", "relative": DEMO_RELATIVE_LOADS, "runs": runs, "duration_s": duration_s,
                   "warmup_s": 0.5, "probe_duration_s": 1.0},
    }


def run_demo(spec: CampaignSpec, results: Path, as_json: bool) -> None:
    from softnet.report.html import write_report

    started = time.monotonic()
    cid = campaign_cmd.run(spec, results, as_json)
    configs = campaign_cmd.analyze(results, cid, spec.analysis.pdr_loss_ratio, spec.analysis.eta,
                                   as_json=False, tables=not as_json) if not as_json else None
    report = write_report(results, results / f"{cid}.html", campaign_id=cid)
    if as_json:
        from softnet.analysis.campaigns import analyze_path

        print_json({"campaign_id": cid, "report": str(report), "elapsed_s": time.monotonic() - started,
                    "configurations": [c.to_dict() for c in analyze_path(results, cid)]})
        return
    r = configs[0].analysis.report
    rate = (lambda v: eng(v, "pps"))
    loads = [ls.load_pps for ls in configs[0].analysis.stats.loads]
    console.print(f"\nkernel IPv4 forwarding on this machine, loads {rate(min(loads))} to {rate(max(loads))}:",
                  highlight=False)
    x = f"{100 * r.pdr_loss_ratio:g}%"
    console.print(f"  NDR (no loss): {rate(r.ndr_load_pps)}\n"
                  f"  PDR{x} (the last load before mean loss first exceeds {x}): {rate(r.pdr_load_pps)}\n"
                  "  saturation: " + ("none seen (the verdict says why)" if r.saturation_load_pps is None
                                      else f"from {rate(r.saturation_load_pps)}"), highlight=False)
    console.print(f"  verdict [bold]{r.verdict.value}[/]: {r.reason}", highlight=False)
    stalls = campaign_cmd.host_stall_line(configs[0].meta)
    if stalls:
        console.print(f"  on this host: {stalls}", highlight=False)
    console.print(f"report: {report}  ({time.monotonic() - started:.0f} s)", highlight=False)

