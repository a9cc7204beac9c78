"""Measurers: what a campaign calls to get one trial result at one load.

The campaign never knows whether the SUT is real: `TestbedMeasurer` builds the
local testbed once per cell and runs real trials on it; `SyntheticMeasurer`
draws counts from the PASTRAMI load-loss model (Eq. 3-5). Both return the same
result dict as softnet.campaign.trial.run_trial (the keys the store and analysis use).
"""
from __future__ import annotations

import math
import os
from dataclasses import replace
import sys
import time
from typing import Callable

import numpy as np

from softnet import interrupts
from softnet.analysis.back_to_back import BurstPlan
from softnet.analysis.synthetic import LoadLossModel
from softnet.campaign.interleave import Turn
from softnet.campaign.spec import CampaignSpec
from softnet.collect.drift import read_levels
from softnet.errors import InputError
from softnet.provenance import provenance
from softnet.results.live import LiveSample
from softnet.tools.changes import HostChanges
from softnet.testbed.local import LocalTestbed, Placement, SideSettings
from softnet.campaign.trial import TrialSpec, trial
from softnet.hosts.this_host import ThisHost

PROBE_RATE_PPS = 30e6  # beyond what one CPU generates here: the probe floods


class SyntheticMeasurer:
    def __init__(self, spec: CampaignSpec, cell_id: int):
        s = spec.synthetic
        self.spec, self.cell_id = spec, cell_id
        self.model = LoadLossModel(o_sat_pps=s.o_sat_pps, plr_at_sat=s.plr_at_sat, pre_sat_exponent=s.pre_sat_exponent,
                                   o_trash_pps=s.o_trash_pps if s.o_trash_pps is not None else math.inf,
                                   m_pps=s.m_pps, noise=s.noise)
        self.after = None if s.o_sat_after_pps is None else replace(
            self.model, o_sat_pps=s.o_sat_after_pps, o_trash_pps=max(self.model.o_trash_pps, s.o_sat_after_pps))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def run_id(self) -> str:
        return f"synthetic-{self.cell_id}"  # no testbed: a name for the trials it takes turns with

    def _rng(self, *key: int) -> np.random.Generator:
        # One stream per (cell, load, run): a resumed campaign draws exactly what
        # an uninterrupted one would have.
        return np.random.default_rng([self.spec.synthetic.seed, self.cell_id, *key])

    def measure(self, rate_pps: float, load_index: int, run_index: int, duration_s: float | None = None,
                live: Callable[[LiveSample], None] | None = None, turn: Turn | None = None) -> dict:
        """``live``: unused, the model has no kernel to sample; ``turn``: unused, nor a host to share."""
        interrupts.check()  # a signal swallowed on its way: no more simulated trials either
        m = self.spec.method
        duration = duration_s or m.duration_s
        if self.spec.synthetic.trial_wall_s:  # a simulated testbed's trial takes its time
            time.sleep(self.spec.synthetic.trial_wall_s)
        stepped = self.after is not None and load_index >= self.spec.synthetic.step_at_trial
        tx, rx = (self.after if stepped else self.model)(rate_pps, duration, self._rng(load_index, run_index))
        return {
            "sut": "synthetic", "ip_version": None, "frame_bytes": self.spec.traffic.frame_bytes,
            "flows": self.spec.traffic.flows, "intended_rate_pps": rate_pps, "achieved_rate_pps": rate_pps,
            "duration_s": duration, "warmup_s": m.warmup_s, "intended_pkts": tx, "sent_pkts": tx,
            "received_pkts": rx, "lost_pkts": tx - rx, "loss_ratio": (tx - rx) / tx if tx else None,
            "reordered_pkts": 0, "duplicate_pkts": 0, "latency_mean_ns": None, "latency_p99_ns": None,
            "diagnosis": {}, "flags": [], "valid": True, "started_unix_s": time.time(),
            "provenance": provenance(None, model=self.spec.synthetic.model_dump(), sut="synthetic"),
        }

    def drift_levels(self) -> dict | None:
        """None: the model has no host to watch."""
        return None

    def probe_max(self) -> tuple[float, dict]:
        r = self.measure(4 * self.model.o_sat_pps, -1, 0)
        return r["received_pkts"] / r["duration_s"], r


