"""Fleet workers as Slurm jobs, on a real Slurm: munged, slurmctld and one
slurmd (Debian's packages) started by the test on this machine. A worker
submitted with `softnet fleet sbatch` joins the fleet as its job runs, a
campaign's cells run on it, and scancel stops it with nothing left."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import duckdb
import pytest

from softnet.fleet.local import LocalFleet, free_port
from tests.conftest import softnet_cmd

pytestmark = pytest.mark.slow
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (slurmd runs jobs as their user)"
    gone = [d for d in DAEMONS if not shutil.which(d, path=os.environ["PATH"] + ":/usr/sbin:/sbin")]
    return f"Slurm is not installed ({', '.join(gone)} missing; make apt installs it)" if gone else None


@pytest.fixture
def slurm(tmp_path_factory):
    """A one-node Slurm cluster in a private folder (its own munge socket and key, ports, state, spool)."""
    why = _missing()
    if why:
        pytest.skip(why)
    d = Path(tempfile.mkdtemp(prefix="softnet-slurm-"))
    d.chmod(0o711)  # munged wants the socket's folder reachable by all, and not writable by them
    (d / "state").mkdir()
    (d / "spool").mkdir()
    key = d / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    node = socket.gethostname()
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=softnet
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
KillWait=10
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory=500 State=UNKNOWN
PartitionName=lab Nodes={node} Default=YES MaxTime=INFINITE State=UP
""")
    env = {**os.environ, "SLURM_CONF": str(conf), "PATH": os.environ["PATH"] + ":/usr/sbin:/sbin"}
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for argv in (
        ["munged", "-F", "-f", f"--socket={d}/munge.sock", f"--key-file={key}", f"--log-file={d}/munged.log",
         f"--pid-file={d}/munged.pid", f"--seed-file={d}/munged.seed"],
        ["slurmctld", "-D", "-f", str(conf)], ["slurmd", "-D", "-f", str(conf)])]
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True)
            if r.stdout.strip() == "idle":
                break
            time.sleep(0.5)
        else:
            pytest.skip("Slurm did not start: " + "".join((d / f).read_text()[-1500:] for f in
                                                          ("slurmctld.log", "slurmd.log") if (d / f).exists()))
        yield env, d
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(d, ignore_errors=True)


def jobs(env) -> list[str]:
    r = subprocess.run(["squeue", "-h", "-o", "%i %T %j"], env=env, capture_output=True, text=True, check=True)
    return r.stdout.split("\n")[:-1]


def test_a_worker_started_as_a_slurm_job_measures_and_scancel_stops_it(slurm, tmp_path):
    env, d = slurm
    fleet = LocalFleet(tmp_path, [])  # the scheduler; the worker comes from Slurm
    try:
        r = subprocess.run(softnet_cmd("fleet", "sbatch", "--scheduler", fleet.address, "--testbed", "sim1",
                                       "--logs", str(tmp_path), "--json"), env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        job = json.loads(r.stdout)["jobs"]["sim1"]
        fleet.wait_workers(1, timeout=120)
        assert [f"{job} RUNNING softnet-sim1"] == jobs(env)
        spec = tmp_path / "c.toml"
        spec.write_text('name = "slurm"\n[testbed]\nsut = "synthetic"\n[synthetic]\ntrial_wall_s = 0.05\n'
                        '[method]\nloads = ["100kpps", "300kpps"]\nruns = 2\nduration_s = 1\n'
                        '[matrix]\n"traffic.frame_bytes" = [64, 128]\n')
        run = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r"), "--scheduler",
                                         fleet.address), capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        with duckdb.connect(str(tmp_path / "r" / "softnet.duckdb"), read_only=True) as c:
            rows = c.execute("SELECT json_extract_string(result_json, '$.provenance.fleet.testbed') FROM trials"
                             ).fetchall()
        assert rows == [("sim1",)] * 8
        subprocess.run(["scancel", job], env=env, check=True)
        end = time.monotonic() + 60
        while jobs(env) and time.monotonic() < end:
            time.sleep(0.5)
        assert jobs(env) == []
        log = (tmp_path / f"softnet-sim1-{job}.log").read_text()
        assert "Received signal SIGTERM" in log or "signal-15" in log, log[-2000:]
        # the worker removed its scratch space and left no process
        assert not list(Path(tempfile.gettempdir()).glob("softnet-fleet-sim1-*"))
        ps = subprocess.run(["pgrep", "-f", "--", "--testbed sim1"], capture_output=True, text=True)
        assert ps.stdout == "", ps.stdout
    finally:
        fleet.close()


def test_the_job_script_is_shown_and_a_bad_testbed_refused(tmp_path):
    r = subprocess.run(softnet_cmd("fleet", "sbatch", "--scheduler", "tcp://10.0.0.5:8786", "--testbed", "tb1",
                                   "--partition", "lab", "--sbatch-arg=--time=8:00:00", "--dry-run",
                                   "--logs", str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "#!/bin/sh" and "#SBATCH --exclusive" in lines and "#SBATCH --partition=lab" in lines
    assert "#SBATCH --time=8:00:00" in lines and f"#SBATCH --output={tmp_path}/softnet-tb1-%j.log" in lines
    assert lines[-1].startswith("exec ") and "fleet worker --scheduler tcp://10.0.0.5:8786 --testbed tb1" in lines[-1]
    bad = subprocess.run(softnet_cmd("fleet", "sbatch", "--scheduler", "tcp://10.0.0.5:8786", "--testbed", "a,b",
                                     "--dry-run"), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--testbed" in bad.stderr and "'a,b'" in bad.stderr, bad.stderr
