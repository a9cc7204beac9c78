"""What a running campaign tells its viewers (`softnet serve`): the trial in
progress, its kernel figures at each sample, and how far the campaign is.
Written next to the campaign's raw trials (softnet.results.live), removed
when the campaign ends as planned, marked interrupted when it ends early.
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Callable

from softnet.campaign.spec import CampaignSpec
from softnet.results.live import HISTORY_POINTS, LiveCampaign, LiveSample, LiveTrial, clear_live, write_live
from softnet.results.soak import CriticalLoad
from softnet.results.stored import knobs_label


UNITS = {"sweep": "trials", "search": "searches", "compare": "trials", "latency": "runs", "soak": "seconds"}


class LiveWriter:
    """``with LiveWriter(folder, cid, kind) as w:``; the campaign's progress
    events go through ``w.progress``; a trial passes ``w.trial(...)`` to its
    measure as the callback that adds each kernel sample."""

    def __init__(self, folder: Path, campaign_id: str, kind: str):
        self.folder = folder
        now = time.time()
        self.state = LiveCampaign(campaign_id=campaign_id, kind=kind, unit=UNITS.get(kind, "trials"),
                                  pid=os.getpid(), hostname=socket.gethostname(), started_unix_s=now,
                                  updated_unix_s=now)

    def __enter__(self) -> "LiveWriter":
        self._write()
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is None:
            clear_live(self.folder)
        else:  # Ctrl-C or an error: a viewer shows the campaign as interrupted (a resume clears it)
            self.state.state, self.state.trial = "interrupted", None
            self._write()

    def _write(self) -> None:
        self.state.updated_unix_s = time.time()
        write_live(self.folder, self.state)

    def progress(self, kind: str, done: int, planned: int) -> None:
        """A campaign event: "plan" first (what was stored before sets the
        pace's start), "trial" / "search" when one ended."""
        st = self.state
        if st.done_at_start is None:
            st.done_at_start, st.started_unix_s = done, time.time()
        st.done, st.planned = done, planned
        if kind in ("trial", "search"):
            st.trial = None
        self._write()

    def estimate(self, cell_id: int, critical: CriticalLoad) -> None:
        """A soak's estimate after its last trial."""
        self.state.estimate, self.state.estimate_cell = critical, cell_id
        self._write()

    def trial(self, cell_id: int, load_index: int, run_index: int, knobs: dict, rate_pps: float,
              cell: CampaignSpec, duration_s: float | None = None) -> Callable[[LiveSample], None]:
        """Announce a trial of ``cell`` (``duration_s``: its window, when not
        the cell's); the callback adds each of its samples."""
        m = cell.method
        self.state.trial = LiveTrial(cell_id=cell_id, load_index=load_index, run_index=run_index,
                                     configuration=knobs_label(knobs), intended_rate_pps=rate_pps,
                                     started_unix_s=time.time(), expected_s=m.warmup_s + (duration_s or m.duration_s),
                                     sut_cpus=list(cell.testbed.sut_cpus or []))
        self._write()

        def sample(s: LiveSample) -> None:
            t = self.state.trial
            if t is not None:
                t.samples = [*t.samples[-(HISTORY_POINTS - 1):], s]
                self._write()

        return sample
