"""`softnet trial`: one measurement on the local testbed."""
from __future__ import annotations

from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from softnet.analysis.cpu_audit import by_context
from softnet.cli.output import console, err_console, kv_table, print_json
from softnet.errors import InputError
from softnet.tools.changes import HostChanges
from softnet.testbed.local import LocalTestbed, Placement
from softnet.campaign.trial import TrialSpec, run_trial
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


def build_placement(gen_cpu: int | None, sut_cpus: str | None, sink_cpu: int | None, steering: str) -> Placement:
    p = Placement.default()
    if gen_cpu is not None:
        p.gen_cpu = gen_cpu
    if sut_cpus is not None:
        p.sut_cpus = parse_cpus(sut_cpus, "--sut-cpus")
    p.sink_cpu, p.steering = sink_cpu, steering
    p.validate()
    return p


def run(sut: str, rate: str, duration: float, warmup: float, size: int, flows: int, rate_layer: str,
        placement: Placement, as_json: bool, sample_interval_s: float | None = 1.0, profile: bool = False,
        profile_duty: float = 0.02) -> dict:
    with HostChanges() as changes:
        tb = LocalTestbed(changes, sut, placement)  # validates SUT and CPUs; touches nothing
        spec = TrialSpec(rate_pps=parse_rate(rate, size, rate_layer), duration_s=duration,
                         warmup_s=warmup, frame_bytes=size, flows=flows, sample_interval_s=sample_interval_s,
                         profile=profile, profile_duty=profile_duty)
        spec.validate(tb.ip_version)  # all input checked before the host is changed
        ep = tb.build()
        if as_json:
            result = run_trial(tb, ep, spec, changes)
        else:
            with Progress(TextColumn("[bold]trial[/] {task.description}"), BarColumn(),
                          TextColumn("{task.percentage:>3.0f}%"), TimeRemainingColumn(),
                          console=err_console, transient=True) as bar:
                task = bar.add_task(f"{sut} at {format_rate(spec.rate_pps)}", total=1.0)
                result = run_trial(tb, ep, spec, changes, progress=lambda f: bar.update(task, completed=f))
    result["rate_text"], result["rate_layer"] = rate, rate_layer
    if as_json:
        print_json(result)
    else:
        show(result)
    return result


def show(r: dict) -> None:
    d = r["diagnosis"]
    rows = [
        ("intended load", r["intended_rate_pps"], "pps"),
        ("achieved offered load", r["achieved_rate_pps"], f"pps ({100 * r['achieved_ratio']:.3f}% of intended)"),
        ("sent (window)", r["sent_pkts"], "packets"),
        ("received (window)", r["received_pkts"], "packets"),
        ("lost", r["lost_pkts"], "packets"),
        ("loss ratio", r["loss_ratio"], ""),
        ("reordered / duplicated", f"{r['reordered_pkts']:,} / {r['duplicate_pkts']:,}", "packets"),
        ("one-way latency min / mean / max", " / ".join(
            "-" if v is None else f"{v / 1000:.1f}" for v in
            (r["latency_min_ns"], r["latency_mean_ns"], r["latency_max_ns"])), "us"),
        ("latency p99 (upper bound)", None if r["latency_p99_upper_ns"] is None else r["latency_p99_upper_ns"] / 1000,
         "us (log2 histogram bucket edge)"),
        (f"{d['ingress_ring_of']} ingress ring full", d["ingress_ring_full_pkts"], "packets (diagnosis, whole trial)"),
        ("softnet backlog drops", d["softnet_dropped_pkts"], "packets (diagnosis)"),
        ("qdisc drops (SUT)", d["qdisc_dropped_pkts"], "packets (diagnosis)"),
        ("interface rx/tx dropped", f"{d['interface_rx_dropped_pkts']:,} / {d['interface_tx_dropped_pkts']:,}",
         "packets (diagnosis)"),
    ]
    title = (f"{r['sut']} IPv{r['ip_version']}, {r['frame_bytes']} B frames, {r['flows']} flow(s), "
             f"{r['duration_s']} s window after {r['warmup_s']} s warm-up")
    console.print(kv_table(title, rows))
    pl = r["placement"]
    obs = pl["observed"]
    console.print(f"placement requested: gen CPU {pl['requested']['gen_cpu']}, SUT CPUs {pl['requested']['sut_cpus']} "
                  f"({pl['requested']['steering']}); observed: gen CPU {obs['gen_cpu']}, sink ran on CPUs "
                  f"{obs['sink_cpus']}, NET_RX softirqs per CPU {obs['net_rx_softirqs_per_cpu']}")
    if (r.get("kernel") or {}).get("per_cpu"):
        show_kernel(r["kernel"])
    if r.get("profile"):
        show_profile(r["profile"])
    if r["valid"]:
        console.print("[green]valid[/]: no flags")
    else:
        console.print(f"[red]NOT valid[/]: flags {', '.join(r['flags'])}")


