"""`ip -j` output as small typed records: the fields softnet reads, parsed
once where the command's JSON comes in (the rest of iproute2's fields are
ignored; a field a kernel leaves out takes its default)."""
from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field

XDP_MODES = {1: "xdpdrv", 2: "xdpgeneric", 3: "xdpoffload"}  # ip link's mode numbers -> its set keywords


class _Ip(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class XdpProg(_Ip):
    id: int | None = None


class XdpAttached(_Ip):
    mode: int | None = None
    prog: XdpProg | None = None

    @property
    def keyword(self) -> str:
        """How `ip link set` names this attachment's mode."""
        return XDP_MODES.get(self.mode, "xdp")


class XdpState(XdpAttached):
    """ip's "xdp" of a link: one program (mode, prog) or several under "attached"."""
    attached: list[XdpAttached] = Field(default_factory=list)

    def programs(self) -> list[XdpAttached]:
        return self.attached or ([self] if self.prog is not None else [])


class IpLink(_Ip):
    ifname: str
    address: str = ""
    operstate: str = ""
    mtu: int | None = None
    xdp: XdpState | None = None


class AddrInfo(_Ip):
    local: str = ""


class IpAddr(_Ip):
    ifname: str = ""
    addr_info: list[AddrInfo] = Field(default_factory=list)


class IpRoute(_Ip):
    dev: str = ""


def links(text: str) -> list[IpLink]:
    return [IpLink.model_validate(x) for x in json.loads(text or "[]")]


def addrs(text: str) -> list[IpAddr]:
    return [IpAddr.model_validate(x) for x in json.loads(text or "[]")]


def routes(text: str) -> list[IpRoute]:
    return [IpRoute.model_validate(x) for x in json.loads(text or "[]")]
