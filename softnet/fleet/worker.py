"""`softnet fleet worker`: one Dask worker for one testbed. An inventory's
testbed is checked first (`softnet inventory check` on its hosts); one that
fails is left out: no worker starts, and the reason is left with the
scheduler (a dataset) for every controller's progress to show. Otherwise
the worker starts with the testbed's resources (softnet.fleet.resources)
and runs one cell at a time."""
from __future__ import annotations

import os
import sys

from softnet.errors import InputError
from softnet.fleet.controller import CHECK_PREFIX, connect
from softnet.fleet.resources import resources_arg, testbed_resources
from softnet.fleet.task import ENV_INVENTORY, ENV_TESTBED


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
    found = check_inventory(sub)
    sut = found["hosts"].get(tb.sut, {})
    drivers = [f.get("driver") for f in (sut.get("interfaces") or {}).values() if isinstance(f, dict)]
    kernel = (sut.get("host") or {}).get("kernel")
    problems = [f"{p['field']}: {p['error']}" for p in found["problems"]]
    return [d for d in drivers if d], kernel, problems


def start(scheduler: str, testbed: str, inventory: str | None, host: str) -> None:
    """Check, then exec `dask worker` (never returns unless the check fails)."""
    drivers, kernel, problems = inventory_facts(inventory, testbed) if inventory else ([], None, [])
    client = connect(scheduler)
    try:
        name = f"{CHECK_PREFIX}{testbed}"
        if name in client.list_datasets():
            client.unpublish_dataset(name)
        if problems:
            client.publish_dataset(**{name: "; ".join(problems)})
            raise InputError("--testbed", f"{testbed} failed its check, left out of the fleet: {'; '.join(problems)}")
    finally:
        client.close()
    env = dict(os.environ, **{ENV_TESTBED: testbed}, **({ENV_INVENTORY: os.path.abspath(inventory)} if inventory else {}))
    argv = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nworkers", "1", "--nthreads", "1",
            "--resources", resources_arg(testbed_resources(testbed, drivers, kernel)), "--name", f"softnet-{testbed}",
            "--host", host]
    os.execve(sys.executable, argv, env)


def scheduler_argv(host: str, port: int) -> list[str]:
    """`dask scheduler` on ``host`` (127.0.0.1 unless told otherwise), no dashboard."""
    return [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", host, "--port", str(port),
            "--no-dashboard"]
