"""What the agent refuses to touch, decided on the host itself.

An interface is used only if it is exactly the one the inventory describes
(MAC, PCI address, driver), does not carry the management connection (the
address sshd accepted us on, or the route back to the controller) or the
default route, and is either softnet's own or explicitly allowed
(allow_physical). The controller's word is not enough: a wrong inventory
must not cut a host off its network.
"""
from __future__ import annotations

import json
import os
import re

from softnet.tools import hostcmd

SOFTNET_IFNAME_RE = re.compile(r"^sn[0-9a-f]{6}[a-z]$")  # what softnet itself creates (testbed/cleanup.py)


def ip_json(*args: str) -> list[dict]:
    return json.loads(hostcmd.run(["ip", "-j", *args]) or "[]")


def interface_facts(ifname: str) -> dict | None:
    """MAC, PCI address, driver and firmware of an interface of this host
    (None if it does not exist). PCI address and driver from ethtool -i, as
    CSIT's topology files record them."""
    links = [link for link in ip_json("link", "show") if link.get("ifname") == ifname]
    if not links:
        return None
    out = hostcmd.run(["ethtool", "-i", ifname], check=False)
    info = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if k}
    bus = info.get("bus-info", "")
    return {"name": ifname, "mac": links[0].get("address", "").lower(),
            "pci": bus.lower() if re.match(r"^[0-9a-fA-F]{4}:", bus) else "",
            "driver": info.get("driver", ""), "driver_version": info.get("version", ""),
            "firmware": info.get("firmware-version", ""), "operstate": links[0].get("operstate", ""),
            "mtu": links[0].get("mtu")}


def management_interfaces(ssh_connection: str | None = None) -> dict[str, str]:
    """ifname -> why it is management: the one holding the address sshd
    accepted the controller on, and the one the route back to it leaves by."""
    conn = (ssh_connection if ssh_connection is not None else os.environ.get("SSH_CONNECTION", "")).split()
    found: dict[str, str] = {}
    if len(conn) == 4:
        client, server = conn[0], conn[2]
        for link in ip_json("addr", "show"):
            if any(a.get("local") == server for a in link.get("addr_info", [])):
                found[link["ifname"]] = f"carries the management connection (sshd address {server})"
        for route in ip_json("route", "get", client):
            found.setdefault(route.get("dev", ""), f"carries the management connection (route to {client})")
    for family in ("-4", "-6"):
        for route in ip_json(family, "route", "show", "default"):
            if route.get("dev"):
                found.setdefault(route["dev"], "carries the default route")
    found.pop("", None)
    return found


def refusals(field: str, want: dict, facts: dict | None, management: dict[str, str]) -> list[dict]:
    """Why the interface of inventory entry ``want`` (at ``field``) must not
    be used; each refusal names the field path."""
    name = want["name"]
    if facts is None:
        return [{"field": f"{field}.name", "error": f"no interface '{name}' on this host"}]
    out = []
    for key in ("mac", "pci", "driver"):
        if (want.get(key) or "") != (facts.get(key) or ""):
            out.append({"field": f"{field}.{key}", "error": f"{name}: the inventory says "
                        f"{want.get(key) or '(none)'!s}, the host has {facts.get(key) or '(none)'}"})
    if name in management:
        out.append({"field": f"{field}.name", "error": f"{name} {management[name]}: softnet never touches it"})
    if not want.get("allow_physical") and not SOFTNET_IFNAME_RE.match(name):
        out.append({"field": f"{field}.allow_physical", "error": f"{name} was not created by softnet: "
                    "set allow_physical = true to let softnet use it"})
    return out
