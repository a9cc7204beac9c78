"""`softnet trial`: one measurement on the local testbed."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from softnet.analysis.cpu_audit import by_context
from softnet.analysis.trial_eval import evaluate
from softnet.cli.output import Col, console, count, eng, err_console, kv_table, pct, print_json, sci, table
from softnet.errors import HostNotRestored, InputError
from softnet.hosts.this_host import ThisHost
from softnet.hosts.trial_hosts import TrialHosts
from softnet.results.trial import Direction, KernelStats, ProfileResult, TrialResult
from softnet.tools.changes import HostChanges
from softnet.testbed.local import LocalTestbed, Placement
from softnet.campaign.trial import TrialSpec, measure
from softnet.units import format_rate, parse_rate


def parse_cpus(text: str, field: str) -> list[int]:
    """'1', '0,1' or '0-3' -> [..]."""
    cpus: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise InputError(field, f"'{text}' is not a CPU list such as 1, 0,1 or 0-3") from None
    return cpus


def build_placement(gen_cpu: int | None, sut_cpus: str | None, sink_cpu: int | None, steering: str,
                    remote: bool = False) -> Placement:
    """The CPUs of a trial; on remote hosts they are the hosts' CPUs, which
    their agents check (here: generator 0, SUT 1 unless given)."""
    p = Placement(gen_cpu=0, sut_cpus=[1]) if remote else Placement.default()
    if gen_cpu is not None:
        p.gen_cpu = gen_cpu
    if sut_cpus is not None:
        p.sut_cpus = parse_cpus(sut_cpus, "--sut-cpus")
    p.sink_cpu, p.steering = sink_cpu, steering
    if not remote:
        p.validate()
    elif sink_cpu is not None:
        raise InputError("--sink-cpu", "not on remote testbeds (the sink's host runs only the sink)")
    return p


@dataclass(frozen=True)
class LoadOptions:
    """The Load panel of `softnet trial`: what is offered, for how long."""

    rate: str  # as given: 200kpps, 1.5Mpps, 500Mbps
    duration_s: float = 5.0
    warmup_s: float = 1.0
    frame_bytes: int = 64
    flows: int = 1
    rate_layer: str = "l1"


@dataclass(frozen=True)
class StallOptions:
    """The stall probe and injector (--stall-probe, --inject-stall): TrialSpec fields."""

    stall_probe: bool = True
    stall_period_us: int = 2000
    inject_busy_ms: float | None = None
    inject_every_ms: float = 500.0
    inject_cpu: int | None = None


@dataclass(frozen=True)
class CollectOptions:
    """The Collect panel: the kernel sampler, the eBPF profiler, the stall probe."""

    sample_interval_s: float | None = 1.0  # None: off
    profile: bool = False
    profile_duty: float = 0.02
    profile_base_duty: float = TrialSpec.profile_base_duty
    stalls: StallOptions = StallOptions()
    profile_stack_hz: int = TrialSpec.profile_stack_hz


@dataclass(frozen=True)
class ShapeOptions:
    """The traffic shape's options (docs/how-to/traffic.md), as TrialSpec names them,
    with its defaults (one source: "not given" is "as TrialSpec has it")."""

    dst_ips: int = TrialSpec.dst_ips
    dst_ports: int = TrialSpec.dst_ports
    mix: str | None = TrialSpec.mix
    arrivals: str = TrialSpec.arrivals
    burst_pkts: int = TrialSpec.burst_pkts
    on_duty: float = TrialSpec.on_duty
    seed: int = TrialSpec.seed
    bidirectional: bool = TrialSpec.bidirectional


@dataclass(frozen=True)
class TrafficOptions:
    """The Traffic shape panel, checked: source addresses, generator CPUs, shape."""

    src_ips: int = 1
    gen_cpus: list[int] | None = None
    shape: ShapeOptions = ShapeOptions()


def parse_inject(text: str | None, cpu: int | None, stall_probe: bool = True, period_us: int = 2000,
                 remote: bool = False) -> StallOptions:
    """--inject-stall 5/500 (5 ms every 500 ms) and the probe's options."""
    if text is None:
        if cpu is not None:
            raise InputError("--inject-cpu", "needs --inject-stall (e.g. --inject-stall 5/500)")
        return StallOptions(stall_probe, period_us)
    busy, sep, every = text.partition("/")
    try:
        out = StallOptions(stall_probe, period_us, inject_busy_ms=float(busy),
                           inject_every_ms=float(every) if sep else 500.0, inject_cpu=cpu)
    except ValueError:
        raise InputError("--inject-stall", f"'{text}': expected BUSY_MS/EVERY_MS, e.g. 5/500") from None
    if cpu is not None and not remote and cpu not in os.sched_getaffinity(0):  # a remote SUT host checks its own
        raise InputError("--inject-cpu", f"CPU {cpu} does not exist or is not usable; accepted: "
                         f"{sorted(os.sched_getaffinity(0))}")
    return out


