"""Output helpers: JSON for scripts (stdout), tables and progress for people (stderr for progress).

Every number a person reads goes through ``eng`` (or ``sci`` for ratios), so a
table column is a few characters wide and fits 80 columns: ``1.67 Mpps``,
``850 kpps``, ``2.1e-2``. Tables built with ``table`` show fewer columns by
default and all of them with ``--wide``.
"""
from __future__ import annotations

import json
import math
import sys
import textwrap
import time
from dataclasses import dataclass
from typing import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from softnet.jsonsafe import json_safe

console = Console()
err_console = Console(stderr=True)

_PREFIXES = ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))


def print_json(obj) -> None:
    json.dump(json_safe(obj), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def plain(text: str) -> None:
    """A line as it is: no markup, no highlighting."""
    console.print(text, markup=False, highlight=False)


def print_error(exc: BaseException) -> None:
    """One error line on stderr: the message verbatim (no markup, no wrapping),
    so a path or a ``[rate_pps, ...]`` in it reads as written."""
    err_console.print("[red]softnet: error:[/] ", end="")
    err_console.print(str(exc), markup=False, highlight=False, soft_wrap=True)


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def eng(v, unit: str = "", digits: int = 3) -> str:
    """A number in engineering form with an SI prefix on its unit:
    1_669_000, "pps" -> "1.67 Mpps"; 850_000 -> "850k"; 0.0123, "s" -> "12.3 ms".
    Integers below 10,000 stay exact (a count of 7 lost packets is 7); a
    unitless number below 1 keeps ``digits`` significant digits (0.95)."""
    if _missing(v):
        return "-"
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return str(v)
    sep = " " if unit else ""
    if v == 0 or (float(v).is_integer() and abs(v) < 10_000):
        return f"{int(v)}{sep}{unit}"
    if not unit and abs(v) < 1:
        mantissa, e, exp = f"{v:.{digits}g}".partition("e")
        return mantissa + (f"e{int(exp)}" if e else "")
    for i, (scale, prefix) in enumerate(_PREFIXES):
        if abs(v) >= scale:
            text = _significant(v / scale, digits)
            if abs(float(text)) >= 1000 and i > 0:  # 999.96 k rounds up: 1.00 M
                scale, prefix = _PREFIXES[i - 1]
                text = _significant(v / scale, digits)
            return f"{text}{' ' if unit or prefix else ''}{prefix}{unit}"
    return sci(v) + sep + unit


def _significant(x: float, digits: int) -> str:
    """x in [1, 1000): ``digits`` significant digits, never fewer than its integer part."""
    return f"{x:.{max(digits - len(str(int(abs(x)))), 0)}f}"


def sci(v, digits: int = 2) -> str:
    """A ratio in compact scientific form: 0.021 -> "2.1e-2", 0 -> "0"."""
    if _missing(v):
        return "-"
    if v == 0:
        return "0"
    mantissa, _, exp = f"{v:.{digits - 1}e}".partition("e")
    return f"{mantissa}e{int(exp)}"


def count(v) -> str:
    """An exact count with thousands separators: 465,659 (a trial's packets)."""
    return "-" if _missing(v) else f"{int(v):,}"


def fixed(v, digits: int = 1, signed: bool = False) -> str:
    """Fixed decimals, for numbers on a known scale: a percentage (12.34 -> "12.3",
    the header says %), a TIR (0.999)."""
    return "-" if _missing(v) else f"{v:{'+' if signed else ''}.{digits}f}"


pct = fixed


def fmt(v, digits: int = 3) -> str:
    """Any value: numbers through ``eng``, the rest as text."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) and v is not None:
        return str(v)
    return eng(v, digits=digits)


@dataclass(frozen=True)
class Col:
    """A table column: ``wide`` columns show only with --wide; ``text`` columns
    wrap (numbers never do, so they are never cut)."""

    header: str
    wide: bool = False
    text: bool = False
    justify: str = "right"


def table(title: str | None, cols: list[Col], rows: Iterable[list], wide: bool = False, **kw) -> Table:
    """A table of the columns ``cols`` (all of them if ``wide``). A number
    column's header is folded onto lines as narrow as its numbers, so the
    column is as narrow as its widest number and never cut."""
    keep = [i for i, c in enumerate(cols) if wide or not c.wide]
    rows = [[row[i] for i in keep] for row in rows]
    t = Table(title=title, header_style="bold", **kw)
    for j, i in enumerate(keep):
        c = cols[i]
        header = c.header
        if not c.text:
            cells = max((Text.from_markup(r[j]).cell_len for r in rows), default=0)
            words = max(len(w) for w in header.split())
            header = textwrap.fill(header, max(cells, words))
        t.add_column(header, justify="left" if c.text else c.justify, no_wrap=not c.text,
                     overflow="fold" if c.text else "ellipsis")
    for row in rows:
        t.add_row(*row)
    return t


def chunks(items: list, n: int) -> list[list]:
    """Columns per load split into tables of ``n`` loads, so 10 loads fit 80 columns."""
    return [items[i:i + n] for i in range(0, len(items), n)] or [[]]


def kv_table(title: str, rows: list[tuple[str, object, str]]) -> Table:
    """quantity | value | note; a value that is not already text goes through ``fmt``."""
    return table(title, [Col("quantity", text=True), Col("value"), Col("note", text=True)],
                 ([name, value if isinstance(value, str) else fmt(value), note] for name, value, note in rows))


class Progress:
    """Progress of a long run on stderr: a rich bar with the trial in progress
    and the time left on a terminal; otherwise (a log file, a pipe) one plain
    line per finished step. ``off``: nothing (--json)."""

    def __init__(self, title: str, off: bool = False):
        self.title, self.off = title, off
        self.live = not off and err_console.is_terminal
        self.done, self.total, self.started = 0, None, time.monotonic()

    def __enter__(self) -> "Progress":
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeRemainingColumn
            from rich.table import Column

            # Numbers first at fixed widths; the description takes what is left and
            # is the only thing shortened on a narrow terminal.
            self.bar = Bar(MofNCompleteColumn(), BarColumn(bar_width=10), TextColumn("left"), TimeRemainingColumn(),
                           TextColumn("[bold]{task.description}",
                                      table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
                           console=err_console, transient=True, expand=True)
            self.bar.__enter__()
            self.task = self.bar.add_task(self.title, total=None)
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self.bar.__exit__(*exc)

    def update(self, done: int, total: int | None, now: str | None = None) -> None:
        """``now``: what is running (a trial's load, run), shown beside the bar."""
        self.done, self.total = done, total
        if self.live:
            self.bar.update(self.task, completed=done, total=total, description=self.title if now is None else now)

    def log(self, message: str) -> None:
        """A line that stays (plan, probe, a finished search; every trial off a terminal)."""
        if self.off:
            return
        if self.live:
            self.bar.console.print(message, markup=False, highlight=False)
            return
        left = self.time_left()
        step = f"[{self.done}/{self.total}] " if self.total else ""
        err_console.print(f"{step}{message}" + (f" ({left} left)" if left else ""), markup=False,
                          highlight=False, soft_wrap=True)

    def time_left(self) -> str | None:
        if not self.total or not self.done or self.done >= self.total:
            return None
        s = (time.monotonic() - self.started) / self.done * (self.total - self.done)
        return f"{s / 60:.0f} min" if s >= 90 else f"{s:.0f} s"
