"""The kernel's netdev generic-netlink family, the few calls softnet needs:
an interface's NAPI instances (napi-get), RX queue 0's NAPI link
(queue-get), and a NAPI's irq-suspend-timeout (napi-set, kernel 6.13+).
Numbers from include/uapi/linux/netdev.h (checked against this kernel's BTF).

Netlink talks to the caller's network namespace: `in_netns(ns, ...)` runs a
call in a child process inside another (`ip netns exec`)."""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys

from softnet.errors import TestbedError

NETLINK_GENERIC, GENL_ID_CTRL, CTRL_CMD_GETFAMILY = 16, 0x10, 3
CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME = 1, 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP, NLMSG_ERROR, NLMSG_DONE = 1, 4, 0x300, 2, 3
NETDEV_CMD_QUEUE_GET, NETDEV_CMD_NAPI_GET, NETDEV_CMD_NAPI_SET = 10, 11, 14
NETDEV_A_NAPI_IFINDEX, NETDEV_A_NAPI_ID, NETDEV_A_NAPI_PID = 1, 2, 4
NETDEV_A_NAPI_DEFER_HARD_IRQS, NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT, NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT = 5, 6, 7
NETDEV_A_QUEUE_ID, NETDEV_A_QUEUE_IFINDEX, NETDEV_A_QUEUE_TYPE, NETDEV_A_QUEUE_NAPI_ID = 1, 2, 3, 4
NETDEV_A_QUEUE_XSK = 7


def _nla(kind: int, payload: bytes) -> bytes:
    n = 4 + len(payload)
    return struct.pack("=HH", n, kind) + payload + b"\0" * (-n % 4)


def _attrs(buf: bytes) -> dict[int, bytes]:
    out, i = {}, 0
    while i + 4 <= len(buf):
        n, kind = struct.unpack_from("=HH", buf, i)
        if n < 4:
            break
        out[kind & 0x3FFF] = buf[i + 4:i + n]
        i += (n + 3) & ~3
    return out


def _uint(b: bytes) -> int:
    return int.from_bytes(b, "little")


def _genl(sock: socket.socket, family: int, cmd: int, flags: int, attrs: bytes) -> list[dict[int, bytes]]:
    payload = struct.pack("=BBH", cmd, 1, 0) + attrs
    sock.send(struct.pack("=IHHII", 16 + len(payload), family, NLM_F_REQUEST | flags, 1, 0) + payload)
    replies = []
    while True:
        data, i = sock.recv(65536), 0
        while i + 16 <= len(data):
            length, kind, _, _, _ = struct.unpack_from("=IHHII", data, i)
            if kind == NLMSG_DONE:
                return replies
            if kind == NLMSG_ERROR:
                err = struct.unpack_from("=i", data, i + 16)[0]
                if err:
                    raise OSError(-err, os.strerror(-err))
                return replies
            replies.append(_attrs(data[i + 20:i + length]))
            i += (length + 3) & ~3
        if not flags & (NLM_F_DUMP | NLM_F_ACK):
            return replies


def _family(s: socket.socket) -> int:
    fam = _genl(s, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0, _nla(CTRL_ATTR_FAMILY_NAME, b"netdev\0"))
    return struct.unpack("=H", fam[0][CTRL_ATTR_FAMILY_ID][:2])[0]


def view(ifname: str) -> dict:
    """This namespace's view of ifname: its NAPIs (id, irq-suspend-timeout) and
    whether RX queue 0 is linked to one (what AF_XDP busy polling needs)."""
    ifindex = socket.if_nametoindex(ifname)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC) as s:
        family = _family(s)
        napis = _genl(s, family, NETDEV_CMD_NAPI_GET, NLM_F_DUMP,
                      _nla(NETDEV_A_NAPI_IFINDEX, struct.pack("=I", ifindex)))
        queues = _genl(s, family, NETDEV_CMD_QUEUE_GET, NLM_F_DUMP,
                       _nla(NETDEV_A_QUEUE_IFINDEX, struct.pack("=I", ifindex)))
    rx0 = [q for q in queues if _uint(q[NETDEV_A_QUEUE_TYPE]) == 0 and _uint(q[NETDEV_A_QUEUE_ID]) == 0]
    return {"napis": [{"id": _uint(n[NETDEV_A_NAPI_ID]),
                       "irq_suspend_timeout_ns": _uint(n[NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT])
                       if NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT in n else None}
                      for n in napis if NETDEV_A_NAPI_ID in n],
            "rxq0_napi_id": _uint(rx0[0][NETDEV_A_QUEUE_NAPI_ID]) if rx0 and NETDEV_A_QUEUE_NAPI_ID in rx0[0]
            else None,
            "rxq0_xsk": bool(rx0 and NETDEV_A_QUEUE_XSK in rx0[0])}


def set_irq_suspend_timeout(napi_id: int, ns_value: int) -> None:
    """napi-set irq-suspend-timeout (ns) of one NAPI."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC) as s:
        _genl(s, _family(s), NETDEV_CMD_NAPI_SET, NLM_F_ACK,
              _nla(NETDEV_A_NAPI_ID, struct.pack("=I", napi_id))
              + _nla(NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT, struct.pack("=Q", ns_value)))


def in_netns(ns: str, call: str, *args) -> dict | None:
    """Run ``view`` or ``set_irq_suspend_timeout`` inside namespace ``ns``."""
    proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "softnet.tools.netdev", call,
                           *map(str, args)], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise TestbedError(f"netdev {call} {' '.join(map(str, args))} in {ns}: "
                           f"{(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    return json.loads(proc.stdout) if proc.stdout.strip() else None


if __name__ == "__main__":
    if sys.argv[1] == "view":
        print(json.dumps(view(sys.argv[2])))
    elif sys.argv[1] == "set_irq_suspend_timeout":
        set_irq_suspend_timeout(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(f"unknown call {sys.argv[1]}")