# the CLI's option for each traffic shape field of TrialSpec (its errors name the option)
SHAPE_OPTIONS = {"dst_ips": "--dst-ips", "dst_ports": "--dst-ports", "mix": "--mix", "arrivals": "--arrivals",
                 "burst_pkts": "--burst", "on_duty": "--duty-on", "seed": "--seed", "bidirectional": "--bidirectional"}


def parse_traffic(src_ips: int = 1, gen_cpus: str | None = None, remote: bool = False,
                  shape: ShapeOptions = ShapeOptions()) -> TrafficOptions:
    """--src-ips N and --gen-cpus LIST: N source addresses in turn (RSS
    spread), one generator per CPU of LIST (streams of one schedule); on
    remote testbeds the traffic host's CPUs. ``shape`` is checked here when
    it differs from the defaults."""
    from softnet.results.trial import MAX_GEN_STREAMS, SRC_IPS_RANGE

    lo, hi = SRC_IPS_RANGE
    if not lo <= src_ips <= hi:
        raise InputError("--src-ips", f"{src_ips} is outside [{lo}, {hi}] (source addresses used in turn)")
    cpus = None
    if gen_cpus is not None:
        cpus = parse_cpus(gen_cpus, "--gen-cpus")
        online = sorted(os.sched_getaffinity(0))
        bad = [] if remote else [c for c in cpus if c not in online]  # a remote host's agent checks its own
        if bad:
            raise InputError("--gen-cpus", f"CPU {bad[0]} does not exist or is not usable; accepted: {online}")
        if len(set(cpus)) != len(cpus):
            raise InputError("--gen-cpus", f"'{gen_cpus}' names a CPU twice (one generator per CPU)")
        if len(cpus) > MAX_GEN_STREAMS:
            raise InputError("--gen-cpus", f"{len(cpus)} CPUs: at most {MAX_GEN_STREAMS} generators per trial")
    if shape != ShapeOptions():
        try:
            TrialSpec(rate_pps=1.0, **asdict(shape)).validate_shape(4)
        except InputError as exc:
            raise InputError(SHAPE_OPTIONS.get(exc.field, exc.field), exc.message) from None
    return TrafficOptions(src_ips, cpus, shape)


def frame_size(size: int, traffic: TrafficOptions) -> int:
    """The frame size a bit rate is converted with: a mix's mean (rounded), else --size."""
    mix = traffic.shape.mix
    if mix is None:
        return size
    from softnet.results import shapes

    try:
        return round(shapes.mean_frame_bytes(shapes.parse_mix(mix, 0)))
    except InputError:
        return size  # validate() names the field


@dataclass
class TrialRequest:
    """What `softnet trial` was asked, parsed and checked once, before the
    testbed lock is waited for or any host touched."""

    sut: str
    spec: TrialSpec
    placement: Placement
    rate_text: str
    rate_layer: str
    nic: dict = field(default_factory=dict)  # parse_nic()'s knobs
    remote: tuple[Path, str] | None = None  # (inventory, testbed)
    raw_out: Path | None = None


