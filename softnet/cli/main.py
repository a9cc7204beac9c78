"""softnet command line."""
from __future__ import annotations

import os
import re
import sys
from contextlib import nullcontext

import typer

from softnet import __version__, interrupts
from pathlib import Path

from softnet.cli.output import console, err_console, print_error, print_json
from softnet.errors import InputError, SoftnetError
from softnet.tools.changes import Terminated
from softnet.testbed.personalities import names as personality_names

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="softnet: a lab for the Linux packet data path.")


JSON_HELP = "print the result as JSON (for scripts) instead of tables"


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        console.print(f"softnet {version('softnet')}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="print softnet's version and exit")) -> None:
    """softnet: a lab for the Linux packet data path."""


def need_root() -> None:
    if os.geteuid() != 0:
        raise SoftnetError("softnet needs root to build namespaces and load eBPF programs")


WAIT_HELP = "if another run holds the testbed, wait up to this many seconds for it (0: refuse at once)"


def wait_option():
    return typer.Option(0.0, "--wait", envvar="SOFTNET_WAIT", help=WAIT_HELP)


def scheduler_option():
    return typer.Option(None, "--scheduler", help="tcp://HOST:PORT: run on the testbeds of a fleet, through its "
                        "Dask scheduler (docs/how-to/fleet.md)")


def wide_option():
    return typer.Option(False, "--wide", help="all table columns (wider than 80 characters)")


P_LAB = "A lab's part"


def lab_options():
    """--testbed, --kernel, --driver of the read commands: which part of a lab's trials they look at."""
    return (typer.Option(None, "--testbed", metavar="NAME", rich_help_panel=P_LAB,
                         help="only trials measured on this testbed (a fleet's or an inventory's; 'local': one "
                         "host); repeat for several"),
            typer.Option(None, "--kernel", metavar="RELEASE", rich_help_panel=P_LAB,
                         help="only trials whose SUT host ran this kernel release (uname -r); repeat for several"),
            typer.Option(None, "--driver", metavar="DRIVER", rich_help_panel=P_LAB,
                         help="only trials whose SUT host's interfaces use this NIC driver ('veth': namespaces); "
                         "repeat for several"))


LAB_TESTBED, LAB_KERNEL, LAB_DRIVER = lab_options()


def slice_lab(paths: list[Path], testbed: list[str] | None, kernel: list[str] | None,
              driver: list[str] | None) -> None:
    """Every store this command reads shows only the trials of the testbeds,
    kernels and drivers asked for (and the campaigns and cells that have
    any); a value none of the paths' trials has is an error listing those
    they have."""
    from softnet.results import store

    lab = store.LabSlice(tuple(testbed or ()), tuple(kernel or ()), tuple(driver or ()))
    if not lab:
        return
    stores = [p for p in paths if store.is_store_dir(p)]
    if not stores:
        raise InputError("--testbed" if testbed else "--kernel" if kernel else "--driver",
                         "a lab's part is read from softnet results directories or their exports")
    known: dict[str, set[str]] = {"testbed": set(), "kernel": set(), "driver": set()}
    for p in stores:
        with store.Store(p, read_only=True) as st:
            for what, values in st.lab_values().items():
                known[what] |= set(values)
    for what, asked in (("testbed", lab.testbeds), ("kernel", lab.kernels), ("driver", lab.drivers)):
        for value in asked:
            if value not in known[what]:
                raise InputError(f"--{what}", f"'{value}': no trial was measured on it ({what}s here: "
                                 f"{', '.join(sorted(known[what])) or 'none'})")
    store.slice_lab(lab)


def measuring(results: Path | None, wait: float, real: bool = True):
    """The testbed lock for a measuring run (softnet.testbed.lock); a simulated
    SUT (``real`` false) touches no testbed and takes none. Once it holds the
    lock, what a killed run left on this host is restored first."""
    interrupts.checkpoint("spec")  # every measuring command comes here once its spec is checked
    interrupts.check()  # one swallowed while the options and the spec were read
    from softnet.testbed.lock import describe, testbed_lock

    if not wait >= 0:
        raise InputError("--wait", f"{wait} is not a number of seconds >= 0")
    if not real:
        return nullcontext()
    return _restoring(testbed_lock(results, wait, on_wait=lambda h: err_console.print(
        f"waiting up to {wait:g} s for the testbed, in use by {describe(h)}", markup=False, highlight=False)))


def _restoring(lock):
    from softnet.testbed import cleanup

    return cleanup.restoring(lock, lambda counts: err_console.print(
        f"restored what a killed run left: {', '.join(counts)}", markup=False, highlight=False))


def check_store(results: Path, running_ok: bool = False) -> None:
    """Open the results store once, so a corrupt or foreign softnet.duckdb is
    an error naming the file, whichever command reads it next; ``running_ok``:
    a store a run is writing is fine (`serve` reads its raw files meanwhile)."""
    import duckdb

    from softnet.results.store import DB_NAME, Store

    if Path(results).exists() and not Path(results).is_dir():
        raise InputError(str(results), "not a directory: a results store is a directory (made when missing)")
    db = Path(results) / DB_NAME
    if not db.exists():
        return
    try:
        Store(results, read_only=True).close()
    except (duckdb.Error, OSError) as exc:
        held = re.search(r"Conflicting lock is held in (.+?) \(PID (\d+)\)", str(exc))
        if held and running_ok:
            return
        if held:  # DuckDB has one writer: a campaign still running into this folder
            raise SoftnetError(f"{db}: in use by pid {held.group(2)} ({held.group(1)}), a run still writing "
                               "there; wait for it to end or use another --results folder") from None
        raise InputError(str(db), f"not a readable softnet results store ({first_line(exc)})") from None


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


@app.command()
def version() -> None:
    """Print the softnet version."""
    print(__version__)


BASE_DUTY_HELP = ("share of time the other programs (softirq, irq, switch, poll) are attached, at least --duty; "
                  "below 1 their figures are estimates scaled from that time")
STACK_HZ_HELP = ("kernel stacks sampled per second on each SUT CPU: time by kernel function (0: none; "
                 "10..20000)")
# the panels of `softnet trial`, `search` and `compare --help`
P_LOAD, P_TRAFFIC, P_PLACEMENT, P_COLLECT, P_REAL, P_OUTPUT = (
    "Load", "Traffic shape", "Placement", "Collect", "Real hosts and NICs", "Output")
P_GOALS, P_BUDGET, P_VARIANTS, P_DECIDE = "Goals", "Loads and budget", "Variants and metrics", "Verdicts and stopping"
P_HOSTS = "Real hosts"


@app.command()
def trial(
    sut: str = typer.Option("ipv4-fwd", help="SUT personality as name:key=value,... (e.g. nft-fw:rules=1000,"
                            "conntrack=on; docs/reference/personalities.md): " + ", ".join(personality_names())),
    rate: str = typer.Option(..., "--rate", "--load", help="offered load: 200kpps, 1.5Mpps, 500Mbps (bit rates "
                             "on --rate-layer)", rich_help_panel=P_LOAD),
    duration: float = typer.Option(5.0, help="measurement window, seconds", rich_help_panel=P_LOAD),
    warmup: float = typer.Option(1.0, help="warm-up before the window, seconds (its packets are not counted)",
                                 rich_help_panel=P_LOAD),
    size: int = typer.Option(64, help="frame size in bytes incl. FCS (64..1518; IPv6 needs >= 82)",
                             rich_help_panel=P_LOAD),
    flows: int = typer.Option(1, help="number of flows (UDP source ports)", rich_help_panel=P_LOAD),
    rate_layer: str = typer.Option("l1", help="bit rates computed on l1 (frame + 20 B) or l2 (frame) size",
                                   rich_help_panel=P_LOAD),
    gen_cpu: int = typer.Option(None, help="CPU of the generator (default: first CPU)", rich_help_panel=P_PLACEMENT),
    sut_cpus: str = typer.Option(None, help="CPUs of the SUT packet processing, e.g. 1 or 1-3 (default: the others)",
                                 rich_help_panel=P_PLACEMENT),
    sink_cpu: int = typer.Option(None, help="pin the sink's NAPI to this CPU (default: where the SUT sends it)",
                                 rich_help_panel=P_PLACEMENT),
    steering: str = typer.Option("threaded", help="how SUT work reaches its CPUs: threaded (NAPI kthread) or rps",
                                 rich_help_panel=P_PLACEMENT),
    sample_interval: float = typer.Option(1.0, help="kernel statistics sampling interval, s (0.1..10; 0: off)",
                                          rich_help_panel=P_COLLECT),
    profile: bool = typer.Option(False, "--profile", help="eBPF packet-path profile and CPU accounting audit",
                                 rich_help_panel=P_COLLECT),
    duty: float = typer.Option(0.02, help="with --profile: share of time the per-packet stage events are attached",
                               rich_help_panel=P_COLLECT),
    base_duty: float = typer.Option(0.2, help=f"with --profile: {BASE_DUTY_HELP}",
                                    rich_help_panel=P_COLLECT),
    stack_hz: int = typer.Option(499, help=f"with --profile: {STACK_HZ_HELP}", rich_help_panel=P_COLLECT),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON", rich_help_panel=P_OUTPUT),
    wide: bool = wide_option(),
    wait: float = wait_option(),
    raw: Path = typer.Option(None, "--raw", help="also write the raw trial (what was read) to this JSON file",
                             rich_help_panel=P_OUTPUT),
    stall_probe: bool = typer.Option(True, "--stall-probe/--no-stall-probe",
                                     help="watch the data path's CPUs for stalls (softnet-stalls)",
                                     rich_help_panel=P_COLLECT),
    stall_period_us: int = typer.Option(2000, help="the stall probe's clock on a busy CPU, us (gaps from "
                                        "period + 0.2 ms are seen; shorter costs more)", rich_help_panel=P_COLLECT),
    inject_stall: str = typer.Option(None, help="take a CPU away BUSY_MS every EVERY_MS, e.g. 5/500 (SCHED_FIFO)",
                                     rich_help_panel=P_COLLECT),
    inject_cpu: int = typer.Option(None, help="with --inject-stall: the CPU (default: the first SUT CPU)",
                                   rich_help_panel=P_COLLECT),
    src_ips: int = typer.Option(1, help="source addresses used in turn (RSS spread by addresses; 1..65536)",
                                rich_help_panel=P_TRAFFIC),
    gen_cpus: str = typer.Option(None, help="one generator per CPU, e.g. 0,1 (streams of one schedule; "
                                 "default: --gen-cpu)", rich_help_panel=P_TRAFFIC),
    dst_ips: int = typer.Option(1, help="destination addresses used in turn (1..65536; docs/how-to/traffic.md)",
                                rich_help_panel=P_TRAFFIC),
    dst_ports: int = typer.Option(1, help="UDP destination ports used in turn, from 7 up (1..1024)",
                                  rich_help_panel=P_TRAFFIC),
    mix: str = typer.Option(None, help="frame mix instead of --size: SIZE:WEIGHT,... (64:7,570:4,1518:1), "
                            "SIZE:P%,... or imix", rich_help_panel=P_TRAFFIC),
    arrivals: str = typer.Option("const", help="arrival process at the same mean rate: const, poisson, onoff",
                                 rich_help_panel=P_TRAFFIC),
    burst: int = typer.Option(32, help="with --arrivals onoff: packets per on period", rich_help_panel=P_TRAFFIC),
    duty_on: float = typer.Option(0.5, help="with --arrivals onoff: share of time on (0..1]",
                                  rich_help_panel=P_TRAFFIC),
    seed: int = typer.Option(1, help="with --arrivals poisson: the random seed of the gaps", rich_help_panel=P_TRAFFIC),
    bidirectional: bool = typer.Option(False, help="both directions at once; --rate is their sum "
                                       "(each direction half)", rich_help_panel=P_TRAFFIC),
    inventory: Path = typer.Option(None, help="run on real hosts: an inventory file (docs/how-to/remote-hosts.md)",
                                   rich_help_panel=P_REAL),
    testbed: str = typer.Option(None, help="with --inventory: the testbed to run on", rich_help_panel=P_REAL),
    nic: str = typer.Option(None, help="NIC knobs of the SUT's interfaces, e.g. rx_ring=512,irq_affinity=pin-1cpu "
                            "(docs/how-to/nic-knobs.md; veth takes rx_channels, tx_channels)", rich_help_panel=P_REAL),
) -> None:
    """Run one trial: build the testbed, offer a load, count, tear down."""
    interrupts.checkpoint("options")
    from softnet.cli import trial_cmd  # each command imports what it uses: `softnet --help` stays quick

    if (inventory is None) != (testbed is None):
        raise InputError("--testbed" if inventory else "--inventory", "--inventory and --testbed go together")
    remote = inventory is not None
    # the options in the sets of their --help panels, each checked as it is parsed
    load = trial_cmd.LoadOptions(rate, duration, warmup, size, flows, rate_layer)
    placement = trial_cmd.build_placement(gen_cpu, sut_cpus, sink_cpu, steering, remote=remote)
    traffic = trial_cmd.parse_traffic(src_ips, gen_cpus, remote=remote, shape=trial_cmd.ShapeOptions(
        dst_ips, dst_ports, mix, arrivals, burst_pkts=burst, on_duty=duty_on, seed=seed, bidirectional=bidirectional))
    collect = trial_cmd.CollectOptions(sample_interval or None, profile, duty, base_duty, trial_cmd.parse_inject(
        inject_stall, inject_cpu, stall_probe, stall_period_us, remote=remote), stack_hz)
    spec = trial_cmd.validate_inputs(sut, load, collect, traffic, raw, remote=remote)
    req = trial_cmd.TrialRequest(sut, spec, placement, rate, rate_layer, nic=trial_cmd.parse_nic(nic, remote=remote),
                                 remote=(inventory, testbed) if inventory else None, raw_out=raw)
    if req.remote is None:
        need_root()
    with measuring(None, wait) if req.remote is None else nullcontext():  # a remote run: each host's agent locks
        trial_cmd.run(req, as_json, wide)


@app.command()
def evaluate(path: Path = typer.Argument(..., help="raw trial file (softnet trial --raw, or results/raw/...)"),
             as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
             wide: bool = wide_option()) -> None:
    """Re-evaluate a raw trial: the same figures and flags, no root, no testbed."""
    from softnet.cli import trial_cmd

    trial_cmd.evaluate_file(path, as_json, wide)


@app.command()
def run(spec: Path = typer.Argument(..., help="campaign spec (TOML)"),
        results: Path = typer.Option(Path("results"), help="results directory (DuckDB + raw JSON)"),
        as_json: bool = typer.Option(False, "--json", help="print the analysis as JSON when done"),
        wide: bool = wide_option(),
        wait: float = wait_option(),
        scheduler: str = scheduler_option()) -> None:
    """Run (or resume) a campaign: load sweeps x runs x knob matrix, stored as they complete."""
    interrupts.checkpoint("options")
    from softnet.campaign.spec import load_spec

    s = load_spec(spec)
    check_store(results)
    if scheduler is not None:
        check_scheduler(scheduler)
    from softnet.cli import campaign_cmd  # scipy, DuckDB: after the input is checked, so errors come fast
    real = s.testbed.sut != "synthetic" or any(k.startswith("testbed.") for k in s.matrix)
    if real and not s.testbed.inventory and scheduler is None:
        need_root()
    # On an inventory's hosts each agent holds its own host's lock; this host is not measured (nor on a fleet).
    with measuring(results, wait, real and not s.testbed.inventory and scheduler is None):
        cid = campaign_cmd.run(s, results, as_json, scheduler)
    if s.method.kind == "latency":
        from softnet.cli import latency_cmd

        latency_cmd.show(results, cid, as_json, wide)
    elif s.method.kind == "compare":
        from softnet.analysis.comparisons import stored_paired
        from softnet.cli import compare_cmd

        compare_cmd.show(stored_paired(str(results), cid), None, 0.001, as_json, wide)
    elif s.method.kind == "soak":
        from softnet.cli import soak_cmd

        soak_cmd.show(soak_cmd.soak_summaries(results, cid), as_json, wide)
    elif s.method.kind in ("reset", "back-to-back", "recovery"):
        campaign_cmd.show_rfc_benchmarks(campaign_cmd.rfc_benchmarks(results, cid), as_json, wide)
    else:
        campaign_cmd.analyze(results, cid, s.analysis.pdr_loss_ratio, s.analysis.eta, as_json,
                             tables=not as_json, wide=wide)
    if not as_json:
        console.print(f"results: {results}/ (campaign {cid}); report: softnet report {results}")


@app.command()
def search(
    sut: str = typer.Option("ipv4-fwd", help="a SUT personality (name:key=value,...; see softnet trial --help) "
                            "or synthetic (simulated, no root)"),
    goals: str = typer.Option("ndr,pdr0.5", help="comma-separated: ndr, pdr<percent> (pdr0.5 = 0.5% loss)",
                              rich_help_panel=P_GOALS),
    width: float = typer.Option(0.005, help="goal width: relative (upper - lower) / upper to reach",
                                rich_help_panel=P_GOALS),
    exceed_ratio: float = typer.Option(0.5, help="goal exceed ratio (RFC 9971): the share of the duration sum "
                                       "that may be trials losing more than the goal; 0.5: the median trial",
                                       rich_help_panel=P_GOALS),
    duration_sum: float = typer.Option(None, help="goal duration sum, seconds of trials that classify a load "
                                       "(default: 3 x --duration)", rich_help_panel=P_GOALS),
    engine: str = typer.Option(None, help="mlrsearch (MLRsearch 1.2.1, the reference; the default), softnet (its "
                               "own) or bayes (posterior confidence and a knee model); each answers as RFC 9971",
                               rich_help_panel=P_GOALS),
    min_load: str = typer.Option("10kpps", help="lowest load to try", rich_help_panel=P_BUDGET),
    max_load: str = typer.Option("4Mpps", help="highest load to try (first trial)", rich_help_panel=P_BUDGET),
    duration: float = typer.Option(1.0, help="final trial duration, seconds", rich_help_panel=P_BUDGET),
    initial_duration: float = typer.Option(None, help="shorter trials for bracketing (default: the final one)",
                                           rich_help_panel=P_BUDGET),
    warmup: float = typer.Option(0.5, help="warm-up before each trial window, seconds", rich_help_panel=P_BUDGET),
    confidence: float = typer.Option(0.9, help="bayes engine: posterior confidence to classify a load",
                                     rich_help_panel=P_GOALS),
    repeats: int = typer.Option(1, "--repeats", "--runs", help="independent searches (CV and an 'unstable' "
                                "verdict from 3 on)", rich_help_panel=P_BUDGET),
    max_trials: int = typer.Option(None, help="budget: at most this many trials per search", rich_help_panel=P_BUDGET),
    max_seconds: float = typer.Option(None, help="budget: at most this many trial-seconds per search",
                                      rich_help_panel=P_BUDGET),
    latency_fractions: str = typer.Option(None, help="after each search, latency under load at these fractions "
                                          "of each PDR's lower bound, e.g. 0.1,0.5,0.9", rich_help_panel=P_GOALS),
    latency_duration: float = typer.Option(None, help="seconds per latency trial (default: --duration)",
                                           rich_help_panel=P_GOALS),
    size: int = typer.Option(64, help="frame size in bytes incl. FCS", rich_help_panel=P_LOAD),
    flows: int = typer.Option(1, help="number of flows", rich_help_panel=P_LOAD),
    host_stall_loss: str = typer.Option("set_apart", help="set_apart: loss that host stalls explain is not "
                                        "the SUT's; count: all loss counts (as MLRsearch)", rich_help_panel=P_GOALS),
    name: str = typer.Option("search", help="campaign name in the results store", rich_help_panel=P_OUTPUT),
    results: Path = typer.Option(Path("results"), help="results directory (DuckDB + raw JSON)",
                                 rich_help_panel=P_OUTPUT),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP, rich_help_panel=P_OUTPUT),
    wide: bool = wide_option(),
    wait: float = wait_option(),
    inventory: Path = typer.Option(None, help="search on real hosts: an inventory file (docs/how-to/remote-hosts.md)",
                                   rich_help_panel=P_HOSTS),
    testbed: str = typer.Option(None, help="with --inventory: the testbed(s), e.g. tb1 or tb1,tb2",
                                rich_help_panel=P_HOSTS),
    scheduler: str = scheduler_option(),
) -> None:
    """Find NDR / PDR as RFC 9971 (MLRsearch) defines them: relevant bounds and conditional throughput; stored like
    a campaign."""
    interrupts.checkpoint("options")
    if duration_sum is not None and duration_sum < duration:
        raise InputError("--duration-sum", f"{duration_sum:g} s is shorter than the final trial duration "
                         f"(--duration {duration:g}): the goal duration sum must hold at least one full-length trial")
    if engine == "bayes" and exceed_ratio == 0:
        raise InputError("--exceed-ratio", "0: the bayes engine needs a share of bad trials above 0; use "
                         "--engine softnet or mlrsearch")
    method = {"kind": "search", "goals": [g for g in goals.split(",") if g.strip()], "width": width,
              "exceed_ratio": exceed_ratio, "duration_sum_s": duration_sum,
              "min_load": min_load, "max_load": max_load, "duration_s": duration,
              "initial_duration_s": initial_duration, "warmup_s": warmup, "confidence": confidence,
              "runs": repeats, "max_trials": max_trials, "max_trial_seconds": max_seconds,
              "latency_fractions": parse_fractions(latency_fractions, "--latency-fractions"),
              "latency_duration_s": latency_duration, "host_stall_loss": host_stall_loss}
    if engine is not None:  # else the spec's default
        method["engine"] = engine
    if (inventory is None) != (testbed is None):
        raise InputError("--testbed" if inventory else "--inventory", "--inventory and --testbed go together")
    where = {"sut": sut}
    if inventory is not None:  # a testbed of an inventory, or several (the campaign's testbeds knob)
        testbeds = [t.strip() for t in testbed.split(",")]
        where |= {"inventory": str(inventory.resolve()), "testbeds": testbeds}
        inv = load_inventory(inventory)
        for t in testbeds:
            inv.ports(t)  # names a testbed the inventory does not have (as --testbed)
    spec = spec_from_options({"name": name, "testbed": where,
                              "traffic": {"frame_bytes": size, "flows": flows}, "method": method}, SEARCH_OPTIONS)
    try:
        spec.search_range_pps()
    except InputError as exc:
        raise option_error(exc, SEARCH_OPTIONS) from None
    check_store(results)
    if scheduler is not None:
        check_scheduler(scheduler)
    from softnet.cli import campaign_cmd  # scipy, DuckDB: after the input is checked, so errors come fast

    # on an inventory's hosts each agent locks its host; on a fleet, each worker's testbed
    local = sut != "synthetic" and inventory is None and scheduler is None
    if local:
        need_root()
    with measuring(results, wait, local):
        cid = campaign_cmd.run(spec, results, as_json, scheduler)
    summaries = campaign_cmd.search_summaries(results, cid)
    if as_json:
        print_json({"campaign_id": cid, "results_dir": str(results), "searches": [s.to_dict() for s in summaries]})
    else:
        campaign_cmd.show_searches(summaries, wide)
        console.print(f"results: {results}/ (campaign {cid}); report: softnet report {results}")


