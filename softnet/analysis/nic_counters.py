"""What `ethtool -S` says over a trial's window: every driver counter that
moved, per testbed interface, with the ones that count lost packets (drops,
discards, misses, errors, buffer shortages) and the per-queue counters
grouped by queue.

Names differ by driver; the patterns below cover the common layouts:
``rx_queue_0_drops`` (veth, ixgbe), ``rx0_drops`` (virtio_net, mlx5),
``rx-0.packets`` (i40e, ice). A counter whose meaning is a design choice is
still a counter: the sink's XDP program drops what it has counted
(``sink.rx_queue_0_xdp_drops``), and a generator's ``tx_queue_0_xdp_xmit_errors``
are sends the ring refused, which it retried. The SUT's own interfaces'
losses are the ones the summary names.
"""
from __future__ import annotations

import re

from softnet.results.trial import NicCounters

LOSS = re.compile(r"drop|discard|missed|no_dma|no_buf|nobuf|out_of_buffer|alloc_fail|overrun|overflow|timeout|err")
QUEUE = re.compile(r"^(rx|tx)(?:_queue)?[_-]?(\d+)[._](.+)$")
SUT_ROLES = ("sut_in", "sut_out")


def nic_counters(deltas: dict[str, float]) -> dict[str, NicCounters]:
    """{"role.counter": change over the window} -> per role, what moved."""
    out: dict[str, NicCounters] = {}
    for key, v in sorted(deltas.items()):
        role, _, name = key.partition(".")
        if not v or not name:
            continue
        n = out.setdefault(role, NicCounters(changed={}, losses={}, queues={}))
        n.changed[name] = v
        if LOSS.search(name):
            n.losses[name] = v
        if m := QUEUE.match(name):
            n.queues.setdefault(f"{m[1]}{m[2]}", {})[m[3]] = v
    return out


def sut_losses(nic: dict[str, NicCounters] | None) -> dict[str, float]:
    """{"role.counter": n} of the SUT's interfaces' loss counters that moved."""
    return {f"{role}.{k}": v for role in SUT_ROLES for k, v in (nic or {}).get(role, NicCounters(
        changed={}, losses={}, queues={})).losses.items()}