def validate_inputs(sut: str, load: LoadOptions, collect: CollectOptions, traffic: TrafficOptions = TrafficOptions(),
                    raw_out: Path | None = None, remote: bool = False) -> TrialSpec:
    """Every input checked before the testbed lock is waited for or the host
    touched; the trial's spec."""
    from softnet.campaign.trial import first_source
    from softnet.doctor.personalities import require
    from softnet.testbed.local import ADDR
    from softnet.testbed.personalities import parse_sut

    personality = parse_sut(sut, "--sut")
    if remote:  # the SUT host's agent checks what it needs there
        personality.require_remote("--sut")
    else:
        require(personality, "--sut")
    if traffic.shape.bidirectional and not personality.bidirectional:
        raise InputError("--bidirectional", f"{personality.name} forwards one way only: {personality.one_way_why}")
    spec = TrialSpec(rate_pps=parse_rate(load.rate, frame_size(load.frame_bytes, traffic), load.rate_layer),
                     duration_s=load.duration_s, warmup_s=load.warmup_s, frame_bytes=load.frame_bytes,
                     flows=load.flows, sample_interval_s=collect.sample_interval_s, profile=collect.profile,
                     profile_duty=collect.profile_duty, profile_base_duty=collect.profile_base_duty,
                     profile_stack_hz=collect.profile_stack_hz,
                     **asdict(collect.stalls), src_ips=traffic.src_ips,
                     gen_cpus=traffic.gen_cpus, **asdict(traffic.shape))
    v = personality.ip_version
    try:  # the local testbed's source addresses (the remote ones refuse src_ips > 1 before this)
        first_source(v, ADDR["gen"][0 if v == 4 else 1], spec.src_ips)
    except InputError as exc:
        raise InputError("--src-ips", exc.message) from None
    from softnet.testbed.local import first_destination
    try:
        first_destination(v, ADDR["sink"][0 if v == 4 else 1], spec.dst_ips)
    except InputError as exc:
        raise InputError("--dst-ips", exc.message) from None
    try:
        spec.validate(v)
    except InputError as exc:
        raise InputError(SHAPE_OPTIONS.get(exc.field, exc.field), exc.message) from None
    if raw_out is not None:
        check_writable(raw_out)
    return spec


@dataclass(frozen=True)
class TrialShown:
    """What `softnet trial` shows: the result, the rate as asked, and the
    undo errors of a teardown that failed (the result is then flagged)."""

    result: TrialResult
    rate_text: str
    rate_layer: str
    undo_errors: list[str] | None = None

    def to_json(self) -> dict:
        return {**self.result.to_dict(), **({} if self.undo_errors is None else {"undo_errors": self.undo_errors}),
                "rate_text": self.rate_text, "rate_layer": self.rate_layer}


def measured(hosts: TrialHosts, spec: TrialSpec, progress) -> tuple[TrialResult, dict]:
    """measure + evaluate: the result and the raw trial it came from."""
    raw = measure(hosts, spec, progress)
    return evaluate(raw, spec), raw


def run(req: TrialRequest, as_json: bool, wide: bool = False) -> TrialShown:
    """The trial of a checked request, on this host or an inventory's."""
    sut, spec, placement, remote, nic, raw_out = req.sut, req.spec, req.placement, req.remote, req.nic, req.raw_out
    what = f"{sut} at {format_rate(spec.rate_pps)}"
    done: tuple[TrialResult, dict] | None = None
    not_restored = None
    try:
        if remote is not None:
            tb = _remote_testbed(remote, sut, placement, spec, nic)
            with tb:
                done = with_bar(lambda progress: measured(tb, spec, progress), f"{what} on {remote[1]}", as_json)
        else:
            with HostChanges() as changes:
                ltb = LocalTestbed(changes, sut, placement,  # validates SUT, CPUs, knobs; touches nothing
                                   bidirectional=spec.bidirectional, nic=nic)
                spec.validate(ltb.ip_version)  # all input checked before the host is changed
                ep = ltb.build()
                done = with_bar(lambda progress: measured(ThisHost(ltb, ep, changes), spec, progress), what,
                                as_json)
    except HostNotRestored as exc:  # the trial ran but its teardown failed: shown flagged, then the error
        if done is None:
            raise
        not_restored = exc
    result, raw = done
    if not_restored is not None:
        result = result.model_copy(update={"flags": [*result.flags, "host_not_restored"], "valid": False})
    shown = TrialShown(result, req.rate_text, req.rate_layer, None if not_restored is None else not_restored.errors)
    if raw_out is not None:
        raw_out.write_text(json.dumps(raw) + "\n")
    if as_json:
        print_json(shown.to_json())
    else:
        show(result, wide)
    if not_restored is not None:
        raise not_restored
    return shown


