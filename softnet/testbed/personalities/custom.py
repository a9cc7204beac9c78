"""The user's own data path: shell commands run inside the SUT namespace.

The commands come from a table: a campaign spec's ``[testbed.custom]``, or a
TOML file named by the ``file`` param (``--sut custom:file=sut.toml``):

    setup = ["cmd", ...]        # or script = "setup.sh"
    teardown = ["cmd", ...]     # run however the testbed ends (even after a failed setup)
    counters = "cmd"            # optional: prints a JSON object of integer counters
    reset = ["cmd", ...]        # optional: the reset benchmark's action (softnet trial --reset-at)
    l3 = true                   # softnet's kernel L3 setup first (next hop: sut_in), else the sink's MAC
    timeout_s = 60              # per command
    workdir = "dir"             # optional: where commands run (default: the file's folder, else here)

Each command runs as ``sh -c CMD`` through ``ip netns exec`` in the SUT
namespace, in the working directory, with the testbed named in SN_*
environment variables (see ENV below and docs/reference/personalities.md).
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from softnet.errors import InputError, TestbedError
from softnet.specfile import read_toml
from softnet.testbed.personalities import register
from softnet.testbed.personalities.base import Param, Personality
from softnet.testbed.personalities.kernel_fwd import L3Forwarding

if TYPE_CHECKING:
    from softnet.testbed.local import LocalTestbed

TABLE_WHERE = "testbed.custom"


class CustomTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    setup: list[str] | None = None
    script: str | None = None
    teardown: list[str] = []
    counters: str | None = None
    reset: list[str] = []  # the reset benchmark's action, run in order (e.g. a process restart)
    l3: bool = False
    timeout_s: float = Field(60.0, gt=0, le=3600)
    workdir: str | None = None

    @model_validator(mode="after")
    def one_setup(self):
        if self.setup is None and self.script is None:
            raise ValueError("missing: give setup = [\"cmd\", ...] or script = \"path\"")
        if self.setup is not None and self.script is not None:
            raise ValueError("give setup or script, not both")
        return self


def _end_group(proc: subprocess.Popen) -> None:
    """SIGKILL to the command's process group, then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def parse_table(data: Any, where: str) -> CustomTable:
    """The table validated; errors name the field as ``where.field``."""
    if not isinstance(data, dict):
        raise InputError(where, f"expected a table of setup/teardown commands, got {type(data).__name__}")
    try:
        return CustomTable.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(p) for p in e["loc"])
        if not loc:  # the model-level checks are about setup / script
            loc = "setup"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = f"unknown key; accepted: {', '.join(CustomTable.model_fields)}"
        raise InputError(f"{where}.{loc}", msg) from None


def env(tb: "LocalTestbed") -> dict[str, str]:
    """What a command knows of the testbed."""
    from softnet.testbed.local import DST_RANGE

    addr = tb.addr  # this testbed's addresses and MACs (an inventory's hosts have their own MACs)

    v = 0 if tb.ip_version == 4 else 1
    return {"SN_NS": tb.ns["sut"], "SN_IN": tb.ifs["sut_in"], "SN_OUT": tb.ifs["sut_out"],
            "SN_IN_MAC": addr["sut_in"][2], "SN_OUT_MAC": addr["sut_out"][2],
            "SN_IN_IP": addr["sut_in"][v], "SN_OUT_IP": addr["sut_out"][v],
            "SN_GEN_IP": addr["gen"][v], "SN_GEN_MAC": addr["gen"][2],
            "SN_SINK_IP": addr["sink"][v], "SN_SINK_MAC": addr["sink"][2],
            "SN_DST_RANGE": str(DST_RANGE[tb.ip_version])}


