"""ethtool -S over a trial's window: counters that moved, the ones that
count losses, and per-queue grouping, on real counter names (this VM's
virtio_net, tests/data/ethtool/virtio_net.S.txt) and real window changes
(veth, from a captured overload trial)."""
from __future__ import annotations

import json
from pathlib import Path

from softnet.analysis.kernel_stats import summarize_by_load, window_deltas
from softnet.analysis.nic_counters import nic_counters, sut_losses
from softnet.analysis.trial_eval import evaluate
from softnet.results.series import Series

DATA = Path(__file__).parent / "data"


def virtio_names() -> list[str]:
    text = (DATA / "ethtool" / "virtio_net.S.txt").read_text()
    return [line.split(":")[0].strip() for line in text.splitlines()[1:] if ":" in line]


def test_virtio_counters_are_grouped_by_queue_and_losses_named():
    names = virtio_names()
    assert "rx0_drops" in names and "tx0_kicks" in names
    (n,) = nic_counters({f"sut_in.{c}": 1 for c in names}).values()
    assert set(n.changed) == set(names)
    assert {"rx_drops", "rx0_drops", "rx_xdp_drops", "tx_xdp_tx_drops", "tx_tx_timeouts"} <= set(n.losses)
    assert not {"rx_kicks", "tx0_kicks", "rx_xdp_packets", "rx0_xdp_tx"} & set(n.losses)
    assert set(n.queues) == {"rx0", "tx0"} and n.queues["rx0"]["drops"] == 1 and n.queues["tx0"]["kicks"] == 1


def test_a_veth_overload_shows_the_refused_sends_and_the_sinks_own_drops():
    """1.8 Mpps offered to ipv4-fwd: the generator's XDP transmits the SUT's
    full ring refused, and the sink's XDP program dropping what it counted;
    none of the SUT's own interfaces counts a loss (veth has no such
    counter: the ring's overflow is the sender's)."""
    raw = json.loads((DATA / "raw_trials" / "ipv4fwd_1800kpps_overload.json").read_text())["raw"]
    d, _ = window_deltas(Series.from_json(raw["series"]))
    nic = nic_counters({k[1]: v for k, v in d.items() if k[0] == "ethtool"})
    assert nic["gen"].losses["tx_queue_0_xdp_xmit_errors"] > 100_000
    assert nic["sink"].losses["rx_queue_0_xdp_drops"] == nic["sink"].changed["rx_queue_0_xdp_drops"] > 0
    assert nic["sut_in"].queues["rx0"]["xdp_packets"] > 0 and sut_losses(nic) == {}
    assert evaluate(raw).kernel.nic == nic  # what the trial's result holds


def test_loss_counters_per_second_by_load():
    raw = json.loads((DATA / "raw_trials" / "ipv4fwd_1800kpps_overload.json").read_text())
    (level,) = summarize_by_load([raw["result"]])
    k = raw["result"]["kernel"]
    assert level["nic_losses_per_s"]["gen.tx_queue_0_xdp_xmit_errors"] == \
        k["nic"]["gen"]["losses"]["tx_queue_0_xdp_xmit_errors"] / k["window_s"]