COMPARE_OPTIONS = {"method.loads": "--load", "method.duration_s": "--duration", "method.warmup_s": "--warmup",
                   "compare.overload": "--overload", "compare.metrics": "--metrics", "compare.decide_on": "--decide-on",
                   "compare.margin": "--margin", "compare.loss_margin": "--loss-margin",
                   "compare.confidence": "--confidence", "compare.budget_s": "--budget",
                   "compare.min_rounds": "--min-rounds", "compare.max_rounds": "--max-rounds",
                   "compare.variants": "--sut/--variant", "traffic.frame_bytes": "--size", "name": "--name",
                   "collect.pace_probe": "--pace", "compare.pairing": "--pairing",
                   "compare.interleave_ms": "--interleave-ms", "collect.profile_stack_hz": "--stack-hz",
                   "method.goals": "--goals", "method.width": "--width", "method.max_trial_seconds": "--search-seconds"}


def parse_share(text: str | float | None, option: str, most: float = 1.0) -> float | None:
    """"5%" or "0.05" -> 0.05 (None when not given). A bare number is a
    ratio: "5" is refused with a hint rather than read as 500%; so is a share
    above ``most`` (100% by default)."""
    if text is None:
        return None
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise InputError(option, f"'{text}': expected a share such as 5% or 0.05") from None
    if not t.endswith("%") and v > 1:
        raise InputError(option, f"'{text}': a bare number is a ratio of at most 1; for {t} percent write {t}%")
    if not 0 <= v <= most:
        raise InputError(option, f"'{text}': expected a share from 0 to {100 * most:g}%")
    return v