def split_egress_cpu(p: Placement) -> int:
    """A CPU for the egress side apart from the SUT's: one free of the
    generator too when the host has it (a 2-CPU host has not: it then shares
    the generator's CPU, and the placement records it)."""
    others = [c for c in sorted(os.sched_getaffinity(0)) if c not in p.sut_cpus]
    if not others:
        raise InputError("testbed.placement", "split needs a CPU besides testbed.sut_cpus")
    free = [c for c in others if c != p.gen_cpu]
    return (free or others)[0]


class TestbedMeasurer:
    __test__ = False

    def __init__(self, spec: CampaignSpec, cell_id: int):
        t = spec.testbed
        p = Placement.default()
        if t.gen_cpu is not None:
            p.gen_cpu = t.gen_cpu
        if t.sut_cpus is not None:
            p.sut_cpus = list(t.sut_cpus)
        p.sink_cpu, p.steering = t.sink_cpu, t.ingress_steering()
        if t.placement == "split":
            p.sink_cpu = split_egress_cpu(p)
        self.spec, self.placement = spec, p

    def __enter__(self):
        self.changes = HostChanges().__enter__()
        try:
            t = self.spec.testbed
            sides = {role: SideSettings(gro=t.side(name).gro, xdp=t.side(name).xdp, qdisc=t.side(name).qdisc)
                     for role, name in zip(("sut_in", "sut_out"), t.sides())}
            self.tb = LocalTestbed(self.changes, t.personality(), self.placement, sides,
                                   bidirectional=self.spec.traffic.bidirectional, nic=t.nic.knobs())
            self.ep = self.tb.build()
        except BaseException:
            self.changes.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc):
        self.changes.__exit__(*exc)

    def run_id(self) -> str:
        return self.tb.run_id

    def _trial(self, rate_pps: float, duration_s: float, warmup_s: float,
               live: Callable[[LiveSample], None] | None = None, turn: Turn | None = None) -> dict:
        t, c, m = self.spec.traffic, self.spec.collect, self.spec.method
        arrivals, burst_pkts, on_duty, burst_rate = t.arrivals, t.burst_pkts, t.on_duty, None
        step_at, step_rate = None, None
        if m.kind == "recovery":  # rate_pps: the overload; then the recovery load, as fractions of the throughput
            step_at, step_rate = m.overload_s, rate_pps / m.overload * m.recovery_load
            duration_s = m.overload_s + m.recovery_s
        if m.kind == "back-to-back":  # rate_pps: the frame rate inside each burst
            plan = BurstPlan(rate_pps, m.burst_pkts, m.burst_gap_s, m.bursts)
            arrivals, burst_pkts, on_duty, burst_rate = "onoff", m.burst_pkts, plan.duty, rate_pps
            rate_pps, duration_s, warmup_s = plan.mean_rate_pps, plan.window_s, plan.cycle_s
        spec = TrialSpec(rate_pps=rate_pps, duration_s=duration_s, warmup_s=warmup_s,
                         frame_bytes=t.frame_bytes, flows=t.flows, src_ips=t.src_ips, dst_ips=t.dst_ips,
                         dst_ports=t.dst_ports, mix=t.mix, arrivals=arrivals, burst_pkts=burst_pkts,
                         on_duty=on_duty, seed=t.seed, bidirectional=t.bidirectional, burst_rate_pps=burst_rate,
                         sample_interval_s=c.sample_interval_s if c.sample else None, profile=c.profile,
                         profile_per_packet=c.profile_per_packet, profile_duty=c.profile_duty,
                         profile_base_duty=c.profile_base_duty, profile_stack_hz=c.profile_stack_hz,
                         stall_probe=c.stall_probe, stall_period_us=c.stall_period_us, inject_busy_ms=c.inject_busy_ms,
                         inject_every_ms=c.inject_every_ms, inject_cpu=c.inject_cpu,
                         reset_at_s=m.reset_at_s, step_at_s=step_at, step_rate_pps=step_rate,
                         idle_s=c.idle_power_s if c.sample else 0.0, victim=c.victim,
                         pace_probe=c.pace_probe and not c.victim)
        return self._run(turn.turns.spec(spec) if turn else spec, live, turn)

    def _run(self, spec: TrialSpec, live: Callable[[LiveSample], None] | None, turn: Turn | None = None) -> dict:
        hosts = ThisHost(self.tb, self.ep, self.changes, turn.partners if turn else frozenset())
        return trial(hosts, spec, keep_raw=True, path=self.path(), live=live, exact_pkts=self.spec.collect.exact_delays,
                     together=turn.slot if turn else None, interleave=turn.record() if turn else None)

    def measure(self, rate_pps: float, load_index: int, run_index: int, duration_s: float | None = None,
                live: Callable[[LiveSample], None] | None = None, turn: Turn | None = None) -> dict:
        """One trial; ``live``: called with the kernel's figures at each sample while it runs;
        ``turn``: its place among trials that take turns in the same seconds (softnet.campaign.interleave)."""
        interrupts.check()
        return self._trial(rate_pps, duration_s or self.spec.method.duration_s, self.spec.method.warmup_s, live,
                           turn)

    def drift_levels(self) -> dict:
        """The SUT host's resources now (softnet.collect.drift), its namespace's own where they are per namespace."""
        return read_levels(self.tb.ns["sut"])

    def path(self) -> dict:
        """Which side of the SUT receives (sut_in) and which sends (sut_out)."""
        t = self.spec.testbed
        ingress, egress = t.sides()
        return {"direction": t.direction, "sut_in_side": ingress, "sut_out_side": egress,
                "sides": {n: s.model_dump(exclude={"qdisc"} if s.qdisc is None else set())
                          for n, s in (("a", t.side_a), ("b", t.side_b))},
                "placement": t.placement, "ingress_steering": t.ingress_steering()}

    def probe_max(self) -> tuple[float, dict]:
        """Flood the SUT and take what it delivered per second as its maximum.
        Quick, and a scale for relative loads rather than the capacity: under
        a flood the kernel's receive path forwards less than at moderate
        overload (receive livelock), so relative sweeps should reach beyond 1."""
        r = self._trial(PROBE_RATE_PPS, self.spec.method.probe_duration_s, 0.2)
        r.pop("raw_trial")  # the probe is a scale, not a stored trial
        return r["received_pkts"] / r["send_span_s"], r


