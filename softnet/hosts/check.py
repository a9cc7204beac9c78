"""`softnet inventory check`: is every host of an inventory what it says?

Each host's agent reports its interfaces' facts and refusals (the same rules
it enforces before any change), runs `softnet doctor` for what the host's
roles need, and stamps its clock. Nothing is changed on any host.
"""
from __future__ import annotations

from softnet import __version__
from softnet.errors import InputError, SoftnetError
from softnet.hosts.agent_protocol import CheckReply
from softnet.hosts.inventory import Inventory
from softnet.hosts.session import open_sessions

# doctor checks each role depends on (softnet doctor names)
ROLE_NEEDS = {"traffic": ("root", "xdp_veth", "kernel_btf"), "sut": ("root", "threaded_napi", "kernel_btf")}
CLOCK_SKEW_MAX_S = 0.1  # beyond this the window edges on two hosts are suspect (no NTP?)


def roles_of(inv: Inventory, host: str) -> set[str]:
    return {key for tb in inv.testbeds.values() for key in ("traffic", "sut") if getattr(tb, key) == host}


def check_inventory(inv: Inventory, doctor: bool = True) -> dict:
    """{"hosts": {name: findings}, "problems": [{"field", "error"}]}; a host
    that cannot be reached is a problem of its `address` field."""
    problems: list[dict] = []
    hosts: dict[str, dict] = {}
    for name, host in inv.hosts.items():
        try:
            session = open_sessions({name: host})[name]
        except InputError as exc:  # a field of this host: its key files here, or refused at hello there
            problems.append({"field": exc.field, "error": exc.message})
            hosts[name] = {"reachable": not exc.field.endswith((".identity", ".known_hosts"))}
            continue
        except SoftnetError as exc:
            problems.append({"field": f"hosts.{name}.address", "error": str(exc)})
            hosts[name] = {"reachable": False}
            continue
        try:
            ports = {f"{i}": {"field": f"hosts.{name}.interfaces.{i}", **f.model_dump()}
                     for i, f in enumerate(host.interfaces)}
            found = session.ask(CheckReply, "check", ports=ports, doctor=doctor, timeout=120)
        finally:
            session.close(undo=False)
        hello, clock = session.hello, session.clock
        problems += found.refusals
        findings = {"reachable": True, "host": hello.host.model_dump(), "softnet_version": hello.softnet_version,
                    "clock_offset_ms": clock.offset_s * 1e3, "clock_uncertainty_ms": clock.uncertainty_s * 1e3,
                    "interfaces": found.facts, "management": found.management}
        if hello.softnet_version != __version__:
            problems.append({"field": f"hosts.{name}.softnet", "error": f"softnet {hello.softnet_version} "
                             f"on the host, {__version__} here: prepare the host (softnet host prepare)"})
        if abs(clock.offset_s) > CLOCK_SKEW_MAX_S:
            problems.append({"field": f"hosts.{name}.address", "error": f"clock {clock.offset_s:+.3f} s "
                             f"from the controller's (> {CLOCK_SKEW_MAX_S:g} s): run NTP/chrony on both"})
        if doctor:
            checks = {c.name: c for c in found.doctor or []}
            findings |= {"doctor": [c.model_dump() for c in found.doctor or []]}
            for role in sorted(roles_of(inv, name)):
                for need in ROLE_NEEDS[role]:
                    c = checks.get(need)
                    if c is not None and c.ok is False:
                        problems.append({"field": f"hosts.{name}", "error": f"as the {role} host it needs "
                                         f"{need}: {c.detail}"})
        hosts[name] = findings
    return {"hosts": hosts, "problems": problems}
