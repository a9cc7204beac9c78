"""Parsers of /proc files, on files captured from this machine (tests/data/procfs)."""
from pathlib import Path

import pytest

from softnet.collect import procfs

DATA = Path(__file__).parent / "data" / "procfs"


def test_softirqs():
    s = procfs.parse_softirqs((DATA / "softirqs").read_text())
    assert set(s) >= {"HI", "TIMER", "NET_TX", "NET_RX", "SCHED"}
    assert s["NET_RX"] == [83311, 3655]


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
    a = procfs.snapshot()
    b = procfs.snapshot()
    d = procfs.delta(a, b)
    assert all(v >= 0 for vals in d["softirqs"].values() for v in vals)
    assert all(v >= 0 for c in d["softnet"].values() for v in c.values())


def test_malformed_softirqs_is_an_error():
    with pytest.raises(ValueError, match="NET_RX"):
        procfs.parse_softirqs("  CPU0 CPU1\n  NET_RX: 1\n")