def with_bar(fn, what: str, quiet: bool):
    """fn(progress) under a progress bar on stderr (none with --json)."""
    if quiet:
        return fn(None)
    with Progress(TextColumn("[bold]trial[/] {task.description}"), BarColumn(),
                  TextColumn("{task.percentage:>3.0f}%"), TimeRemainingColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task(what, total=1.0)
        return fn(lambda f: bar.update(task, completed=f))


def _remote_testbed(remote: tuple[Path, str], sut: str, placement: Placement, spec: TrialSpec,
                    nic: dict | None = None):
    """An inventory's testbed: generators and sinks on its traffic host, the
    SUT on its SUT host, each restored when the trial ends."""
    from softnet.hosts.inventory import load
    from softnet.hosts.remote_trial import RemotePlacement, RemoteTestbed

    tb = RemoteTestbed(load(remote[0]), remote[1], sut, RemotePlacement(placement.gen_cpu, placement.sut_cpus,
                                                                        placement.steering),
                       bidirectional=spec.bidirectional, nic=nic)
    spec.validate(tb.ip_version)
    return tb


def parse_nic(text: str | None, remote: bool = False) -> dict:
    """--nic rx_ring=512,irq_affinity=pin-1cpu -> the knobs (softnet.tools.nic);
    on this host, those veth does not take are refused here."""
    from pydantic import ValidationError

    from softnet.campaign.spec import NicSpec

    if not text:
        return {}
    pairs = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError("--nic", f"'{item}': expected KNOB=VALUE; knobs: {', '.join(NicSpec.model_fields)}")
        pairs[key.strip()] = value.strip()
    try:
        knobs = NicSpec.model_validate(pairs).knobs()
    except ValidationError as exc:
        e = exc.errors()[0]
        raise InputError(f"--nic {e['loc'][0]}", e["msg"] if e["type"] != "extra_forbidden" else
                         f"unknown knob; accepted: {', '.join(NicSpec.model_fields)}") from None
    from softnet.testbed.local import veth_refuses

    if not remote and (refused := veth_refuses(knobs)):
        raise InputError(f"--nic {refused[0]}", refused[1])
    return knobs


def check_writable(path: Path) -> None:
    """Before the host is changed: the raw file's folder exists and takes files."""
    folder = path.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK) or path.is_dir():
        raise InputError("--raw", f"{path}: cannot write a file there")


class RawFile(BaseModel):
    """The files a raw trial comes in: `softnet trial --raw` writes the raw
    trial itself, a campaign's results/raw/ file keeps it under raw_trial,
    the stored trials under tests/data under raw."""

    raw_trial: dict | None = None
    raw: dict | None = None
    raw_schema_version: Any = None  # the raw trial itself

    @classmethod
    def raw_of(cls, doc: Any) -> dict | None:
        """The raw trial in a file's JSON, or None."""
        try:
            f = cls.model_validate(doc)
        except ValidationError:
            return None
        if f.raw_trial is None and f.raw is None:
            return doc if f.raw_schema_version is not None else None
        raw = f.raw_trial if f.raw_trial is not None else f.raw
        return raw if _RawHead.model_validate(raw).raw_schema_version is not None else None


class _RawHead(BaseModel):
    raw_schema_version: Any = None


