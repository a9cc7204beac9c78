"""Packet-path stages from the profiler's stage clock.

softnet-profile sums, per CPU, the time between consecutive packet-path events
while the CPU does packet processing (a NET_RX/NET_TX softirq or a NAPI
kthread), per (previous event, next event) pair. Interrupts and other softirq
vectors inside are paused out. This module names those pairs as the stages of
the WiFi-AP study (Table V) and of the eBPF receive-path profile (sec. IV),
says how exact each stage is with the tracepoint-only plan, and measures the
coverage: named stage time against the packet-processing time the profiler's
independent counters (softirq entry/exit, sched_switch) measured.
"""
from __future__ import annotations

from softnet.results.raw import ProfileCpu
from softnet.results.trial import CpuStages, StageRow

HANDOFF = {"gro", "rcv", "list", "netif_rx"}          # the driver hands a packet up
HANDOFF_EXIT = {"gro_exit", "rcv_exit", "list_exit"}
RELEASE = {"kfree", "consume"}
SOFTIRQ = {"softirq_rx", "softirq_tx"}

# Stage: (exactness, why). Order is the data path's, as in Fig. 10.
WIFI_STAGES = {
    "Init RX-IRQ": ("approximate", "the handler (irq_handler or x86 system vector entry/exit, e.g. the RPS IPI) that "
                    "raised NET_RX, then irq_exit up to softirq_entry; interrupt entry code and the hypervisor's "
                    "delivery are not visible to tracepoints"),
    "Init ksoftirqd": ("exact", "ksoftirqd's sched_switch in to its NET softirq's softirq_entry"),
    "NAPI thread": ("approximate", "a NAPI kthread's wake-up, loop and sleep (threaded NAPI's counterpart of "
                    "Init ksoftirqd); after a wake-up it includes the driver's fetch of the first packet "
                    "(no tracepoint at poll entry)"),
    "RX SoftIRQ": ("approximate", "softirq_entry (or the end of the previous poll) to the first packet the "
                   "driver hands up: includes the driver's fetch of that packet, since no tracepoint marks the "
                   "poll function's entry (fentry on the driver's poll would; not permitted here)"),
    "Poll Function": ("approximate", "the driver's poll between packets handed up (napi_gro_receive / "
                      "netif_receive_skb / netif_rx entry and exit) up to __netif_receive_skb_core; "
                      "its end is net:netif_receive_skb, not ip_rcv, so it excludes tc ingress and rx handlers"),
    "IP Stack": ("approximate", "net:netif_receive_skb to net:net_dev_queue (__dev_queue_xmit), through "
                 "fib:fib_table_lookup; starts at __netif_receive_skb_core rather than ip_rcv"),
    "Init Xmit": ("exact", "net:net_dev_queue (__dev_queue_xmit) to net:net_dev_start_xmit and on to "
                  "net:net_dev_xmit (the driver's ndo_start_xmit returned), or to qdisc:qdisc_enqueue"),
    "Init TX-IRQ": ("unavailable", "an interrupt's direction (RX or TX completion) is not visible to "
                    "tracepoints; veth has no TX interrupt, and NIC TX IRQs count under Init RX-IRQ when "
                    "they raise NET_RX"),
    "TX SoftIRQ": ("approximate", "softirq_entry of NET_TX to its first qdisc dequeue"),
    "TX Qdisc": ("approximate", "qdisc:qdisc_enqueue / qdisc_dequeue to the driver's ndo_start_xmit"),
    "TX Reclaim": ("approximate", "skb release (skb:kfree_skb / consume_skb) and the poll around it; on veth a "
                   "sent skb is released by the receiving peer's poll (the sink's XDP), which runs on the "
                   "sending CPU, not by a NIC's TX completion"),
    "Nested interrupts": ("exact", "hardirqs and system vectors (IPIs, local timer) that interrupted packet "
                          "processing, entry to exit"),
}

