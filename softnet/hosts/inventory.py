"""The inventory: hosts reached over SSH, their interfaces, and the testbeds
made of them, in CSIT's node / interface / link model (one TOML file).

    [hosts.dut]                       # a host: how to reach it, what softnet may use
    address = "192.0.2.10"
    housekeeping_cpus = [0]
    [[hosts.dut.interfaces]]          # an interface softnet will use, as it must find it
    name = "ens1f0"
    mac = "3c:fd:fe:00:00:01"
    pci = "0000:3b:00.0"
    driver = "i40e"
    role = "sut_in"                   # gen_out | sink_in | sut_in | sut_out
    link = "l1"                       # the cable: two interfaces share a link name
    allow_physical = true
    [testbeds.tb1]
    traffic = "tg"                    # the host with gen_out and sink_in
    sut = "dut"                       # the host with sut_in and sut_out
    # sink = "rx"                     # sink_in on a host of its own (the AF_XDP lab's C)

Every error names its field path (hosts.dut.interfaces.0.mac). The agent on
each host checks the same facts again before it touches anything.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from softnet.errors import InputError
from softnet.specfile import read_toml, spec_error

ROLES = ("gen_out", "sink_in", "sut_in", "sut_out")
TRAFFIC_ROLES, SUT_ROLES = ("gen_out", "sink_in"), ("sut_in", "sut_out")
# The cables of a testbed: generator -> SUT ingress, SUT egress -> sink.
LINK_PAIRS = (("gen_out", "sut_in"), ("sut_out", "sink_in"))
MAC_RE = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")
PCI_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
IFNAME_RE = re.compile(r"^[^/\s:]{1,15}$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Interface(Strict):
    name: str
    mac: str
    pci: str = ""  # empty: no PCI device (virtual NICs)
    driver: str
    role: Literal["gen_out", "sink_in", "sut_in", "sut_out"]
    link: str
    allow_physical: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not IFNAME_RE.match(v):
            raise ValueError(f"'{v}' is not an interface name (1-15 characters, no '/', ':' or space)")
        return v

    @field_validator("mac")
    @classmethod
    def _mac(cls, v: str) -> str:
        v = v.strip().lower()
        if not MAC_RE.match(v):
            raise ValueError(f"'{v}' is not a MAC address; expected six hex pairs like 02:00:00:00:00:01")
        return v

    @field_validator("pci")
    @classmethod
    def _pci(cls, v: str) -> str:
        v = v.strip().lower()
        if v and not PCI_RE.match(v):
            raise ValueError(f"'{v}' is not a PCI address; expected domain:bus:device.function like "
                             "0000:3b:00.0, or \"\" for a virtual interface")
        return v


class Host(Strict):
    address: str
    port: int = Field(22, ge=1, le=65535)
    user: str = "root"
    identity: str | None = None  # private key file; None: the SSH agent / default keys
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts
    softnet: str = "softnet"  # the command that runs softnet on the host
    housekeeping_cpus: list[int] = Field(default_factory=lambda: [0], min_length=1)
    lease_s: float = Field(10.0, ge=1.0, le=300.0)  # the agent undoes everything when it lapses
    interfaces: list[Interface] = Field(default_factory=list)

    def interface(self, role: str) -> list[tuple[int, Interface]]:
        return [(i, f) for i, f in enumerate(self.interfaces) if f.role == role]


class Testbed(Strict):
    traffic: str
    sut: str
    # The host with sink_in when it is not the traffic host: the AF_XDP lab's
    # reflector (C) on a third host. Trials refuse it (one-way delays need the
    # generator's and the sink's clock to be one).
    sink: str | None = None

    def host_of(self, role: str) -> str:
        """The inventory host that has an interface of this role."""
        if role == "sink_in" and self.sink is not None:
            return self.sink
        return self.traffic if role in TRAFFIC_ROLES else self.sut


class Port(BaseModel):
    """One interface of a testbed, with where it is in the inventory."""

    host: str
    field: str  # hosts.<host>.interfaces.<i>
    iface: Interface


class Inventory(Strict):
    hosts: dict[str, Host]
    testbeds: dict[str, Testbed] = Field(default_factory=dict)
    source: str = ""  # the file it came from (not a TOML key: set by load)

    def ports(self, testbed: str) -> dict[str, Port]:
        """role -> Port of a testbed; InputError naming the field when the
        inventory does not make a testbed of it."""
        if testbed not in self.testbeds:
            raise InputError("--testbed", f"'{testbed}' is not in {self.source or 'the inventory'}; "
                             f"accepted: {', '.join(self.testbeds) or 'none (no [testbeds.NAME])'}")
        tb, where = self.testbeds[testbed], f"testbeds.{testbed}"
        ports: dict[str, Port] = {}
        for role in (*TRAFFIC_ROLES, *SUT_ROLES):
            name = tb.host_of(role)
            key = "sink" if role == "sink_in" and tb.sink is not None else \
                ("traffic" if role in TRAFFIC_ROLES else "sut")
            if name not in self.hosts:
                raise InputError(f"{where}.{key}", f"host '{name}' is not in [hosts]; accepted: "
                                 f"{', '.join(self.hosts)}")
            found = self.hosts[name].interface(role)
            if not found:
                raise InputError(f"hosts.{name}.interfaces", f"no interface with role = \"{role}\" "
                                 f"(testbed {testbed} needs it on its {key} host)")
            ports[role] = [Port(host=name, field=f"hosts.{name}.interfaces.{i}", iface=f) for i, f in found]
        chosen = {}
        for a, b in LINK_PAIRS:  # the pair of interfaces that share a link
            pairs = [(pa, pb) for pa in ports[a] for pb in ports[b] if pa.iface.link == pb.iface.link]
            if len(pairs) != 1:
                what = "no" if not pairs else "more than one"
                raise InputError(f"{where}", f"{what} link joins a {a} interface of host "
                                 f"'{ports[a][0].host}' to a {b} interface of host '{ports[b][0].host}' "
                                 "(interfaces join by equal `link` names)")
            chosen[a], chosen[b] = pairs[0]
        return chosen


def parse(data: dict, source: str = "") -> Inventory:
    try:
        inv = Inventory.model_validate({k: v for k, v in data.items() if k != "source"})
    except ValidationError as exc:
        raise spec_error(exc, prefix=f"{source}: " if source else "") from None
    inv.source = source
    _check(inv)
    return inv


def _check(inv: Inventory) -> None:
    """What one field cannot say alone: names unique, links joining two
    interfaces, every interface allowed (softnet creates none of them)."""
    pre = f"{inv.source}: " if inv.source else ""
    ends: dict[str, list[str]] = {}
    for hname, host in inv.hosts.items():
        seen: dict[str, int] = {}
        for i, f in enumerate(host.interfaces):
            field = f"hosts.{hname}.interfaces.{i}"
            if f.name in seen:
                raise InputError(f"{pre}{field}.name", f"'{f.name}' is also interfaces.{seen[f.name]}")
            seen[f.name] = i
            if not f.allow_physical:
                raise InputError(f"{pre}{field}.allow_physical", f"{hname}:{f.name} is an interface softnet "
                                 "did not create: set allow_physical = true to let softnet configure it "
                                 "and send test traffic through it")
            ends.setdefault(f.link, []).append(field)
        for c in host.housekeeping_cpus:
            if c < 0:
                raise InputError(f"{pre}hosts.{hname}.housekeeping_cpus", f"{c}: CPU numbers are >= 0")
    for link, fields in ends.items():
        if len(fields) != 2:
            raise InputError(f"{pre}{fields[0]}.link", f"link '{link}' joins {len(fields)} interface(s) "
                             f"({', '.join(fields)}); a link joins exactly two")
    for name in inv.testbeds:
        try:
            inv.ports(name)
        except InputError as exc:
            raise InputError(pre + exc.field, exc.message) from None


def load(path: str | Path) -> Inventory:
    return parse(read_toml(path, "an inventory"), str(path))
