"""Remote hosts emulated on this machine, to test softnet's remote mode
without hardware: each host is a network namespace running its own sshd.

    root ns: snIDp 198.18.255.1/30 ==veth== mgmt0 198.18.255.2/30 [sn-ID-tg]  sshd
             snIDq 198.18.255.5/30 ==veth== mgmt0 198.18.255.6/30 [sn-ID-dut] sshd
    data:    tg:eth1 ==l1== dut:eth1     dut:eth2 ==l2== tg:eth2

The data links play the hosts' physical NICs: unaddressed and down, with
fixed MACs, so that softnet's agent has to configure them itself (which is
what the emulation tests). The management links are the only way in, so
cutting one (`cut_mgmt`) is a lost controller. The inventory TOML written by
`build()` describes the hosts as softnet's remote mode reads real ones.
"""
from __future__ import annotations

import ipaddress
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import IPRoute

from softnet.errors import InputError
from softnet.testbed import sshd
from softnet.testbed.netns import NetnsLab
from softnet.tools import hostcmd
from softnet.tools.changes import NAME_PREFIX, HostChanges

MGMT_NET = ipaddress.ip_network("198.18.255.0/24")  # RFC 2544 benchmark space, /30 per host
MGMT_IF = "mgmt0"
MGMT_LETTERS = "pqrstuvwxyz"  # root-side names sn<run id><letter>, which `softnet clean` recognizes
CUT_METRIC = "4242"
SUT_RX_QUEUES = 2
HOST_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,11}$")
# (interface, role, link number within the testbed) of the traffic host and the SUT.
TRAFFIC_NICS = (("eth1", "gen_out", 1), ("eth2", "sink_in", 2))
SUT_NICS = (("eth1", "sut_in", 1), ("eth2", "sut_out", 2))


@dataclass(frozen=True)
class Nic:
    name: str
    mac: str
    role: str
    link: str


@dataclass
class Host:
    name: str
    index: int  # 1-based, over all hosts
    ns: str
    mgmt_link: str  # root-side end of the management veth
    root_addr: str
    addr: str  # where its sshd listens
    nics: list[Nic] = field(default_factory=list)


