"""`softnet doctor`'s summary for people: what works, by group, on a line
or two each; what does not, and what that disables; what each check found
is behind --verbose and in --json."""
from __future__ import annotations

import io

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from softnet.doctor.checks import Check

# the groups in the order a newcomer needs them: the testbed first
GROUPS = (("testbed", ("root", "netns", "veth", "xdp_veth", "af_xdp", "threaded_napi", "rps", "nic_knobs")),
          ("qdiscs", ("qdisc:",)), ("tc", ("tc_filter:", "tc_action:")),
          ("eBPF", ("tracefs", "bpf_raw_tracepoint", "kprobes", "fentry_fexit", "kernel_btf")),
          ("counters", ("hw_perf_counters", "rapl_power", "irq_time_accounting")),
          ("tools", ("tool:",)), ("SUTs", ("sut:",)))
NAME_WIDTH = 22  # the longest check name, indented


def group_of(name: str) -> str:
    for group, members in GROUPS:
        if any(name == m or (m.endswith(":") and name.startswith(m)) for m in members):
            return group
    return "other"


def short_name(name: str) -> str:
    """A check's name without its kind (qdisc:tbf -> tbf)."""
    return name.partition(":")[2] or name


def _grid(name_width: int = 0) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, min_width=name_width)
    grid.add_column()
    return grid


def _by_group(checks: list[Check], style: str) -> Table:
    grid = _grid()
    for group, _ in GROUPS + (("other", ()),):
        names = [short_name(c.name) for c in checks if group_of(c.name) == group]
        if names:
            grid.add_row(Text(f"  {group}", style=style), Text(", ".join(names)))
    return grid


def render_summary(checks: list[Check], max_lines: int = 40) -> Group:
    """At most ``max_lines`` at 80 columns: a count, what works by group,
    then each check that does not work (or could not be told) with what it
    disables; by group when those would not fit (a host without root)."""
    one_by_one = _summary(checks, True)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(one_by_one)
    return one_by_one if len(console.export_text().splitlines()) <= max_lines else _summary(checks, False)


def _summary(checks: list[Check], one_by_one: bool) -> Group:
    works = [c for c in checks if c.ok]
    failing = [c for c in checks if c.ok is False]
    unknown = [c for c in checks if c.ok is None]
    head = Text(f"softnet doctor: {len(works)} of {len(checks)} checks work", style="bold")
    if failing or unknown:
        head.append(f"; {len(failing)} do not, {len(unknown)} unknown", style="bold")
    parts: list = [head]
    if any(c.name == "root" and not c.ok for c in checks):
        parts.append(Text("not root: most checks need root to be told; run softnet doctor as root", style="yellow"))
    parts += [Text(""), Text("works"), _by_group(works, "green") if works else Text("  nothing")]
    for title, sel, style in (("does not work, and what that disables", failing, "red"),
                              ("could not be told, and what it would enable", unknown, "yellow")):
        if not sel:
            continue
        if not one_by_one:
            parts += [Text(""), Text(title.partition(",")[0] + " (--verbose: what each disables)"),
                      _by_group(sel, style)]
            continue
        grid = _grid(NAME_WIDTH)
        for c in sel:  # what it disables, whole; what was found is in --verbose
            grid.add_row(Text(f"  {c.name}", style=style), Text(c.enables))
        parts += [Text(""), Text(title), grid]
    parts += [Text(""), Text("every check and what it found: softnet doctor --verbose (or --json)", style="dim")]
    return Group(*parts)
