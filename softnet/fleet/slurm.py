"""Fleet workers as Slurm jobs: one batch job per testbed, each running
`softnet fleet worker` on a node of its own (exclusive: a testbed's
controller host measures nothing, but its CPU time is the agents' and
SSH's). Plain sbatch rather than dask-jobqueue's SLURMCluster: that one
starts generic Dask workers, while a testbed's worker checks its testbed
first, holds its named resources and starts its Dask worker again when the
scheduler comes back. scancel sends SIGTERM: the worker stops its Dask
worker and removes its scratch space, as under Ctrl-C."""
from __future__ import annotations

import shlex
import subprocess
import sys

from softnet.errors import InputError, SoftnetError
from softnet.fleet.resources import NAME


def job_script(scheduler: str, testbed: str, inventory: str | None, host: str, partition: str | None,
               logs: str, extra: list[str]) -> str:
    """The batch script for one testbed's worker (this interpreter's softnet:
    the lab's nodes share its path, as Slurm clusters share software)."""
    if not NAME.match(testbed):
        raise InputError("--testbed", f"'{testbed}': a testbed name of letters, digits and _.:+-")
    opts = [f"--job-name=softnet-{testbed}", "--nodes=1", "--ntasks=1", "--exclusive",
            f"--output={logs}/softnet-{testbed}-%j.log"]
    if partition:
        opts.append(f"--partition={partition}")
    argv = [sys.executable, "-m", "softnet", "fleet", "worker", "--scheduler", scheduler, "--testbed", testbed,
            "--host", host] + (["--inventory", inventory] if inventory else [])
    # exec: the worker is the job's process, so scancel's SIGTERM reaches it
    return "\n".join(["#!/bin/sh", *(f"#SBATCH {o}" for o in [*opts, *extra]),
                      "exec " + " ".join(map(shlex.quote, argv)), ""])


def submit(script: str) -> str:
    """sbatch the script; its job id."""
    try:
        r = subprocess.run(["sbatch", "--parsable"], input=script, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise SoftnetError("sbatch: not found (Slurm's client commands are needed on this host)") from None
    if r.returncode != 0:
        raise SoftnetError(f"sbatch refused the job: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout.strip().split(";")[0]
