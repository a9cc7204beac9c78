"""The kernel's BPF run-time statistics (bpf_stats): every program's run
count and run time, on only while the returned fd is open (the kernel turns
them off when it closes, however the process ends: nothing to restore)."""
from __future__ import annotations

import ctypes
import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

BPF_ENABLE_STATS, BPF_STATS_RUN_TIME, SYS_BPF = 32, 0, 321  # linux/bpf.h; x86-64 syscall number


def enable_bpf_stats() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 32)(BPF_STATS_RUN_TIME)
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, attr, ctypes.sizeof(attr))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "BPF_ENABLE_STATS")
    return fd


def programs() -> list[dict]:
    """Every loaded program as `bpftool -j prog show` gives it (id, name, run_cnt, run_time_ns, pids)."""
    return json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                     check=True).stdout)


def prog_stats(prog_id: int) -> tuple[int, int]:
    out = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)], capture_output=True,
                                    text=True, check=True).stdout)
    return out.get("run_cnt", 0), out.get("run_time_ns", 0)


@contextmanager
def watched(keep: Callable[[dict], bool], every_s: float = 0.2) -> Iterator[dict[int, dict]]:
    """The loaded programs ``keep`` selects, as last seen (id -> `programs()`'s
    record), polled while the block runs: programs a trial loads for its own
    length are read before they unload with it."""
    seen: dict[int, dict] = {}
    done = threading.Event()

    def poll() -> None:
        while True:
            seen.update({p["id"]: p for p in programs() if keep(p)})
            if done.wait(every_s):
                return

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    try:
        yield seen
    finally:
        done.set()
        t.join()