# The eBPF receive-path profile's stages, over the same transitions.
EBPF_STAGES = {
    "packet poll time": ("approximate", "RX SoftIRQ + Poll Function + NAPI thread: from the softirq (or thread) "
                         "to the packet handed up, GRO included"),
    "skb-IP preparation": ("approximate", "the handoff's end (GRO flush, list batching) to "
                           "__netif_receive_skb_core"),
    "IP processing": ("approximate", "__netif_receive_skb_core to the transmit (forwarding) or delivery"),
    "IP to transport": ("approximate", "fib_table_lookup to sock:sk_data_ready: ip_local_deliver, udp_rcv and the "
                        "socket's queue; only where packets end at a local socket (udp-relay), 0 when forwarded"),
    "transmit path": ("approximate", "Init Xmit + TX SoftIRQ + TX Qdisc + TX Reclaim"),
    "context switch time": ("approximate", "NAPI thread and Init ksoftirqd: the threads' own wake-up and "
                            "sleep paths, not the scheduler's switch itself"),
}
_EBPF_OF = {"RX SoftIRQ": "packet poll time", "Poll Function": "packet poll time", "NAPI thread": "context switch time",
            "Init ksoftirqd": "context switch time", "IP Stack": "IP processing", "Init Xmit": "transmit path",
            "TX SoftIRQ": "transmit path", "TX Qdisc": "transmit path", "TX Reclaim": "transmit path"}

# Stages outside the softirq/NAPI-thread time the coverage is measured against.
OUTSIDE = {"Init RX-IRQ", "Init ksoftirqd"}


def stage_of(frm: str, to: str) -> str | None:
    """The WiFi-AP stage of the time between event `frm` and event `to`, or
    None when the pair is not one the data path explains (unattributed)."""
    if frm == "rx_irq" or (frm == "irq_exit" and to in SOFTIRQ):
        return "Init RX-IRQ"
    if frm == "irq":
        return "Nested interrupts"
    if frm == "ksoftirqd_in":
        return "Init ksoftirqd"
    if frm == "thread_in" or to == "thread_out" or frm == "softirq_exit" or (frm == "napi_poll" and to in SOFTIRQ):
        return "NAPI thread"  # the last three happen only inside a NAPI kthread
    if frm in ("fib", "sk_ready") or (frm == "core" and to != "core") or (frm == "xmit" and to == "queue"):
        return "IP Stack"  # up to the transmit, or to a drop in the stack
    if frm == "queue":
        return "Init Xmit"  # to the driver's return, the qdisc, or a drop there
    if frm == "softirq_tx" or (frm == "xmit" and to == "softirq_exit"):
        return "TX SoftIRQ"  # net_tx_action up to its first dequeue, and after its last transmit
    if frm in ("enqueue", "dequeue") or to in ("enqueue", "dequeue"):
        return "TX Qdisc"  # qdisc_run: dequeue, transmit, next dequeue
    if frm in RELEASE or to in RELEASE:
        return "TX Reclaim"
    if frm == "softirq_rx" or (frm == "napi_poll" and (to in HANDOFF or to in ("core", "napi_poll", "softirq_exit"))):
        return "RX SoftIRQ"
    if frm == "start_xmit" and to == "xmit":
        return "Init Xmit"
    if to in HANDOFF or to in HANDOFF_EXIT or to in ("core", "napi_poll"):
        return "Poll Function"
    return None


def ebpf_stage_of(frm: str, to: str, stage: str | None) -> str | None:
    """The eBPF-profile stage: the WiFi-AP one regrouped, with the handoff's
    end (GRO flush, list batching) up to __netif_receive_skb_core apart."""
    if stage == "Poll Function" and to == "core":
        return "skb-IP preparation"
    if stage == "IP Stack" and (frm == "sk_ready" or (frm == "fib" and to == "sk_ready")):
        return "IP to transport"  # local delivery: from the route lookup to the socket's wake-up
    return _EBPF_OF.get(stage)


