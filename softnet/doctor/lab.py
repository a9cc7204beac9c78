"""Probes inside one temporary namespace (netns, veth, XDP, NAPI, RPS, qdiscs, tc)."""
from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path


from softnet.errors import TestbedError
from softnet.tools import ip_json
from softnet.tools.changes import HostChanges
from softnet.tools.ip_json import XdpState
from softnet.testbed.netns import napi_thread_pids

from softnet.doctor.checks import ACTIONS, CLASSIFIERS, Check, NS_PREFIX, QDISCS, _Result, _check, _cmd

# ---- the temporary namespace and its probes ----------------------------------------
@dataclass
class _Lab:
    changes: HostChanges
    ns: str | None = None
    dev_a: str | None = None  # XDP, qdiscs, classifiers
    dev_b: str | None = None  # threaded NAPI, RPS

    def ns_cmd(self, argv: list[str], **kw) -> _Result:
        return _cmd(["ip", "netns", "exec", self.ns, *argv], **kw)


def _not_probed(name: str, why: str) -> Check:
    return _check(name, None, f"not probed: {why}")


def _probe_root() -> Check:
    euid = os.geteuid()
    return _check("root", euid == 0, f"euid {euid}" + ("" if euid == 0 else ": run softnet as root"))


def _delete_netns(ns: str) -> None:
    if Path("/run/netns", ns).exists():
        r = _cmd(["ip", "netns", "del", ns])
        if r.rc != 0:
            raise RuntimeError(f"ip netns del {ns}: {r.why}")


def _probe_netns(lab: _Lab) -> Check:
    ns = f"{NS_PREFIX}{secrets.token_hex(4)}"
    r = _cmd(["ip", "netns", "add", ns])
    if r.rc != 0:
        return _check("netns", False, f"ip netns add {ns}: {r.why}")
    lab.changes.record(f"netns {ns}", lambda: _delete_netns(ns))
    lab.ns = ns
    r = _cmd(["ip", "-n", ns, "link", "set", "lo", "up"])
    if r.rc != 0:
        return _check("netns", False, f"created {ns} but cannot use it: {r.why}")
    return _check("netns", True, f"created temporary namespace {ns} (deleted when the probe ends)")


def _probe_veth(lab: _Lab) -> Check:
    if lab.ns is None:
        return _not_probed("veth", "no temporary namespace (see netns)")
    tag = secrets.token_hex(3)
    a, b = f"snd{tag}a", f"snd{tag}b"
    r = _cmd(["ip", "-n", lab.ns, "link", "add", a, "type", "veth", "peer", "name", b])
    if r.rc != 0:
        return _check("veth", False, f"ip link add {a} type veth: {r.why}")
    for dev in (a, b):
        r = _cmd(["ip", "-n", lab.ns, "link", "set", dev, "up"])
        if r.rc != 0:
            return _check("veth", False, f"created {a}/{b} but cannot bring {dev} up: {r.why}")
    lab.dev_a, lab.dev_b = a, b
    return _check("veth", True, f"pair {a} <-> {b} in {lab.ns}, both up")


def _need_veth(lab: _Lab, name: str) -> Check | None:
    if lab.ns is None:
        return _not_probed(name, "no temporary namespace (see netns)")
    if lab.dev_a is None:
        return _not_probed(name, "no veth pair (see veth)")
    return None


_XDP_MODES = {1: "native (driver)", 2: "generic (skb)", 3: "offloaded", 4: "multi"}


def _xdp_state(lab: _Lab, dev: str) -> XdpState | None:
    r = _cmd(["ip", "-n", lab.ns, "-j", "link", "show", "dev", dev])
    if r.rc != 0:
        return None
    found = ip_json.links(r.out)
    return found[0].xdp if found else None


def _probe_xdp_veth(lab: _Lab) -> Check:
    skip = _need_veth(lab, "xdp_veth")
    if skip:
        return skip
    from softnet.traffic.native import Sink, tool  # late: only this probe needs the native tools
    try:
        tool("sink")
    except Exception as exc:
        return _not_probed("xdp_veth", str(exc))
    dev = lab.dev_a
    try:
        sink = Sink(lab.changes, lab.ns, dev, count=64, warmup=0)  # recorded: stopped however we leave
    except TestbedError as exc:
        return _check("xdp_veth", False, f"softnet-sink on {dev}: {exc}")
    xdp = _xdp_state(lab, dev)
    mode = None if xdp is None else xdp.mode
    if mode == 4:  # several programs: the mode of ours
        mode = next((a.mode for a in xdp.attached if a.prog is not None and a.prog.id == sink.prog_id), mode)
    sink.close()
    after = _xdp_state(lab, dev)
    detached = "detached on quit" if after is None else \
        f"STILL ATTACHED after quit: {after.model_dump(exclude_defaults=True)}"
    if mode != 1:
        return _check("xdp_veth", False, f"softnet-sink attached prog {sink.prog_id} to {dev} in mode "
                      f"{_XDP_MODES.get(mode, mode)}, not native; {detached}")
    return _check("xdp_veth", not after, f"softnet-sink attached prog {sink.prog_id} to {dev} in native "
                  f"(driver) mode; {detached}")