def parse_variant(text: str, option: str = "--variant") -> dict:
    """"name=dual;testbed.placement=split" -> {"name": "dual", "testbed.placement": "split"}; a value is
    read as TOML (numbers, true/false, [lists]) when it parses, else as text."""
    import tomllib

    out: dict = {}
    for item in filter(None, (x.strip() for x in text.split(";"))):
        key, eq, val = item.partition("=")
        if not eq or not key.strip():
            raise InputError(option, f"'{item}': expected KNOB=VALUE, e.g. testbed.placement=split")
        try:
            out[key.strip()] = tomllib.loads(f"v = {val.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            out[key.strip()] = val.strip()
    if not out:
        raise InputError(option, f"'{text}': expected KNOB=VALUE;..., e.g. testbed.placement=split")
    return out


@app.command()
def compare(
    paths: list[Path] = typer.Argument(None, help="stored results: a baseline directory and candidates, or one "
                                       "directory holding a paired comparison; also Parquet exports"),
    campaign: list[str] = typer.Option(None, "--campaign", help="with PATHS: the campaign of each, in their "
                                       "order (default: each one's newest)", rich_help_panel=P_OUTPUT),
    sut: list[str] = typer.Option(None, "--sut", help="a variant's SUT personality (give 2 or more; the first is "
                                  "the baseline)", rich_help_panel=P_VARIANTS),
    variant: list[str] = typer.Option(None, "--variant", help="a variant as KNOB=VALUE;... (e.g. "
                                      "'name=dual;testbed.placement=split'); after the --sut ones",
                                      rich_help_panel=P_VARIANTS),
    load: str = typer.Option(None, "--load", "--loads", help="fixed loads below capacity, comma-separated (cpu, "
                             "loss, latency), e.g. 200kpps", rich_help_panel=P_VARIANTS),
    overload: str = typer.Option("3Mpps", help="the load capacity is measured at (beyond it)",
                                 rich_help_panel=P_VARIANTS),
    metrics: str = typer.Option(None, help="capacity,cpu,loss,latency,search (default: capacity, and the rest "
                                "but search when --load is given)", rich_help_panel=P_VARIANTS),
    goals: str = typer.Option("ndr,pdr0.5", help="with the search metric: each round's search goals",
                              rich_help_panel=P_VARIANTS),
    width: float = typer.Option(0.02, help="with the search metric: the searches' relative width",
                                rich_help_panel=P_VARIANTS),
    search_seconds: float = typer.Option(60.0, help="with the search metric: trial-seconds per search at most",
                                         rich_help_panel=P_VARIANTS),
    decide_on: str = typer.Option(None, help="stop once these metrics have verdicts (default: capacity,cpu of "
                                  "those measured)", rich_help_panel=P_DECIDE),
    budget: float = typer.Option(120.0, help="trial-seconds at most (measurement windows)", rich_help_panel=P_DECIDE),
    margin: str = typer.Option("2%", help="equivalence margin of rates, costs and latencies", rich_help_panel=P_DECIDE),
    loss_margin: str = typer.Option("0.1%", help="equivalence margin of loss ratios (absolute: a difference "
                                    "of 0.1% of the packets)", rich_help_panel=P_DECIDE),
    confidence: float = typer.Option(0.95, help="confidence over all the looks of the experiment",
                                     rich_help_panel=P_DECIDE),
    duration: float = typer.Option(1.0, help="trial window, seconds", rich_help_panel=P_LOAD),
    warmup: float = typer.Option(0.5, help="warm-up before each window, seconds", rich_help_panel=P_LOAD),
    min_rounds: int = typer.Option(4, help="first look after this many rounds", rich_help_panel=P_DECIDE),
    max_rounds: int = typer.Option(None, help="at most this many rounds (default: as the budget allows)",
                                   rich_help_panel=P_DECIDE),
    size: int = typer.Option(64, help="frame size in bytes incl. FCS", rich_help_panel=P_LOAD),
    pace: bool = typer.Option(False, "--pace", help="probe the host's pace around each trial (0.2 s of a "
                              "fixed loop) and take its drift out of capacity and CPU per packet",
                              rich_help_panel=P_VARIANTS),
    pairing: str = typer.Option("sequential", help="sequential (each variant in turn, ABBA) or interleaved (all "
                                "at once, bursts taking turns: pairs share the host's seconds)",
                                rich_help_panel=P_DECIDE),
    interleave_ms: float = typer.Option(20.0, help="with --pairing interleaved: one turn of every variant, ms",
                                        rich_help_panel=P_DECIDE),
    profile: bool = typer.Option(False, "--profile", help="eBPF profile every trial: which stages, kernel "
                                 "functions and drop reasons changed (ns per packet, with intervals)",
                                 rich_help_panel=P_VARIANTS),
    stack_hz: int = typer.Option(499, help=f"with --profile: {STACK_HZ_HELP}", rich_help_panel=P_VARIANTS),
    threshold: str = typer.Option(None, help="CI gate: exit 1 when a metric is significantly worse by more than "
                                  "this (e.g. 5%)", rich_help_panel=P_DECIDE),
    loss_threshold: str = typer.Option("0.1%", help="CI gate for loss ratios (absolute: worse by more than "
                                       "0.1% of the packets), with --threshold", rich_help_panel=P_DECIDE),
    name: str = typer.Option("compare", help="campaign name in the results store", rich_help_panel=P_OUTPUT),
    results: Path = typer.Option(Path("results"), help="results directory (DuckDB + raw JSON)",
                                 rich_help_panel=P_OUTPUT),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP, rich_help_panel=P_OUTPUT),
    wide: bool = wide_option(),
    wait: float = wait_option(),
    scheduler: str = scheduler_option(),
    testbed: list[str] = LAB_TESTBED, kernel: list[str] = LAB_KERNEL, driver: list[str] = LAB_DRIVER,
) -> None:
    """Is B faster than A? Variants measured in pairs (ABBA, or interleaved) until a verdict, or stored results
    compared."""
    interrupts.checkpoint("options")
    from softnet.cli import compare_cmd

    gate = parse_share(threshold, "--threshold")
    rel_margin = parse_share(margin, "--margin", most=0.5)
    loss_margin = parse_share(loss_margin, "--loss-margin")
    loss_threshold = parse_share(loss_threshold, "--loss-threshold")
    if paths and (sut or variant):
        raise InputError("PATHS", "give stored results to compare, or variants to measure (--sut/--variant), "
                         "not both")
    if paths:
        from softnet.analysis.comparisons import compare_stored, stored_paired

        for p in paths:
            if not p.exists():
                raise InputError(str(p), "no such results directory")
            check_store(p)
        slice_lab(list(paths), testbed, kernel, driver)
        same = [i for i in range(1, len(paths)) if paths[i].resolve() == paths[0].resolve()
                and (campaign or [None] * len(paths))[i:i + 1] == (campaign or [None] * len(paths))[:1]]
        for i in same:
            err_console.print(f"warning: {paths[i]} is the baseline's own campaign: every difference is zero by "
                              "construction (give --campaign to pick another campaign of one store)",
                              highlight=False, markup=False, soft_wrap=True)
        summary = (stored_paired(str(paths[0]), (campaign or [None])[0]) if len(paths) == 1 else
                   compare_stored([str(p) for p in paths], confidence, rel_margin, loss_margin, campaign or ()))
        raise typer.Exit(compare_cmd.show(summary, gate, loss_threshold, as_json, wide))
    if testbed or kernel or driver:
        raise InputError("--testbed" if testbed else "--kernel" if kernel else "--driver",
                         "a lab's part is for stored results (PATHS); a comparison to run picks its testbed "
                         "by [fleet] testbed or an inventory")
    variants = [{"testbed.sut": s} for s in sut or []] + [parse_variant(v) for v in variant or []]
    loads = [x.strip() for x in load.split(",") if x.strip()] if load else []
    kinds = [x.strip() for x in metrics.split(",") if x.strip()] if metrics else (
        ["capacity", "cpu", "loss", "latency"] if loads else ["capacity"])
    decide = [x.strip() for x in decide_on.split(",") if x.strip()] if decide_on else (
        [k for k in ("capacity", "cpu") if k in kinds] or kinds)
    base_sut = variants[0].get("testbed.sut", "ipv4-fwd") if variants else "ipv4-fwd"
    data = {"name": name, "testbed": {"sut": base_sut}, "traffic": {"frame_bytes": size},
            "collect": {"profile": profile, "pace_probe": pace, "profile_stack_hz": stack_hz},
            "method": {"kind": "compare", "loads": loads or None, "duration_s": duration, "warmup_s": warmup,
                       "goals": [g for g in goals.split(",") if g.strip()], "width": width,
                       "max_trial_seconds": search_seconds},
            "compare": {"variants": variants, "overload": overload, "metrics": kinds, "decide_on": decide,
                        "margin": rel_margin, "loss_margin": loss_margin, "confidence": confidence,
                        "budget_s": budget, "min_rounds": min_rounds, "max_rounds": max_rounds,
                        "pairing": pairing, "interleave_ms": interleave_ms}}
    spec = spec_from_options(data, COMPARE_OPTIONS)
    try:
        cells = spec.variants()
        spec.compare_loads_pps()
        if spec.compare.pairing == "interleaved":
            from softnet.campaign.spec import interleavable

            interleavable(spec.compare, [c for _, _, c in cells])
    except InputError as exc:
        raise option_error(exc, COMPARE_OPTIONS) from None
    from softnet.doctor.personalities import require

    real = any(c.testbed.sut != "synthetic" for _, _, c in cells)
    for _, knobs, c in cells:
        if c.testbed.sut != "synthetic":
            require(c.testbed.personality(), "--sut" if "testbed.sut" in knobs else "--variant")
    check_store(results)
    if scheduler is not None:
        check_scheduler(scheduler)
    from softnet.cli import campaign_cmd

    real = real and scheduler is None  # on a fleet, the worker's testbed is measured, not this host
    if real:
        need_root()
    with measuring(results, wait, real):
        cid = campaign_cmd.run(spec, results, as_json, scheduler)
    from softnet.analysis.comparisons import stored_paired

    summary = stored_paired(str(results), cid)
    code = compare_cmd.show(summary, gate, loss_threshold, as_json, wide,
                            extra={"campaign_id": cid, "results_dir": str(results)})
    if not as_json:
        console.print(f"results: {results}/ (campaign {cid}); report: softnet report {results}")
    raise typer.Exit(code)


