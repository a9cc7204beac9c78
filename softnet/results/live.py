"""A running campaign's state, as its controller writes it for viewers:
``raw/<campaign>/live.json`` next to the campaign's raw trials, replaced
whole (tmp file + rename) at every kernel sample, so a reader never sees
half a file. Its absence means the campaign ended as planned; a file whose
writer is gone means the run was interrupted.
"""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from softnet.results.soak import CriticalLoad

LIVE_FILE = "live.json"
HISTORY_POINTS = 600  # per-second points kept for a page opened mid-trial


class LiveCpu(BaseModel):
    """One CPU over the last sample interval (the trial JSON's per-CPU rates, per interval)."""

    model_config = ConfigDict(extra="forbid")

    busy_pct: float  # 100 x (1 - idle / wall): kernel_stats' cpu_time_pct
    net_rx_softirqs_per_s: float
    net_tx_softirqs_per_s: float
    softirq_tick_pct: float | None = None


class LiveSample(BaseModel):
    """The kernel's figures over the last sample interval of a running trial."""

    model_config = ConfigDict(extra="forbid")

    elapsed_s: float  # since the generators started (warm-up included)
    interval_s: float
    offered_pps: float | None = None  # into the SUT's ingress interface
    forwarded_pps: float | None = None  # out of the SUT's egress interface
    received_pps: float | None = None  # at the sink's interface
    loss_ratio: float | None = None  # 1 - received / offered over the interval
    per_cpu: dict[int, LiveCpu] = {}


class LiveTrial(BaseModel):
    """The trial in progress and the campaign around it."""

    model_config = ConfigDict(extra="forbid")

    cell_id: int
    load_index: int
    run_index: int
    configuration: str  # the cell's knobs, "k=v, ..." ("": none)
    intended_rate_pps: float
    started_unix_s: float
    expected_s: float  # warm-up + window at the intended rate
    sut_cpus: list[int] = []
    samples: list[LiveSample] = []  # oldest first, at most HISTORY_POINTS

    @property
    def latest(self) -> LiveSample | None:
        return self.samples[-1] if self.samples else None


class LiveCampaign(BaseModel):
    model_config = ConfigDict(extra="forbid")

    campaign_id: str
    kind: str  # the method: sweep, search, compare, latency
    unit: str  # what done and planned count: trials, searches, runs
    pid: int
    hostname: str
    started_unix_s: float
    updated_unix_s: float
    done: int = 0
    planned: int = 0
    done_at_start: int | None = None  # stored before this run began (a resumed campaign)
    state: Literal["running", "interrupted"] = "running"
    trial: LiveTrial | None = None  # None between trials
    estimate: CriticalLoad | None = None  # a soak's critical load after its last trial
    estimate_cell: int | None = None  # the cell whose soak it is

    def writer_alive(self) -> bool:
        """Whether the controller that writes it still runs (on this host: its pid)."""
        if self.state != "running":
            return False
        if self.hostname != socket.gethostname():
            return True  # another host's run: its own word
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def time_left_s(self, now: float) -> float | None:
        """What is left at the mean pace of what this run has done."""
        ran = self.done - (self.done_at_start or 0)
        if ran <= 0:
            return None
        return (now - self.started_unix_s) / ran * max(0, self.planned - self.done)


def write_live(folder: Path, live: LiveCampaign) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{LIVE_FILE}.{os.getpid()}"
    tmp.write_text(live.model_dump_json())
    os.replace(tmp, folder / LIVE_FILE)


def read_live(folder: Path) -> LiveCampaign | None:
    """The campaign's live state; None when there is none (or it cannot be read: a viewer shows stored data)."""
    try:
        return LiveCampaign.model_validate(json.loads((folder / LIVE_FILE).read_text()))
    except (OSError, ValueError, ValidationError):
        return None


def clear_live(folder: Path) -> None:
    (folder / LIVE_FILE).unlink(missing_ok=True)
