"""The agent's operations for the AF_XDP latency lab: the lab hosts (A, B, C)
an inventory host plays, on its own NICs, by the same code as the local lab
(softnet.hosts.xsk_lab.XskLabHere). Mixed into softnet.hosts.agent.Agent.

Before a NIC moves into a lab namespace, its state and what the lab's knobs
change on it (NAPI deferral, GRO flush timeout, interrupt coalescing) are
journalled in the host's namespace, so that after a kill -9 the reaper moves
it back and restores it; host-wide sysctls (busy polling) go through the
same journal.

Its ops are in XSK_OPS, which the agent's op table takes in.
"""
from __future__ import annotations

import base64
from dataclasses import asdict
from pathlib import Path

from softnet.errors import InputError
from softnet.hosts.safety import PortSpec
from softnet.hosts.xsk_lab import XskLabHere
from softnet.testbed.latency import RX_DEVS, LatencyKnobs, LatencyPlacement
from softnet.tools import hostcmd, nic
from softnet.traffic.xsk import XskKnobs

IF_ROLES = ("a", "b_a", "b_c", "c")
NAPI_FILES = {"napi_defer_hard_irqs": "napi_defer_hard_irqs", "gro_flush_timeout_ns": "gro_flush_timeout"}


class XskLabOps:
    xsk: XskLabHere | None = None

    def op_xsk_build(self, ports: dict[str, PortSpec], macs: dict[str, str], knobs: dict,
                     app_cpus: dict[str, int], napi_cpus: dict[str, int]) -> dict:
        """This host's lab hosts: ``ports`` (interface role -> port) its NICs,
        ``macs`` every interface role's MAC (the next hops')."""
        from softnet.hosts.agent import AgentError

        unknown = sorted(set(ports) - set(IF_ROLES)) or sorted(set(IF_ROLES) - set(macs))
        if unknown:
            raise AgentError(f"lab interface roles {unknown}; expected {', '.join(IF_ROLES)}", "ports")
        if self.xsk is not None:
            raise AgentError("an AF_XDP lab is already built by this agent", "op")
        self._verify(ports)
        ops = self._changes()
        try:
            lk = LatencyKnobs(**knobs)
            lab = XskLabHere(self.lab_changes, lk, LatencyPlacement(dict(app_cpus), dict(napi_cpus)),
                             {r: (ports[r].name if r in ports else None, macs[r]) for r in IF_ROLES},
                             host_write=ops.write_file, cpus=online_cpus())
        except InputError as exc:
            raise AgentError(exc.message, exc.field) from None
        here = lab.tb.here
        if sorted(r for h in here for r in RX_DEVS[h]) != sorted(ports):
            raise AgentError("a lab host's NICs must all be on one inventory host (B has two)", "ports")
        for h in here:
            names = [ports[r].name for r in RX_DEVS[h]]
            for name in names:
                ops.device_state(name)
                self._keep_knob_state(name, lk)
            ops.lab_netns(lab.tb.ns[h], names)
            self.lab_changes.record(f"netlink sockets in {lab.tb.ns[h]}",
                                    lambda ns=lab.tb.ns[h]: lab.tb._close_netlink(ns))
        self.xsk = lab
        self.lab_changes.record("AF_XDP lab", lambda: setattr(self, "xsk", None))
        hosts = lab.build()
        return {"hosts": {h: asdict(v) for h, v in hosts.items()}, "applied": [*ops.applied, *self.lab_changes.applied]}

    def _keep_knob_state(self, name: str, lk: LatencyKnobs) -> None:
        """Journal, in this namespace, the device settings the lab's knobs
        will change once the NIC is in the lab's (same values: the lab
        applies them there and records what the device took)."""
        for knob, f in NAPI_FILES.items():
            value = getattr(lk, knob)
            path = Path(f"/sys/class/net/{name}/{f}")
            if value is not None and path.exists():
                self.ops.write_file(str(path), str(value))
        want = {p: str(v) for p, v in (("rx-usecs", lk.coalesce_rx_usecs), ("tx-usecs", lk.coalesce_tx_usecs))
                if v is not None}
        if want:
            current, _ = nic.parse_ethtool("-C", hostcmd.run(["ethtool", "-c", name], check=False))
            took = {p: v for p, v in want.items() if p in current}
            if took:
                self.ops.ethtool_set(name, "-C", took, current)

    def _lab(self) -> XskLabHere:
        from softnet.hosts.agent import AgentError

        if self.xsk is None:
            raise AgentError("no AF_XDP lab built (xsk_build first)", "op")
        return self.xsk

    def op_xsk_start(self, reflect: dict, forward: dict) -> dict:
        lab = self._lab()
        hellos = lab.start(XskKnobs(**reflect), XskKnobs(**forward))
        for role, tool in (("reflect", lab.reflect), ("forward", lab.forward)):
            if tool is not None and role in hellos:
                self.ops.started(tool.proc, f"softnet-xsk --role {role}")
        return {"hellos": {role: h.model_dump() for role, h in hellos.items()}}

    def op_xsk_ping(self, knobs: dict, count: int, interval_ns: int, arrivals: str, frame_bytes: int) -> dict:
        """One run from A; its records travel back with the summary."""
        records = self.state_dir / "xsk-records.bin"
        try:
            summary, hello, _ = self._lab().ping(XskKnobs(**knobs), count, interval_ns, arrivals, frame_bytes,
                                                 records)
            data = base64.b64encode(records.read_bytes()).decode()
        finally:
            records.unlink(missing_ok=True)
        return {"summary": summary.model_dump(), "hello": hello.model_dump(), "records_b64": data}

    def op_xsk_read(self, role: str) -> dict:
        return {"read": self._lab().read(role).model_dump()}

    def op_xsk_stamps(self, role: str) -> dict:
        """The hop stamps the role kept beside frames too short for them."""
        stamps = self._lab().stamps(role, self.state_dir / f"xsk-stamps-{role}.bin")
        return {"stamps_b64": base64.b64encode(stamps.tobytes()).decode()}

    def op_xsk_netstat(self, host: str) -> dict:
        return {"netstat": self._lab().netstat(host)}

    def op_xsk_observe(self) -> dict:
        return {"observed": self._lab().observe().model_dump()}

    def op_xsk_kernel_ping(self, count: int, interval_s: float, frame_bytes: int) -> dict:
        return {"baseline": self._lab().kernel_ping(count, interval_s, frame_bytes).model_dump()}

    def op_xsk_describe(self) -> dict:
        return {"testbed": self._lab().describe().model_dump()}


def online_cpus(path: Path = Path("/sys/devices/system/cpu/online")) -> list[int]:
    """The host's CPUs ("0-3,6"): the agent's own affinity is its housekeeping CPUs."""
    out: list[int] = []
    for part in path.read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


XSK_OPS = {"xsk_build": XskLabOps.op_xsk_build, "xsk_start": XskLabOps.op_xsk_start,
           "xsk_ping": XskLabOps.op_xsk_ping, "xsk_read": XskLabOps.op_xsk_read,
           "xsk_stamps": XskLabOps.op_xsk_stamps,
           "xsk_netstat": XskLabOps.op_xsk_netstat, "xsk_observe": XskLabOps.op_xsk_observe,
           "xsk_kernel_ping": XskLabOps.op_xsk_kernel_ping, "xsk_describe": XskLabOps.op_xsk_describe}
