"""NIC knobs (softnet.tools.nic): parsed from real ethtool output, refused
by name before anything changes, applied and restored on real interfaces."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from softnet.errors import InputError
from softnet.tools import nic
from tests.conftest import host_state, softnet_cmd, wait_host_state

DATA = Path(__file__).parent / "data" / "ethtool"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def virtio_caps() -> nic.NicCaps:
    """eth0 of this VM (virtio_net), as ethtool printed it."""
    def run(argv):
        return (DATA / f"virtio_net.{argv[1][1]}.txt").read_text()
    return nic.capabilities("eth0", run, "virtio_net", irqs=[36, 37])


def test_ethtool_output_parsed_with_its_maximums():
    caps = virtio_caps()
    assert caps.current["-G"] == {"rx": "256", "tx": "256"} and caps.maximum["-G"] == {"rx": 256, "tx": 256}
    assert caps.current["-L"] == {"combined": "1"} and caps.maximum["-L"] == {"combined": 1}  # rx/tx: n/a
    assert caps.current["-C"]["rx-usecs"] == "0" and caps.current["-C"]["adaptive-rx"] == "off"
    assert "adaptive-tx" not in caps.current["-C"] and "rx-usecs-irq" not in caps.current["-C"]  # n/a
    assert caps.takes() == ["rx_ring", "tx_ring", "channels", "rx_usecs", "tx_usecs", "rx_frames", "tx_frames",
                            "adaptive_rx", "irq_affinity"]


def test_a_plan_sets_only_what_is_asked_and_keeps_the_old_values():
    caps = virtio_caps()
    p = nic.plan({"rx_ring": 128, "rx_usecs": 20, "adaptive_rx": True, "irq_affinity": "pin-2cpu"}, caps,
                 "sut_out", [2, 3], "testbed.nic")
    assert p.ethtool == {"-G": {"rx": "128"}, "-C": {"rx-usecs": "20", "adaptive-rx": "on"}}
    assert p.irq_cpus == [3]  # transmit side: the second SUT CPU
    assert nic.changed(p, caps) == {"-G": {"rx": "256"}, "-C": {"rx-usecs": "0", "adaptive-rx": "off"}}
    assert nic.ethtool_argv("eth0", "-C", p.ethtool["-C"]) == ["ethtool", "-C", "eth0", "adaptive-rx", "on",
                                                                "rx-usecs", "20"]
    assert nic.plan({"irq_affinity": "pin-1cpu"}, caps, "sut_out", [2, 3], "x").irq_cpus == [2]
    assert nic.plan({"irq_affinity": "unpinned", "tx_ring": None}, caps, "sut_in", [2], "x").ethtool == {}


@pytest.mark.parametrize("knobs, field, words", [
    ({"rx_ring": 4096}, "testbed.nic.rx_ring", "4096 on eth0 (virtio_net): the driver takes 1..256"),
    ({"channels": 2}, "testbed.nic.channels", "the driver takes 1..1"),
    ({"rx_channels": 1}, "testbed.nic.rx_channels", "eth0 (virtio_net) does not take rx_channels; it takes: "),
    ({"adaptive_tx": True}, "testbed.nic.adaptive_tx", "does not take adaptive_tx"),
    ({"irq_affinity": "pin-2cpu"}, "testbed.nic.irq_affinity", "give testbed.sut_cpus two CPUs"),
])
def test_a_refused_knob_names_itself_the_interface_and_the_driver(knobs, field, words):
    with pytest.raises(InputError) as err:
        nic.plan(knobs, virtio_caps(), "sut_in", [1], "testbed.nic")
    assert err.value.field == field and words in err.value.message, err.value


def test_readback_names_what_the_driver_did_not_take():
    caps = virtio_caps()
    p = nic.plan({"rx_ring": 128}, caps, "sut_in", [1], "testbed.nic")
    assert nic.readback(caps, p) == ["eth0: rx 128 asked, 256 read back"]


def test_a_local_spec_with_a_knob_veth_does_not_take_is_refused_at_load(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text('name = "n"\n[testbed]\nsut = "ipv4-fwd"\n[testbed.nic]\nrx_ring = 512\n'
                    '[method]\nloads = [1000]\n')
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r")), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "testbed" in r.stderr and "nic.rx_ring: veth" in r.stderr, r.stderr
    spec.write_text(spec.read_text().replace("rx_ring = 512", "rx_rings = 512"))
    r = subprocess.run(softnet_cmd("run", str(spec), "--results", str(tmp_path / "r")), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "testbed.nic.rx_rings" in r.stderr, r.stderr


def test_matrix_over_nic_knobs_makes_one_cell_each(tmp_path):
    from softnet.campaign.spec import load_spec

    spec = tmp_path / "c.toml"
    spec.write_text('name = "n"\n[testbed]\nsut = "ipv4-fwd"\n[method]\nloads = [1000]\n'
                    '[matrix]\n"testbed.nic.rx_channels" = [1]\n"testbed.nic.irq_affinity" = '
                    '["unpinned"]\n"testbed.nic.tx_channels" = [1]\n')
    cells = list(load_spec(spec).cells())
    assert [c.testbed.nic.knobs() for _, c in cells] == [{"rx_channels": 1, "tx_channels": 1,
                                                          "irq_affinity": "unpinned"}]


@pytest.mark.parametrize("arg, field", [("rx_ring=512", "--nic rx_ring: veth"), ("colour=red", "--nic colour"),
                                        ("rx_ring", "--nic"), ("irq_affinity=pin-3cpu", "--nic irq_affinity")])
def test_trial_nic_option_errors_name_the_knob(arg, field):
    before = host_state() if os.geteuid() == 0 else None
    r = subprocess.run(softnet_cmd("trial", "--rate", "1kpps", "--nic", arg), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and field in r.stderr, r.stderr
    if before is not None:
        assert host_state() == before


@needs_root
@pytest.mark.netns
def test_veth_takes_what_softnet_says_it_takes(host_unchanged):
    """A real veth pair, as the local testbed builds them (one queue each)."""
    from softnet.testbed.local import VETH_NIC_KNOBS
    from softnet.tools import hostcmd
    from softnet.tools.changes import HostChanges

    with HostChanges() as ch:
        ns = f"sn-nic{os.getpid()}"
        ch.record(f"netns {ns}", lambda: subprocess.run(["ip", "netns", "del", ns], check=False))
        subprocess.run(["ip", "netns", "add", ns], check=True)
        hostcmd.in_netns(ns, ["ip", "link", "add", "name", "a", "numtxqueues", "1", "numrxqueues", "1", "type", "veth",
                              "peer", "name", "b", "numtxqueues", "1", "numrxqueues", "1"])
        caps = nic.capabilities("a", lambda argv: hostcmd.in_netns(ns, argv), "veth")
        assert caps.takes() == list(VETH_NIC_KNOBS), caps
        assert caps.maximum["-L"] == {"rx": 1, "tx": 1}


def ixgbe_caps() -> nic.NicCaps:
    """An 82599 (ixgbe) whose table spreads over 16 of its 63 rings (its RSS
    limit), as ethtool -x printed it; its other outputs are the VM's."""
    def run(argv):
        return (DATA / ("ixgbe_82599.x.txt" if argv[1] == "-x" else f"virtio_net.{argv[1][1]}.txt")).read_text()
    return nic.capabilities("eno5", run, "ixgbe")


