"""Time by kernel function from softnet-stacks' samples: the window's counts,
idle against busy, self and inclusive time per packet, paired changes per
function, and the flame graph and export formats. Inputs are real captures
of softnet-stacks on this VM (tests/data/stacks)."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from softnet.analysis import kernel_functions as kf
from softnet.report import flamegraph
from softnet.results.comparison import ComparisonSummary, FunctionChanges
from softnet.results.raw import RawStacks

DATA = Path(__file__).parent / "data" / "stacks"


def capture(name: str) -> RawStacks:
    d = json.loads((DATA / name).read_text())
    h = d["hello"]
    return RawStacks(freq_hz=h["freq_hz"], period_ns=h["period_ns"], cpus=h["cpus"], window_start=d["window_start"],
                     window_end=d["window_end"], **d["names"])


def test_the_window_counts_are_the_reads_difference():
    raw = capture("nft_fw_cpu1.json")
    counts = kf.window_counts(raw.window_start, raw.window_end)
    taken = sum(raw.window_end.samples_per_cpu.values()) - sum(raw.window_start.samples_per_cpu.values())
    assert sum(counts.values()) == taken  # every sample counted once (none missed here)
    assert all(n > 0 for n in counts.values())


def test_a_busy_sut_cpu_by_function():
    """CPU 1 ran the SUT's NAPI kthreads through nft-fw: the kthreads' poll
    loop holds nearly all busy time, nft_do_chain is the top self time, and
    the per-packet figures are samples x period over the packets."""
    raw = capture("nft_fw_cpu1.json")
    p = kf.function_profile(raw, forwarded_pkts=200_000)
    assert p.samples == p.busy_samples + p.idle_samples
    assert p.busy_ns_per_pkt == pytest.approx(p.busy_samples * raw.period_ns / 200_000)
    rows = {r.function: r for r in p.functions}
    assert max(p.functions, key=lambda r: r.self_samples).function == "nft_do_chain"
    chain, poll = rows["nft_do_chain"], rows["napi_threaded_poll"]
    assert chain.self_samples <= chain.incl_samples <= rows["nft_do_chain_inet"].incl_samples
    assert poll.incl_samples > 0.6 * p.busy_samples
    assert chain.incl_ns_per_pkt == pytest.approx(chain.incl_samples * raw.period_ns / 200_000)
    incl = [r.incl_samples for r in p.functions]
    assert incl == sorted(incl, reverse=True)
    # self times (user space as one pseudo-function) add up to the busy samples that have a stack
    assert sum(r.self_samples for r in p.functions) == p.busy_samples - p.lost_samples


def test_the_idle_loop_is_idle_and_a_softirq_under_the_idle_task_is_work():
    raw = capture("gen_cpu0.json")
    p = kf.function_profile(raw, forwarded_pkts=1000)
    halted = sum(n for (_, tid, _, sid), n in kf.window_counts(raw.window_start, raw.window_end).items()
                 if tid == 0 and sid >= 0 and raw.stacks[sid].endswith("pv_native_safe_halt"))
    assert halted > 100 and p.idle_samples >= halted
    assert "pv_native_safe_halt" not in {r.function for r in p.functions}
    # a real NAPI stack with its softirq frames, as if run on an interrupt's exit while the CPU idled
    napi = next(s for s in capture("nft_fw_cpu1.json").stacks.values() if "handle_softirqs" in s)
    idle = next(s for s in raw.stacks.values() if s.endswith("pv_native_safe_halt"))
    end = raw.window_end.model_copy(update={"counts": [[0, 0, "swapper/0", 1, 5], [0, 0, "swapper/0", 2, 7]]})
    mixed = raw.model_copy(update={"window_start": None, "window_end": end, "stacks": {1: napi, 2: idle}})
    stacks, tally = kf.busy_stacks(mixed)
    assert tally["idle"] == 7 and sum(stacks.values()) == 5


def test_folded_stacks_hold_the_busy_samples():
    raw = capture("nft_fw_cpu1.json")
    p = kf.function_profile(raw, 1)
    f = kf.folded(raw)
    assert sum(f.values()) == p.busy_samples - p.lost_samples
    assert all(not s.startswith(";") and ";;" not in s for s in f)
    per_pkt = kf.folded_per_packet([(raw, 1000, None), (raw, 3000, None)])  # two trials: time over all their packets
    assert sum(per_pkt.values()) == pytest.approx(2 * sum(f.values()) * raw.period_ns / 4000)


def sides(rng, n: int, grow: float) -> list[tuple[kf.Side, kf.Side]]:
    """n rounds of (A, B): busy ~ 1000 ns, a caller (its own time 20 ns)
    of nft_do_chain (300 ns), B's chain ``grow`` ns more; 15 other
    functions; per-round noise as sample counts give it."""
    out = []
    for _ in range(n):
        def one(extra: float) -> kf.Side:
            chain = 300 + extra + rng.normal(0, 15)
            hook = 20 + rng.normal(0, 3)
            other = {f"f{i}": (v := 40 + rng.normal(0, 6), v) for i in range(15)}
            return (700 + chain + rng.normal(0, 10),
                    {"nft_do_chain": (chain, chain), "nf_hook_slow": (hook, hook + chain), **other})
        out.append((one(0.0), one(grow)))
    return out


def test_a_grown_function_is_found_and_accounts_for_the_change():
    fc = kf.function_changes(sides(np.random.default_rng(1), 12, 100.0), 200e3, 0.95)
    top = fc.functions[0]  # by its own time's change: the caller's inclusive change is as large
    assert top.function == "nft_do_chain" and top.self.verdict == "slower" and top.significant
    assert 0.8 < fc.share_of_busy(top.incl) < 1.2
    hook = next(c for c in fc.functions if c.function == "nf_hook_slow")
    assert hook.incl.significant and not hook.self.significant
    assert fc.tested == 17 and top.self.confidence == pytest.approx(1 - 0.05 / 34)


def test_no_false_function_verdict_beyond_the_family_rate():
    """A against A, 200 simulated comparisons of 10 rounds: comparisons with
    any significant function stay near the 5% the table states."""
    rng = np.random.default_rng(7)
    hits = sum(any(c.significant for c in kf.function_changes(sides(rng, 10, 0.0), 1e5, 0.95).functions)
               for _ in range(200))
    assert hits <= 20, hits  # 5% of 200 is 10; Bonferroni is conservative


def test_function_changes_survive_the_store():
    fc = kf.function_changes(sides(np.random.default_rng(2), 6, 50.0), 2e5, 0.95)
    s = ComparisonSummary(baseline="A", candidates=["B"], functions={"B": [fc]})
    back = ComparisonSummary.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back.functions["B"][0] == fc and isinstance(back.functions["B"][0], FunctionChanges)


def test_flame_graph_svg():
    raw = capture("nft_fw_cpu1.json")
    folded = kf.folded_per_packet([(raw, 100_000, None)])
    root = ET.fromstring(flamegraph.svg(folded, "A at 200 kpps"))
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text for t in root.iter(f"{ns}title")]
    assert any(t.startswith("nft_do_chain: ") for t in titles)
    labels = [t.text for t in root.iter(f"{ns}text")]
    assert "A at 200 kpps" in labels and any(x and x.startswith("napi_threaded_poll") for x in labels)
    width = float(root.get("width"))
    for g in root.iter(f"{ns}g"):  # every label fits its frame
        rect, text = g.find(f"{ns}rect"), g.find(f"{ns}text")
        if text is not None:
            assert len(text.text) * flamegraph.CHAR_PX <= float(rect.get("width")) + 1e-6
        assert float(rect.get("x")) + float(rect.get("width")) <= width + 0.01


def test_differential_flame_graph_colours_growth_red():
    a = {"root;poll;nft_do_chain": 100.0, "root;poll;ip_forward": 50.0}
    b = {"root;poll;nft_do_chain": 200.0, "root;poll;ip_forward": 30.0}
    root = ET.fromstring(flamegraph.svg(b, "B against A", against=a))
    ns = "{http://www.w3.org/2000/svg}"
    fill = {g.find(f"{ns}title").text.split(":")[0]: g.find(f"{ns}rect").get("fill") for g in root.iter(f"{ns}g")}
    assert fill["nft_do_chain"] == "rgb(255,0,0)"  # the largest change: full red
    r, g_, b_ = (int(x) for x in fill["ip_forward"][4:-1].split(","))
    assert b_ == 255 and r == g_ < 255  # shrank: blue


def test_speedscope_file():
    folded = {"a;b;c": 3.0, "a;b": 1.0, "a;d": 2.0}
    s = flamegraph.speedscope(folded, "x")
    frames = [f["name"] for f in s["shared"]["frames"]]
    prof = s["profiles"][0]
    assert prof["type"] == "sampled" and prof["unit"] == "nanoseconds" and prof["endValue"] == 6.0
    stacks = Counter({";".join(frames[i] for i in smp): w for smp, w in zip(prof["samples"], prof["weights"])})
    assert stacks == Counter(folded)


def test_a_trial_taking_turns_counts_its_own_threads():
    """Partners' SUTs share the CPU: only the trial's kthreads' samples are its time."""
    raw = capture("nft_fw_cpu1.json")
    counts = kf.window_counts(raw.window_start, raw.window_end)
    per_thread = Counter()
    for (_, tid, comm, _), n in counts.items():
        if comm.startswith("napi/"):
            per_thread[tid] += n
    one = max(per_thread, key=per_thread.get)
    p = kf.function_profile(raw, 1000, threads={one})
    assert p.samples == per_thread[one] and p.threads == [one]
    assert sum(kf.folded(raw, {one}).values()) == per_thread[one] - p.lost_samples


def test_stacks_command_on_a_raw_trial(tmp_path):
    """A captured profiled trial (nft-fw rules=10 at 200 kpps, 999 Hz): its
    folded stacks hold its busy samples, the SVG names the rule walk, and an
    option that picks from a results folder is refused by name."""
    import subprocess

    from tests.conftest import softnet_cmd

    path = Path(__file__).parent / "data" / "raw_trials" / "nftfw_200kpps_profiled_stacks.json"
    result = json.loads(path.read_text())["result"]
    run = subprocess.run(softnet_cmd("stacks", str(path), "--format", "folded"), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    counts = [int(line.rsplit(" ", 1)[1]) for line in run.stdout.splitlines()]
    f = result["profile"]["functions"]
    assert sum(counts) == f["busy_samples"] - f["lost_samples"]
    svg = tmp_path / "t.svg"
    run = subprocess.run(softnet_cmd("stacks", str(path), "-o", str(svg)), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "nft_do_chain" in svg.read_text() and "nft-fw:rules=10 at 200 kpps" in svg.read_text()
    run = subprocess.run(softnet_cmd("stacks", str(path), "--variant", "B"), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "--campaign/--variant/--against" in run.stderr