def _probe_threaded_napi(lab: _Lab) -> Check:
    skip = _need_veth(lab, "threaded_napi")
    if skip:
        return skip
    dev = lab.dev_b
    r = lab.ns_cmd(["ethtool", "-K", dev, "gro", "on"])
    if r.rc != 0:
        return _check("threaded_napi", False, f"ethtool -K {dev} gro on: {r.why}")
    path = f"/sys/class/net/{dev}/threaded"
    r = lab.ns_cmd(["tee", path], input="1\n")
    if r.rc != 0:
        return _check("threaded_napi", False, f"write 1 to {path}: {r.why}")
    deadline = time.monotonic() + 1.0
    pids = napi_thread_pids(dev)
    while not pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = napi_thread_pids(dev)
    value = lab.ns_cmd(["cat", path]).out.strip()
    if not pids:
        return _check("threaded_napi", False, f"{path} reads {value!r} but no napi/{dev}-* kthread appeared")
    comms = [Path(f"/proc/{p}/comm").read_text().strip() for p in pids if Path(f"/proc/{p}/comm").exists()]
    return _check("threaded_napi", True, f"GRO on + {path}=1 -> kthread {', '.join(comms)} (pid "
                  f"{', '.join(map(str, pids))})")


def _probe_rps(lab: _Lab) -> Check:
    skip = _need_veth(lab, "rps")
    if skip:
        return skip
    path = f"/sys/class/net/{lab.dev_b}/queues/rx-0/rps_cpus"
    r = lab.ns_cmd(["cat", path])
    if r.rc != 0:
        return _check("rps", False, f"{path}: {r.why}")
    before = r.out.strip()
    mask = format(1 << min(os.sched_getaffinity(0)), "x")
    w = lab.ns_cmd(["tee", path], input=mask + "\n")
    if w.rc != 0:
        return _check("rps", False, f"{path} exists ({before!r}) but writing {mask} failed: {w.why}")
    after = lab.ns_cmd(["cat", path]).out.strip()
    ok = int(after.replace(",", "") or "0", 16) == int(mask, 16)
    return _check("rps", ok, f"{path}: {before!r}, wrote {mask}, reads back {after!r}")


def _probe_nic_knobs(lab: _Lab) -> Check:
    """Which NIC knobs (softnet.tools.nic) veth takes, read from its driver."""
    from softnet.testbed.local import VETH_NIC_KNOBS
    from softnet.tools import hostcmd, nic

    skip = _need_veth(lab, "nic_knobs")
    if skip:
        return skip
    takes = nic.capabilities(lab.dev_a, lambda argv: hostcmd.in_netns(lab.ns, argv), "veth").takes()
    rest = [k for k in nic.KNOBS if k not in takes]
    # this host's own NICs, read only (an inventory naming one with allow_physical may set them)
    own = []
    for dev in sorted(p.name for p in Path("/sys/class/net").iterdir() if (p / "device").exists()):
        driver = Path(f"/sys/class/net/{dev}/device/driver").resolve().name
        knobs = nic.capabilities(dev, hostcmd.run, driver, nic.device_irqs(dev)).takes()
        own.append(f"{dev} ({driver}): {', '.join(knobs) or 'none'}")
    return _check("nic_knobs", sorted(takes) == sorted(VETH_NIC_KNOBS),
                  f"veth takes {', '.join(takes) or 'none'}; {', '.join(rest)} need a NIC "
                  f"(an inventory's hosts: softnet inventory check lists what each interface takes)"
                  + (f"; this host's NICs take: {'; '.join(own)}" if own else ""))


def _probe_qdiscs(lab: _Lab) -> list[Check]:
    out = []
    for kind, (args, _) in QDISCS.items():
        name = f"qdisc:{kind}"
        skip = _need_veth(lab, name)
        if skip:
            out.append(skip)
            continue
        base = ["tc", "-n", lab.ns, "qdisc", "add", "dev", lab.dev_a]
        argv = base + (["clsact"] if args is None else ["root", *args])
        r = _cmd(argv)
        shown = " ".join(argv[3:])
        if r.rc != 0:
            out.append(_check(name, False, f"`tc {shown}`: {r.why}"))
            continue
        if args is not None:  # clsact stays for the classifier probes
            _cmd(["tc", "-n", lab.ns, "qdisc", "del", "dev", lab.dev_a, "root"])
        out.append(_check(name, True, f"`tc {shown}` accepted"))
    return out


def _probe_tc(lab: _Lab, name: str, argv: list[str], skip: Check | None) -> Check:
    """One `tc ... add` attempt inside the lab namespace."""
    if skip:
        return skip
    r = _cmd(argv)
    shown = " ".join(argv[3:])
    return _check(name, r.rc == 0, f"`tc {shown}`: " + ("accepted" if r.rc == 0 else r.why))


def _probe_classifiers(lab: _Lab, have_clsact: bool) -> list[Check]:
    return [_probe_tc(lab, f"tc_filter:{kind}",
                      ["tc", "-n", lab.ns, "filter", "add", "dev", lab.dev_a, "ingress", *args],
                      _need_veth(lab, f"tc_filter:{kind}") or
                      (None if have_clsact else _not_probed(f"tc_filter:{kind}", "no clsact qdisc to attach to")))
            for kind, (args, _) in CLASSIFIERS.items()]


def _probe_actions(lab: _Lab) -> list[Check]:
    return [_probe_tc(lab, f"tc_action:{kind}",
                      ["tc", "-n", lab.ns, "actions", "add", "action", *[a.replace("{dev}", lab.dev_b) for a in args]],
                      _need_veth(lab, f"tc_action:{kind}"))
            for kind, (args, _) in ACTIONS.items()]