def show_kernel(k: dict) -> None:
    """Per-CPU kernel statistics of the measurement window and the normalized cost."""
    t = Table(title=f"kernel statistics over the {k['window_s']:.2f} s window ({k['samples']} samples, "
                    f"every {k['interval_s']:g} s)", header_style="bold")
    for col in ("CPU", "utilization %", "CPU time %", "softirq (tick) %", "IRQs/s", "NET_RX/s", "NET_TX/s",
                "pkts / NET_RX", "squeeze/s", "ctx sw/s"):
        t.add_column(col, justify="right")

    def f(v, fmt="{:,.1f}"):
        return "-" if v is None else fmt.format(v)

    for cpu, c in sorted(k["per_cpu"].items(), key=lambda kv: int(kv[0])):
        t.add_row(str(cpu), f(c["utilization_pct"]), f(c["cpu_time_pct"]), f(c["softirq_tick_pct"]),
                  f(c["irqs_per_s"], "{:,.0f}"), f(c["net_rx_softirqs_per_s"], "{:,.0f}"),
                  f(c["net_tx_softirqs_per_s"], "{:,.0f}"), f(c["pkts_per_rx_softirq"]),
                  f(c["time_squeeze_per_s"]), f(c["context_switches_per_s"], "{:,.0f}"))
    console.print(t)
    n = k["normalized"]
    if "utilization_per_mbps" in n:
        console.print(f"normalized cost over SUT CPUs {n['cpus']} at {n['throughput_mbps']:,.1f} Mbps: "
                      f"utilization {n['utilization_per_mbps']:.4f} %/Mbps, {n['cost_basis']} "
                      f"{n['cycles_per_mbps']:.4f} %/Mbps (dev_weight {k['dev_weight']})")
    if k["missing"]:
        console.print(f"[dim]not sampled: {'; '.join(f'{s}: {why}' for s, why in sorted(k['missing'].items()))}[/]")


def show_profile(p: dict) -> None:
    """eBPF-measured packet-path time per CPU against /proc/stat, and drops."""
    t = Table(title=f"eBPF profile over the {p['window_s']:.2f} s window ({p['plan']}) and the CPU accounting audit",
              header_style="bold")
    for col in ("CPU", "busy % (eBPF)", "busy % (/proc/stat)", "softirq % (eBPF)", "softirq % (ticks)",
                "NET_RX % by context", "NAPI polls/s", "pkts/poll"):
        t.add_column(col, justify="right")
    for cpu, m in sorted(p["per_cpu"].items(), key=lambda kv: int(kv[0])):
        a = p["audit"][cpu]
        ctx = by_context(m["net_rx_pct_by_context"])
        t.add_row(str(cpu), f"{m['busy_pct']:.1f}", f"{a.get('reported_busy_pct', float('nan')):.1f}",
                  f"{m['softirq_pct']:.1f}", f"{a.get('reported_softirq_pct', float('nan')):.1f}", ctx,
                  f"{m['napi_polls_per_s']:,.0f}",
                  "-" if m["napi_work_per_poll"] is None else f"{m['napi_work_per_poll']:.1f}")
    console.print(t)
    for cpu, a in sorted(p["audit"].items(), key=lambda kv: int(kv[0])):
        console.print(f"audit CPU {cpu}: {a['verdict']}")
    for d in p["drops"][:5]:
        exact = d["skbs"] == d["estimated_skbs"]
        console.print(f"dropped: {d['estimated_skbs']:,} skbs{'' if exact else ' (estimated from ' + format(d['skbs'], ',') + ' counted while sampled)'}, "
                      f"{d['reason']} on {d['device']}")
    show_stages(p)


def show_stages(p: dict) -> None:
    """The stage clock's breakdown on the CPUs that did packet work."""
    if p.get("stages_missing"):
        console.print(f"[dim]stages: {p['stages_missing']}[/]")
    cpus = sorted((c for c, s in p.get("stages", {}).items() if (s["packet_time_pct"] or 0) >= 1.0), key=int)
    if not cpus:
        return
    st = p["stages"]
    t = Table(title=f"packet-path stages (stage events attached {100 * p['duty']:.0f}% of the time, scaled to the "
                    "window)", header_style="bold")
    t.add_column("stage")
    t.add_column("timing")
    for c in cpus:
        t.add_column(f"CPU {c} ns/pkt", justify="right")
        t.add_column(f"CPU {c} %", justify="right")
    for i, row in enumerate(st[cpus[0]]["wifi_ap"]):
        rows = [st[c]["wifi_ap"][i] for c in cpus]
        if not any(r["ns"] for r in rows) and row["exactness"] != "unavailable":
            continue
        cells = [x for r in rows for x in ("-" if r["ns_per_packet"] is None else f"{r['ns_per_packet']:,.0f}",
                                              f"{r['pct_of_cpu']:.2f}")]
        t.add_row(row["stage"], row["exactness"], *cells)
    console.print(t)
    for c in cpus:
        s = st[c]
        q = "" if s.get("qdisc_enqueued_share") is None else f"; transmits through the qdisc {100 * s['qdisc_enqueued_share']:.1f}%"
        console.print(f"CPU {c}: softirq + NAPI-thread time {s['packet_time_pct']:.1f}%, stage coverage "
                      f"{100 * s['coverage']:.1f}%{q}")
