"""Testbeds as Dask worker resources. Every fleet worker stands for one
testbed and holds one unit of ``testbed`` (so it runs one cell at a time)
and one of ``testbed-NAME``, ``driver-D`` (its SUT host's NIC drivers) and
``kernel-K`` (its SUT host's kernel release). A cell asks for ``testbed``
and, where its knobs pin it, the others: Dask then runs it only where they
are, one cell per testbed at a time."""
from __future__ import annotations

import re

from softnet.campaign.spec import CampaignSpec
from softnet.errors import InputError

ANY = "testbed"
NAME = re.compile(r"^[A-Za-z0-9_.:+-]+$")  # a resource name's part: no ',' or '=' (dask worker --resources)


def _res(kind: str, value: str, field: str) -> str:
    if not NAME.match(value):
        raise InputError(field, f"'{value}': a testbed, driver or kernel name of letters, digits and _.:+-")
    return f"{kind}-{value}"


def worker_resources(name: str, drivers: list[str] = (), kernel: str | None = None) -> dict[str, int]:
    """A worker's resources for the testbed ``name``."""
    out = {ANY: 1, _res("testbed", name, "--testbed"): 1}
    out |= {_res("driver", d, "driver"): 1 for d in sorted(set(drivers))}
    if kernel:
        out[_res("kernel", kernel, "kernel")] = 1
    return out


def cell_resources(cell: CampaignSpec) -> dict[str, int]:
    """What a cell needs of a worker: a testbed, and the one its knobs name."""
    f, t = cell.fleet, cell.testbed
    out = {ANY: 1}
    pinned = f.testbed or (t.name if t.inventory else None)
    if pinned:
        out[_res("testbed", pinned, "fleet.testbed")] = 1
    if f.driver:
        out[_res("driver", f.driver, "fleet.driver")] = 1
    if f.kernel:
        out[_res("kernel", f.kernel, "fleet.kernel")] = 1
    return out


def resources_arg(res: dict[str, int]) -> str:
    """As `dask worker --resources` takes them."""
    return ",".join(f"{k}={v}" for k, v in res.items())


def testbed_of(res: dict[str, float]) -> str | None:
    return next((k[len("testbed-"):] for k in res if k.startswith("testbed-")), None)


def satisfies(worker: dict[str, float], need: dict[str, int]) -> bool:
    return all(worker.get(k, 0) >= v for k, v in need.items())


def describe(need: dict[str, int]) -> str:
    """A cell's constraints in words ("any testbed" when it has none)."""
    named = [k for k in need if k != ANY]
    return " and ".join(k.replace("-", " ", 1) for k in named) or "any testbed"
