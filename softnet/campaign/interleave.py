"""Trials that take turns: several variants measured in the same seconds.

A host's pace drifts over seconds (on the test VM the SUT vCPU's time per
packet moved by 7-14% between trials one second apart), and a paired
comparison of trials run one after the other carries that drift into every
pair. Here all the variants' testbeds are up at once and their generators
share one schedule: each period is cut into one slot per variant, and
variant k sends its burst in slot k (onoff arrivals, the load's rate inside
the burst), then sleeps while the others send. Every variant sees the host
of the same seconds, a slot apart, and its figures come from its own
testbed's counters and NAPI kthreads as in any trial. A guard at the end of
each slot lets the last burst drain before the next variant starts. A burst
the generator cannot pace (a flood beyond what its CPU sends) runs late into
the next slot: the trials then overlap, alike for every variant.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Callable

from softnet import interrupts
from softnet.errors import InputError, TestbedError
from softnet.results.trial import Interleave, TrialSpec

GUARD_S = 0.001  # the end of every slot left idle: the burst before it drains
LEAD_S = 0.3  # the shared schedule starts this long after the last trial is ready (its generator loads)
READY_TIMEOUT_S = 120.0  # a trial that never gets ready (its testbed failed): the others give up
SLEEP_GAPS_US = 500.0  # each generator sleeps through gaps this long: its CPU is the others' in them


@dataclass(frozen=True)
class Turns:
    """``n`` variants in slots of a ``period_s`` cycle."""

    n: int
    period_s: float

    @property
    def duty(self) -> float:
        """Each variant's share of the time on: its slot less the guard."""
        return (self.period_s / self.n - GUARD_S) / self.period_s

    def check(self, field: str) -> None:
        if self.n < 2:
            raise InputError(field, "interleaving takes two or more variants")
        shortest_s = 2 * GUARD_S + SLEEP_GAPS_US * 1e-6  # a burst, the guard, and a gap the generator sleeps in
        if not self.period_s / self.n >= shortest_s:
            raise InputError(field, f"{self.period_s * 1e3:g} ms: each of {self.n} variants' slots must last at "
                             f"least {shortest_s * 1e3:g} ms (a period of {shortest_s * self.n * 1e3:g} ms or more)")

    def spec(self, spec: TrialSpec) -> TrialSpec:
        """A variant's trial: the load's rate inside its bursts, over a window
        ``n`` times as long (the trial-seconds the variants would have spent
        one after the other); so it sends ``n x duty`` (0.9 with two) of
        the packets a trial on its own would."""
        mean = spec.rate_pps * self.duty
        burst = max(1, round(mean * self.period_s))
        # the cycle is burst / mean: the same for every variant, so the slots never drift apart
        return replace(spec, rate_pps=burst / self.period_s, duration_s=spec.duration_s * self.n, arrivals="onoff",
                       burst_pkts=burst, on_duty=self.duty, sleep_gaps_us=SLEEP_GAPS_US)

    def offset_ns(self, k: int) -> int:
        return round(k * self.period_s / self.n * 1e9)


class Origin:
    """Where the trials wait for each other: before their generators start
    (the last one ready fixes the schedule's origin, ``LEAD_S`` ahead) and
    when all have sent (no trial's reads take the CPU from a partner's
    generator still sending)."""

    def __init__(self, turns: Turns):
        self.turns = turns
        self.t0_ns = 0
        self.ready = threading.Barrier(turns.n, action=self._fix)
        self.done = threading.Barrier(turns.n)

    def _fix(self) -> None:
        self.t0_ns = time.monotonic_ns() + round(LEAD_S * 1e9)

    def wait(self, barrier: threading.Barrier) -> None:
        try:
            barrier.wait(READY_TIMEOUT_S)
        except threading.BrokenBarrierError:
            raise TestbedError(PARTNER_STOPPED) from None

    def abort(self) -> None:
        self.ready.abort()
        self.done.abort()


PARTNER_STOPPED = "an interleaved trial stopped while its partners ran (its own error is reported with it)"


@dataclass(frozen=True)
class Slot:
    """Trial k's side of an Origin (softnet.campaign.trial.Together)."""

    origin: Origin
    k: int

    def start_at(self) -> int:
        self.origin.wait(self.origin.ready)
        return self.origin.t0_ns + self.origin.turns.offset_ns(self.k)

    def end_at(self, pkts: int, burst_pkts: int) -> int:
        """The end of the cycle in which the last slot sends its last burst."""
        return self.origin.t0_ns + round(-(-pkts // burst_pkts) * self.origin.turns.period_s * 1e9)

    def sent(self) -> None:
        self.origin.wait(self.origin.done)


def run_together(turns: Turns, run: Callable[[int, Slot], dict]) -> list[dict]:
    """``run(k, slot)`` for every variant k at once, each in its own
    thread (they mostly wait on their tools); their results in order. The
    first error, after every trial has stopped, is raised (a signal too:
    each trial unwinds its own changes)."""
    origin = Origin(turns)
    results: list[dict | None] = [None] * turns.n
    errors: list[BaseException | None] = [None] * turns.n

    def body(k: int) -> None:
        try:
            results[k] = run(k, Slot(origin, k))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            errors[k] = exc
            origin.abort()

    threads = [threading.Thread(target=body, args=(k,), name=f"interleaved-{k}") for k in range(turns.n)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:
        origin.abort()  # a signal here: the trials see it at their next check and unwind
        for t in threads:
            t.join()
        raise
    interrupts.check()
    # the trial that failed first, not the partners it broke
    first = next((e for e in errors if e is not None and not _broken(e)), None) or next(
        (e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return [r for r in results if r is not None]


def _broken(exc: BaseException) -> bool:
    return isinstance(exc, TestbedError) and str(exc) == PARTNER_STOPPED


@dataclass(frozen=True)
class Turn:
    """One trial's place among interleaved ones."""

    slot: Slot
    partners: frozenset[str]  # the other trials' testbed run ids

    @property
    def turns(self) -> Turns:
        return self.slot.origin.turns

    def record(self) -> dict:
        """What the raw trial keeps of it (softnet.results.trial.Interleave)."""
        return Interleave(variants=self.turns.n, slot=self.slot.k, period_s=self.turns.period_s,
                          duty=self.turns.duty, partners=sorted(self.partners)).model_dump()


def measure_together(turns: Turns, measurers: list, rate_pps: float, load_index: int, run_index: int) -> list[dict]:
    """One trial per measurer at ``rate_pps``, taking turns (measurer k in slot k)."""
    ids = [m.run_id() for m in measurers]

    def one(k: int, slot: Slot) -> dict:
        turn = Turn(slot, frozenset(ids[:k] + ids[k + 1:]))
        return measurers[k].measure(rate_pps, load_index, run_index, turn=turn)

    return run_together(turns, one)
