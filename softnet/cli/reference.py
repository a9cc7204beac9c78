"""The CLI reference page, written from the commands' own help texts, so
`--help` and docs/reference/cli.md cannot disagree (a test compares them).

    python -m softnet.cli.reference > docs/reference/cli.md
"""
from __future__ import annotations

import click
import typer

HEAD = """# CLI reference

Every command and option, as `softnet COMMAND --help` prints them. This page
is generated from those help texts (`python -m softnet.cli.reference >
docs/reference/cli.md`; a test checks it is current): edit the help, not
this page.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _command(name: str, cmd: click.Command) -> list[str]:
    ctx = click.Context(cmd, info_name=name)
    out = [f"## `{name}`", "", _cell(cmd.help or cmd.short_help or ""), "",
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
        out += [f"| `{_cell(opt)}` | {_cell(text)} |" for opt, text in rows]
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
    lines = [HEAD, "| command | what it does |", "|---|---|"]
    lines += [f"| [`{n}`](#{n.replace(' ', '-')}) | {_cell(c.get_short_help_str(200))} |" for n, c in commands]
    lines.append("")
    for name, cmd in commands:
        lines += _command(name, cmd)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(cli_reference(), end="")