LATENCY_OPTIONS = {f"latency.{k}": f"--{k.replace('_', '-')}" for k in (
    "bind_mode", "need_wakeup", "busy_poll", "busy_poll_us", "poll_sender", "poll_forwarder", "poll_receiver",
    "batch", "ring_size", "xdp_mode", "threaded_napi", "cstate_limit_us", "irq_suspend_timeout_ns", "arrivals",
    "baseline_count")} | {
    "latency.interval_s": "--interval", "method.runs": "--runs", "method.duration_s": "--duration",
    "traffic.frame_bytes": "--size", "name": "--name"}


@app.command()
def latency(
    bind_mode: str = typer.Option("copy", help="AF_XDP bind mode: copy or zero-copy (veth: copy only)"),
    need_wakeup: bool = typer.Option(True, "--need-wakeup/--no-need-wakeup", help="XDP_USE_NEED_WAKEUP"),
    busy_poll: bool = typer.Option(False, "--busy-poll", help="SO_BUSY_POLL + SO_PREFER_BUSY_POLL, busy-poll sysctls"),
    busy_poll_us: int = typer.Option(20, help="busy-poll time, us"),
    poll_sender: bool = typer.Option(False, "--poll-sender", help="A calls poll() before reading (else spins)"),
    poll_forwarder: bool = typer.Option(False, "--poll-forwarder", help="B calls poll() before reading"),
    poll_receiver: bool = typer.Option(False, "--poll-receiver", help="C calls poll() before reading"),
    batch: int = typer.Option(1, help="packets per send burst / ring batch"),
    threaded_napi: bool = typer.Option(False, "--threaded-napi", help="threaded NAPI on every receiving veth"),
    cstate_limit_us: int = typer.Option(None, help="hold /dev/cpu_dma_latency at this (0: shallowest C-state)"),
    irq_suspend_timeout_ns: int = typer.Option(None, "--irq-suspend-ns",
                                               help="netdev napi-set irq-suspend-timeout of every NAPI, ns"),
    interval: float = typer.Option(0.01, help="seconds between packets: 10 ms gives 1,000 round trips in 10 s, "
                                   "enough for a p99 (the study: 1 s)"),
    arrivals: str = typer.Option("periodic", help="periodic or poisson"),
    runs: int = typer.Option(3, help="runs (the study: at least 3)"),
    duration: float = typer.Option(10.0, help="seconds per run (the study: 30)"),
    size: int = typer.Option(64, help="frame size in bytes incl. FCS"),
    baseline_count: int = typer.Option(0, help="kernel ping replies over the same path, after the runs (0: none)"),
    name: str = typer.Option("latency", help="campaign name in the results store"),
    results: Path = typer.Option(Path("results"), help="results directory (DuckDB, raw JSON, records)"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
    wide: bool = wide_option(),
    wait: float = wait_option(),
    scheduler: str = scheduler_option(),
) -> None:
    """AF_XDP round-trip latency of one configuration: A -> B (AF_XDP forward) -> C (reflect) -> B -> A."""
    interrupts.checkpoint("options")
    lat = {"bind_mode": bind_mode, "need_wakeup": need_wakeup, "busy_poll": busy_poll, "busy_poll_us": busy_poll_us,
           "poll_sender": poll_sender, "poll_forwarder": poll_forwarder, "poll_receiver": poll_receiver,
           "batch": batch, "threaded_napi": threaded_napi, "cstate_limit_us": cstate_limit_us,
           "irq_suspend_timeout_ns": irq_suspend_timeout_ns,
           "interval_s": interval, "arrivals": arrivals, "baseline_count": baseline_count}
    spec = spec_from_options({"name": name, "traffic": {"frame_bytes": size}, "latency": lat,
                              "method": {"kind": "latency", "runs": runs, "duration_s": duration}}, LATENCY_OPTIONS)
    check_store(results)
    if scheduler is not None:
        check_scheduler(scheduler)
    else:
        need_root()
    from softnet.cli import campaign_cmd, latency_cmd  # after the input is checked, so errors come fast

    with measuring(results, wait, scheduler is None):
        cid = campaign_cmd.run(spec, results, as_json, scheduler)
    latency_cmd.show(results, cid, as_json, wide)
    if not as_json:
        console.print(f"results: {results}/ (campaign {cid}); report: softnet report {results}")


@app.command()
def profile(
    sut: str = typer.Option("ipv4-fwd", help="a SUT personality (name:key=value,...; see softnet trial --help)"),
    loads: str = typer.Option("50kpps,100kpps,200kpps,300kpps", "--loads", "--load",
                              help="comma-separated offered loads (pps or bit rates), or max (the probed maximum)"),
    runs: int = typer.Option(3, help="runs per load"),
    duration: float = typer.Option(2.0, help="measurement window per run, seconds"),
    warmup: float = typer.Option(0.5, help="warm-up before each window, seconds"),
    size: int = typer.Option(64, help="frame size in bytes incl. FCS"),
    steering: str = typer.Option("threaded", help="threaded (NAPI kthread) or rps"),
    placement: str = typer.Option("single", help="single: egress-side processing on the SUT CPU; split: apart"),
    duty: float = typer.Option(0.02, help="share of time the per-packet stage events are attached (1: every packet)"),
    base_duty: float = typer.Option(0.2, help=BASE_DUTY_HELP),
    pdr: str = typer.Option("0.5%", help="loss goal of the PDR the prediction is compared with (0.5% or 0.005)"),
    victim: str = typer.Option(None, help="python or c: a CPU-bound victim pinned to the SUT CPU, its lost share "
                               "checked against the profiler's softirq + irq time (the eBPF study's sec. V)"),
    name: str = typer.Option("profile", help="campaign name in the results store"),
    results: Path = typer.Option(Path("results"), help="results directory (DuckDB + raw JSON)"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
    wide: bool = wide_option(),
    wait: float = wait_option(),
) -> None:
    """Profile the kernel's packet path over a load sweep: stages, CPU audit, cost fits, predicted capacity."""
    pdr = parse_share(pdr, "--pdr")
    if not 0 < pdr < 1:
        raise InputError("--pdr", f"'{pdr:g}': the PDR's loss goal is above 0 and below 100%")
    spec = spec_from_options({
        "name": name, "testbed": {"sut": sut, "steering": steering, "placement": placement},
        "traffic": {"frame_bytes": size},
        "method": {"kind": "sweep", "loads": [x.strip() for x in loads.split(",") if x.strip()], "runs": runs,
                   "duration_s": duration, "warmup_s": warmup},
        "collect": {"profile": True, "profile_duty": duty, "profile_base_duty": base_duty,
                    **({"victim": victim} if victim else {})}},
        PROFILE_OPTIONS)
    try:
        spec.loads_pps(-1.0)  # rates parse before anything runs
    except InputError as exc:
        raise option_error(exc, PROFILE_OPTIONS) from None
    if sut == "synthetic":
        raise InputError("--sut", "the synthetic SUT has no kernel path to profile")
    check_store(results)
    need_root()
    from softnet.cli import profile_cmd  # after the input is checked, so errors come fast

    with measuring(results, wait):
        profile_cmd.run(spec, results, pdr, as_json, wide)


# Spec fields the search and profile commands set from their options: errors name the option.
SEARCH_OPTIONS = {"method.goals": "--goals", "method.width": "--width", "method.min_load": "--min-load",
                  "method.exceed_ratio": "--exceed-ratio", "method.duration_sum_s": "--duration-sum",
                  "method.engine": "--engine",
                  "method.max_load": "--max-load", "method.duration_s": "--duration",
                  "method.initial_duration_s": "--initial-duration", "method.warmup_s": "--warmup",
                  "method.confidence": "--confidence", "method.runs": "--repeats", "method.max_trials": "--max-trials",
                  "method.max_trial_seconds": "--max-seconds", "testbed.sut": "--sut", "traffic.frame_bytes": "--size",
                  "traffic.flows": "--flows", "name": "--name", "method.latency_fractions": "--latency-fractions",
                  "method.latency_duration_s": "--latency-duration", "method.host_stall_loss": "--host-stall-loss",
                  "method": "--initial-duration",  # the only whole-method check a search can fail
                  "testbed": "--testbed"}
PROFILE_OPTIONS = {"method.loads": "--loads", "method.runs": "--runs", "method.duration_s": "--duration",
                   "method.warmup_s": "--warmup", "testbed.sut": "--sut", "testbed.steering": "--steering",
                   "testbed.placement": "--placement", "traffic.frame_bytes": "--size",
                   "collect.profile_duty": "--duty", "collect.profile_base_duty": "--base-duty",
                   "collect.victim": "--victim", "name": "--name"}


def load_inventory(path: Path):
    from softnet.hosts.inventory import load

    return load(path)


def spec_from_options(data: dict, options: dict[str, str]):
    """A CampaignSpec built from command-line options; errors name the options."""
    from pydantic import ValidationError

    from softnet.campaign.spec import CampaignSpec, spec_error

    try:
        spec = CampaignSpec.model_validate(data)
    except ValidationError as exc:
        raise spec_error(exc, names=options) from None
    if spec.testbed.sut != "synthetic":  # what this host lacks: refused before it is touched
        from softnet.doctor.personalities import require

        require(spec.testbed.personality(), options.get("testbed.sut", "--sut"))
    return spec


def parse_fractions(text: str | None, option: str) -> list[float] | None:
    """"0.1,0.5,0.9" -> [0.1, 0.5, 0.9] (checked by the spec); None when not given."""
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(option, f"'{text}': expected comma-separated fractions such as 0.1,0.5,0.9") from None


def option_error(exc: InputError, options: dict[str, str]) -> InputError:
    return InputError(options.get(exc.field, exc.field), exc.message)


def check_readable(path: Path) -> None:
    """What analyze and report read: a results directory (softnet.duckdb in
    it), a PASTRAMI file or a folder of them; anything else is named, with
    what was expected, before a reader trips on it."""
    from softnet.analysis.pastrami_files import is_pastrami_name, list_pastrami_files
    from softnet.results.store import DB_NAME, is_store_dir

    expected = "expected a softnet results directory (with softnet.duckdb), a PASTRAMI file or a folder of them"
    if not path.exists():
        raise InputError(str(path), "no such file or directory")
    if path.is_file() and path.name == DB_NAME:
        raise InputError(str(path), f"the store's database file: give its directory, {path.parent}")
    if path.is_dir() and is_store_dir(path):
        return
    if path.is_file():
        if path.suffix == ".txt":
            return  # the PASTRAMI reader names what is wrong with it, by line
        raise InputError(str(path), f"not a PASTRAMI file: {expected}")
    texts = list_pastrami_files(path)
    if any(is_pastrami_name(p.name) for p in texts):
        return
    if texts:
        raise InputError(str(path), f"not a results directory (no {DB_NAME}), and no file below it is named as "
                         f"PASTRAMI data ({texts[0]}:0: not in the pattern of its names)")
    raise InputError(str(path), f"a directory without {DB_NAME} or PASTRAMI files: {expected}")


@app.command()
def analyze(path: Path = typer.Argument(..., help="softnet results dir, or PASTRAMI file / folder"),
            campaign: str = typer.Option(None, help="only this campaign id (results dir)"),
            pdr: str = typer.Option("0.5%", help="PDR loss goal X: 0.5% or 0.005"),
            eta: float = typer.Option(0.1, help="TIR saturation threshold"),
            tables: bool = typer.Option(True, help="print per-load tables"),
            paper_ci: bool = typer.Option(False, "--paper-ci", help="PLR intervals as PASTRAMI computes them "
                                          "(Student-t, unclipped: may go below 0)"),
            as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
            wide: bool = wide_option(),
            testbed: list[str] = LAB_TESTBED, kernel: list[str] = LAB_KERNEL, driver: list[str] = LAB_DRIVER
            ) -> None:
    """PASTRAMI statistics, PDR/NDR and GOOD/BAD verdict of softnet results or published PASTRAMI data."""
    pdr = parse_share(pdr, "--pdr")
    if not 0 < pdr < 1:
        raise InputError("--pdr", f"'{pdr:g}': the PDR's loss goal is above 0 and below 100%")
    if not eta > 0:
        raise InputError("--eta", f"{eta} must be > 0")
    check_readable(path)
    if path.is_dir():
        check_store(path)
    slice_lab([path], testbed, kernel, driver)
    from softnet.cli import campaign_cmd  # after the input is checked, so errors come fast

    campaign_cmd.analyze(path, campaign, pdr, eta, as_json, tables, wide, paper_ci)


@app.command()
def report(path: Path = typer.Argument(..., help="softnet results dir, or PASTRAMI file / folder"),
           out: Path = typer.Option(None, help="HTML file to write"),
           pdr: str = typer.Option("0.5%", help="PDR loss goal X: 0.5% or 0.005"),
           eta: float = typer.Option(0.1, help="TIR saturation threshold (the PASTRAMI verdict)"),
           interactive: bool = typer.Option(False, help="the load curves also as interactive charts (plotly.js "
                                                        "inlined: about 4.8 MB more, still one file)"),
           testbed: list[str] = LAB_TESTBED, kernel: list[str] = LAB_KERNEL, driver: list[str] = LAB_DRIVER
           ) -> None:
    """Write one self-contained HTML report: verdicts, plots, tables, flags, provenance."""
    check_readable(path)
    if path.is_dir():
        check_store(path)
    slice_lab([path], testbed, kernel, driver)
    from softnet.report.html import write_report

    console.print(str(write_report(path, out, pdr_loss_ratio=parse_share(pdr, "--pdr"), eta=eta,
                                   interactive=interactive)))


@app.command()
def serve(results: list[Path] = typer.Argument(..., help="softnet results directories"),
          host: str = typer.Option("127.0.0.1", help="address to listen on (off loopback: --token required)"),
          port: int = typer.Option(8080, min=1, max=65535, help="TCP port"),
          token: str = typer.Option(None, help="required of every request: ?token=T or Authorization: Bearer T"),
          testbed: list[str] = LAB_TESTBED, kernel: list[str] = LAB_KERNEL, driver: list[str] = LAB_DRIVER
          ) -> None:
    """Serve results stores: campaign pages, JSON under /api, OpenMetrics under /metrics."""
    for r in results:  # before the web stack's imports (seconds): a wrong path is said at once
        check_store(r, running_ok=True)
    slice_lab(list(results), testbed, kernel, driver)
    import uvicorn

    from softnet.report import web

    web.check_bind(host, token)
    app = web.make_app(list(results), token)
    err_console.print(f"softnet serve: http://{host}:{port}/ ({len(results)} results store(s)); Ctrl-C ends it",
                      markup=False, highlight=False)
    # a live page's event stream never ends by itself: do not wait on it at Ctrl-C
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=1)


@app.command()
def trend(results: list[Path] = typer.Argument(..., help="softnet results directories (campaigns of any age)"),
          figure: str = typer.Option(None, help="only this figure: capacity, pdr, ndr, latency_p50, cpu_ns"),
          as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
          fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="CI gate: exit 1 when a "
                                                  "series' latest change point is a regression at the newest "
                                                  "campaign"),
          wide: bool = wide_option(),
          testbed: list[str] = LAB_TESTBED, kernel: list[str] = LAB_KERNEL, driver: list[str] = LAB_DRIVER
          ) -> None:
    """Each configuration's figures over stored campaigns, per testbed, with change points (jumpavg)."""
    from softnet.cli import trend_cmd

    for r in results:
        check_store(r)
    slice_lab(list(results), testbed, kernel, driver)
    raise typer.Exit(trend_cmd.run(list(results), figure, as_json, fail_on_regression, wide))