class EmulatedHosts(NetnsLab):
    """``hosts``: names of the traffic host and the SUT of the first testbed;
    testbed n > 1 adds the same names with suffix n (tg2, dut2). ``workdir``
    receives keys, sshd configs and logs, known_hosts and the inventory
    (None: a temporary directory removed on teardown). ``lease_s`` is every
    host's agent lease in the inventory (short ones make crash tests quick)."""

    def __init__(self, changes: HostChanges, hosts: tuple[str, ...] = ("tg", "dut"),
                 workdir: Path | None = None, testbeds: int = 1, lease_s: float = 10.0):
        """A third name in ``hosts`` is a sink host of its own (the testbed's
        `sink`): the traffic host keeps gen_out, the third has sink_in."""
        if len(hosts) not in (2, 3) or len(set(hosts)) != len(hosts) or \
                not all(HOST_NAME_RE.match(h) for h in hosts):
            raise InputError("hosts", f"two or three distinct names matching {HOST_NAME_RE.pattern} are "
                             f"needed, got {hosts}")
        if not 1 <= testbeds <= len(MGMT_LETTERS) // 2:
            raise InputError("testbeds", f"{testbeds} out of range; accepted: 1..{len(MGMT_LETTERS) // 2}")
        if not 1.0 <= lease_s <= 300.0:  # the inventory's bounds
            raise InputError("lease_s", f"{lease_s:g} out of range; accepted: 1..300 s")
        super().__init__(changes)
        self.lease_s = float(lease_s)
        self.workdir = None if workdir is None else Path(workdir).resolve()
        self.hosts: dict[str, Host] = {}
        self.testbeds: dict[str, tuple[str, ...]] = {}  # name -> (traffic host, SUT host[, sink host])
        for t in range(1, testbeds + 1):
            suffix = "" if t == 1 else str(t)
            tg, dut, *sink = (self._plan_host(h + suffix) for h in hosts)
            # a sink host of its own takes the traffic host's sink_in NIC
            plan = [(tg, TRAFFIC_NICS[:1]), (dut, SUT_NICS), (sink[0], TRAFFIC_NICS[1:])] if sink else \
                [(tg, TRAFFIC_NICS), (dut, SUT_NICS)]
            for host, nics in plan:
                for i, (name, role, link) in enumerate(nics, start=1):
                    mac = f"02:00:00:{host.index:02x}:00:{i:02x}"
                    host.nics.append(Nic(name, mac, role, f"l{2 * (t - 1) + link}"))
            self.testbeds[f"tb{t}"] = (tg.name, dut.name, *(h.name for h in sink))

    def _plan_host(self, name: str) -> Host:
        if name in self.hosts:
            raise InputError("hosts", f"host name {name} occurs twice once testbed numbers are appended")
        k = len(self.hosts)
        net = list(MGMT_NET.subnets(new_prefix=30))[k]
        host = Host(name=name, index=k + 1, ns=f"{NAME_PREFIX}{self.run_id}-{name}",
                    mgmt_link=f"sn{self.run_id}{MGMT_LETTERS[k]}", root_addr=str(net[1]), addr=str(net[2]))
        self.hosts[name] = host
        self.ns[name] = host.ns
        for nic in ("eth1", "eth2"):
            self.ifs[f"{name}/{nic}"] = nic
        return host

    @property
    def identity(self) -> Path:
        return self.workdir / "client_key"

    @property
    def known_hosts(self) -> Path:
        return self.workdir / "known_hosts"

    @property
    def inventory(self) -> Path:
        return self.workdir / "inventory.toml"

    # ---- building -------------------------------------------------------
    def build(self) -> Path:
        """Namespaces, links, one sshd per host; returns the inventory's path."""
        self._lock()
        if self.workdir is None:  # a private one, removed with the rest
            self.changes.record("temporary workdir", lambda: self.workdir and shutil.rmtree(self.workdir, True))
            self.workdir = Path(tempfile.mkdtemp(prefix=f"softnet-emulated-{self.run_id}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._claim()
        for host in self.hosts.values():
            self._add_netns(host.ns)
            self._add_mgmt(host)
        for tg, dut, *sink in self.testbeds.values():
            self._add_data_link(tg, "eth1", dut, "eth1")
            self._add_data_link(dut, "eth2", sink[0] if sink else tg, "eth2")
        self._start_sshds()
        self._write_inventory()
        self._settle()
        return self.inventory

    def _settle(self, timeout: float = 5.0) -> None:
        """Wait out IPv6 duplicate address detection on the management links:
        a host snapshot taken while an address is still tentative would
        differ from the next one for no change of ours."""
        deadline = time.monotonic() + timeout
        for host in self.hosts.values():
            while time.monotonic() < deadline and hostcmd.in_netns(
                    host.ns, ["ip", "-6", "addr", "show", "tentative"]).strip():
                time.sleep(0.1)

    def _add_mgmt(self, host: Host) -> None:
        self.changes.record(f"veth {host.mgmt_link} <-> {host.ns}/{MGMT_IF}", lambda: _del_root_link(host.mgmt_link))
        q = {"num_tx_queues": 1, "num_rx_queues": 1}
        with IPRoute() as ipr:
            ipr.link("add", ifname=host.mgmt_link, kind="veth", **q,
                     peer={"ifname": MGMT_IF, "net_ns_fd": host.ns, **q})
            idx = ipr.link_lookup(ifname=host.mgmt_link)[0]
            ipr.addr("add", index=idx, address=host.root_addr, prefixlen=30)
            ipr.link("set", index=idx, state="up")
        with self._ipr(host.ns) as ipr:
            idx = ipr.link_lookup(ifname=MGMT_IF)[0]
            ipr.addr("add", index=idx, address=host.addr, prefixlen=30)
            ipr.link("set", index=idx, state="up")
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")

    def _add_data_link(self, a: str, a_if: str, b: str, b_if: str) -> None:
        # the SUT's ports have two receive queues, as a multi-queue NIC's
        # (its rx_channels knob has something to change); the traffic host's one
        suts = {tb[1] for tb in self.testbeds.values()}
        rx = tuple(SUT_RX_QUEUES if h in suts else 1 for h in (a, b))
        self._add_veth(a, f"{a}/{a_if}", b, f"{b}/{b_if}", up=False, rx_queues=rx)
        for host, name in ((a, a_if), (b, b_if)):
            mac = next(n.mac for n in self.hosts[host].nics if n.name == name)
            with self._ipr(self.ns[host]) as ipr:
                ipr.link("set", index=ipr.link_lookup(ifname=name)[0], address=mac)

    def _start_sshds(self) -> None:
        sshd.ensure_privsep_dir(self.changes)
        client_pub = sshd.keygen(self.identity, f"softnet-emulated-{self.run_id}")
        authorized = self.workdir / "authorized_keys"
        authorized.write_text(client_pub + "\n")
        known, started = [], []
        for host in self.hosts.values():
            d = self.workdir / host.name
            d.mkdir(exist_ok=True)
            host_pub = sshd.keygen(d / "ssh_host_ed25519_key", f"{host.name}-{self.run_id}")
            # Each emulated host gets its own testbed lock, as a real host has:
            # sharing ours would make every agent wait for this very process.
            sshd.write_config(d / "sshd_config", host.addr, d / "ssh_host_ed25519_key", authorized,
                              env={"SOFTNET_LOCK_DIR": str(d / "run")})
            started.append((host, sshd.start(self.changes, host.ns, d / "sshd_config", d / "sshd.log")))
            # Port 22 is implicit in OpenSSH's and asyncssh's lookups; the
            # bracketed form is for clients that name the port.
            known.append(f"{host.addr},[{host.addr}]:22 {' '.join(host_pub.split()[:2])}")
        self.known_hosts.write_text("\n".join(known) + "\n")
        for host, proc in started:  # started together, waited for together
            sshd.wait_listening(proc, host.addr, self.workdir / host.name / "sshd.log")

    def _write_inventory(self) -> None:
        softnet = Path(sys.executable).parent / "softnet"
        out = []
        for host in self.hosts.values():
            out += [f"[hosts.{host.name}]", f"address = {_s(host.addr)}", "port = 22", 'user = "root"',
                    f"identity = {_s(self.identity)}", f"known_hosts = {_s(self.known_hosts)}",
                    f"softnet = {_s(softnet)}", "housekeeping_cpus = [0]", f"lease_s = {self.lease_s:g}", ""]
            for nic in host.nics:
                out += [f"[[hosts.{host.name}.interfaces]]", f"name = {_s(nic.name)}", f"mac = {_s(nic.mac)}",
                        'pci = ""  # veth has no PCI address', 'driver = "veth"', f"role = {_s(nic.role)}",
                        f"link = {_s(nic.link)}",
                        "allow_physical = true  # the agent did not create it: to it, a physical NIC", ""]
        for name, (tg, dut, *sink) in self.testbeds.items():
            out += [f"[testbeds.{name}]", f"traffic = {_s(tg)}", f"sut = {_s(dut)}",
                    *(f"sink = {_s(h)}" for h in sink), ""]
        self.inventory.write_text("\n".join(out))

    # ---- helpers for tests ----------------------------------------------
    def ns_of(self, host: str) -> str:
        return self.hosts[host].ns

    def mgmt_link(self, host: str) -> str:
        return self.hosts[host].mgmt_link

    def cut_mgmt(self, host: str) -> None:
        """Take the management link down, as a pulled cable would. The
        unreachable route keeps our packets for that host from leaving by
        the default route while the link's own route is gone."""
        h = self.hosts[host]
        net = str(ipaddress.ip_network(f"{h.addr}/30", strict=False))
        self.changes.record(f"unreachable route {net} (management of {host} cut)", lambda: _del_cut_route(net))
        hostcmd.run(["ip", "route", "replace", "unreachable", net, "metric", CUT_METRIC])
        with IPRoute() as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname=h.mgmt_link)[0], state="down")

    def restore_mgmt(self, host: str) -> None:
        h = self.hosts[host]
        with IPRoute() as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname=h.mgmt_link)[0], state="up")
        _del_cut_route(str(ipaddress.ip_network(f"{h.addr}/30", strict=False)))
        sshd.wait_listening(None, h.addr, None)

    def ssh_argv(self, host: str) -> list[str]:
        """OpenSSH client argv into host (append the remote command)."""
        h = self.hosts[host]
        return ["ssh", "-F", "/dev/null", "-i", str(self.identity), "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                f"root@{h.addr}"]


def _s(value) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(str(value))


def _del_root_link(name: str) -> None:
    with IPRoute() as ipr:
        for idx in ipr.link_lookup(ifname=name):
            ipr.link("del", index=idx)


def _del_cut_route(net: str) -> None:
    hostcmd.run(["ip", "route", "del", "unreachable", net, "metric", CUT_METRIC], check=False)
