"""What every strategy shares: the step it nominates, the verdict it gives,
and the interface the controller (algorithm.py) calls.

A strategy is one piece of the method: bracketing, bisection, the knee
model, the inversion check. The controller asks them in a fixed order for
each goal; the first that answers decides what that goal wants next. A
strategy reads the settings from the config and the evidence from the search
state; what it must remember between calls it keeps itself.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

from softnet.search.model import Goal

if TYPE_CHECKING:
    from softnet.search.state import SearchState, View


@dataclass
class Step:
    """A trial to run: the load, its duration and why (passed to on_trial)."""

    load_pps: float
    duration_s: float
    why: str


@dataclass
class Done:
    """A goal's verdict: status (as GoalResult.status) and its diagnosis."""

    status: str
    diagnosis: str


class Strategy(ABC):
    def __init__(self, state: SearchState):
        self.state, self.config = state, state.config

    @abstractmethod
    def nominate(self, goal: Goal, view: View) -> Step | Done | None:
        """The goal's next trial, its verdict, or None when the goal is not
        in this strategy's case and the next strategy decides."""