def evaluate_file(path: Path, as_json: bool, wide: bool = False) -> TrialResult:
    """Re-evaluate a raw trial file: one written by `softnet trial --raw`, or
    a campaign's raw file (results/raw/...), which keeps it under "raw_trial"."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(str(path), f"not a raw trial JSON file: {exc}") from None
    raw = RawFile.raw_of(doc)
    if raw is None:
        raise InputError(str(path), "no raw trial in it (written by `softnet trial --raw FILE`, or a campaign's "
                         "results/raw/ file)")
    try:
        result = evaluate(raw)
    except (KeyError, TypeError) as exc:
        raise InputError(str(path), f"raw trial is incomplete: {exc!r} is missing or malformed") from None
    except InputError as exc:
        raise InputError(str(path), str(exc)) from None
    if as_json:
        print_json(result.to_dict())
    else:
        show(result, wide)
    return result


def latency_row(r: TrialResult, us) -> tuple[str, str, str]:
    """p50 / p90 / p99 / p99.9 (schema 3), or a schema 2 result's log2 bound."""
    if r.latency_log2_hist is not None:  # a schema 2 result: its percentiles are log2 bucket edges
        return "latency p99 (upper bound)", us(r.latency_p99_upper_ns), "log2 histogram bucket edge"
    err = r.latency_percentile_rel_error
    return ("latency percentiles", " / ".join(us(v) for v in (r.latency_p50_ns, r.latency_p90_ns, r.latency_p99_ns,
                                                              r.latency_p99_9_ns)),
            "p50 / p90 / p99 / p99.9" + (f" (±{100 * err:.2g}%)" if err is not None else ""))


def shape_rows(r: TrialResult) -> list[tuple[str, str, str]]:
    """The traffic shape's rows (docs/how-to/traffic.md): only what a shaped trial has."""
    rows = []
    shape = r.traffic_shape
    arrivals = "const" if shape is None else shape.arrivals
    if r.throughput_bps is not None and (r.frame_mix or arrivals != "const"):
        rows.append(("received throughput", eng(r.throughput_bps, "bit/s"),
                     f"frames incl. FCS, mean {r.mean_frame_bytes:.1f} B"))
    if shape is not None and arrivals != "const":
        how = (f"seed {shape.seed}" if arrivals == "poisson"
               else f"{shape.burst_pkts} packets on {100 * shape.on_duty:g}% of the time")
        rows.append(("arrivals", arrivals, how))
    if r.flow_counts is not None:
        f = r.flow_counts
        rows.append(("flows (window packets each)", f"{count(f.min_pkts)} .. {count(f.max_pkts)}",
                     f"over {f.flows} flows"))
    for size, row in (r.size_loss or {}).items():
        rows.append((f"  {size} B frames: lost", count(row.lost_pkts), f"of {count(row.sent_pkts)} sent"))
    return rows


DIRECTION_COLS = [Col("direction", justify="left"), Col("load"), Col("sent"), Col("received"), Col("lost"),
                  Col("loss ratio"), Col("p50"), Col("p99"), Col("max", wide=True), Col("flags", text=True, wide=True)]


def show_directions(dirs: dict[str, Direction], us, wide: bool = False) -> None:
    """Each direction of a bidirectional trial: its counts and one-way latency."""
    rows = [[name, eng(d.intended_rate_pps, "pps"), count(d.sent_pkts), count(d.received_pkts),
             count(d.lost_pkts), sci(d.loss_ratio), us(d.latency_p50_ns), us(d.latency_p99_ns),
             us(d.latency_max_ns), ", ".join(d.flags) or "-"] for name, d in dirs.items()]
    console.print(table("per direction (forward: generator -> sink)", DIRECTION_COLS, rows, wide))