@app.command()
def stacks(source: Path = typer.Argument(..., help="a raw trial file (softnet trial --profile --raw FILE) or a "
                                          "results directory"),
           fmt: str = typer.Option("svg", "--format", help="svg (a flame graph), folded (Brendan Gregg's format: "
                                   "flamegraph.pl, speedscope, inferno) or speedscope (its JSON)"),
           out: Path = typer.Option(None, "--out", "-o", help="write here (default: standard output)"),
           campaign: str = typer.Option(None, help="with a results directory: the campaign (default: the last)"),
           variant: str = typer.Option(None, help="the comparison's variant (default: the baseline), or a cell "
                                       "number"),
           against: str = typer.Option(None, help="with --format svg: a differential flame graph against this "
                                       "variant (red: grew, blue: shrank)"),
           load: str = typer.Option(None, help="the profiled load to show (default: the lowest)")) -> None:
    """The kernel stacks sampled on the SUT's CPUs (--profile), as a flame graph or for other viewers."""
    from softnet.cli import stacks_cmd

    stacks_cmd.run(source, fmt, out, campaign, variant, against, load)


@app.command()
def export(results: Path = typer.Argument(..., help="softnet results directory"),
           fmt: str = typer.Option("parquet", "--format", help="csv, parquet, or hdrh (latency logs)"),
           out: Path = typer.Option(None, help="output folder (default RESULTS/export)")) -> None:
    """Export the results tables (campaigns, cells, trials) to CSV or Parquet,
    or each load's latency histograms as HdrHistogram interval logs (hdrh)."""
    from softnet.results.store import Store

    if fmt not in ("csv", "parquet", "hdrh"):
        raise InputError("--format", f"'{fmt}': accepted csv, parquet, hdrh")
    import duckdb

    check_store(results)
    if fmt == "hdrh":
        from softnet.report.hdr import export_logs

        try:
            logs = export_logs(results, out or results / "export")
        except OSError as exc:
            raise InputError("--out", f"cannot write to {out or results / 'export'}: {first_line(exc)}") from None
        if not logs:
            raise InputError(str(results), "no trial there kept a latency histogram (a simulated SUT has none): "
                             "nothing written")
        for p in logs:
            console.print(str(p))
        return
    try:
        store = Store(results, read_only=True)
    except FileNotFoundError as exc:
        raise InputError("RESULTS", str(exc)) from None
    target = out or results / "export"
    with store:
        try:
            paths = store.export(target, fmt)
        except (OSError, duckdb.Error) as exc:
            raise InputError("--out", f"cannot write to {target}: {first_line(exc)}") from None
    for p in paths:
        console.print(str(p))


