"""Wrappers around the native generator and sink (native/gen, native/sink)."""
from __future__ import annotations

import json
import math
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict

from softnet.errors import TestbedError
from softnet.results.trial import MAX_GEN_STREAMS, MAX_TRIAL_PKTS, Number  # noqa: F401 (the sink's bitmap bound)
from softnet.tools.changes import HostChanges
from softnet.tools.process import quit_tool, read_json_line, read_tool, terminate, tool  # noqa: F401

TIMELINE_MAX_BINS = 1 << 21  # native/sink/sink.h SINK_TIMELINE_MAX_BINS
TIMELINE_MAX_RUNS = 20_000  # runs listed by "timeline" (all are counted)
TIMELINE_BIN_S = 1e-3
DRAIN_STABLE_READS, DRAIN_POLL_S, DRAIN_MAX_S = 3, 0.02, 2.0  # a bin: about 1 ms of the generator's schedule


def timeline_bin_pkts(rate_pps: float, total_pkts: int) -> int:
    """Sequence numbers per bin of the sink's timeline (--bin-pkts): about
    1 ms of schedule at rate_pps, grown so that the total_pkts of the trial
    (warm-up included) make at most TIMELINE_MAX_BINS bins."""
    return max(1, round(rate_pps * TIMELINE_BIN_S), math.ceil(total_pkts / TIMELINE_MAX_BINS))


class _Reply(BaseModel):
    """What softnet reads of a native tool's JSON line (the rest is passed on as it came)."""

    model_config = ConfigDict(extra="ignore")


class _SinkHello(_Reply):
    prog_id: int
    xdp_mode: str | None = None  # "native" | "generic" (also in every read)


class _SinkCount(_Reply):
    rx_test_pkts: int


class _TimelineReply(_Reply):
    timeline: dict[str, Any] | None = None  # kept as the sink wrote it (the raw trial's)
    error: Any = None


class _GenFailure(_Reply):
    error: Any = None


class StreamReport(_Reply):
    """One stream's softnet-gen report, the keys merge_reports combines."""

    stream: int | None = None
    sent_pkts: int
    intended_pkts: int
    warmup_pkts: int
    calls: int
    window_late_pkts: int
    late_episodes_total: int
    schedule_start_ns: int
    first_send_ns: int
    window_start_ns: int
    last_send_ns: int
    window_lag_mean_ns: Number
    window_lag_max_ns: Number
    window_due_start_ns: int | None = None
    last_due_ns: int | None = None
    late_episodes: list[list[Number]]  # [first seq, last seq, largest lag ns]
    batch: int
    cpu: int
    interrupted: bool
    error: str
    xdp_mode: str | None = None


def netns_args(ns: str | None) -> list[str]:
    """A native tool's namespace option; None: the current namespace (on a
    remote host, the agent's own)."""
    return [] if ns is None else ["--netns", ns]


