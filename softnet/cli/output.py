"""Output helpers: JSON for scripts (stdout), tables and progress for people (stderr for progress)."""
from __future__ import annotations

import json
import math
import sys

from rich.console import Console
from rich.table import Table

from softnet.jsonsafe import json_safe

console = Console()
err_console = Console(stderr=True)


def print_json(obj) -> None:
    json.dump(json_safe(obj), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_error(exc: BaseException) -> None:
    """One error line on stderr: the message verbatim (no markup, no wrapping),
    so a path or a ``[rate_pps, ...]`` in it reads as written."""
    err_console.print("[red]softnet: error:[/] ", end="")
    err_console.print(str(exc), markup=False, highlight=False, soft_wrap=True)


def fmt(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}" if v.is_integer() or abs(v) >= 1e5 else f"{v:,.1f}"
        return f"{v:.{digits}g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def kv_table(title: str, rows: list[tuple[str, object, str]]) -> Table:
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_column("unit / note")
    for name, value, unit in rows:
        table.add_row(name, fmt(value), unit)
    return table