@app.command()
def demo(results: Path = typer.Option(Path("results"), help="results directory"),
         runs: int = typer.Option(5, help="runs per load (K); fewer give wider intervals"),
         duration: float = typer.Option(2.0, help="measurement window per run, seconds"),
         as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
         wait: float = wait_option()) -> None:
    """The main job: kernel IPv4 forwarding, probe its maximum, sweep around it (K=5 x 2 s), verdict, report."""
    from softnet.cli.demo import demo_spec, run_demo

    spec = spec_from_options(demo_spec(runs, duration), {"method.runs": "--runs", "method.duration_s": "--duration"})
    check_store(results)
    need_root()
    with measuring(results, wait):
        run_demo(spec, results, as_json)


@app.command()
def clean(check: bool = typer.Option(False, "--check", help="only report; exit 1 if leftovers exist"),
          as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
          inventory: Path = typer.Option(None, help="clean every host of this inventory, through its agent")) -> None:
    """Remove leftovers of a killed run (namespaces, links, processes named
    sn-...) and replay the journals of killed agents."""
    import textwrap

    from softnet.testbed import cleanup

    if inventory is not None:
        from softnet.cli import hosts_cmd

        raise typer.Exit(hosts_cmd.clean_hosts(inventory, check, as_json))
    need_root()
    found = cleanup.find_leftovers() if check else cleanup.clean()
    errors = found.journal_errors
    any_found = found.any()
    if as_json:
        print_json({"leftovers" if check else "removed": found.to_json(),
                    **({} if check else {"journal_errors": errors})})
    elif not any_found:
        console.print("clean: nothing left by softnet")
    else:
        verb = "found" if check else "removed"
        for kind, items in (("namespaces", found.namespaces), ("processes", found.processes),
                            ("root_links", found.root_links)):
            if items:
                console.print(f"{verb} {kind}: {', '.join(map(str, items))}")
        for j in found.journals:
            # paths and change names may hold [brackets]: no rich markup
            console.print(f"{'found' if check else 'replayed'} journal of a dead agent, "
                          f"{len(j.pending)} changes:\n  {j.path}", markup=False, highlight=False)
            console.print(textwrap.fill("; ".join(j.pending), width=78, initial_indent="  ",
                                        subsequent_indent="  "), markup=False, highlight=False)
    for err in errors:
        err_console.print(f"clean: not restored: {err}", markup=False, highlight=False)
    if (check and any_found) or errors:
        raise typer.Exit(1)


