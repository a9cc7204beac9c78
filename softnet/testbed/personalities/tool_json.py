"""What the personalities read of the tools' JSON (``ip -j``, ``tc -j``,
``bridge -j``, ``bpftool -j``, ``nft -j``): the few fields each uses, parsed
once where the tool's output is read; the rest of the output is not ours."""
from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ProgRef(_Out):
    id: int | None = None


class XdpAttached(_Out):
    prog: ProgRef | None = None


class XdpInfo(_Out):
    prog: ProgRef | None = None  # one program (older iproute2)
    attached: list[XdpAttached] = []  # one per mode (newer)

    def first_prog(self) -> ProgRef | None:
        return self.prog or next((a.prog for a in self.attached if a.prog is not None), None)


class IpLink(_Out):
    """One interface of ``ip -j link show``."""

    mtu: int | None = None
    xdp: XdpInfo = XdpInfo()


class TcOptions(_Out):
    prog: ProgRef = ProgRef()


class TcFilter(_Out):
    """One filter of ``tc -j filter show``."""

    options: TcOptions = TcOptions()


class FdbEntry(_Out):
    """One entry of ``bridge -j fdb show``."""

    mac: str | None = None
    ifname: str | None = None
    state: str = ""


class BpfProg(_Out):
    """``bpftool -j prog show id N``."""

    map_ids: list[int] = []


class BpfMap(_Out):
    """``bpftool -j map show id N``."""

    name: str | None = None


class BpfCpuValue(_Out):
    value: int | list[str]  # an int with BTF, else little-endian hex bytes


class BpfEntry(_Out):
    key: int | list[str]
    values: list[BpfCpuValue]  # one per CPU (a per-CPU map)


class BpfDumpEntry(BpfEntry):
    """One entry of ``bpftool -j map dump``: with BTF, a raw entry holding a
    "formatted" one; without, the raw entry alone."""

    key: int | list[str] | None = None
    values: list[BpfCpuValue] = []
    formatted: BpfEntry | None = None

    def readable(self) -> BpfEntry:
        return self.formatted or BpfEntry(key=self.key, values=self.values)


class NftCounter(_Out):
    name: str
    packets: int


class NftObject(_Out):
    counter: NftCounter | None = None  # the listing holds other objects too (metainfo, table)


class NftListing(_Out):
    """``nft -j list counters``."""

    nftables: list[Any] = []

    def counters(self) -> list[NftCounter]:
        objs = (NftObject.model_validate(o) for o in self.nftables if isinstance(o, dict))
        return [o.counter for o in objs if o.counter is not None]


def ip_links(text: str) -> list[IpLink]:
    return [IpLink.model_validate(x) for x in json.loads(text)]


def tc_filters(text: str) -> list[TcFilter]:
    return [TcFilter.model_validate(x) for x in json.loads(text or "[]")]


def fdb_entries(text: str) -> list[FdbEntry]:
    return [FdbEntry.model_validate(x) for x in json.loads(text or "[]")]
