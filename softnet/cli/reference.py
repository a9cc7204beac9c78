"""The CLI reference page, written from the commands' own help texts, so
`--help` and docs/reference/cli.md cannot disagree (a test compares them).

    python -m softnet.cli.reference docs/reference
"""
from __future__ import annotations

from pathlib import Path

import click
import typer

from softnet.cli.reference_spec import cell, paged

HEAD = """# CLI reference

Every command and option, as `softnet COMMAND --help` prints them. This page
is generated from those help texts (`python -m softnet.cli.reference
docs/reference`; a test checks it is current): edit the help, not this
page.
"""


def _command(name: str, cmd: click.Command) -> list[str]:
    ctx = click.Context(cmd, info_name=name)
    out = [f"## `{name}`", "", cell(cmd.help or cmd.short_help or ""), "",
           "```", f"Usage: {name} {' '.join(cmd.collect_usage_pieces(ctx))}", "```", ""]
    panels: dict[str, list[tuple[str, str]]] = {}
    for p in cmd.params:
        if getattr(p, "hidden", False):
            continue
        if isinstance(p, click.Argument):
            record = (p.make_metavar(ctx) if _takes_ctx(p) else p.make_metavar(), getattr(p, "help", "") or "")
            panels.setdefault("Arguments", []).append(record)
            continue
        record = p.get_help_record(ctx)
        if record:
            panels.setdefault(getattr(p, "rich_help_panel", None) or "Options", []).append(record)
    for panel, rows in panels.items():
        out += [f"{panel}:", "", "| option | what it does |", "|---|---|"]
        out += [f"| `{cell(opt)}` | {cell(text)} |" for opt, text in rows]
        out.append("")
    return out


def _takes_ctx(p: click.Parameter) -> bool:
    import inspect

    return "ctx" in inspect.signature(p.make_metavar).parameters


def _walk(prefix: str, group: click.Group) -> list[tuple[str, click.Command]]:
    out = []
    for name, cmd in group.commands.items():
        full = f"{prefix} {name}"
        if isinstance(cmd, click.Group):
            out += _walk(full, cmd)
        else:
            out.append((full, cmd))
    return out


def cli_reference() -> str:
    from softnet.cli.main import app

    root = typer.main.get_command(app)
    commands = _walk("softnet", root)
    body: list[str] = []
    for name, cmd in commands:
        body += _command(name, cmd)
    where = {n: "cli.md" for n, _ in commands}
    for _ in range(3):  # the index links each command to the page it lands on, which the index shifts
        index = ["| command | what it does |", "|---|---|"] + [
            f"| [`{n}`]({where[n] if where[n] != 'cli.md' else ''}#{n.replace(' ', '-')}) | "
            f"{cell(c.get_short_help_str(200))} |" for n, c in commands]
        out = paged("cli", HEAD, ["## Commands", ""] + index + [""] + body)
        landed = {line.split("`")[1]: page for page, text in out.items() for line in text.splitlines()
                  if line.startswith("## `")}
        if landed == where:
            break
        where = landed
    return out


def write(folder: Path) -> list[Path]:
    out = []
    for name, text in cli_reference().items():
        (folder / name).write_text(text)
        out.append(folder / name)
    return out


if __name__ == "__main__":
    import sys

    for p in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference")):
        print(p)