@app.command()
def agent(stdio: bool = typer.Option(False, "--stdio", help="speak the agent protocol on stdin/stdout (as SSH runs it)"),
          state_dir: Path = typer.Option(None, help="journal and lock folder (default /run/softnet/agent/net-INODE)"),
          lease_s: float = typer.Option(10.0, help="undo everything when no request came for this long, s")) -> None:
    """The on-host agent a controller starts over SSH (not for people)."""
    if not stdio:
        raise InputError("--stdio", "the agent speaks only over stdin/stdout: softnet agent --stdio "
                         "(a controller starts it over SSH; see docs/how-to/remote-hosts.md)")
    need_root()
    from softnet.hosts import agent as agent_mod

    raise typer.Exit(agent_mod.main(str(state_dir) if state_dir else None, lease_s))


inventory_app = typer.Typer(no_args_is_help=True, help="The hosts and testbeds of an inventory file.")
app.add_typer(inventory_app, name="inventory")


@inventory_app.command("check")
def inventory_check(path: Path = typer.Argument(..., help="inventory (TOML)"),
                    doctor: bool = typer.Option(True, "--doctor/--no-doctor", help="run softnet doctor on each host"),
                    as_json: bool = typer.Option(False, "--json", help="print the findings as JSON")) -> None:
    """Connect to every host; verify each interface (MAC, PCI, driver, safety),
    what each role needs of the kernel, and clock and version skew."""
    from softnet.cli import hosts_cmd

    raise typer.Exit(hosts_cmd.inventory_check(path, doctor, as_json))


