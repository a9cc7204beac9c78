"""Synthetic load-loss model of PASTRAMI sec. IV-B (eq. 3-5) as a simulated SUT.

Above the saturation offered load O^sat (paper symbols -> parameters):

    T(O) = f(O) * T^sat,   T^sat = O^sat * (1 - PLR(O^sat))          (eq. 4)
    f(O) = 1                              for O^sat < O < O^trash
         = max(0, 1 - (O - O^trash) / M)  for O >= O^trash             (eq. 5)
    PLR(O) = 1 - T(O) / O                                               (eq. 3)

Eq. 5 is printed with f(x), x = O - O^sat, compared against O^sat and
O^trash; that only makes sense (and only reproduces Fig. 4: O^sat = 1 Mpps,
O^trash = 1.5 Mpps, M = 1 Mpps) when the conditions are read on the offered
load O itself, which is what this module does.

Below O^sat the paper gives no formula, only that real loss "smoothly
increases" up to PLR(O^sat). softnet's stand-in: PLR(O) = PLR(O^sat) *
(O / O^sat) ** pre_sat_exponent. With plr_at_sat = 0 (default) the model is
the ideal curve of Fig. 3: no loss up to O^sat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .pastrami_files import TrialRow


@dataclass(frozen=True)
class LoadLossModel:
    """Simulated SUT: ``model(offered_load_pps, duration_s, rng) -> (tx, rx)``.

    o_sat_pps:   O^sat, saturation offered load.
    plr_at_sat:  PLR(O^sat); sets T^sat = O^sat * (1 - plr_at_sat).
    o_trash_pps: O^trash, start of thrashing (inf = throughput stays T^sat).
    m_pps:       M, load span over which throughput falls from T^sat to 0.
    pre_sat_exponent: shape of the loss below O^sat (softnet addition).
    noise:       rx ~ Binomial(tx, DR(O)) per run; otherwise rx = round(tx * DR(O)).
    """

    o_sat_pps: float
    plr_at_sat: float = 0.0
    o_trash_pps: float = math.inf
    m_pps: float = 1e6
    pre_sat_exponent: float = 8.0
    noise: bool = True

    def __post_init__(self):
        if not self.o_sat_pps > 0:
            raise ValueError("o_sat_pps must be > 0")
        if not 0.0 <= self.plr_at_sat < 1.0:
            raise ValueError("plr_at_sat must be in [0, 1)")
        if not self.o_trash_pps >= self.o_sat_pps:
            raise ValueError("o_trash_pps must be >= o_sat_pps")
        if not self.m_pps > 0:
            raise ValueError("m_pps must be > 0")

    @property
    def t_sat_pps(self) -> float:
        return self.o_sat_pps * (1.0 - self.plr_at_sat)

    def f(self, o: float) -> float:
        """Eq. 5 (read on the offered load, see module docstring)."""
        if o < self.o_trash_pps:
            return 1.0
        return max(0.0, 1.0 - (o - self.o_trash_pps) / self.m_pps)

    def throughput_pps(self, o: float) -> float:
        """Expected throughput T(O)."""
        if o <= self.o_sat_pps:
            return o * (1.0 - self.plr_at_sat * (o / self.o_sat_pps) ** self.pre_sat_exponent)
        return self.f(o) * self.t_sat_pps

    def plr(self, o: float) -> float:
        """Expected packet loss ratio, 1 - T(O)/O."""
        return 1.0 - self.throughput_pps(o) / o

    def __call__(self, offered_load_pps: float, duration_s: float,
                 rng: np.random.Generator | None = None) -> tuple[int, int]:
        tx = int(round(offered_load_pps * duration_s))
        dr = min(1.0, max(0.0, 1.0 - self.plr(offered_load_pps)))
        if not self.noise:
            return tx, int(round(tx * dr))
        if rng is None:
            raise ValueError("noise=True needs a numpy Generator")
        return tx, int(rng.binomial(tx, dr))


def simulate_sweep(sut, loads_pps: Sequence[float], runs: int, duration_s: float,
                   rng: np.random.Generator | None = None) -> list[TrialRow]:
    """Run ``sut`` ``runs`` times at each load; rows like read_pastrami_file's."""
    meta = {"source": "synthetic", "runs": runs, "duration_s": duration_s}
    rows = []
    for line_no, load in enumerate(loads_pps, start=1):
        for i in range(runs):
            tx, rx = sut(load, duration_s, rng)
            rows.append(TrialRow(float(load), i, tx, rx, float(duration_s),
                                 source="synthetic", line_no=line_no, meta=meta))
    return rows


@dataclass(frozen=True)
class ModelCurve:
    """The model's expected curves over a load grid (the paper's Figs. 3-5)
    and, beside them, the means a campaign measured at its loads."""

    label: str
    loads_pps: list[float]
    plr: list[float]  # PLR(O), eq. 3
    delivery: list[float]  # DR(O) = T(O) / O
    ideal_plr: list[float]  # Fig. 3: no loss up to O^sat, then 1 - O^sat / O
    measured: list[tuple[float, float]]  # (load, mean PLR over its runs)


def model_curve(label: str, model: LoadLossModel, measured: Sequence[tuple[float, float]],
                points: int = 400) -> ModelCurve:
    """The model from 0 to past the highest load measured (or 2 O^sat)."""
    top = max([model.o_sat_pps * 2, *(o for o, _ in measured)]) * 1.05
    grid = np.linspace(top / points, top, points)
    plr = [model.plr(float(o)) for o in grid]
    ideal = [max(0.0, 1.0 - model.o_sat_pps / o) for o in grid]
    return ModelCurve(label, grid.tolist(), plr, [1.0 - p for p in plr], ideal, sorted(measured))
