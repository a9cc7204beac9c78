"""The commands about real hosts: inventory check (and the remote trial's output)."""
from __future__ import annotations

from pathlib import Path

from rich.table import Table

from softnet.cli.output import console, print_json


def inventory_check(path: Path, doctor: bool, as_json: bool) -> int:
    """Exit code 1 when any field of the inventory does not match its host."""
    from softnet.hosts.check import check_inventory
    from softnet.hosts.inventory import load

    inv = load(path)
    found = check_inventory(inv, doctor)
    if as_json:
        print_json(found)
        return 1 if found["problems"] else 0
    table = Table(title=f"inventory {path}", title_justify="left")
    for col in ("host", "reached", "kernel", "softnet", "clock", "ifaces"):
        table.add_column(col, no_wrap=col != "kernel", overflow="fold")
    for name, h in found["hosts"].items():
        if not h["reachable"]:
            table.add_row(name, "no", "-", "-", "-", "-")
            continue
        n_if = len(inv.hosts[name].interfaces)
        bad = {p["field"].split(".")[3] for p in found["problems"]
               if p["field"].startswith(f"hosts.{name}.interfaces.")}
        table.add_row(name, "yes", h["host"]["kernel"], h["softnet_version"],
                      f"{h['clock_offset_ms']:+.1f} ms", f"{n_if - len(bad)}/{n_if} ok")
    console.print(table)
    for p in found["problems"]:
        console.print(f"[red]{p['field']}[/]: {p['error']}", soft_wrap=False, highlight=False)
    if not found["problems"]:
        console.print("inventory check: every host and interface matches")
    return 1 if found["problems"] else 0