def check_scheduler(address: str) -> None:
    """A Dask scheduler's address, before anything connects or changes."""
    if not re.match(r"^(tcp|tls)://[^/\s]+:\d+$", address):
        raise InputError("--scheduler", f"'{address}': expected tcp://HOST:PORT (or tls://)")


fleet_app = typer.Typer(no_args_is_help=True, help="A fleet of testbeds on Dask: its scheduler and workers.")
app.add_typer(fleet_app, name="fleet")


@fleet_app.command("scheduler")
def fleet_scheduler(host: str = typer.Option("127.0.0.1", help="address to listen on (the lab's, for other hosts)"),
                    port: int = typer.Option(8786, help="port")) -> None:
    """Start the fleet's Dask scheduler (no dashboard) in the foreground."""
    from softnet.fleet.worker import run_scheduler

    raise typer.Exit(run_scheduler(host, port))


@fleet_app.command("worker")
def fleet_worker(scheduler: str = typer.Option(..., "--scheduler", help="tcp://HOST:PORT of the fleet's scheduler"),
                 testbed: str = typer.Option(..., "--testbed", help="the testbed this worker stands for"),
                 inventory: Path = typer.Option(None, "--inventory", help="the inventory naming the testbed "
                                                "(checked first); none: a testbed without hosts (synthetic)"),
                 host: str = typer.Option("127.0.0.1", help="address the worker listens on (the lab's, when the "
                                          "scheduler is on another host)")) -> None:
    """Start one Dask worker for one testbed: checked first, then one part at a time."""
    check_scheduler(scheduler)
    from softnet.fleet.worker import start

    raise typer.Exit(start(scheduler, testbed, str(inventory) if inventory else None, host))


@fleet_app.command("sbatch")
def fleet_sbatch(scheduler: str = typer.Option(..., "--scheduler", help="tcp://HOST:PORT of the fleet's scheduler"),
                 testbed: list[str] = typer.Option(..., "--testbed", help="a testbed to start a worker for, as a "
                                                   "Slurm job of its own (give several)"),
                 inventory: Path = typer.Option(None, "--inventory", help="the inventory naming the testbeds"),
                 host: str = typer.Option("127.0.0.1", help="address each worker listens on (the lab's, when "
                                          "the scheduler is on another host)"),
                 partition: str = typer.Option(None, help="the Slurm partition (default: the cluster's)"),
                 logs: Path = typer.Option(Path("."), help="folder for each job's output (softnet-TESTBED-JOB.log)"),
                 sbatch_arg: list[str] = typer.Option(None, "--sbatch-arg", help="more for sbatch, e.g. "
                                                      "--sbatch-arg=--time=8:00:00"),
                 dry_run: bool = typer.Option(False, "--dry-run", help="print the job script; submit nothing"),
                 as_json: bool = typer.Option(False, "--json", help="print the job ids as JSON")) -> None:
    """Start fleet workers as Slurm jobs: one job per testbed, each running
    `softnet fleet worker` on a node of its own (scancel stops it cleanly)."""
    check_scheduler(scheduler)
    from softnet.fleet.slurm import job_script, submit

    if inventory is not None and not inventory.is_file():
        raise InputError("--inventory", f"{inventory}: no such file")
    inv = str(inventory.resolve()) if inventory else None
    if dry_run:
        for tb in testbed:
            print(job_script(scheduler, tb, inv, host, partition, str(logs.resolve()), sbatch_arg or []), end="")
        return
    jobs = {tb: submit(job_script(scheduler, tb, inv, host, partition, str(logs.resolve()), sbatch_arg or []))
            for tb in testbed}
    if as_json:
        print_json({"jobs": jobs})
    else:
        for tb, job in jobs.items():
            console.print(f"{tb}: Slurm job {job} (scancel {job} stops it)", markup=False, highlight=False)


host_app = typer.Typer(no_args_is_help=True, help="Prepare the hosts of an inventory.")
app.add_typer(host_app, name="host")


@host_app.command("prepare")
def host_prepare(path: Path = typer.Argument(..., help="inventory (TOML)"),
                 hosts: str = typer.Option(None, "--hosts", help="comma-separated host names (default: all)"),
                 steps: str = typer.Option("apt,venv,native", help="what to make there: apt, venv, native")) -> None:
    """Ship this softnet to each host and build it there (Debian packages,
    virtualenv, native tools for the host's kernel)."""
    from softnet.cli import hosts_cmd

    raise typer.Exit(hosts_cmd.prepare_hosts(path, hosts, steps))


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
           verbose: bool = typer.Option(False, "--verbose", "-v", help="every check: what was found, what it "
                                        "enables")) -> None:
    """What this host can do, and what each answer enables or disables."""
    from softnet import doctor as doc
    from softnet.doctor.summary import render_summary

    checks = doc.run_probes()
    if as_json:
        print_json([c.to_dict() for c in checks])
    else:
        console.print(doc.render_table(checks) if verbose else render_summary(checks))


def _exit_if_signalled() -> None:
    """An error a signal caused (DuckDB answers Ctrl-C with "Query interrupted", a tool the
    terminal's Ctrl-C ended fails): the signal is what ended the command, and says so."""
    if interrupts.received() is None:
        return
    code = 128 + interrupts.received()  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them
    err_console.print(f"softnet: {'interrupted' if code == 130 else 'terminated'}; host changes undone")
    exec("")  # see below: CPython's "unhandled KeyboardInterrupt" flag
    sys.exit(code)


def main() -> None:
    try:
        # Non-standalone typer returns exit codes (typer.Exit, Ctrl-C as 130)
        # instead of raising them.
        rc = app(standalone_mode=False)
        if rc == 130:
            raise KeyboardInterrupt
        interrupts.check()  # a signal that code on its way swallowed: never reported as success
        sys.exit(rc if isinstance(rc, int) else 0)
    except SoftnetError as exc:
        _exit_if_signalled()
        print_error(exc)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):  # click turns Ctrl-C into Abort
        err_console.print("softnet: interrupted; host changes undone")
        # A Ctrl-C that passed through exec() of a string (scipy's imports run
        # some) leaves CPython's "unhandled KeyboardInterrupt" flag set, and the
        # interpreter would end by SIGINT, not 130; a clean exec() clears it.
        exec("")
        sys.exit(130)
    except Terminated:
        err_console.print("softnet: terminated; host changes undone")
        sys.exit(143)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        _exit_if_signalled()
        # Usage errors of the vendored click: show them like click would, exit 2.
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show()
            sys.exit(exc.exit_code)
        # Bad input found deep down (a malformed data file, a store DuckDB
        # cannot read): its message names the file; no traceback.
        from softnet.analysis.pastrami_files import DataFormatError

        if isinstance(exc, DataFormatError) or type(exc).__module__.partition(".")[0] == "duckdb":
            print_error(exc)
            sys.exit(2)
        raise
