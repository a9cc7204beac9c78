"""RAPL power: which powercap zones make the host's total (each joule once),
the sampler's zone reading, the window and idle power from a series, and
a real trial that pauses for the idle power.

This VM has no RAPL (no /sys/class/powercap), so the zone trees below are
the layouts the kernel exposes (a client CPU's, as cpupower's
powercap-info commit lists it: package-0 with core and uncore inside, the
package again through MMIO, and psys; a two-socket server's, with DRAM
under each package), and the energy counters are planted in a series
captured on this machine during a real trial."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from softnet.analysis import kernel_stats as ks
from softnet.analysis.power import classify, watts
from softnet.collect.sampler import rapl_zones
from softnet.results.series import Series
from tests.conftest import needs_root

DATA = Path(__file__).parent / "data"
CLIENT = {"intel-rapl:0": "package-0", "intel-rapl:0:0": "core", "intel-rapl:0:1": "uncore",
          "intel-rapl-mmio:0": "package-0", "intel-rapl:1": "psys"}
SERVER = {"intel-rapl:0": "package-0", "intel-rapl:0:0": "dram", "intel-rapl:1": "package-1",
          "intel-rapl:1:0": "dram"}


def test_a_client_cpu_counts_its_package_once():
    zones = {z.zone: z for z in classify(CLIENT)}
    assert [z for z, r in zones.items() if r.counted] == ["intel-rapl:0"]
    assert zones["intel-rapl:0:0"].why == "inside package-0"
    assert "through MMIO" in zones["intel-rapl-mmio:0"].why and "platform" in zones["intel-rapl:1"].why


def test_a_server_counts_both_packages_and_their_dram():
    assert sorted(z.zone for z in classify(SERVER) if z.counted) == sorted(SERVER)


def test_zones_without_names_count_at_the_top_of_their_tree_only():
    """A raw trial from before zone names were kept: the sub-zones and the
    MMIO copy are still left out."""
    got = {z.zone for z in classify({z: "" for z in CLIENT}) if z.counted}
    assert got == {"intel-rapl:0", "intel-rapl:1"}


def test_watts_sums_the_counted_zones_and_names_every_zone():
    # one second: 30 J in the package, of which 12 J in its cores; psys 41 J
    total, per_zone = watts({"intel-rapl:0": 30e6, "intel-rapl:0:0": 12e6, "intel-rapl:0:1": 2e6,
                             "intel-rapl-mmio:0": 30e6, "intel-rapl:1": 41e6}, 1.0, CLIENT)
    assert total == pytest.approx(30.0)  # not 115 W, the sum of every counter
    assert per_zone["intel-rapl:0:0 (core)"] == pytest.approx(12.0) and len(per_zone) == 5


def test_the_sampler_reads_zone_names_and_skips_unreadable_counters(tmp_path):
    for zone, name in CLIENT.items():
        (tmp_path / zone).mkdir()
        (tmp_path / zone / "name").write_text(name + "\n")
        (tmp_path / zone / "energy_uj").write_text("123456\n")
    (tmp_path / "intel-rapl:1" / "energy_uj").write_text("")  # unreadable (a non-root user's read)
    (tmp_path / "intel-rapl").mkdir()  # the control type: no counter of its own
    assert rapl_zones(tmp_path) == {z: n for z, n in CLIENT.items() if z != "intel-rapl:1"}


def planted(package_w: dict[float, float], core_w: float = 5.0) -> Series:
    """The captured series with RAPL counters: the package draws
    package_w[t0] W from each t0 on; its cores core_w; the MMIO copy the same
    as the package."""
    s = Series.from_json(json.loads((DATA / "kernel_samples_ipv4fwd_300kpps.json").read_text()))
    s.power_zones = dict(CLIENT)

    def energy_uj(t: float) -> float:
        edges = sorted(package_w)
        return 1e6 * sum(package_w[a] * max(0.0, min(t, b) - a) for a, b in zip(edges, edges[1:] + [1e9]))

    for t, sample in zip(s.t_s, s.samples):
        sample[("power", "intel-rapl:0", -1)] = energy_uj(t)
        sample[("power", "intel-rapl-mmio:0", -1)] = energy_uj(t)
        sample[("power", "intel-rapl:0:0", -1)] = core_w * t * 1e6
    return s


def test_window_power_idle_power_and_mw_per_mbps_from_a_series():
    """Idle at 20 W until the traffic, 32 W after: the window's power is 32 W
    (the package alone), the idle 20 W, and the traffic's 12 W; Table II's
    mW per Mbps is the window's power over the throughput."""
    s = planted({0.0: 20.0, 1.05: 32.0})
    k = ks.trial_kernel_stats(s, [1], forwarded_pkts=600_000, frame_bytes=64, idle_s=1.0, warmup_s=0.0)
    p = k.power
    assert p.watts == pytest.approx(32.0) and p.zones_w["intel-rapl:0:0 (core)"] == pytest.approx(5.0)
    assert p.idle_watts == pytest.approx(20.0) and p.traffic_watts == pytest.approx(12.0)
    mbps = k.normalized.throughput_mbps
    assert k.normalized.power_mw_per_mbps == pytest.approx(32_000 / mbps)
    assert k.normalized.traffic_power_mw_per_mbps == pytest.approx(12_000 / mbps)
    # without the idle pause: the host's whole draw, no idle figure
    k = ks.trial_kernel_stats(s, [1], forwarded_pkts=600_000, frame_bytes=64)
    assert k.power.idle_watts is None and k.normalized.traffic_power_mw_per_mbps is None


def test_a_zone_whose_counter_wrapped_in_the_window_is_left_out():
    """The MMIO copy of the package then stands for it: the same joules."""
    s = planted({0.0: 20.0})
    end = s.marks["window_end"]
    s.samples[end][("power", "intel-rapl:0", -1)] = 10.0  # wrapped at max_energy_range_uj
    k = ks.trial_kernel_stats(s, [1], forwarded_pkts=600_000, frame_bytes=64)
    assert "intel-rapl:0 (package-0)" not in k.power.zones_w and k.power.watts == pytest.approx(20.0)


@needs_root
@pytest.mark.netns
@pytest.mark.usefixtures("host_unchanged")
def test_a_trial_pauses_for_the_idle_power_before_its_traffic(tmp_path):
    """idle_power_s = 1: the sampler runs a second before the generator
    starts (samples before the traffic); here no RAPL, which the trial names."""
    from tests.conftest import run_spec

    spec = """name = "idle"
[testbed]
sut = "ipv4-fwd"
[method]
loads = ["20kpps"]
runs = 1
duration_s = 1
warmup_s = 0.2
[collect]
sample_interval_s = 0.25
idle_power_s = 1.0
"""
    _, (t,) = run_spec(tmp_path, spec)
    raw = json.loads(next((tmp_path / "r" / "raw").rglob("*.json")).read_text())["raw_trial"]
    s = Series.from_json(raw["series"])
    traffic_t = s.t_s[s.marks["window_start"]] - 0.2
    before = [x for x in s.t_s if x < traffic_t - 0.05]
    assert len(before) >= 4 and before[-1] - before[0] >= 0.7, (s.t_s, traffic_t)
    assert "RAPL" in t["kernel"]["missing"]["power"] and "power" not in t["kernel"]