def show(r: TrialResult, wide: bool = False) -> None:
    d = r.diagnosis
    us = (lambda v: eng(None if v is None else v / 1e9, "s"))  # ns -> "12.3 µs"
    rows = [
        ("intended load", eng(r.intended_rate_pps, "pps"), ""),
        ("achieved offered load", eng(r.achieved_rate_pps, "pps"), f"{100 * r.achieved_ratio:.3f}% of intended"),
        ("sent (window)", count(r.sent_pkts), "packets"),
        ("received (window)", count(r.received_pkts), "packets"),
        ("lost", count(r.lost_pkts), "packets"),
        ("loss ratio", sci(r.loss_ratio), ""),
        *([("lost, host stalls set apart", count(r.sut_lost_pkts), f"loss ratio {sci(r.sut_loss_ratio)}")]
          if r.loss_explained_by_host_stalls is not None else []),
        ("reordered / duplicated", f"{count(r.reordered_pkts)} / {count(r.duplicate_pkts)}", "packets"),
        ("one-way latency min / mean / max", " / ".join(
            us(v) for v in (r.latency_min_ns, r.latency_mean_ns, r.latency_max_ns)), ""),
        latency_row(r, us),
        *([("RFC 8219 PDV / IPDV max", f"{us(r.rfc8219.pdv_ns)} / {us(r.rfc8219.ipdv_max_ns)}",
            "PDV: p99.9 - min" + (f"; IPDV over {r.rfc8219.ipdv_pkts:,} pairs" if r.rfc8219.ipdv_pkts else
                                   "; IPDV: a campaign's collect.exact_delays"))] if r.rfc8219 is not None else []),
        (f"{d.ingress_ring_of} ingress ring full", count(d.ingress_ring_full_pkts),
         "packets (diagnosis, whole trial)"),
        ("softnet backlog drops", count(d.softnet_dropped_pkts), "packets (diagnosis)"),
        ("qdisc drops (SUT)", count(d.qdisc_dropped_pkts), "packets (diagnosis)"),
        ("interface rx/tx dropped",
         f"{count(d.interface_rx_dropped_pkts)} / {count(d.interface_tx_dropped_pkts)}", "packets (diagnosis)"),
        *shape_rows(r),
    ]
    frames = f"frame mix {r.frame_mix}" if r.frame_mix else f"{r.frame_bytes} B frames"
    title = (f"{r.sut} IPv{r.ip_version}, {frames}, {r.flows} flow(s), "
             f"{r.duration_s} s window after {r.warmup_s} s warm-up")
    if r.directions:
        title = "bidirectional (sums), " + title
        rows = [row for row in rows if not row[0].startswith(("one-way latency", "latency"))]  # per direction below
    console.print(kv_table(title, rows))
    if r.directions:
        show_directions(r.directions, us, wide)
    if r.hosts:  # a trial across an inventory's hosts
        t, u = r.hosts["traffic"], r.hosts["sut"]
        console.print(f"hosts: generator and sink on {t.name} ({t.address}, {t.kernel}), SUT on "
                      f"{u.name} ({u.address}, {u.kernel}); SUT window edges within "
                      f"±{r.window_skew_ms:.1f} ms of the generator's", highlight=False)
    req, obs = r.placement.requested, r.placement.observed
    gens = req.gen_cpus
    console.print(f"placement requested: "
                  f"{f'gen CPUs {gens}' if gens else 'gen CPU ' + str(req.gen_cpu)}, "
                  f"SUT CPUs {req.sut_cpus} "
                  f"({req.steering}); observed: gen CPU {obs.gen_cpu}, sink ran on CPUs "
                  f"{obs.sink_cpus}, NET_RX softirqs per CPU {obs.net_rx_softirqs_per_cpu}", highlight=False)
    if r.path_counters:  # the personality's own counters: proof the packets took its path
        console.print(f"path ({r.sut}): " + ", ".join(f"{k} {count(v)}" for k, v in r.path_counters.items()),
                      highlight=False)
    if r.kernel is not None and r.kernel.per_cpu:
        show_kernel(r.kernel, wide)
    if r.profile is not None:
        show_profile(r.profile, wide)
    if r.host_stalls is not None:
        show_stalls(r)
    if r.valid:
        console.print("[green]valid[/]: " + (f"flags {', '.join(r.flags)} (informational)" if r.flags
                                             else "no flags"))
    else:
        console.print(f"[red]NOT valid[/]: flags {', '.join(r.flags)}")


STALL_COLS = [Col("CPU"), Col("role", text=True), Col("stalls"), Col("total ms"), Col("longest ms"),
              Col("steal ms"), Col("held by", text=True, wide=True)]


