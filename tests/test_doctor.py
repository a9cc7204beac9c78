"""softnet doctor: real probes on this machine (root), and cleanup even when a probe fails."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from softnet import doctor
from softnet.doctor import NS_PREFIX, Check, render_table, run_probes

pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, XDP, eBPF)")]

# The checks the brief asks for, written out here (not taken from doctor.py) so a dropped probe fails.
REQUIRED = {"root", "netns", "veth", "xdp_veth", "af_xdp", "tracefs", "kprobes", "fentry_fexit", "kernel_btf",
            "hw_perf_counters", "rapl_power", "irq_time_accounting", "threaded_napi", "rps",
            "qdisc:pfifo", "qdisc:bfifo", "qdisc:tbf", "qdisc:htb", "qdisc:fq_codel", "qdisc:netem", "qdisc:fq",
            "qdisc:clsact", "tc_filter:u32", "tc_filter:bpf", "tc_filter:flower", "tc_filter:matchall",
            "tool:trafgen", "tool:iperf3", "tool:bpftool", "tool:nft", "tool:ethtool", "tool:perf"}


def doctor_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].startswith(NS_PREFIX)]


def doctor_bpf_progs() -> list[int]:
    if not shutil.which("bpftool"):
        return []
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
    return [p["id"] for p in json.loads(out or "[]") if p.get("name") == "sn_doctor"]


def pids_mentioning(text: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return [p for p in pids if p != os.getpid()]


def wait_for(pred, timeout_s: float = 3.0) -> bool:
    """Namespaces and BPF programs are freed asynchronously by the kernel: poll briefly."""
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture(scope="module")
def checks() -> list[Check]:
    assert doctor_namespaces() == [], "a previous run left a doctor namespace behind"
    t0 = time.monotonic()
    result = run_probes()
    elapsed_s = time.monotonic() - t0
    assert elapsed_s < 10, f"the probe should take a few seconds, took {elapsed_s:.1f} s"
    return result


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_returns_every_named_check_once(checks):
    names = [c.name for c in checks]
    assert len(names) == len(set(names)), "duplicate check names"
    assert REQUIRED <= set(names), f"missing: {sorted(REQUIRED - set(names))}"
    assert names == doctor.check_names()
    for c in checks:
        assert c.ok in (True, False, None), c
        assert isinstance(c.detail, str) and c.detail.strip(), c
        assert isinstance(c.enables, str) and c.enables.strip(), c


def test_root_is_ok(checks):
    root = by_name(checks)["root"]
    assert root.ok is True
    assert root.detail == "euid 0"


@pytest.mark.parametrize("name", ["netns", "veth", "xdp_veth", "threaded_napi"])
def test_what_this_machine_can_do(checks, name):
    c = by_name(checks)[name]
    assert c.ok is True, f"{name}: {c.detail}"


def test_details_say_what_was_found(checks):
    c = by_name(checks)
    assert "native (driver) mode" in c["xdp_veth"].detail and "detached on quit" in c["xdp_veth"].detail
    assert "napi/snd" in c["threaded_napi"].detail
    assert c["netns"].detail.count(NS_PREFIX) == 1
    # A required qdisc that is built here, and one DESIGN.md says is not: both answered, not assumed.
    assert c["qdisc:pfifo"].ok is True
    assert c["qdisc:netem"].ok is not None and "tc qdisc add" in c["qdisc:netem"].detail
    # The kernel-BTF answer must match the file, whichever it is.
    assert c["kernel_btf"].ok is Path("/sys/kernel/btf/vmlinux").exists()
    # NIC knobs: what a real veth takes, and each of this host's own NICs, read from their drivers
    assert c["nic_knobs"].ok is True and c["nic_knobs"].detail.startswith("veth takes rx_channels, tx_channels;")
    for dev in (p.name for p in Path("/sys/class/net").iterdir() if (p / "device").exists()):
        assert f"{dev} (" in c["nic_knobs"].detail


def test_result_is_json_serializable(checks):
    text = json.dumps([c.to_dict() for c in checks])
    back = json.loads(text)
    assert len(back) == len(checks)
    assert set(back[0]) == {"name", "ok", "detail", "enables"}
    assert [Check(**d) for d in back] == checks


def test_no_namespace_process_or_program_left(checks):
    assert doctor_namespaces() == []
    assert pids_mentioning(NS_PREFIX) == []
    assert wait_for(lambda: doctor_bpf_progs() == []), doctor_bpf_progs()


def test_tracefs_probe_does_not_mount_on_the_host():
    before = Path("/sys/kernel/tracing/events").exists()
    tfs = doctor.tracefs_info()
    assert Path("/sys/kernel/tracing/events").exists() == before
    assert (tfs.where is None) == (tfs.error is not None)


def test_btf_ids_agree_with_bpftool():
    if not shutil.which("bpftool"):
        pytest.skip("bpftool not installed")
    ids = doctor.btf_ids({"bpf_fentry_test1": doctor.BTF_KIND_FUNC, "btf_trace_napi_poll": doctor.BTF_KIND_TYPEDEF,
                          "no_such_function_xyz": doctor.BTF_KIND_FUNC})
    dump = subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux"],
                          capture_output=True, text=True, check=True).stdout
    assert f"[{ids['bpf_fentry_test1']}] FUNC 'bpf_fentry_test1'" in dump
    assert f"[{ids['btf_trace_napi_poll']}] TYPEDEF 'btf_trace_napi_poll'" in dump
    assert "no_such_function_xyz" not in ids


def test_failing_probe_is_reported_and_namespace_removed(monkeypatch):
    seen = {}

    def broken(lab):
        seen["ns"] = lab.ns
        seen["existed"] = Path("/run/netns", lab.ns).exists()
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(doctor, "_probe_threaded_napi", broken)
    result = by_name(run_probes())
    assert seen["existed"], "the namespace should exist while probes run"
    assert result["threaded_napi"].ok is None
    assert "simulated failure" in result["threaded_napi"].detail
    assert result["rps"].ok is True  # the probes after it still ran
    assert not Path("/run/netns", seen["ns"]).exists()
    assert doctor_namespaces() == []


def test_interrupt_with_sink_running_cleans_up(monkeypatch):
    """Ctrl-C while softnet-sink holds XDP on the temp veth: the process dies and the namespace goes."""
    seen = {}

    def interrupted(lab, dev):
        seen["ns"] = lab.ns
        seen["pids"] = pids_mentioning(lab.ns)
        raise KeyboardInterrupt

    monkeypatch.setattr(doctor.lab, "_xdp_state", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_probes()
    assert seen["pids"], "softnet-sink should have been running when the interrupt came"
    assert all(not Path(f"/proc/{p}").exists() for p in seen["pids"]), "softnet-sink survived"
    assert not Path("/run/netns", seen["ns"]).exists()
    assert doctor_namespaces() == []


def test_render_table_shows_every_check_literally():
    checks = [Check("x", True, "[Errno 1] [bold]not markup[/bold]", "e1"),
              Check("y", False, "missing", "e2"), Check("z", None, "unknown", "e3")]
    table = render_table(checks)
    assert table.row_count == 3
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "[Errno 1] [bold]not markup[/bold]" in text
    for word in ("yes", "no", "unknown", "e1", "e2", "e3"):
        assert word in text


def test_the_command_sums_up_on_one_screen():
    r = subprocess.run([sys.executable, "-m", "softnet", "doctor"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "80"})
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0].startswith("softnet doctor: ") and len(lines) <= 40, r.stdout + r.stderr
    assert max(len(x) for x in lines) <= 80 and "--verbose" in r.stdout
