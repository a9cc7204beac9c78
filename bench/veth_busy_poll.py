"""Does AF_XDP busy polling ever run on veth? (docs/reference/xsk.md,
"Busy polling on veth").

For each configuration: the three-namespace testbed (softnet/testbed/latency.py,
host changes through HostChanges), C reflects and B forwards with softnet-xsk
with SO_BUSY_POLL / SO_PREFER_BUSY_POLL / SO_BUSY_POLL_BUDGET set and
net.core.busy_poll/busy_read on, A pings; then per configuration:

* napi_id: SO_INCOMING_NAPI_ID of B's two sockets and C's socket (`read`);
* BusyPollRxPackets: growth of TcpExt BusyPollRxPackets in B's and C's
  namespaces over the run;
* what the kernel's netdev netlink family says about B's interface towards A:
  the NAPI instances it has (napi-get: their IDs) and whether RX queue 0 is
  linked to one (queue-get: napi-id) -- xsk_bind() takes the socket's NAPI ID
  from exactly that link (net/xdp/xsk.c, kernel 6.18).

    sudo .venv/bin/python bench/veth_busy_poll.py [--count N] [--json]

Root only. Prints a table (or JSON lines with --json).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

def netdev_view(ifname: str) -> dict:
    """This namespace's view of ifname: its NAPI IDs and RX queue 0's NAPI link."""
    from softnet.tools import netdev

    v = netdev.view(ifname)
    return {"napi_ids": sorted(n["id"] for n in v["napis"]), "rxq0_napi_id": v["rxq0_napi_id"],
            "rxq0_xsk": v["rxq0_xsk"]}


def netdev_view_in(ns: str | None, ifname: str) -> dict:
    argv = [sys.executable, __file__, "--netdev-view", ifname]
    if ns:
        argv = ["ip", "netns", "exec", ns, *argv]
    return json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)


# ---- the experiment ------------------------------------------------------------
@dataclass
class Config:
    name: str
    xdp_mode: str = "native"
    rx_mode: str = "busy"
    gro: bool = True                  # B's and C's veth GRO when the tool attaches
    threaded_napi: bool = False
    defer_irqs: bool = False          # napi_defer_hard_irqs 2, gro_flush_timeout 200 us
    traffic_before_bind: bool = False  # kernel ping A -> C through B before B's sockets exist
    rebind: bool = False              # stop B's forward and start it again (XDP and NAPI up before bind)
    notes: list[str] = field(default_factory=list)


CONFIGS = [
    Config("native, busy spin"),
    Config("native, recvfrom", rx_mode="recvfrom"),
    Config("native, poll()", rx_mode="poll"),
    Config("native, epoll", rx_mode="epoll"),
    Config("skb mode, busy spin", xdp_mode="skb"),
    Config("native, GRO off at attach", gro=False),
    Config("native, threaded NAPI", threaded_napi=True),
    Config("native, defer irqs + flush timeout", defer_irqs=True),
    Config("native, traffic before bind", traffic_before_bind=True),
    Config("native, bind again after a run", rebind=True),
]
BUSY_POLL_US = 50


def run_config(cfg: Config, count: int) -> dict:
    from softnet.testbed.latency import LatencyKnobs, LatencyTestbed
    from softnet.tools import hostcmd
    from softnet.tools.changes import HostChanges
    from softnet.traffic.xsk import Forward, Ping, Reflect, XskKnobs

    knobs = LatencyKnobs(threaded_napi=cfg.threaded_napi, busy_poll_us=BUSY_POLL_US,
                         napi_defer_hard_irqs=2 if cfg.defer_irqs else None,
                         gro_flush_timeout_ns=200_000 if cfg.defer_irqs else None)
    sock = XskKnobs(rx_mode=cfg.rx_mode, xdp_mode=cfg.xdp_mode, busy_poll_us=BUSY_POLL_US,
                    prefer_busy_poll=True, busy_poll_budget=64)
    row: dict = {"config": cfg.name}
    with HostChanges() as changes, tempfile.TemporaryDirectory() as tmp:
        tb = LatencyTestbed(changes, knobs)
        hosts = tb.build()
        a, b, c = hosts["a"], hosts["b"], hosts["c"]
        if not cfg.gro:
            for ns, dev in ((b.ns, b.ifname), (b.ns, b.ifname2), (c.ns, c.ifname)):
                hostcmd.in_netns(ns, ["ethtool", "-K", dev, "gro", "off"])  # dies with the namespace
        row["before"] = netdev_view_in(b.ns, b.ifname)
        reflect = Reflect(changes, c.ns, c.ifname, sock)
        if cfg.traffic_before_bind:
            hostcmd.in_netns(a.ns, ["ping", "-q", "-c", "50", "-i", "0.002", "-W", "1", c.ip], check=False)

        def start_forward():
            return Forward(changes, b.ns, b.ifname, b.ifname2, a_mac=b.peer_mac, c_mac=b.peer_mac2, knobs=sock)

        forward = start_forward()
        ping = Ping(changes, a.ns, a.ifname, a.mac, a.peer_mac, a.ip, a.peer_ip, 64, sock)
        if cfg.rebind:
            ping.run(count, Path(tmp, "warm.bin"), interval_ns=100_000)
            forward.close()
            forward = start_forward()
        row["bound"] = netdev_view_in(b.ns, b.ifname)
        nb0, nc0 = tb.netstat("b"), tb.netstat("c")
        summary, _ = ping.run(count, Path(tmp, "rec.bin"), interval_ns=100_000)
        nb1, nc1 = tb.netstat("b"), tb.netstat("c")
        fb, fc = forward.read(), reflect.read()
        key = "TcpExt.BusyPollRxPackets"
        row.update({
            "xdp_mode": forward.hello["xdp_mode"], "rx_mode": cfg.rx_mode,
            "busy_poll": forward.hello["busy_poll"], "unsupported": forward.hello["unsupported"],
            "received": f"{summary['received_pkts']}/{summary['sent_pkts']}",
            "napi_id_b": [s["napi_id"] for s in fb["sockets"]], "napi_id_c": [s["napi_id"] for s in fc["sockets"]],
            "napi_id_a": [s["napi_id"] for s in summary["sockets"]],
            "busy_poll_rx_b": nb1.get(key, 0) - nb0.get(key, 0), "busy_poll_rx_c": nc1.get(key, 0) - nc0.get(key, 0),
            "applied": tb.describe()["applied"],
        })
    return row


def host_nic_view() -> list[dict]:
    """The same netlink view of this machine's own NICs (root namespace): a
    driver that links its queues to NAPIs shows rxq0_napi_id."""
    out = []
    for dev in sorted(os.listdir("/sys/class/net")):
        if dev == "lo" or not Path(f"/sys/class/net/{dev}/device").exists():
            continue
        driver = Path(f"/sys/class/net/{dev}/device/driver").resolve().name
        out.append({"ifname": dev, "driver": driver, **netdev_view_in(None, dev)})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=1000, help="packets per ping run (100 us apart)")
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    p.add_argument("--only", help="run the configurations whose name contains this")
    p.add_argument("--netdev-view", metavar="IFNAME", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.netdev_view:
        print(json.dumps(netdev_view(args.netdev_view)))
        return 0
    if os.geteuid() != 0:
        print("veth_busy_poll: needs root", file=sys.stderr)
        return 2
    rows = []
    for cfg in CONFIGS:
        if args.only and args.only not in cfg.name:
            continue
        t = time.monotonic()
        row = run_config(cfg, args.count)
        row["seconds"] = round(time.monotonic() - t, 1)
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
    nics = host_nic_view()
    if args.json:
        print(json.dumps({"host_nics": nics}))
        return 0
    print(f"uname -r: {os.uname().release}; SO_BUSY_POLL {BUSY_POLL_US} us, SO_PREFER_BUSY_POLL, "
          f"SO_BUSY_POLL_BUDGET 64, net.core.busy_poll = busy_read = {BUSY_POLL_US}")
    hdr = ("configuration", "xdp", "rx", "replies", "napi_id B / C", "BusyPollRx B / C", "B's NAPI ids",
           "rxq0 napi-id (bound)")
    print(" | ".join(hdr))
    print(" | ".join("---" for _ in hdr))
    for r in rows:
        print(" | ".join(str(x) for x in (
            r["config"], r["xdp_mode"], r["rx_mode"], r["received"], f"{r['napi_id_b']} / {r['napi_id_c']}",
            f"{r['busy_poll_rx_b']} / {r['busy_poll_rx_c']}", r["bound"]["napi_ids"],
            r["bound"]["rxq0_napi_id"] if r["bound"]["rxq0_napi_id"] is not None else "none")))
    for n in nics:
        print(f"host NIC {n['ifname']} ({n['driver']}): NAPI ids {n['napi_ids']}, rxq0 napi-id "
              f"{n['rxq0_napi_id'] if n['rxq0_napi_id'] is not None else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