class Sink:
    """The XDP sink on the sink interface, alive for one trial."""

    def __init__(self, changes: HostChanges, ns: str, ifname: str, count: int, warmup: int, exact: int = 0,
                 bin_pkts: int = 0, streams: int = 1, flows: int = 1, mix: str | None = None, dst_ports: int = 1):
        """``bin_pkts``: keep the timeline (largest delay per bin of that many
        seqs) and answer `timeline()`; timeline_bin_pkts() gives ~1 ms bins.
        ``streams``: the generators of a GeneratorGroup; reordering is judged
        within each one's seqs (seq % streams). ``flows``: window packets
        counted per flow seq % flows ("flow_pkts" in every read); ``mix``: the
        generator's --mix, counted per size ("size_pkts", "window_frame_bytes");
        ``dst_ports``: the generator's --dst-ports (test frames' ports)."""
        argv = [str(tool("sink")), *netns_args(ns), "--ifname", ifname, "--count", str(count),
                "--warmup", str(warmup)]
        if exact:  # every delay kept too: for checking the histogram, not for long trials
            argv += ["--exact", str(exact)]
        if bin_pkts:
            argv += ["--bin-pkts", str(bin_pkts)]
        if streams > 1:
            argv += ["--streams", str(streams)]
        if flows > 1:
            argv += ["--flows", str(flows)]
        if mix is not None:
            argv += ["--mix", mix]
        if dst_ports > 1:
            argv += ["--dst-ports", str(dst_ports)]
        self.proc = None
        changes.record(f"XDP sink program on {ns}/{ifname}", self.close)  # before it exists: no leak window
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        hello = _SinkHello.model_validate(read_json_line(self.proc, "softnet-sink did not start", 10))
        self.prog_id = hello.prog_id
        self.xdp_mode = hello.xdp_mode

    def read(self) -> dict:
        return read_tool(self.proc, "softnet-sink")

    def timeline(self, sent: int, timeout: float = 30) -> dict:
        """Where the window's losses sit in the sequence, and the largest delay
        per bin: the sink's "timeline" answer (docs/explanation/generator.md, "Loss in
        time"). ``sent``: the generator's sent_pkts (warm-up included), asked
        after the drain so nothing is in flight. Needs ``bin_pkts``."""
        if self.proc.poll() is not None:
            raise TestbedError(f"softnet-sink died (exit {self.proc.returncode}): {self.proc.stderr.read().strip()}")
        self.proc.stdin.write(f"timeline {int(sent)}\n")
        self.proc.stdin.flush()
        reply = read_json_line(self.proc, "softnet-sink timeline", timeout)
        answer = _TimelineReply.model_validate(reply)
        if answer.timeline is None:
            raise TestbedError(f"softnet-sink timeline: {answer.error if answer.error is not None else reply}")
        return answer.timeline

    def drain(self) -> tuple[dict, float]:
        """Read until the counters stop moving (nothing left in flight):
        the counts and how long that took."""
        start = time.monotonic()
        last, stable = self.read(), 0
        while stable < DRAIN_STABLE_READS and time.monotonic() - start < DRAIN_MAX_S:
            time.sleep(DRAIN_POLL_S)
            cur = self.read()
            same = _SinkCount.model_validate(cur).rx_test_pkts == _SinkCount.model_validate(last).rx_test_pkts
            stable = stable + 1 if same else 0
            last = cur
        return last, time.monotonic() - start

    def close(self) -> None:
        quit_tool(self.proc)


@dataclass
class Shape:
    """A traffic shape's generator options (docs/how-to/traffic.md); the defaults
    add nothing to the command line."""

    dst_ips: int = 1
    dst_ip: str | None = None  # the first destination (default: the endpoint's)
    dst_ports: int = 1
    mix: str | None = None  # softnet-gen --mix (then no --size)
    arrivals: str = "const"
    seed: int = 1
    burst_pkts: int = 32
    on_duty: float = 0.5
    step_seq: int | None = None  # a rate step: from this seq on...
    step_rate_pps: float | None = None  # ...this rate (all streams)
    sleep_gaps_ns: int | None = None  # sleep, not spin, through gaps this long (a CPU shared with another)
    hold_until_ns: int | None = None  # exit no sooner (CLOCK_MONOTONIC): not during a partner's burst

    def argv(self) -> list[str]:
        out = []
        if self.sleep_gaps_ns is not None:
            out += ["--sleep-gaps", str(self.sleep_gaps_ns)]
        if self.hold_until_ns is not None:
            out += ["--hold-until", str(self.hold_until_ns)]
        if self.step_seq is not None:
            out += ["--step-at", str(self.step_seq), "--step-rate", repr(float(self.step_rate_pps))]
        if self.dst_ips != 1:
            out += ["--dst-ips", str(self.dst_ips)]
        if self.dst_ports != 1:
            out += ["--dst-ports", str(self.dst_ports)]
        if self.mix is not None:
            out += ["--mix", self.mix]
        if self.arrivals != "const":
            out += ["--arrivals", self.arrivals]
            if self.arrivals == "poisson":
                out += ["--seed", str(self.seed)]
            if self.arrivals == "onoff":
                out += ["--burst", str(self.burst_pkts), "--duty", repr(float(self.on_duty))]
        return out


