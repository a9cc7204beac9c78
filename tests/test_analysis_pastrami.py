"""PASTRAMI reader and analysis on the real published data files."""

from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np
import pytest
from scipy import stats

from softnet.analysis.pastrami_files import (PASTRAMI_DATA_ENV, DataFormatError, list_pastrami_files,
                                             parse_filename, pastrami_data_dir, read_pastrami_file)
from softnet.analysis.saturation import Verdict, analyze_pastrami_file, format_load

PASTRAMI_DATA = pastrami_data_dir()  # $SOFTNET_PASTRAMI_DATA or the shared copy
HAVE_DATA = PASTRAMI_DATA.is_dir()
needs_data = pytest.mark.skipif(
    not HAVE_DATA, reason=f"PASTRAMI data folder {PASTRAMI_DATA} missing (set ${PASTRAMI_DATA_ENV})")
FILES = list_pastrami_files(PASTRAMI_DATA) if HAVE_DATA else []
IDS = [str(p.relative_to(PASTRAMI_DATA)) for p in FILES]
ALLOWED = {"GOOD", "BAD", "INCONCLUSIVE", "NO-SATURATION"}


def raw_lines(path):
    """Independent parse: the JSON lines exactly as the README describes them."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@needs_data
@pytest.mark.skipif(bool(os.environ.get(PASTRAMI_DATA_ENV)), reason="count is for the published set only")
def test_published_set_has_107_files():
    assert len(FILES) == 107


@needs_data
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_every_file_parses_and_matches_raw_json(path):
    rows = read_pastrami_file(path)
    meta = parse_filename(path)
    lines = raw_lines(path)
    assert len(rows) == sum(len(rec) - 1 for rec in lines)
    assert {r.offered_load_pps for r in rows} == {float(rec[0][0]) for rec in lines}
    for rec in lines:
        assert len(rec) - 1 == meta["runs"]
    first = lines[0]
    got = [(r.tx_pkts, r.rx_pkts) for r in rows if r.offered_load_pps == first[0][0]]
    assert got == [(run[0], run[1]) for run in first[1:]]
    assert all(r.duration_s == meta["duration_s"] and r.meta == meta for r in rows)


@needs_data
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_folder_agrees_with_file_name(path):
    # The README: the folder repeats part of the name (exp_t_20, run_30, ebpf_30, ...).
    meta = parse_filename(path)
    folder = path.parent.name
    assert meta["folder"] == folder
    if folder == "exp_t_20":
        assert meta["duration_s"] == 20
    if folder in ("run_30", "ebpf_30"):
        assert meta["runs"] == 30
    assert meta["ebpf_router"] == (folder == "ebpf_30")
    top = path.relative_to(PASTRAMI_DATA).parts[0]
    assert meta["env"] == {"bare-metal": "bare-metal", "vm": "vm", "mazinga": "ns"}[top]


def test_metadata_of_named_files():
    m = parse_filename("bare-metal/ebpf_30/clab_tb1_class_ebpf_raw_30_exp_t_10_k6.5_intel_"
                       "bare-metal_nic_buf_4096_irq_pf0-4_pf1-6.txt")
    assert m == {
        "file": "clab_tb1_class_ebpf_raw_30_exp_t_10_k6.5_intel_bare-metal_nic_buf_4096_irq_pf0-4_pf1-6.txt",
        "folder": "ebpf_30", "site": "clab", "testbed": "tb1", "ebpf_router": True,
        "runs": 30, "duration_s": 10, "kernel": "6.5", "nic": "intel", "env": "bare-metal",
        "nic_ring": "large", "nic_buf": 4096, "irq_pinning": {"kind": "pf", "port0_cpu": 4, "port1_cpu": 6},
        "pinning": "pin-2cpu", "date": None, "ver": None, "exec_ordinal": 1, "exec_note": None}

    m = parse_filename("bare-metal/clab_tb1_raw_50_k6.8_intel_bare-metal_as-is_4th_exec_after-reboot.txt")
    assert (m["duration_s"], m["runs"], m["kernel"], m["nic_ring"], m["nic_buf"], m["pinning"]) == \
        (10, 50, "6.8", "default", None, "unpinned")
    assert (m["exec_ordinal"], m["exec_note"], m["ebpf_router"]) == (4, "after-reboot", False)

    m = parse_filename("mazinga/exp_t_20/mazinga_raw_50_exp_t_20_k6.8_intel_ns_nic_buf_4096_irq_vf0-33_vf1-33.txt")
    assert (m["site"], m["testbed"], m["env"], m["duration_s"]) == ("mazinga", None, "ns", 20)
    assert m["irq_pinning"] == {"kind": "vf", "port0_cpu": 33, "port1_cpu": 33}
    assert m["pinning"] == "pin-1cpu"

    m = parse_filename("vm/clab_tb2_raw_50_k5.15_intel_vm_nic_buf_4096_2nd_exec.txt")
    assert (m["testbed"], m["kernel"], m["env"], m["exec_ordinal"]) == ("tb2", "5.15", "vm", 2)

    m = parse_filename("run_30/clab_tb3_raw_30_exp_t_6_k5.18_intel_bare-metal_as-is.txt")
    assert (m["duration_s"], m["runs"], m["kernel"]) == (6, 30, "5.18")

    # date/ver appear in the paper's figure captions, not in this copy of the data.
    m = parse_filename("clab_tb2_raw_50_exp_t_10_k6.5_intel_bare-metal_nic_buf_4096_date_2024-10-24_ver_02.txt")
    assert (m["date"], m["ver"]) == ("2024-10-24", 2)


@pytest.mark.parametrize("name", [
    "clab_tb1_raw_50_k6.8_intel_bare-metal.txt",          # no as-is / nic_buf
    "clab_tb1_k6.8_intel_bare-metal_as-is.txt",            # no raw_{runs}
    "clab_tb1_raw_50_k6.8_intel_bare-metal_as-is.csv",
    "clab_tb1_raw_50_k6.8_intel_vm_nic_buf_4096_irq_pf0-1_vf1-2.txt",  # mixed pf/vf
])
def test_bad_file_names(name):
    with pytest.raises(DataFormatError, match=re.escape(f"{name}:0: ")):
        parse_filename(name)


NAME = "clab_tb1_raw_2_k6.8_intel_bare-metal_as-is.txt"  # 2 runs, T = 10 s


def write(tmp_path, text, name=NAME):
    p = tmp_path / name
    p.write_bytes(text.encode())
    return p


# 100 kpps and 200 kpps for 10 s; one run counts 3 packets more than were sent.
GOOD_LINES = ["[[100000, 0], [1000000, 1000000, 0], [1000000, 1000003, 0]]",
              "[[200000, 0], [2000000, 1990000, 3], [2000000, 1980000, 7]]"]


def test_small_file_rows_and_rx_above_tx_kept(tmp_path):
    p = write(tmp_path, "\r\n".join(GOOD_LINES) + "\r\n\r\n")  # CRLF and a trailing blank line
    rows = read_pastrami_file(p)
    assert [(r.offered_load_pps, r.run_index, r.tx_pkts, r.rx_pkts, r.line_no) for r in rows] == [
        (1e5, 0, 10**6, 10**6, 1), (1e5, 1, 10**6, 10**6 + 3, 1),
        (2e5, 0, 2 * 10**6, 1990000, 2), (2e5, 1, 2 * 10**6, 1980000, 2)]
    assert [r.counters_inconsistent for r in rows] == [False, True, False, False]
    assert rows[3].rx_discards_cum == 7 and rows[3].duration_s == 10.0
    a = analyze_pastrami_file(p)
    low = a.stats.loads[0]
    assert low.n_runs == 2 and a.stats.excluded == []
    assert low.plr_ratio.mean == 0.0 and low.n_rx_clamped == 1  # clamped, not -1.5e-6
    assert low.throughput_pps.mean == 100000.0  # min(rx, tx) / T
    assert a.stats.loads[1].plr_ratio.mean == pytest.approx(0.0075)  # (0.005 + 0.01) / 2
    (flag,) = [f for f in a.report.flags if f.kind == "rx_clamped"]
    assert flag.count == 1 and flag.loads_pps == [1e5]


def test_extra_fields_kept_uninterpreted(tmp_path):
    p = write(tmp_path, '[[100, 0], [1000, 990, 99.0, 12.5, 1.2, "a"], [1000, 995, 99.5, 12.0, 1.1, "b"]]\n')
    rows = read_pastrami_file(p)
    assert rows[0].extra == (99.0, 12.5, 1.2, "a") and rows[0].rx_discards_cum is None


@pytest.mark.parametrize("bad_line, expected", [
    ("[[200000, 0], [2000000, 1990000, 3], [2000000, 19", "invalid JSON"),  # truncated
    ("[[200, 0], [2000, \"x\", 3], [2000, 1980, 7]]", r"run 0: expected \[tx_pkts, rx_pkts"),
    ("[[200, 0], [2000, -1, 3], [2000, 1980, 7]]", "non-negative integer"),
    ("[[200, 0], [2000.5, 1990, 3], [2000, 1980, 7]]", "non-negative integer"),
    ("[[200, 0], [2000], [2000, 1980, 7]]", r"expected \[tx_pkts, rx_pkts"),
    ("[[0, 0], [2000, 1990, 3], [2000, 1980, 7]]", "rate_pps > 0"),
    ("[[200, 0]]", "at least one run"),
    ("{\"rate\": 200}", "header and at least one run"),
    ("[[200, 0], [2000, 1990, 3]]", "expected 2 runs"),
    ("[[100000, 0], [1000000, 1000000, 0], [1000000, 1000000, 0]]", "already given on line 1"),
])
def test_malformed_line_names_file_and_line(tmp_path, bad_line, expected):
    p = write(tmp_path, GOOD_LINES[0] + "\n" + bad_line + "\n")
    with pytest.raises(DataFormatError, match=expected) as exc:
        read_pastrami_file(p)
    assert str(exc.value).startswith(f"{p}:2: ")
    assert isinstance(exc.value, ValueError) and exc.value.line == 2


def test_empty_file(tmp_path):
    with pytest.raises(DataFormatError, match=":0: expected at least one load line"):
        read_pastrami_file(write(tmp_path, "\n\n"))


@needs_data
def test_truncated_real_file(tmp_path):
    src = PASTRAMI_DATA / "vm" / "clab_tb2_raw_50_k6.8_intel_vm_as-is.txt"
    text = src.read_text()
    lines = text.splitlines()
    cut = "\n".join(lines[:-1] + [lines[-1][: len(lines[-1]) // 2]])  # writer died mid-line
    p = tmp_path / src.name
    p.write_text(cut)
    with pytest.raises(DataFormatError, match="^" + re.escape(f"{p}:{len(lines)}: invalid JSON")):
        read_pastrami_file(p)
    shutil.copy(src, p)  # the intact copy reads fine
    assert len(read_pastrami_file(p)) == len(lines) * 50


# --- computed numbers, recomputed independently from the raw JSON -----------------

ONE_FILE = "bare-metal/run_30/clab_tb3_raw_30_exp_t_6_k5.18_intel_bare-metal_as-is.txt"  # T = 6 s


@needs_data
def test_stats_of_one_file_recomputed_with_numpy():
    path = PASTRAMI_DATA / ONE_FILE
    a = analyze_pastrami_file(path)
    lines = sorted(raw_lines(path), key=lambda rec: rec[0][0])
    assert [s.load_pps for s in a.stats.loads] == [rec[0][0] for rec in lines]
    thr = []
    for rec, s in zip(lines, a.stats.loads):
        c = np.array([run[:2] for run in rec[1:]], dtype=float)
        tx, rx = c[:, 0], np.minimum(c[:, 1], c[:, 0])
        plr = (tx - rx) / tx
        k = len(plr)
        # scipy returns NaN for a zero-width interval; the library reports [mean, mean].
        lo, hi = (stats.t.interval(0.95, k - 1, loc=plr.mean(), scale=plr.std(ddof=1) / np.sqrt(k))
                  if plr.std() > 0 else (plr.mean(), plr.mean()))
        assert s.n_runs == k == 30
        assert s.plr_ratio.mean == pytest.approx(plr.mean(), rel=1e-12, abs=1e-18)
        assert s.plr_ratio.std == pytest.approx(plr.std(ddof=1), rel=1e-9, abs=1e-18)
        assert (s.plr_ratio.ci_lower, s.plr_ratio.ci_upper) == pytest.approx((lo, hi), rel=1e-9, abs=1e-15)
        assert s.dr_ratio.mean == pytest.approx(1 - plr.mean(), rel=1e-12)
        assert s.throughput_pps.mean == pytest.approx(rx.mean() / 6, rel=1e-12)
        if plr.mean() > 0:
            assert s.plr_delta_ucl == pytest.approx((hi - plr.mean()) / plr.mean(), rel=1e-9)
        assert s.n_rx_clamped == int(np.sum(c[:, 1] > c[:, 0]))
        thr.append(rx.mean() / 6)
    loads = [rec[0][0] for rec in lines]
    expected_tir = np.diff(thr) / np.diff(loads)
    assert [st.tir for st in a.stats.tir_steps] == pytest.approx(expected_tir, rel=1e-9, abs=1e-12)


def independent_verdict(path, x=0.005, eta=0.1):
    """Paper sec. V-C with numpy only: first load with mean PLR > x, then all TIR < eta."""
    lines = sorted(raw_lines(path), key=lambda rec: rec[0][0])
    T = parse_filename(path)["duration_s"]
    loads, plr, thr = [], [], []
    for rec in lines:
        c = np.array([run[:2] for run in rec[1:]], dtype=float)
        rx = np.minimum(c[:, 1], c[:, 0])
        loads.append(rec[0][0])
        plr.append(np.mean((c[:, 0] - rx) / c[:, 0]))
        thr.append(np.mean(rx) / T)
    above = [i for i, p in enumerate(plr) if p > x]
    if not above:
        return "NO-SATURATION", None, None
    i = above[0]
    if i == len(loads) - 1:
        return "INCONCLUSIVE", loads[i], None
    tir = np.diff(thr[i:]) / np.diff(loads[i:])
    bad = np.flatnonzero(tir >= eta)
    # saturation onset: first load after the last violating step, None if that is the top load
    onset = loads[i] if bad.size == 0 else loads[i + bad[-1] + 1]
    return ("GOOD" if bad.size == 0 else "BAD"), loads[i], (None if bad.size and onset == loads[-1] else onset)


@needs_data
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_verdict_on_real_file(path):
    a = analyze_pastrami_file(path)
    r = a.report
    assert r.verdict.value in ALLOWED
    json.dumps(a.to_dict(), allow_nan=False)  # JSON-serializable, no NaN tokens
    verdict, point, onset = independent_verdict(path)
    assert (r.verdict.value, r.pdr_point_load_pps, r.saturation_load_pps) == (verdict, point, onset)
    if point is not None:
        assert format_load(point) in r.reason
    if r.verdict is Verdict.BAD:
        s = r.violations[0]
        assert format_load(s.from_load_pps) in r.reason and format_load(s.to_load_pps) in r.reason
    # PDR@0.5% is the tested load just below the PDR point, NDR is not above PDR.
    loads = sorted({rec[0][0] for rec in raw_lines(path)})
    if point is not None:
        i = loads.index(point)
        assert r.pdr_load_pps == (loads[i - 1] if i > 0 else None)
    if r.ndr_load_pps is not None and r.pdr_load_pps is not None:
        assert r.ndr_load_pps <= r.pdr_load_pps


@needs_data
def test_known_shapes_in_real_data():
    # Raw numbers show only the highest load (1.5 Mpps) above 0.5% loss here.
    r = analyze_pastrami_file(PASTRAMI_DATA / "bare-metal/confronto_clab/"
                              "clab_tb3_raw_50_exp_t_10_k5.6_intel_bare-metal_as-is.txt").report
    assert r.verdict is Verdict.INCONCLUSIVE and "1.5 Mpps" in r.reason

    # Lowest load (300 kpps) loses more than 0.5% on average: warm-up artefact.
    path = PASTRAMI_DATA / "bare-metal/confronto_clab/clab_tb1_raw_50_exp_t_10_k5.15_intel_bare-metal_nic_buf_4096.txt"
    lowest = min(raw_lines(path), key=lambda rec: rec[0][0])
    c = np.array([run[:2] for run in lowest[1:]], dtype=float)
    assert np.mean(np.clip((c[:, 0] - c[:, 1]) / c[:, 0], 0, None)) > 0.005
    r = analyze_pastrami_file(path).report
    kinds = {f.kind: f for f in r.flags}
    assert kinds["low_load_loss"].loads_pps == [300000.0]
    assert "sets the PDR point" in kinds["low_load_loss"].message
    assert r.pdr_point_load_pps == 300000.0 and r.pdr_load_pps is None


@needs_data
def test_rx_above_tx_counted_not_excluded():
    path = PASTRAMI_DATA / "bare-metal/clab_tb1_raw_50_k6.8_intel_bare-metal_as-is.txt"
    n_raw = sum(run[1] > run[0] for rec in raw_lines(path) for run in rec[1:])
    assert n_raw > 0  # this file has them (first line: rx = tx + 5)
    a = analyze_pastrami_file(path)
    assert sum(s.n_rx_clamped for s in a.stats.loads) == n_raw
    assert a.stats.excluded == []
    assert min(s.plr_ratio.mean for s in a.stats.loads) >= 0.0


@needs_data
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_loss_inversion_flags_recomputed(path):
    """Inversion = next load's mean PLR below this load's 95% lower confidence limit."""
    expected = set()
    lines = sorted(raw_lines(path), key=lambda rec: rec[0][0])
    per_load = []
    for rec in lines:
        c = np.array([run[:2] for run in rec[1:]], dtype=float)
        per_load.append((rec[0][0], np.clip((c[:, 0] - c[:, 1]) / c[:, 0], 0, None)))
    for (o1, p1), (o2, p2) in zip(per_load, per_load[1:]):
        k = len(p1)
        lcl = p1.mean() - stats.t.ppf(0.975, k - 1) * p1.std(ddof=1) / np.sqrt(k)
        if p2.mean() < lcl:
            expected.add((o1, o2))
    flags = analyze_pastrami_file(path).report.flags
    got = {tuple(f.loads_pps) for f in flags if f.kind == "loss_inversion"}
    assert got == expected
    for f in flags:
        if f.kind == "loss_inversion":
            assert all(format_load(o) in f.message for o in f.loads_pps)


def test_line_numbers_count_blank_lines_and_crlf(tmp_path):
    p = write(tmp_path, GOOD_LINES[0] + "\r\n\r\n" + "[[200000, 0], [2000000]]\r\n")
    with pytest.raises(DataFormatError, match=re.escape(f"{p}:3: run 0")):
        read_pastrami_file(p)


def test_binary_garbage_is_a_format_error(tmp_path):
    p = tmp_path / NAME
    p.write_bytes(b"\xff\xfe\x00[[1")
    with pytest.raises(DataFormatError, match=":0: expected UTF-8"):
        read_pastrami_file(p)


@needs_data
def test_the_nic_discards_say_where_the_loss_happened():
    """The third field is the NIC's cumulative receive discards from the
    line's header value: each run's own discards are its delta, and on this
    Intel NIC they are the loss, run by run (the paper's ring-size knob)."""
    from softnet.analysis.pastrami_files import discard_shares

    path = PASTRAMI_DATA / "bare-metal" / "clab_tb1_raw_50_k6.8_intel_bare-metal_nic_buf_4096.txt"
    rows = read_pastrami_file(path)
    lines = raw_lines(path)
    at_450k = [r for r in rows if r.offered_load_pps == 450_000]
    head, first, second = lines[1][0], lines[1][1], lines[1][2]
    assert at_450k[0].rx_discards_pkts == first[2] - head[1] == 8357  # 8,351 lost (tx - rx)
    assert at_450k[1].rx_discards_pkts == second[2] - first[2]
    shares = {d.load_pps: d for d in discard_shares(rows)}
    assert 300_000 not in shares  # no loss there: nothing to share
    for d in shares.values():
        assert d.share == pytest.approx(1.0, abs=0.01), d  # every lost packet a NIC receive discard
    # a file whose counter never moved while packets were lost says so
    silent = PASTRAMI_DATA / "bare-metal" / "clab_tb1_raw_50_k5.15_intel_bare-metal_as-is.txt"
    silent_shares = discard_shares(read_pastrami_file(silent))
    assert silent_shares and all(d.discarded_pkts == 0 and d.lost_pkts > 0 for d in silent_shares)
    from softnet.cli.campaign_cmd import discard_line

    assert "stayed at 0" in discard_line(silent_shares) and "100% of the loss" in discard_line(list(shares.values()))
    from softnet.analysis.campaigns import analyze_path

    (config,) = analyze_path(path)
    assert [d["lost_pkts"] for d in config.to_dict()["nic_discards"]] == [d.lost_pkts for d in shares.values()]
