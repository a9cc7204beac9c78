"""A trial across two hosts: the generator and the sink on the traffic host,
the SUT on another, each driven by its agent over SSH.

The raw trial has the local trial's keys (softnet.campaign.trial.measure), so
softnet.analysis.trial_eval.evaluate turns it into the same result, on the
controller. What differs is recorded: which host each piece ran on
(`hosts`, with their provenance), and how well the window edges taken on the
SUT host line up with the generator's clock (`window_skew_ms`).

No SSH traffic crosses the SUT host while the window runs: its window-edge
reads are scheduled on its own clock during the warm-up, its lease is
extended over the trial, and its samples are collected afterwards.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from softnet.errors import InputError, TestbedError
from softnet.hosts.inventory import Inventory, Port
from softnet.hosts.session import AgentSession, controller_id, open_sessions
from softnet.provenance import provenance
from softnet.results.trial import RAW_SCHEMA_VERSION, TrialSpec
from softnet.testbed.local import ADDR, first_source
from softnet.traffic.native import timeline_bin_pkts

OVERTIME_FACTOR, OVERTIME_S = 1.5, 10.0  # as the local trial: a generator this far behind is stopped
POLL_S = 0.25  # the traffic host is asked how the generator does (the SUT host only past the window)
LEASE_MARGIN_S = 5.0  # the SUT's lease beyond the generator's expected run (tools start before it)
RENEW_S = 1.0  # past the window, the SUT's lease is renewed this often while the generator runs late


@dataclass
class RemotePlacement:
    gen_cpu: int = 0  # on the traffic host
    sut_cpus: list[int] = field(default_factory=lambda: [1])  # on the SUT host
    steering: str = "threaded"


class RemoteTestbed:
    """``with RemoteTestbed(inv, "tb1") as tb: raw = tb.measure(spec)``; the
    hosts are configured on enter and restored on exit (and by their agents
    alone if this process dies)."""

    def __init__(self, inv: Inventory, testbed: str, sut: str = "ipv4-fwd",
                 placement: RemotePlacement | None = None, wait_s: float = 0.0):
        if sut not in ("ipv4-fwd", "ipv6-fwd"):
            raise InputError("--sut", f"'{sut}' on real hosts; accepted: ipv4-fwd, ipv6-fwd")
        self.inv, self.name, self.sut = inv, testbed, sut
        self.ports: dict[str, Port] = inv.ports(testbed)
        tb = inv.testbeds[testbed]
        self.host_of = {"traffic": tb.traffic, "sut": tb.sut}
        self.placement = placement or RemotePlacement()
        self.ip_version = 6 if sut == "ipv6-fwd" else 4
        self.wait_s = wait_s
        self.sessions: dict[str, AgentSession] = {}
        self.applied: dict[str, dict] = {}
        self.undone: dict[str, dict] = {}

    # ---- setup and teardown --------------------------------------------------
    def _port(self, role: str) -> dict:
        p = self.ports[role]
        return {"field": p.field, **p.iface.model_dump()}

    def __enter__(self) -> "RemoteTestbed":
        if self.host_of["traffic"] == self.host_of["sut"]:
            raise InputError(f"testbeds.{self.name}", "traffic and sut are one host; a remote testbed needs two")
        # Sessions named by inventory host, so that an error names the host
        # ("host dut: ..."), not its role; kept here by role.
        by_name = open_sessions({name: self.inv.hosts[name] for name in self.host_of.values()})
        self.sessions = {role: by_name[name] for role, name in self.host_of.items()}
        try:
            holder = {"who": controller_id(), "command": f"softnet testbed {self.name}"}
            for s in self.sessions.values():
                s.call("reserve", holder=holder, wait_s=self.wait_s, timeout=self.wait_s + 30)
                left = s.call("clean", check=True)["journals"]  # `softnet clean --check` on each host first
                if left:
                    raise TestbedError(f"host {s.name}: a killed run left changes its reaper did not undo "
                                       f"({'; '.join(left[0]['pending'][:3])}): run `softnet clean` there")
            t, u = self.sessions["traffic"], self.sessions["sut"]
            self.applied["traffic"] = t.call("apply", role="traffic",
                                             ports={r: self._port(r) for r in ("gen_out", "sink_in")})
            self.applied["sut"] = u.call(
                "apply", role="sut", ports={r: self._port(r) for r in ("sut_in", "sut_out")}, sut=self.sut,
                gen_mac=self.ports["gen_out"].iface.mac, sink_mac=self.ports["sink_in"].iface.mac,
                sut_cpus=self.placement.sut_cpus, steering=self.placement.steering)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for role, s in self.sessions.items():
            self.undone[role] = s.close()
        self.sessions = {}

    # ---- one trial ---------------------------------------------------------------
    def _reads(self, role: str, procfs_snapshot: bool = False) -> dict:
        if role == "traffic":
            names = [self.ports["gen_out"].iface.name, self.ports["sink_in"].iface.name]
            return self.sessions[role].call("reads", ifnames=names, ethtool=names[:1])
        names = [self.ports["sut_in"].iface.name, self.ports["sut_out"].iface.name]
        return self.sessions[role].call("reads", ifnames=names, qdiscs=names, procfs_snapshot=procfs_snapshot,
                                        napi=names)

    def _host_reads(self) -> dict:
        """The local trial's before/after reads, from the host that has each."""
        t, u = self._reads("traffic"), self._reads("sut", procfs_snapshot=True)
        names = {r: self.ports[r].iface.name for r in ("gen_out", "sink_in", "sut_in", "sut_out")}
        links = {"gen": t["links"][names["gen_out"]], "sut_in": u["links"][names["sut_in"]],
                 "sut_out": u["links"][names["sut_out"]], "sink": t["links"][names["sink_in"]]}
        return {"links": links, "ethtool_gen": t["ethtool"][names["gen_out"]], "qdisc_drops": u["qdisc_drops"],
                "procfs": u["procfs"], "sut_netns_inode": u["netns_inode"], "sut_ifindex": u["ifindex"],
                "sut_thread_runtime_ns": u.get("napi_runtime_ns") or {}}

    def measure(self, spec: TrialSpec, progress: Callable[[float], None] | None = None) -> dict:
        spec.validate(self.ip_version)
        if spec.inject_busy_ms:
            raise InputError("--inject-stall", "not yet on remote testbeds (docs/remote-hosts.md)")
        t, u = self.sessions["traffic"], self.sessions["sut"]
        warmup, window = spec.warmup_pkts, spec.window_pkts
        total = warmup + window
        expected_s = total / spec.rate_pps
        # No request needs to reach the SUT while the window runs, so its lease
        # is extended over the generator's expected run, and no further: a cut
        # management link must still restore it within about its lease after
        # the window (within lease + 10 s). Should the generator run late,
        # the poll loop renews it once the window is over. The traffic host
        # is polled all along and needs no extension.
        u.call("lease", seconds=expected_s + LEASE_MARGIN_S)
        p, v = self.placement, 0 if self.ip_version == 4 else 1
        gen_cpus = list(spec.gen_cpus or [p.gen_cpu])  # one generator per CPU of the traffic host
        sink = t.call("start", tool="sink", ifname=self.ports["sink_in"].iface.name, count=total, warmup=warmup,
                      bin_pkts=timeline_bin_pkts(spec.rate_pps, total), streams=len(gen_cpus))["handle"]
        sampler = probe = profiler = None
        sut_names = [self.ports[r].iface.name for r in ("sut_in", "sut_out")]
        if spec.profile:  # the eBPF profiler on the SUT host, read at the window edges there
            profiler = u.call("start", tool="profiler", per_packet=spec.profile_per_packet, duty=spec.profile_duty,
                              avoid_cpus=p.sut_cpus, timeout=120)
        if spec.sample_interval_s is not None:
            sampler = u.call("start", tool="sampler", interval_s=spec.sample_interval_s, avoid_cpus=p.sut_cpus,
                             links=[["sut_in", sut_names[0]], ["sut_out", sut_names[1]]],
                             profiler=profiler["handle"] if profiler else None)["handle"]
        probe_missing = None
        if spec.stall_probe:
            try:
                probe = u.call("start", tool="stalls", cpus=sorted(p.sut_cpus), period_us=spec.stall_period_us,
                               avoid_cpus=p.sut_cpus)["handle"]
            except TestbedError as exc:
                probe_missing = str(exc)
        else:
            probe_missing = "off (--no-stall-probe)"
        before = self._host_reads()
        gen_args = dict(ifname=self.ports["gen_out"].iface.name, anchor=self.applied["traffic"]["anchor"],
                        src_mac=self.ports["gen_out"].iface.mac, dst_mac=self.ports["sut_in"].iface.mac,
                        src_ip=ADDR["gen"][v], dst_ip=ADDR["sink"][v], rate_pps=spec.rate_pps, count=total,
                        warmup=warmup, frame_bytes=spec.frame_bytes, flows=spec.flows, cpu=p.gen_cpu, cpus=gen_cpus,
                        src_ips=spec.src_ips, src_ip_first=first_source(self.ip_version, ADDR["gen"][v], spec.src_ips))
        gen_start = t.call("start", tool="gen", **gen_args)
        gen, t_started = gen_start["handle"], gen_start["started_unix_s"]
        started = t_started - t.clock["offset_s"]  # on the controller's clock
        # The SUT's window edges on its own clock, sent during the warm-up:
        # the agent takes them there and keeps them until `collect`.
        at = t_started - t.clock["offset_s"] + u.clock["offset_s"] + spec.warmup_s
        u.call("window", at_unix_s=[at, at + spec.duration_s], sampler=sampler,
               profiler=profiler["handle"] if profiler else None)
        renewed = time.time()
        while t.call("poll", handle=gen)["running"]:
            elapsed = time.time() - started
            if elapsed > expected_s and time.time() - renewed > RENEW_S:  # past the window
                u.call("lease", seconds=0)
                renewed = time.time()
            if progress:
                progress(min(elapsed / expected_s, 1.0))
            if elapsed > expected_s * OVERTIME_FACTOR + OVERTIME_S:
                t.call("interrupt", handle=gen)
                break
            time.sleep(POLL_S)
        report = t.call("wait", handle=gen, wait_s=5)["report"]
        drained = t.call("drain", handle=sink)
        timeline = t.call("timeline", handle=sink, sent=report["sent_pkts"], timeout=60)["timeline"]
        edge_reads = u.call("collect")["window"]
        stalls = u.call("read", handle=probe)["read"] if probe else {"missing": probe_missing}
        series = u.call("stop", handle=sampler)["series"] if sampler else None
        after = self._host_reads()
        for handle, s in ((probe, u), (profiler and profiler["handle"], u), (sink, t), (gen, t)):
            if handle:
                s.call("stop", handle=handle)
        late = edge_reads.get("late_ms", {})
        skew_ms = (t.clock["uncertainty_s"] + u.clock["uncertainty_s"]) * 1e3 + max(late.values(), default=0.0)
        raw = self._raw(spec, report, drained, timeline, stalls, before, after, edge_reads, series, started, skew_ms)
        if profiler:
            raw["profile"] = {"reads": {"start": profiler["start"], "window_start": edge_reads.get("profile_start"),
                                        "window_end": edge_reads.get("profile_end")},
                              **{k: profiler[k] for k in ("plan", "events", "drop_reasons", "duty", "period_ms")}}
            raw["testbed"]["interface_ids"] = [[before["sut_netns_inode"], before["sut_ifindex"][self.ports[r].iface.name],
                                                f"{r} ({self.host_of['sut']}/{self.ports[r].iface.name})"]
                                               for r in ("sut_in", "sut_out")]
        return json.loads(json.dumps(raw))

    def _raw(self, spec, gen, drained, timeline, stalls, before, after, edges, series, started, skew_ms) -> dict:
        p = self.placement
        hosts = {role: {"name": self.host_of[role], "address": self.inv.hosts[self.host_of[role]].address,
                        **{k: v for k, v in self.sessions[role].hello["host"].items() if k != "sysctls"},
                        "clock_offset_s": self.sessions[role].clock["offset_s"],
                        "clock_uncertainty_s": self.sessions[role].clock["uncertainty_s"],
                        "interfaces": self.applied[role]["facts"],
                        "host_changes_applied": self.applied[role]["applied"]}
                 for role in ("traffic", "sut")}
        sut_host = self.sessions["sut"].hello["host"]
        raw = {
            "raw_schema_version": RAW_SCHEMA_VERSION,
            "spec": asdict(spec),
            "testbed": {"sut": self.sut, "ip_version": self.ip_version, "run_id": self.name,
                        "placement": {"gen_cpu": p.gen_cpu, "sut_cpus": p.sut_cpus, "sink_cpu": None,
                                      "steering": p.steering,
                                      **({"gen_cpus": spec.gen_cpus} if len(spec.gen_cpus or []) > 1 else {})},
                        "src_ip_first": first_source(self.ip_version, ADDR["gen"][0 if self.ip_version == 4 else 1],
                                                     spec.src_ips),
                        "sink_ifname": self.ports["sink_in"].iface.name,
                        "napi_thread_cpus": {}, "interface_ids": [],
                        "remote": {"testbed": self.name, "inventory": self.inv.source,
                                   "hosts": {r: self.host_of[r] for r in ("traffic", "sut")}}},
            "host": {"cpu_freq_hz": sut_host["cpu_freq_hz"], "sysctls": sut_host["sysctls"]},
            "started_unix_s": started,
            "generator": gen, "sink": drained["counts"], "drain_s": drained["drain_s"],
            "sink_timeline": timeline, "stalls": stalls, "injected_stalls": None,
            "before": before, "after": after,
            "window": {"start": edges.get("start"), "end": edges.get("end")},
            "window_skew_ms": skew_ms,
            "other_runs": [],
            "series": series, "profile": None,
            "hosts": hosts,
        }
        raw["provenance"] = provenance(None, spec=asdict(spec), sut=self.sut, testbed=self.name)
        raw["provenance"]["hosts"] = hosts
        return raw


def run_remote_trial(tb: RemoteTestbed, spec: TrialSpec, progress: Callable[[float], None] | None = None,
                     keep_raw: bool = False, path: dict | None = None) -> dict:
    """measure on the hosts + evaluate here: campaign.trial.run_trial's twin."""
    from softnet.analysis.trial_eval import evaluate

    raw = tb.measure(spec, progress)
    if path is not None:
        raw["path"] = path
    result = evaluate(raw, spec).to_dict()
    result["hosts"] = raw["hosts"]
    result["window_skew_ms"] = raw["window_skew_ms"]
    if keep_raw:
        result["raw_trial"] = raw
    return result