class RemoteMeasurer(TestbedMeasurer):
    """Real trials on an inventory's testbed: the hosts are configured once
    per cell through their agents and restored when the cell ends."""

    def __init__(self, spec: CampaignSpec, cell_id: int):
        # here, not at the top: a campaign on this host loads no SSH stack
        from softnet.hosts.remote_trial import RemotePlacement

        t = spec.testbed
        self.spec = spec
        self.placement = RemotePlacement(gen_cpu=t.gen_cpu if t.gen_cpu is not None else 0,
                                         sut_cpus=list(t.sut_cpus or [1]), steering=t.ingress_steering())

    def __enter__(self):
        from softnet.hosts.inventory import load
        from softnet.hosts.remote_trial import RemoteTestbed

        t = self.spec.testbed
        self.tb = RemoteTestbed(load(t.inventory), t.name, t.sut, self.placement, custom=t.custom,
                                field="testbed.sut", wait_s=float(os.environ.get("SOFTNET_WAIT") or 0),
                                bidirectional=self.spec.traffic.bidirectional, nic=t.nic.knobs()).__enter__()
        return self

    def __exit__(self, *exc):
        self.tb.__exit__(*exc)

    def drift_levels(self) -> dict:
        return self.tb.drift_levels()

    def _run(self, spec: TrialSpec, live: Callable[[LiveSample], None] | None, turn: Turn | None = None) -> dict:
        if turn is not None:  # the spec refuses it first (CampaignSpec): each host's clock is its own
            raise InputError("compare.pairing", "interleaved trials run on this host's testbeds only")
        result = trial(self.tb, spec, keep_raw=True, path=self.path(), live=live,
                       exact_pkts=self.spec.collect.exact_delays)
        result.pop("hosts", None)  # kept in the raw trial and its provenance
        return result


def measurer_for(spec: CampaignSpec, cell_id: int):
    if spec.testbed.sut == "synthetic":
        return SyntheticMeasurer(spec, cell_id)
    return (RemoteMeasurer if spec.testbed.inventory else TestbedMeasurer)(spec, cell_id)