def show_stalls(r: TrialResult, wide: bool = False) -> None:
    """Stalls of the data path's CPUs over the trial, and what they explain."""
    h = r.host_stalls
    if h.missing:
        console.print(f"[dim]host stalls: not measured ({h.missing})[/]", highlight=False)
        return
    rows = [[cpu, c.role, count(c.count), f"{c.total_ms:.1f}", f"{c.max_ms:.1f}",
             "" if c.steal_ms is None else f"{c.steal_ms:.0f}", ", ".join(c.by[:3])]
            for cpu, c in sorted(h.per_cpu.items(), key=lambda kv: int(kv[0]))]
    console.print(table("stalls of the data path's CPUs", STALL_COLS, rows, wide))
    console.print(f"[dim]probe: clock every {h.probe.period_ns / 1e6:g} ms, stalls from "
                  f"{h.probe.threshold_ns / 1e6:g} ms; the SUT's ring fills in {h.ring_fill_ms:.2f} ms[/]",
                  highlight=False)
    if h.injected is not None:
        i = h.injected
        got = "" if i.delivered_pct is None else f", {i.delivered_pct:.0f}% delivered"
        console.print(f"injected on CPU {i.cpu}: {i.busy_ms:g} ms every {i.every_ms:g} ms, {i.found} of "
                      f"{i.injected} found{got}", highlight=False)
        if i.disturbed:
            console.print(f"[yellow]disturbed: {i.disturbed}[/]", highlight=False)
    a = r.loss_attribution
    if a is not None:
        console.print(f"loss in time: {a.words}", highlight=False)


KERNEL_COLS = [Col("CPU"), Col("util %"), Col("CPU time %", wide=True), Col("softirq % (tick)"), Col("IRQs/s"),
               Col("NET_RX/s"), Col("NET_TX/s", wide=True), Col("pkts per NET_RX"), Col("squeeze/s"),
               Col("ctx sw/s", wide=True)]


def show_kernel(k: KernelStats, wide: bool = False) -> None:
    """Per-CPU kernel statistics of the measurement window and the normalized cost."""
    rows = [[str(cpu), pct(c.utilization_pct), pct(c.cpu_time_pct), pct(c.softirq_tick_pct),
             eng(c.irqs_per_s), eng(c.net_rx_softirqs_per_s), eng(c.net_tx_softirqs_per_s),
             eng(c.pkts_per_rx_softirq), eng(c.time_squeeze_per_s), eng(c.context_switches_per_s)]
            for cpu, c in sorted(k.per_cpu.items())]
    console.print(table(f"kernel statistics over the {k.window_s:.2f} s window ({k.samples} samples, "
                        f"every {k.interval_s:g} s)", KERNEL_COLS, rows, wide))
    n = k.normalized
    if n.utilization_per_mbps is not None:  # packets were forwarded on the SUT CPUs
        console.print(f"normalized cost over SUT CPUs {n.cpus} at {eng(n.throughput_mbps * 1e6, 'bps')}: "
                      f"utilization {eng(n.utilization_per_mbps)} %/Mbps, {n.cost_basis} "
                      f"{eng(n.cycles_per_mbps)} %/Mbps (dev_weight {k.dev_weight})", highlight=False)
    losses = [f"{role}.{c} {eng(v)}" for role, n in sorted((k.nic or {}).items()) for c, v in n.losses.items()]
    if losses:
        console.print(f"ethtool -S loss counters over the window: {', '.join(losses)}", highlight=False)
    if k.missing:
        console.print(f"[dim]not sampled: {'; '.join(f'{s}: {why}' for s, why in sorted(k.missing.items()))}[/]",
                      highlight=False)


PROFILE_COLS = [Col("CPU"), Col("busy % eBPF"), Col("busy % /proc"), Col("softirq % eBPF"),
                Col("softirq % ticks"), Col("NET_RX % by context", text=True, wide=True), Col("NAPI polls/s"),
                Col("pkts per poll")]