@register
class Custom(Personality):
    name = "custom"
    summary = "your own data path: setup/teardown/counters commands run in the SUT namespace"
    params = {"file": Param(str, "", "a TOML file holding the table (setup, teardown, counters, l3, timeout_s)")}
    requires = ()  # whatever its commands need: they say so when they fail

    def __init__(self, values: dict[str, Any], extra: dict | None = None):
        super().__init__(values, extra)
        file = values.get("file") or ""
        self.table: CustomTable | None = None
        self.workdir = Path.cwd()
        if file and extra:
            raise InputError(TABLE_WHERE, f"give the commands in the table or in file={file}, not both")
        if file:
            path = Path(file)
            self.table = parse_table(read_toml(path, "a custom SUT table"), str(path))
            self.workdir = path.resolve().parent
        elif extra:
            self.table = parse_table(extra, TABLE_WHERE)
        # without a table: only a name so far (a campaign spec's testbed.sut is
        # checked before its [testbed.custom] table); check() refuses it
        if self.table and self.table.workdir:
            self.workdir = (self.workdir / self.table.workdir).resolve()
        # an instance attribute: where the generator sends depends on the table
        self.next_hop_role = "sut_in" if self.table and self.table.l3 else "sink"

    def check(self, where: str) -> None:
        """Refuse, before the host is touched, a custom SUT without commands."""
        if self.table is None:
            raise InputError(where, "custom needs its commands: a [testbed.custom] table in a campaign spec, "
                             "or --sut custom:file=SUT.toml (see examples/custom-sut)")
        if not self.workdir.is_dir():
            raise InputError(f"{TABLE_WHERE}.workdir", f"{self.workdir}: no such folder")

    # ---- running commands ------------------------------------------------
    def _run(self, tb: "LocalTestbed", cmd: str, what: str, check: bool = True) -> str:
        argv = ["ip", "netns", "exec", tb.ns["sut"], "sh", "-c", cmd]
        # its own process group: a command past its time is ended with all it started
        proc = subprocess.Popen(argv, cwd=self.workdir, env={**os.environ, **env(tb)}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=self.table.timeout_s)
        except BaseException as exc:  # the timeout, or Ctrl-C while it ran
            _end_group(proc)
            if isinstance(exc, subprocess.TimeoutExpired):
                raise TestbedError(f"custom SUT {what} `{cmd}` did not finish in {self.table.timeout_s:g} s "
                                   "(testbed.custom.timeout_s)") from None
            raise
        if check and proc.returncode != 0:
            raise TestbedError(f"custom SUT {what} `{cmd}` failed (exit {proc.returncode}) in {self.workdir}: "
                               f"{err.strip() or out.strip() or 'no output'}")
        return out

    def _teardown(self, tb: "LocalTestbed") -> None:
        errors = []
        for cmd in self.table.teardown:  # every one, whatever the others did
            try:
                self._run(tb, cmd, "teardown")
            except TestbedError as exc:
                errors.append(str(exc))
        if errors:
            raise TestbedError("; ".join(errors))

    def configure(self, tb: "LocalTestbed") -> None:
        self.check(TABLE_WHERE)
        if self.table.l3:
            L3Forwarding.configure(self, tb)
        # before setup: a setup that fails halfway is torn down too
        tb.changes.record(f"custom SUT teardown in {tb.ns['sut']} ({len(self.table.teardown)} commands)",
                          lambda: Path("/run/netns", tb.ns["sut"]).exists() and self._teardown(tb))
        if self.table.setup is not None:
            cmds = self.table.setup
        else:
            script = self.table.script
            cmds = [shlex.quote(script) if os.access(self.workdir / script, os.X_OK) else f"sh {shlex.quote(script)}"]
        for cmd in cmds:
            self._run(tb, cmd, "setup")

    def check_reset(self) -> None:
        if not self.table or not self.table.reset:
            raise InputError(f"{TABLE_WHERE}.reset", "this custom SUT names no reset: give reset = [\"cmd\", ...] "
                             "(run in the SUT namespace, in order)")

    def reset(self, tb: "LocalTestbed") -> str:
        self.check_reset()
        for cmd in self.table.reset:
            self._run(tb, cmd, "reset")
        return "; ".join(self.table.reset)

    def counters(self, tb: "LocalTestbed") -> dict[str, int]:
        if not self.table or not self.table.counters:
            return {}
        out = self._run(tb, self.table.counters, "counters")
        try:
            data = json.loads(out)
        except json.JSONDecodeError:
            raise TestbedError(f"custom SUT counters `{self.table.counters}` printed no JSON object: "
                               f"{out.strip()[:200]!r}") from None
        if not isinstance(data, dict) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                 for v in data.values()):
            raise TestbedError(f"custom SUT counters `{self.table.counters}`: expected a JSON object of "
                               f"integers, got {out.strip()[:200]!r}")
        return {str(k): v for k, v in data.items()}
