"""A UDP socket application as the system under test: the test frames are
addressed to the SUT itself, the kernel delivers each to a UDP socket
(IP, UDP, the socket's queue: the eBPF receive-path study's path, which
forwarding never takes), and softnet-udprelay reads each datagram and sends
it on, unchanged, to the sink, which counts it as for any SUT.

Its counters prove the path: the relay's own (read, sent, send errors) and
the namespace's UDP MIB (InDatagrams: delivered to a socket; RcvbufErrors:
dropped because the socket's queue was full)."""
from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from softnet.testbed.personalities import register
from softnet.testbed.personalities.kernel_fwd import L3Forwarding
from softnet.testbed.personalities.nsread import snmp
from softnet.tools.process import quit_tool, read_json_line, read_tool, tool

if TYPE_CHECKING:
    from softnet.testbed.local import LocalTestbed

PORT = 7  # the generator's test-frame port (native/common/sn_proto.h SN_UDP_DPORT)


@register
class UdpRelay(L3Forwarding):
    name = "udp-relay"
    summary = "a UDP socket application: frames delivered to a socket on the SUT, sent on to the sink"
    bidirectional = False
    max_dst_ports = 1  # the relay binds port 7 only
    one_way_why = "the relay reads one socket, bound to the SUT's address on the generator's side"

    def __init__(self, values, extra=None):
        super().__init__(values, extra)
        self.proc: subprocess.Popen | None = None

    def dst_ip(self, tb: "LocalTestbed") -> str:
        return tb.addr["sut_in"][0]

    def configure(self, tb: "LocalTestbed") -> None:
        super().configure(tb)  # the route and static neighbours towards the sink
        ns = tb.ns["sut"]
        tb.changes.record(f"softnet-udprelay in {ns}", lambda: quit_tool(self.proc))
        cpu = tb.placement.sut_cpus[0]
        self.proc = subprocess.Popen(
            [str(tool("udprelay")), "--netns", ns, "--bind", f"{tb.addr['sut_in'][0]}:{PORT}",
             "--to", f"{tb.addr['sink'][0]}:{PORT}", "--cpu", str(cpu)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        read_json_line(self.proc, "softnet-udprelay did not start", 10)

    def counters(self, tb: "LocalTestbed") -> dict[str, int]:
        r = read_tool(self.proc, "softnet-udprelay")
        udp = snmp(tb.ns["sut"], "Udp")
        return {"relay_received_pkts": r["received_pkts"], "relay_sent_pkts": r["sent_pkts"],
                "relay_send_errors": r["send_errors"], "udp_in_datagrams": udp["InDatagrams"],
                "udp_rcvbuf_errors": udp["RcvbufErrors"], "udp_no_ports": udp["NoPorts"]}