def show_profile(p: ProfileResult, wide: bool = False) -> None:
    """eBPF-measured packet-path time per CPU against /proc/stat, and drops."""
    rows = []
    for cpu, m in sorted(p.per_cpu.items()):
        a = p.audit[cpu]
        rows.append([str(cpu), pct(m.busy_pct), pct(a.reported_busy_pct), pct(m.softirq_pct),
                     pct(a.reported_softirq_pct), by_context(m.net_rx_pct_by_context),
                     eng(m.napi_polls_per_s), eng(m.napi_work_per_poll)])
    console.print(table(f"eBPF profile over the {p.window_s:.2f} s window ({p.plan}) and the CPU accounting "
                        "audit", PROFILE_COLS, rows, wide))
    if p.base_time_share is not None:
        console.print(f"[dim]eBPF figures: {100 * p.base_time_share:.0f}% of the window, scaled "
                      "(--base-duty 1: all of it)[/]", highlight=False)
    for cpu, a in sorted(p.audit.items()):
        console.print(f"audit CPU {cpu}: {a.verdict}", highlight=False)
    for d in p.drops[:5]:
        exact = d.skbs == d.estimated_skbs
        console.print(f"dropped: {count(d.estimated_skbs)} skbs"
                      f"{'' if exact else ' (estimated from ' + count(d.skbs) + ' counted while sampled)'}, "
                      f"{d.reason} on {d.device}", highlight=False)
    show_stages(p, wide)
    show_functions(p, wide)


FUNCTIONS_SHOWN = 12


def show_functions(p: ProfileResult, wide: bool = False) -> None:
    """The kernel functions that took the SUT CPUs' time, by self time (as
    perf report sorts), with their inclusive time beside."""
    f = p.functions
    if f is None:
        if p.functions_missing:
            console.print(f"[dim]kernel functions: {p.functions_missing}[/]", highlight=False)
        return
    rows = [[escape(r.function), eng(r.self_ns_per_pkt), eng(r.incl_ns_per_pkt),
             pct(100 * r.self_samples / f.busy_samples if f.busy_samples else None, 1)]
            for r in sorted(f.functions, key=lambda r: -r.self_samples)[:FUNCTIONS_SHOWN]]
    cpus = ",".join(str(c) for c in f.cpus)
    console.print(table(f"kernel functions on CPU {cpus}, ns per forwarded packet ({f.freq_hz} Hz: "
                        f"{f.busy_samples} busy of {f.samples} samples)",
                        [Col("function", text=True), Col("self"), Col("with callees"), Col("self % busy")],
                        rows, wide))
    console.print(f"busy {eng(f.busy_ns_per_pkt)} ns/pkt; idle {f.idle_samples}, user space {f.user_samples}, "
                  f"no stack {f.lost_samples} samples; the flame graph: softnet stacks RAW (with --raw RAW)",
                  highlight=False)


def show_stages(p: ProfileResult, wide: bool = False) -> None:
    """The stage clock's breakdown on the CPUs that did packet work."""
    if p.stages_missing:
        console.print(f"[dim]stages: {p.stages_missing}[/]")
    cpus = sorted(c for c, s in p.stages.items() if (s.packet_time_pct or 0) >= 1.0)
    if not cpus:
        return
    st = p.stages
    cols = [Col("stage", text=True), Col("timing", text=True, wide=True)]
    cols += [x for c in cpus for x in (Col(f"CPU {c} ns/pkt"), Col(f"CPU {c} %"))]
    rows = []
    for i, row in enumerate(st[cpus[0]].wifi_ap):
        per_cpu = [st[c].wifi_ap[i] for c in cpus]
        if not any(r.ns for r in per_cpu) and row.exactness != "unavailable":
            continue
        rows.append([row.stage, row.exactness,
                     *(x for r in per_cpu for x in (eng(r.ns_per_packet), pct(r.pct_of_cpu, 2)))])
    console.print(table(f"packet-path stages (stage events attached {100 * p.duty:.0f}% of the time, scaled to "
                        "the window)", cols, rows, wide))
    for c in cpus:
        s = st[c]
        q = "" if s.qdisc_enqueued_share is None else \
            f"; transmits through the qdisc {100 * s.qdisc_enqueued_share:.1f}%"
        unseen = p.per_cpu[c].unseen_switches if c in p.per_cpu else None
        u = f"; {unseen} context switches unseen (their spans not counted)" if unseen else ""
        console.print(f"CPU {c}: softirq + NAPI-thread time {s.packet_time_pct:.1f}%, stage coverage "
                      f"{100 * s.coverage:.1f}%{q}{u}", highlight=False)
