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

from softnet.results.live import HISTORY_POINTS, LiveCampaign, LiveSample, LiveTrial, clear_live, write_live
from softnet.results.stored import knobs_label


class LiveWriter:
    """``with LiveWriter(folder, cid, total, done) as w:`` then, per trial,
    ``cb = w.trial(...)``, ``m.measure(..., live=cb)``, ``w.trial_done()``."""

    def __init__(self, folder: Path, campaign_id: str, total: int, done: int):
        self.folder = folder
        now = time.time()
        self.state = LiveCampaign(campaign_id=campaign_id, pid=os.getpid(), hostname=socket.gethostname(),
                                  started_unix_s=now, updated_unix_s=now, done_trials=done, total_trials=total,
                                  done_at_start=done)

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

    def trial(self, cell_id: int, load_index: int, run_index: int, knobs: dict, rate_pps: float,
              expected_s: float, sut_cpus: list[int] | None = None) -> Callable[[LiveSample], None]:
        """Announce a trial; the callback adds each of its samples."""
        label = knobs_label(knobs)
        self.state.trial = LiveTrial(cell_id=cell_id, load_index=load_index, run_index=run_index,
                                     configuration=label, intended_rate_pps=rate_pps, started_unix_s=time.time(),
                                     expected_s=expected_s, sut_cpus=list(sut_cpus or []))
        self._write()

        def sample(s: LiveSample) -> None:
            t = self.state.trial
            if t is not None:
                t.samples = [*t.samples[-(HISTORY_POINTS - 1):], s]
                self._write()

        return sample

    def trial_done(self, done: int) -> None:
        self.state.done_trials, self.state.trial = done, None
        self._write()
