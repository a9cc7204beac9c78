"""A stored latency campaign as the study's per-configuration statistics: its
runs' records read back, grouped by matrix cell, with the kernel baseline and
the send interval the outlier rules need."""
from __future__ import annotations

import numpy as np

from softnet.analysis.latency_stats import ConfigStats, config_stats, knob_label
from softnet.errors import InputError
from softnet.results.latency import read_records
from softnet.results.store import Store


def latency_configs(store: Store, campaign_id: str, n_resamples: int = 2000) -> list[ConfigStats]:
    """One ConfigStats per matrix cell that has stored runs, labelled by its
    matrix knobs (all latency knobs when the campaign has no matrix)."""
    runs = store.latency_runs(campaign_id)
    cells = {c["cell_id"]: c for c in store.cells(campaign_id)}
    out = []
    for cell_id in sorted({r["cell_id"] for r in runs}):
        sel = [r for r in runs if r["cell_id"] == cell_id]
        records = []
        for r in sel:
            try:
                records.append(read_records(r["records_path"]))
            except (OSError, ValueError) as exc:
                raise InputError(f"campaign {campaign_id} cell {cell_id} run {r['run_index']}",
                                 f"records unreadable: {exc}") from None
        baselines = [r["kernel_baseline"]["median_ns"] for r in sel
                     if r["kernel_baseline"] and r["kernel_baseline"].get("median_ns") is not None]
        knobs = cells[cell_id]["knobs"] if cell_id in cells and cells[cell_id]["knobs"] else sel[0]["knobs"]
        label = knob_label({k.removeprefix("latency."): v for k, v in knobs.items()})
        out.append(config_stats(sel[0]["knobs"], records, label=label,
                                kernel_baseline=float(np.median(baselines)) if baselines else None,
                                send_interval_ns=sel[0]["interval_s"] * 1e9, n_resamples=n_resamples))
    return out
