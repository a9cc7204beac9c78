"""Parsers of /proc files, on files captured from this machine (tests/data/procfs)."""
from pathlib import Path

import pytest

from softnet.collect import procfs
from softnet.results.raw import ProcSnapshot

DATA = Path(__file__).parent / "data" / "procfs"


def test_softirqs():
    s = procfs.parse_softirqs((DATA / "softirqs").read_text())
    assert set(s) >= {"HI", "TIMER", "NET_TX", "NET_RX", "SCHED"}
    assert s["NET_RX"] == {0: 83311, 1: 3655}


def test_stat_cpus():
    cpus = procfs.parse_stat_cpus((DATA / "stat").read_text())
    assert sorted(cpus) == [0, 1]
    assert cpus[0]["user"] == 1779 and cpus[1]["idle"] == 90751 and cpus[1]["softirq"] == 62
    assert 0 < procfs.busy_ratio(cpus[1]) < 1


def test_softnet_stat_keys_by_cpu_column():
    s = procfs.parse_softnet_stat((DATA / "softnet_stat").read_text())
    assert sorted(s) == [0, 1]
    assert s[0]["processed"] == 0x2B and s[1]["processed"] == 0x14FC and s[1]["dropped"] == 0


def test_delta_of_live_snapshots_is_non_negative():
    a = ProcSnapshot.model_validate(procfs.snapshot())  # as a raw trial keeps it, typed
    b = ProcSnapshot.model_validate(procfs.snapshot())
    d = procfs.delta(a, b)
    assert all(v >= 0 for vals in d.softirqs.values() for v in vals.values())
    assert all(v >= 0 for c in d.softnet.values() for v in c.values())


def test_malformed_softirqs_is_an_error():
    with pytest.raises(ValueError, match="NET_RX"):
        procfs.parse_softirqs("  CPU0 CPU1\n  NET_RX: 1\n")


def test_interrupts_per_irq_per_cpu_from_the_header():
    irqs = procfs.parse_interrupts((DATA / "interrupts").read_text())
    assert irqs["26"] == procfs.IrqCounts("IO-APIC 4-edge ttyS0", cpus={0: 0, 1: 12})
    assert irqs["LOC"].cpus[1] > 0 and irqs["LOC"].name == "Local timer interrupts"
    assert irqs["ERR"] == procfs.IrqCounts("", total=0)


def test_offline_cpu_columns_are_keyed_by_cpu_id_not_position():
    # CPU1 offline: /proc/interrupts and /proc/softirqs print CPU0 CPU2 columns.
    irqs = procfs.parse_interrupts("           CPU0       CPU2\n 36:   5   7   PCI-MSI  virtio1-req.0\nERR:  3\n")
    assert irqs["36"].cpus == {0: 5, 2: 7} and irqs["ERR"].total == 3
    sirq = procfs.parse_softirqs("      CPU0   CPU2\n NET_RX:  10  20\n")
    assert sirq["NET_RX"] == {0: 10, 2: 20}
    stat = procfs.parse_stat("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 0 1 9 0 0 1 0 0 0\ncpu2 2 0 2 8 0 0 3 0 0 0\nctxt 77\n")
    assert sorted(stat.cpus) == [0, 2] and stat.ctxt == 77 and stat.cpus[2]["softirq"] == 3
    # softnet_stat has no row for an offline CPU: the index column says which CPU a row is.
    row = "{:08x} " * 15
    text = row.format(5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) + "\n" + \
        row.format(9, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 3, 2, 1, 2) + "\n"
    sn = procfs.parse_softnet_stat(text)
    assert sorted(sn) == [0, 2] and sn[2]["processed"] == 9 and sn[2]["input_qlen"] == 1


def test_softnet_stat_all_columns_of_this_kernel_and_a_new_one():
    s = procfs.parse_softnet_stat((DATA / "softnet_stat").read_text())
    assert set(s[1]) == {"processed", "dropped", "time_squeeze", "received_rps", "flow_limit_count",
                         "backlog_len", "input_qlen", "process_qlen"}
    # A kernel that prints a 16th column: kept under its position, nothing lost.
    line = " ".join(["00000001"] * 12 + ["00000000", "00000000", "00000000", "0000002a"])
    assert procfs.parse_softnet_stat(line)[0]["col16"] == 42


def test_u32_counters_wrap_and_gauges_are_not_differenced():
    a = {0: {"processed": 0xFFFFFFF0, "time_squeeze": 1, "backlog_len": 50}}
    b = {0: {"processed": 0x10, "time_squeeze": 3, "backlog_len": 7}}
    d = procfs.softnet_delta(a, b)
    assert d[0] == {"processed": 0x20, "time_squeeze": 2, "backlog_len": 7}
    assert procfs.counter_delta(10, 4) == -6  # a 64-bit counter going back is not hidden


@pytest.mark.parametrize("text, where", [
    ("garbage\n 1: 2\n", "line 1"),
    ("  CPU0 CPU1\n 36: 1 x PCI\n", "line 2"),
])
def test_malformed_interrupts_name_the_line(text, where):
    with pytest.raises(ValueError, match=where):
        procfs.parse_interrupts(text)


def test_net_dev_counters_per_interface():
    dev = procfs.parse_net_dev((DATA / "net_dev").read_text())
    assert "lo" in dev and all(len(c) == 16 for c in dev.values())
    assert all(c["rx_packets"] >= 0 and c["tx_bytes"] >= 0 for c in dev.values())
    with pytest.raises(ValueError, match="line 3"):
        procfs.parse_net_dev("h1\nh2\n  eth0: 1 2 3\n")
