"""What the agent refuses to touch, decided on the host itself.

An interface is used only if it is exactly the one the inventory describes
(MAC, PCI address, driver), does not carry the management connection (the
address sshd accepted us on, or the route back to the controller) or the
default route, and is either softnet's own or explicitly allowed
(allow_physical). The controller's word is not enough: a wrong inventory
must not cut a host off its network.
"""
from __future__ import annotations

import os
import re

from pydantic import BaseModel, ConfigDict, Field

from softnet.results.trial import NicFacts
from softnet.tools import hostcmd, ip_json

SOFTNET_IFNAME_RE = re.compile(r"^sn[0-9a-f]{6}[a-z]$")  # what softnet itself creates (testbed/cleanup.py)


class PortSpec(BaseModel):
    """An inventory interface as the controller sends it (its Interface and
    the field path naming it), for the agent to check and use; an inventory
    field the agent does not use is ignored."""
    model_config = ConfigDict(frozen=True, extra="ignore")

    field: str
    name: str
    mac: str = ""
    pci: str = ""
    driver: str = ""
    role: str | None = None
    link: str | None = None
    allow_physical: bool = False


class Refusal(BaseModel):
    """Why an interface must not be used, naming the inventory field."""
    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    error: str


class EthtoolInfo(BaseModel):
    """`ethtool -i`: the driver's "key: value" lines, those read here."""
    model_config = ConfigDict(frozen=True, extra="ignore")

    driver: str = ""
    version: str = ""
    firmware_version: str = Field("", alias="firmware-version")
    bus_info: str = Field("", alias="bus-info")


def _ip(*args: str) -> str:
    return hostcmd.run(["ip", "-j", *args])


def interface_facts(ifname: str) -> NicFacts | None:
    """MAC, PCI address, driver and firmware of an interface of this host
    (None if it does not exist). PCI address and driver from ethtool -i, as
    CSIT's topology files record them."""
    links = [link for link in ip_json.links(_ip("link", "show")) if link.ifname == ifname]
    if not links:
        return None
    out = hostcmd.run(["ethtool", "-i", ifname], check=False)
    info = EthtoolInfo.model_validate({k.strip(): v.strip() for k, _, v in (line.partition(":")
                                                                           for line in out.splitlines()) if k})
    bus = info.bus_info
    return NicFacts(name=ifname, mac=links[0].address.lower(),
                          pci=bus.lower() if re.match(r"^[0-9a-fA-F]{4}:", bus) else "",
                          driver=info.driver, driver_version=info.version, firmware=info.firmware_version,
                          operstate=links[0].operstate, mtu=links[0].mtu)


def management_interfaces(ssh_connection: str | None = None) -> dict[str, str]:
    """ifname -> why it is management: the one holding the address sshd
    accepted the controller on, and the one the route back to it leaves by."""
    conn = (ssh_connection if ssh_connection is not None else os.environ.get("SSH_CONNECTION", "")).split()
    found: dict[str, str] = {}
    if len(conn) == 4:
        client, server = conn[0], conn[2]
        for link in ip_json.addrs(_ip("addr", "show")):
            if any(a.local == server for a in link.addr_info):
                found[link.ifname] = f"carries the management connection (sshd address {server})"
        for route in ip_json.routes(_ip("route", "get", client)):
            found.setdefault(route.dev, f"carries the management connection (route to {client})")
    for family in ("-4", "-6"):
        for route in ip_json.routes(_ip(family, "route", "show", "default")):
            if route.dev:
                found.setdefault(route.dev, "carries the default route")
    found.pop("", None)
    return found


def refusals(want: PortSpec, facts: NicFacts | None, management: dict[str, str]) -> list[Refusal]:
    """Why the interface of inventory entry ``want`` must not be used; each
    refusal names the field path."""
    name, field = want.name, want.field
    if facts is None:
        return [Refusal(field=f"{field}.name", error=f"no interface '{name}' on this host")]
    out = []
    for key, wanted, found in (("mac", want.mac, facts.mac), ("pci", want.pci, facts.pci),
                               ("driver", want.driver, facts.driver)):
        if (wanted or "") != (found or ""):
            out.append(Refusal(field=f"{field}.{key}", error=f"{name}: the inventory says "
                               f"{wanted or '(none)'!s}, the host has {found or '(none)'}"))
    if name in management:
        out.append(Refusal(field=f"{field}.name", error=f"{name} {management[name]}: softnet never touches it"))
    if not want.allow_physical and not SOFTNET_IFNAME_RE.match(name):
        out.append(Refusal(field=f"{field}.allow_physical", error=f"{name} was not created by softnet: "
                           "set allow_physical = true to let softnet use it"))
    return out
