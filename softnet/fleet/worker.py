"""`softnet fleet worker`: one Dask worker for one testbed. An inventory's
testbed is checked first (`softnet inventory check` on its hosts); one that
fails is left out: no worker starts, and the reason is left with the
scheduler (a dataset) for every controller's progress to show. Otherwise
the worker runs with the testbed's resources (softnet.fleet.resources), one
cell at a time, and is started again when it ends (killed, or its scheduler
lost and back)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from softnet.errors import InputError
from softnet.fleet.controller import CHECK_PREFIX, SchedulerLost, connect
from softnet.fleet.resources import resources_arg, worker_resources
from softnet.fleet.task import ENV_INVENTORY, ENV_TESTBED

RETRY_S = 2.0
STOP_GRACE_S = 2.0
POLL_S = 0.1


def inventory_facts(inventory: str, testbed: str) -> tuple[list[str], str | None, list[str]]:
    """(the SUT host's NIC drivers, its kernel, problems) from the inventory check."""
    from softnet.hosts.check import check_inventory
    from softnet.hosts.inventory import load

    inv = load(inventory)
    if testbed not in inv.testbeds:
        raise InputError("--testbed", f"'{testbed}' is not a testbed of {inventory} "
                         f"({', '.join(sorted(inv.testbeds))})")
    tb = inv.testbeds[testbed]
    mine = {tb.traffic, tb.sut}
    sub = inv.model_copy(update={"hosts": {n: h for n, h in inv.hosts.items() if n in mine},
                                 "testbeds": {testbed: tb}})
    found = check_inventory(sub)  # the interfaces' drivers are the inventory's, verified by the check
    drivers = [i.driver for i in inv.hosts[tb.sut].interfaces if i.role in ("sut_in", "sut_out")]
    kernel = (found["hosts"].get(tb.sut, {}).get("host") or {}).get("kernel") or None
    problems = [f"{p['field']}: {p['error']}" for p in found["problems"]]
    return drivers, kernel, problems


def start(scheduler: str, testbed: str, inventory: str | None, host: str) -> int:
    """Check, then run `dask worker` for the testbed, again whenever it ends
    (a Dask worker stops when its scheduler goes: this one waits for it and
    joins again); SIGTERM or SIGINT stop both. A failed check returns 2."""
    drivers, kernel, problems = inventory_facts(inventory, testbed) if inventory else ([], None, [])
    env = dict(os.environ, **{ENV_TESTBED: testbed})
    if inventory:
        env[ENV_INVENTORY] = os.path.abspath(inventory)
    scratch = tempfile.mkdtemp(prefix=f"softnet-fleet-{testbed}-")  # the worker's spill space, removed after
    env["DASK_TEMPORARY_DIRECTORY"] = scratch
    # --preload: softnet is imported before the worker joins, not at its first cell (seconds on a busy host)
    argv = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nworkers", "1", "--nthreads", "1",
            "--resources", resources_arg(worker_resources(testbed, drivers, kernel)), "--name", f"softnet-{testbed}",
            "--host", host, "--preload", "softnet.fleet.task", "--local-directory", scratch]
    try:
        return _supervise(scheduler, testbed, problems, argv, env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _supervise(scheduler: str, testbed: str, problems: list[str], argv: list[str], env: dict) -> int:
    stop: list[int] = []

    def on_signal(signum, frame):
        stop.append(signum)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    while not stop:
        try:
            _announce(scheduler, testbed, problems)
        except SchedulerLost as exc:
            print(f"softnet fleet worker {testbed}: {exc}; waiting for it", file=sys.stderr, flush=True)
            time.sleep(RETRY_S)
            continue
        if problems:
            raise InputError("--testbed", f"{testbed} failed its check, left out of the fleet: {'; '.join(problems)}")
        _run_until_stopped(subprocess.Popen(argv, env=env), stop)
        if not stop:
            print(f"softnet fleet worker {testbed}: the Dask worker ended (scheduler lost?); joining again",
                  file=sys.stderr, flush=True)
            time.sleep(RETRY_S)
    return 0


def catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for the signal (its SigCgt mask)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(mask >> (signum - 1) & 1)


def _run_until_stopped(p: subprocess.Popen, stop: list[int]) -> None:
    """Wait for the Dask worker; once stopped, see that it gets exactly one
    SIGTERM. A Ctrl-C, scancel or systemd signals every process of the job
    at once, and the Dask CLI takes a second signal as "die now" (it drops
    its handler at the first), which skips its goodbye to the scheduler. So
    a worker that had its handler is given STOP_GRACE_S to show (by dropping
    it) that it got the signal itself before it is sent one."""
    armed = False  # the Dask CLI had its SIGTERM handler: a signal it got shows as the handler gone
    since: float | None = None  # when the stop came
    settled = False  # the worker has its one signal
    while p.poll() is None:
        if not stop:
            armed = armed or catches(p.pid, signal.SIGTERM)
        elif not settled:
            since = time.monotonic() if since is None else since
            if armed and not catches(p.pid, signal.SIGTERM):
                settled = True  # it got its own signal and is closing
            elif not armed or time.monotonic() - since >= STOP_GRACE_S:
                p.terminate()
                settled = True
        time.sleep(POLL_S)


def _announce(scheduler: str, testbed: str, problems: list[str]) -> None:
    """Leave the check's verdict with the scheduler: a failed testbed's reason, for the controllers."""
    client = connect(scheduler, timeout_s=5)
    try:
        name = f"{CHECK_PREFIX}{testbed}"
        if name in client.list_datasets():
            client.unpublish_dataset(name)
        if problems:
            client.publish_dataset(**{name: "; ".join(problems)})
    finally:
        client.close()


def run_scheduler(host: str, port: int) -> int:
    """`dask scheduler` on ``host`` (127.0.0.1 unless told otherwise), no
    dashboard, its scratch space removed when it ends (SIGTERM, SIGINT)."""
    scratch = tempfile.mkdtemp(prefix="softnet-fleet-scheduler-")
    argv = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", host, "--port", str(port),
            "--no-dashboard"]
    stop: list[int] = []

    def on_signal(signum, frame):
        stop.append(signum)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        proc = subprocess.Popen(argv, env=dict(os.environ, DASK_TEMPORARY_DIRECTORY=scratch))
        _run_until_stopped(proc, stop)
        return proc.returncode
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