def packet_time_ns(cpu: ProfileCpu) -> float:
    """The CPU's packet-processing time from the profiler's independent
    counters: NET_RX/NET_TX softirqs outside NAPI kthreads, plus the NAPI
    kthreads' run time without the other softirq vectors inside them."""
    net = sum(ns for vec in ("NET_RX", "NET_TX") for ctx, (ns, _) in cpu.softirq_ns[vec].items() if ctx != "napi_thread")
    other_in_thread = sum(v["napi_thread"][0] for vec, v in cpu.softirq_ns.items() if vec not in ("NET_RX", "NET_TX"))
    return net + cpu.napi_thread_ns - other_in_thread


def stage_breakdown(cpu: ProfileCpu, sampled_cpu: ProfileCpu, transitions: list, window_s: float, sampled_s: float,
                    packets: int | None = None) -> CpuStages:
    """One CPU's stages over a window. `cpu` / `sampled_cpu`: the profiler
    delta's counters for this CPU over the window / over the periods the stage
    events were attached in it (`sampled_s` seconds: all of it at duty 1);
    `transitions`: [from name, to name, ns, count], sampled; `packets`:
    forwarded packets, for nanoseconds per packet.

    Stage times are scaled to the whole window by the packet-processing time
    measured over the window against over the sampled periods; coverage is
    measured over the sampled periods only."""
    wifi: dict[str, list] = {}  # stage: [ns, intervals]
    ebpf: dict[str, list] = {}
    unattributed: dict[str, float] = {}
    unsampled = 0
    enqueued = direct = 0  # transmits through the qdisc / straight to the driver (the WiFi-AP study's bypass)
    for frm, to, ns, n in transitions:
        if frm == "queue":
            enqueued += n if to == "enqueue" else 0
            direct += n if to in ("xmit", "start_xmit") else 0
        if frm == "none":
            unsampled += ns  # an interval that crossed an attach or detach
            continue
        stage = stage_of(frm, to)
        if stage is None:
            unattributed[f"{frm}->{to}"] = unattributed.get(f"{frm}->{to}", 0) + ns
            continue
        for times, name in ((wifi, stage), (ebpf, ebpf_stage_of(frm, to, stage))):
            if name:
                acc = times.setdefault(name, [0, 0])
                acc[0] += ns
                acc[1] += n
    inside = sum(ns for s, (ns, _) in wifi.items() if s not in OUTSIDE)
    measured, measured_sampled = packet_time_ns(cpu), packet_time_ns(sampled_cpu)
    scale = measured / measured_sampled if measured_sampled else None
    wall = window_s * 1e9

    def rows(times: dict, catalogue: dict) -> list[StageRow]:
        out = []
        for s, (ex, why) in catalogue.items():
            ns, n = times.get(s, (0, 0))
            est = ns * scale if scale else 0.0
            out.append(StageRow(stage=s, exactness=ex, why=why, ns=est, sampled_ns=ns, sampled_intervals=n,
                                pct_of_cpu=100 * est / wall if wall else None,
                                ns_per_packet=est / packets if packets else None))
        return out

    return CpuStages(
        wifi_ap=rows(wifi, WIFI_STAGES),
        ebpf_profile=rows(ebpf, EBPF_STAGES),
        sampled_share=sampled_s / window_s if window_s else None,
        scale=scale,
        unattributed_ns=sum(unattributed.values()),
        unattributed=dict(sorted(unattributed.items(), key=lambda kv: -kv[1])[:10]),
        unsampled_ns=unsampled,
        transmits_enqueued=enqueued, transmits_direct=direct,
        qdisc_enqueued_share=enqueued / (enqueued + direct) if enqueued + direct else None,
        packet_time_ns=measured,
        packet_time_pct=100 * measured / wall if wall else None,
        # named stage time inside softirqs / NAPI kthreads over the same time measured independently
        coverage=inside / measured_sampled if measured_sampled else None,
    )