def test_the_rss_table_read_as_weights_and_narrowed_to_n_queues():
    caps = ixgbe_caps()
    assert caps.current["-X"] == {"weight": " ".join(["1"] * 16 + ["0"] * 47)} and caps.maximum["-X"] == {"weight": 63}
    assert "rss_queues" in caps.takes()
    p = nic.plan({"rss_queues": 2}, caps, "sut_in", [1], "testbed.nic")
    assert nic.changed(p, caps) == {"-X": {"weight": caps.current["-X"]["weight"]}}  # the undo's weights
    argv = nic.ethtool_argv("eno5", "-X", p.ethtool["-X"])
    assert argv[:5] == ["ethtool", "-X", "eno5", "weight", "1"] and argv[5:] == ["1"] + ["0"] * 61
    assert "rss_queues" not in virtio_caps().takes()  # this VM's virtio_net has no table


@pytest.mark.parametrize("knobs, words", [
    ({"rss_queues": 64}, "the driver takes 1..63"),
    ({"rss_queues": 2, "channels": 4}, "give rss_queues or channels, not both"),
])
def test_an_rss_spread_the_nic_cannot_take_is_refused(knobs, words):
    with pytest.raises(InputError) as err:
        nic.plan(knobs, ixgbe_caps(), "sut_in", [1], "testbed.nic")
    assert err.value.field == "testbed.nic.rss_queues" and words in err.value.message, err.value
