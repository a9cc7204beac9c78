"""Ctrl-C sweep: each command interrupted at every delay from 0.05 s to 1.5 s
(0.05 s steps); every run must exit 130 with a line saying so, no
traceback, never a report of success, and the host as it was after it.

Commands (root; the ones that build a testbed wait for it, SOFTNET_WAIT):
trial (ipv4-fwd, 3 s), run (a 2-load sweep), search (ipv4-fwd), compare
(two data paths), latency (the AF_XDP lab, 3 s); compare-interleaved (the
same, its trials taking turns) when asked for. Reports per command how
many runs exited 130, how many otherwise (with the exit codes), and how
many left the host changed.

Writes bench/results/interrupt_sweep-<UTC>.json (ignored by git).
Run (root): .venv/bin/python bench/interrupt_sweep.py [--commands trial,search] [--step 0.05] [--to 1.5]
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.conftest import host_state, wait_host_state  # noqa: E402
import results_file  # noqa: E402

SWEEP_SPEC = """name = "interrupt-sweep"
[testbed]
sut = "ipv4-fwd"
[method]
loads = ["50kpps", "100kpps"]
runs = 1
duration_s = 1.0
"""


def commands(folder: Path) -> dict[str, list[str]]:
    spec = folder / "sweep.toml"
    spec.write_text(SWEEP_SPEC)
    return {
        "trial": ["trial", "--sut", "ipv4-fwd", "--rate", "50kpps", "--duration", "3"],
        "run": ["run", str(spec), "--results", str(folder / "run")],
        "search": ["search", "--sut", "ipv4-fwd", "--goals", "ndr", "--width", "0.05", "--duration", "0.5",
                   "--results", str(folder / "search")],
        "compare": ["compare", "--sut", "ipv4-fwd", "--sut", "nft-fw:rules=10", "--load", "50kpps",
                    "--duration", "0.5", "--budget", "4", "--results", str(folder / "compare")],
        "latency": ["latency", "--runs", "1", "--duration", "3"],
        # two testbeds up at once, a thread per trial (softnet.campaign.interleave)
        "compare-interleaved": ["compare", "--sut", "ipv4-fwd", "--sut", "nft-fw:rules=10", "--load", "50kpps",
                                "--metrics", "cpu", "--pairing", "interleaved", "--duration", "0.5", "--budget", "4",
                                "--results", str(folder / "compare-interleaved")],
    }


def one(args: list[str], delay: float) -> dict:
    before = host_state()
    p = subprocess.Popen([str(Path(sys.executable).parent / "softnet"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(delay)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    after = wait_host_state(before)
    return {"delay_s": delay, "rc": p.returncode, "said": "interrupted" in err, "traceback": "Traceback" in err,
            "host_as_it_was": after == before,
            # a run that went wrong keeps enough to tell why (a fatal error's C-level report)
            "stderr_tail": err.strip().splitlines()[-(3 if p.returncode == 130 and "Traceback" not in err else 40):]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commands", default="trial,run,search,compare,latency")
    ap.add_argument("--step", type=float, default=0.05)
    ap.add_argument("--to", type=float, default=1.5)
    args = ap.parse_args()
    delays = [round(args.step * i, 3) for i in range(1, int(round(args.to / args.step)) + 1)]
    runs: list[dict] = []
    t0 = time.time()
    with tempfile.TemporaryDirectory() as d:
        cmds = commands(Path(d))
        for name in args.commands.split(","):
            for delay in delays:
                r = {"command": name, **one(cmds[name], delay)}
                runs.append(r)
                ok = r["rc"] == 130 and r["said"] and not r["traceback"] and r["host_as_it_was"]
                print(f"{name:8} {delay:5.2f} s: exit {r['rc']}{'' if ok else '  <- ' + str(r['stderr_tail'])}",
                      flush=True)
    summary = {}
    for name in args.commands.split(","):
        sel = [r for r in runs if r["command"] == name]
        summary[name] = {"runs": len(sel), "exit_130": sum(r["rc"] == 130 for r in sel),
                         "other_exits": sorted({r["rc"] for r in sel if r["rc"] != 130}),
                         "tracebacks": sum(r["traceback"] for r in sel),
                         "host_changed": sum(not r["host_as_it_was"] for r in sel)}
        print(name, summary[name])
    results_file.write("interrupt_sweep", {"benchmark": "interrupt_sweep", "delays_s": delays, "summary": summary,
                                           "runs": runs, "elapsed_s": time.time() - t0})
    bad = [n for n, s in summary.items() if s["exit_130"] < s["runs"] or s["tracebacks"] or s["host_changed"]]
    if bad:
        print("FAIL:", ", ".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
