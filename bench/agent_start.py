"""How long `softnet agent --stdio` takes from its start to its `hello`
answer, over a pipe on this host: the cost an agent per local testbed would
add (docs/how-to/remote-hosts.md says why this host's trials call their pieces
directly).

Run:  .venv/bin/python bench/agent_start.py [--repeats N]
Writes bench/results/agent_start.json and prints the median and range.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from softnet.hosts.agent import PROTOCOL_VERSION  # noqa: E402

SOFTNET = Path(sys.executable).parent / "softnet"


def one_start() -> float:
    with tempfile.TemporaryDirectory() as state:
        t0 = time.perf_counter()
        proc = subprocess.Popen([str(SOFTNET), "agent", "--stdio", "--state-dir", state], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        proc.stdin.write(json.dumps({"id": 1, "op": "hello", "version": PROTOCOL_VERSION}) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        elapsed = time.perf_counter() - t0
        proc.stdin.write(json.dumps({"id": 2, "op": "bye"}) + "\n")
        proc.stdin.flush()
        proc.wait(timeout=30)
    if not reply.get("ok"):
        raise SystemExit(f"the agent refused hello: {reply}")
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--out", type=Path, default=ROOT / "bench/results/agent_start.json")
    a = p.parse_args()
    times = [one_start() for _ in range(a.repeats)]
    doc = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "date_unix_s": time.time(),
           "start_to_hello_s": times, "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"agent start to hello: median {doc['median_s']:.3f} s ({doc['min_s']:.3f}-{doc['max_s']:.3f}), "
          f"{a.repeats} starts; wrote {a.out}")


if __name__ == "__main__":
    main()
