"""How long `softnet serve` takes from its start until it accepts a TCP
connection, on a small results store of the synthetic SUT: what a user
waits for after typing the command, and what every serve test pays.

Run:  .venv/bin/python bench/serve_start.py [--repeats N]
Writes bench/results/serve_start-<UTC>.json and prints the median and range.
"""
from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import results_file  # noqa: E402
from softnet.fleet.local import free_port  # noqa: E402

SOFTNET = Path(sys.executable).parent / "softnet"
SPEC = """name = "serve-start"
[testbed]
sut = "synthetic"
[method]
loads = ["100kpps", "500kpps"]
runs = 2
duration_s = 1
"""


def one_start(store: Path) -> float:
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(SOFTNET), "serve", str(store), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"softnet serve ended: {proc.stderr.read()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return time.perf_counter() - t0
            except OSError:
                time.sleep(0.01)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "s.toml").write_text(SPEC)
        subprocess.run([str(SOFTNET), "run", str(Path(tmp) / "s.toml"), "--results", str(Path(tmp) / "r")],
                       check=True, capture_output=True)
        times = [one_start(Path(tmp) / "r") for _ in range(a.repeats)]
    path = results_file.write("serve_start", {"repeats": a.repeats, "seconds": times})
    print(f"softnet serve, start to listening: median {statistics.median(times):.3f} s, "
          f"range {min(times):.3f}-{max(times):.3f} s over {a.repeats} starts\n{path}")


if __name__ == "__main__":
    main()