@dataclass
class GeneratorJob:
    """A running softnet-gen; `wait()` returns its JSON report."""

    proc: subprocess.Popen
    out: IO[str]  # its report: a file, not a pipe (a report beyond the pipe's 64 KiB would block its exit)
    err: IO[str]

    @classmethod
    def start(cls, changes: HostChanges, ep, rate_pps: float, count: int, warmup: int,
              frame_bytes: int, flows: int, cpu: int, *, src_ips: int = 1, src_ip: str | None = None,
              streams: int = 1, stream: int = 0, t0_ns: int | None = None,
              anchor: str | None = None, shape: Shape | None = None) -> "GeneratorJob":
        """One softnet-gen. The keyword options are added to its command line
        only when they differ from their defaults (the single generator's
        command line is what it always was): ``src_ips`` source addresses from
        ``src_ip`` (default ep.src_ip) up; stream ``stream`` of ``streams`` on
        the schedule starting at ``t0_ns`` (CLOCK_MONOTONIC); its own
        ``anchor`` (default ep.anchor_if); ``shape``: destinations, frame
        mix, arrivals (with a mix, --mix replaces --size)."""
        shape = shape or Shape()
        size = ["--size", str(frame_bytes)] if shape.mix is None else []
        argv = [str(tool("gen")), *netns_args(ep.gen_ns), "--ifname", ep.gen_if, "--anchor", anchor or ep.anchor_if,
                "--src-mac", ep.gen_mac, "--dst-mac", ep.next_hop_mac, "--src-ip", src_ip or ep.src_ip,
                "--dst-ip", shape.dst_ip or ep.dst_ip, *size, "--rate", repr(float(rate_pps)),
                "--count", str(count), "--warmup", str(warmup), "--flows", str(flows), "--cpu", str(cpu)]
        if src_ips != 1:
            argv += ["--src-ips", str(src_ips)]
        if streams != 1:
            argv += ["--streams", str(streams), "--stream", str(stream)]
        if t0_ns is not None:
            argv += ["--t0-ns", str(t0_ns)]
        argv += shape.argv()
        out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        job = cls(proc, out, err)
        changes.record(f"generator on {ep.gen_ns}/{ep.gen_if} (pid {proc.pid})", job.stop)
        return job

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        terminate(self.proc)

    def interrupt(self) -> None:
        """Ask it to stop now: it reports what it sent, flagged interrupted."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def wait(self, timeout: float) -> dict:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise TestbedError(f"softnet-gen did not finish within {timeout:.0f} s") from None
        out, err = (self._read(f) for f in (self.out, self.err))
        if self.proc.returncode < 0:
            raise TestbedError(f"softnet-gen was killed by signal {-self.proc.returncode}")
        report = json.loads(out) if out.strip().startswith("{") else {}
        if self.proc.returncode != 0 or not report:
            why = _GenFailure.model_validate(report).error or err.strip()
            raise TestbedError(f"softnet-gen failed (exit {self.proc.returncode}): {why}")
        return report

    @staticmethod
    def _read(f: IO[str]) -> str:
        f.seek(0)
        text = f.read()
        f.close()
        return text


# Extra anchors (an interface holds one XDP program: each stream needs its own)
# are named like the testbed's own links, sn + 6 hex digits + a letter, so that
# `softnet clean` recognises a leftover; these letters are not taken by the
# testbed (g, a, b, i, o, k). Two anchors per veth pair (both ends).
EXTRA_ANCHOR_LETTERS = "cdefhjlmnpqrstuvwxyz"
assert MAX_GEN_STREAMS == 1 + len(EXTRA_ANCHOR_LETTERS)
# The streams' common t0 lies this far ahead of their start: each process loads
# and verifies its program first (about 10-40 ms each here, in parallel; a
# process that starts late catches up and reports it as a late episode).
GROUP_LEAD_S = 0.25


def extra_anchors(changes: HostChanges, ns: str | None, first_anchor: str, n: int) -> list[str]:
    """``n`` more idle anchors next to ``first_anchor`` in namespace ``ns``
    (None: this one): veth pairs left down, deleted when ``changes`` is
    undone; a pair still there from an earlier group under the same changes
    is used again."""
    from pyroute2 import IPRoute

    if n > len(EXTRA_ANCHOR_LETTERS):
        raise TestbedError(f"{n + 1} generator streams: at most {MAX_GEN_STREAMS} (one anchor each)")
    stem = first_anchor[:-1]
    names = [stem + c for c in EXTRA_ANCHOR_LETTERS[:n + n % 2]]
    kw = {} if ns is None else {"netns": ns}
    for a, b in zip(names[::2], names[1::2]):
        with IPRoute(**kw) as ipr:
            if ipr.link_lookup(ifname=a) and ipr.link_lookup(ifname=b):
                continue
        def undo(a=a):
            if ns is not None and not (Path("/run/netns") / ns).exists():
                return  # gone with its namespace
            with IPRoute(**kw) as ipr:
                idx = ipr.link_lookup(ifname=a)
                if idx:
                    ipr.link("del", index=idx[0])
        changes.record(f"generator anchor veth {ns or ''}/{a} <-> {b}", undo)
        with IPRoute(**kw) as ipr:
            ipr.link("add", ifname=a, kind="veth", num_tx_queues=1, num_rx_queues=1,
                     peer={"ifname": b, "num_tx_queues": 1, "num_rx_queues": 1})
    return names[:n]


def merge_reports(reports: list[dict], cpus: list[int] | None = None) -> dict:
    """One report with the single generator's keys from the reports of the
    streams of one schedule (softnet-gen --streams N --stream K, K = 0..N-1),
    so softnet.analysis.trial_eval.evaluate reads it as it reads one
    generator's: counts summed; first/window-start send times the earliest,
    the last one the latest (evaluate's achieved rate, (window packets - 1) /
    (last - window start), is then the aggregate's); the window's mean lag
    weighted by each stream's window packets, its maximum the largest; the
    late episodes of all streams in seq order (each stream's first and last
    seq are its own: an episode of stream K spans the other streams' seqs in
    between). ``cpus``: the CPUs asked for, stream by stream: "cpu" is the
    first stream's CPU when every stream ran where asked, else -1 (the
    placement check then fails); "cpus" lists where each ran. The reports
    themselves are kept under "streams", in stream order."""
    parsed = sorted(((StreamReport.model_validate(r), r) for r in reports),
                    key=lambda pr: pr[0].stream if pr[0].stream is not None else 0)
    reports = [r for _, r in parsed]
    if len(reports) == 1:
        return reports[0]
    rs = [p for p, _ in parsed]
    sent = [r for r in rs if r.sent_pkts]
    windows = [max(r.sent_pkts - r.warmup_pkts, 0) for r in rs]
    # the group's schedule span, when every stream reports its own
    due = all(r.window_due_start_ns is not None for r in rs)
    observed = [r.cpu for r in rs]
    modes = sorted({r.xdp_mode for r in rs} - {None})
    # the first stream's report with the merged values: its keys keep their order, new ones follow in this
    return {**reports[0], **{
        "sent_pkts": sum(r.sent_pkts for r in rs), "intended_pkts": sum(r.intended_pkts for r in rs),
        "warmup_pkts": sum(r.warmup_pkts for r in rs), "calls": sum(r.calls for r in rs),
        "window_late_pkts": sum(r.window_late_pkts for r in rs),
        "late_episodes_total": sum(r.late_episodes_total for r in rs),
        "schedule_start_ns": min(r.schedule_start_ns for r in rs),
        "first_send_ns": min((r.first_send_ns for r in sent if r.first_send_ns), default=0),
        "window_start_ns": min((r.window_start_ns for r in sent if r.window_start_ns), default=0),
        "last_send_ns": max((r.last_send_ns for r in sent if r.last_send_ns), default=0),
        "window_lag_mean_ns": (sum(w * r.window_lag_mean_ns for w, r in zip(windows, rs)) / sum(windows)
                               if sum(windows) else 0.0),
        "window_lag_max_ns": max(r.window_lag_max_ns for r in rs),
        **({"window_due_start_ns": min((r.window_due_start_ns for r in rs if r.window_due_start_ns), default=0),
            "last_due_ns": max(r.last_due_ns for r in rs)} if due else {}),
        "late_episodes": sorted((e for r in rs for e in r.late_episodes), key=lambda e: (e[0], e[1])),
        "batch": max(r.batch for r in rs),
        "cpus": observed,
        "cpu": observed[0] if cpus is None or observed == list(cpus) else -1,
        "interrupted": any(r.interrupted for r in rs),
        "error": "; ".join(f"stream {r.stream if r.stream is not None else k}: {r.error}"
                           for k, r in enumerate(rs) if r.error),
        "xdp_mode": modes[0] if len(modes) == 1 else "/".join(modes) or None,
        "stream": None,  # all of them
        "streams": reports,
    }}


class GeneratorGroup:
    """One softnet-gen per CPU of ``cpus``, streams of one schedule: together
    they send ``rate_pps`` (each rate_pps / N), every seq exactly once, from a
    common t0 slightly in the future. `wait()` gives the merged report
    (merge_reports). With one CPU it is GeneratorJob as it always was."""

    def __init__(self, jobs: list[GeneratorJob], cpus: list[int], t0_ns: int | None):
        self.jobs, self.cpus, self.t0_ns = jobs, cpus, t0_ns

    @classmethod
    def start(cls, changes: HostChanges, ep, rate_pps: float, count: int, warmup: int, frame_bytes: int,
              flows: int, cpus: list[int], *, src_ips: int = 1, src_ip: str | None = None,
              lead_s: float = GROUP_LEAD_S, anchors: list[str] | None = None,
              shape: Shape | None = None, t0_ns: int | None = None) -> "GeneratorGroup":
        """``anchors``: one idle interface per CPU, made by the caller (the
        remote agent journals its own); None: made here, through ``changes``.
        ``t0_ns``: the schedule's origin (CLOCK_MONOTONIC), shared with
        another group's (interleaved bursts); None: ``lead_s`` from now with
        several CPUs, the generator's own start with one."""
        cpus = list(cpus)
        if not cpus or len(set(cpus)) != len(cpus):
            raise TestbedError(f"generator CPUs {cpus}: one or more, each once")
        if len(cpus) == 1:
            return cls([GeneratorJob.start(changes, ep, rate_pps, count, warmup, frame_bytes, flows, cpus[0],
                                           src_ips=src_ips, src_ip=src_ip, shape=shape, t0_ns=t0_ns)], cpus, t0_ns)
        if anchors is None:
            anchors = [ep.anchor_if, *extra_anchors(changes, ep.gen_ns, ep.anchor_if, len(cpus) - 1)]
        elif len(anchors) != len(cpus):
            raise TestbedError(f"{len(anchors)} anchor interfaces for {len(cpus)} generator CPUs")
        t0 = t0_ns or time.monotonic_ns() + int(lead_s * 1e9)  # CLOCK_MONOTONIC, bpf_ktime_get_ns()'s clock
        group = cls([], cpus, t0)
        try:
            for k, (cpu, anchor) in enumerate(zip(cpus, anchors)):
                group.jobs.append(GeneratorJob.start(changes, ep, rate_pps, count, warmup, frame_bytes, flows, cpu,
                                                     src_ips=src_ips, src_ip=src_ip, streams=len(cpus), stream=k,
                                                     t0_ns=t0, anchor=anchor, shape=shape))
        except BaseException:
            group.stop()
            raise
        return group

    @property
    def proc(self):
        """The first stream's process (what GeneratorJob callers poll);
        running() covers them all."""
        return self.jobs[0].proc

    def running(self) -> bool:
        return any(j.running() for j in self.jobs)

    def stop(self) -> None:
        for j in self.jobs:
            j.stop()

    def interrupt(self) -> None:
        for j in self.jobs:
            j.interrupt()

    def wait(self, timeout: float) -> dict:
        """Every stream's report, merged; the first failure (after stopping
        the others) raises TestbedError naming its stream."""
        if len(self.jobs) == 1:
            return self.jobs[0].wait(timeout)
        deadline = time.monotonic() + timeout
        reports = []
        for k, job in enumerate(self.jobs):
            try:
                reports.append(job.wait(max(deadline - time.monotonic(), 0.0)))
            except TestbedError as exc:
                self.stop()
                raise TestbedError(f"generator stream {k} of {len(self.jobs)} (CPU {self.cpus[k]}): {exc}") from None
        return merge_reports(reports, self.cpus)
