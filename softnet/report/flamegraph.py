"""Flame graphs as self-contained SVG: a variant's kernel stacks, or the
difference of two (width: the candidate's time, colour: how each frame's own
time changed against the baseline; red grew, blue shrank), after Brendan
Gregg's flamegraph.pl and its differential graphs. Colouring by a frame's
own time (not with its callees) puts the red where the time went: the
callers of a function that grew stay pale.

Written here rather than with a plotting library: the report is one static
HTML file with no script, and an SVG of rectangles with a <title> each
(the tooltip) is what a flame graph is. Values are ns per forwarded packet.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from html import escape

WIDTH = 1180  # px: the report's content width
ROW = 17  # px per stack level
FONT_PX = 11
CHAR_PX = 6.6  # a monospace character at FONT_PX, for fitting labels
MIN_PX = 0.4  # narrower frames are not drawn (their time stays in the parent's width)


@dataclass
class Node:
    name: str
    value: float = 0.0  # inclusive
    base: float = 0.0  # the baseline's inclusive value (differential graphs)
    children: dict[str, "Node"] = field(default_factory=dict)

    def self_delta(self) -> float:
        """The change of this frame's own time (without its callees') from the baseline's."""
        own = self.value - sum(c.value for c in self.children.values())
        own_base = self.base - sum(c.base for c in self.children.values())
        return own - own_base


def tree(folded: dict[str, float], against: dict[str, float] | None = None) -> Node:
    """The call tree of folded stacks ("root;...;leaf" -> value); with
    ``against``, each node also carries the baseline's value at that path."""
    root = Node("all")
    for which, stacks in (("value", folded), ("base", against or {})):
        for stack, v in stacks.items():
            node = root
            setattr(node, which, getattr(node, which) + v)
            for frame in stack.split(";"):
                node = node.children.setdefault(frame, Node(frame))
                setattr(node, which, getattr(node, which) + v)
    return root


def _hot(name: str) -> str:
    """flamegraph.pl's "hot" palette, stable per name."""
    h = hashlib.blake2b(name.encode(), digest_size=3).digest()
    return f"rgb({205 + h[0] % 50},{h[1] % 230},{h[2] % 55})"


def _diff(delta: float, scale: float) -> str:
    """Red for growth, blue for shrinkage, white for none; saturated at ``scale``."""
    s = min(abs(delta) / scale, 1.0) if scale > 0 else 0.0
    fade = int(round(255 * (1 - s)))
    return f"rgb(255,{fade},{fade})" if delta > 0 else f"rgb({fade},{fade},255)"


def _depth(node: Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0)


def svg(folded: dict[str, float], title: str, against: dict[str, float] | None = None,
        unit: str = "ns/pkt", width: int = WIDTH) -> str:
    """The flame graph of ``folded`` (root at the bottom); with ``against``,
    coloured by each frame's change from it."""
    root = tree(folded, against)
    total = root.value
    levels = _depth(root)
    top = 2 * ROW + 6  # the title and the legend
    height = top + levels * ROW + 4
    diff = against is not None
    scale = max((abs(n.self_delta()) for n in _walk(root)), default=0.0) if diff else 0.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="{FONT_PX}" role="img" '
           f'aria-label="{escape(title)}">',
           f'<rect width="{width}" height="{height}" fill="#fff"/>',
           f'<text x="{width / 2:.0f}" y="{ROW}" text-anchor="middle" font-size="{FONT_PX + 2}" '
           f'font-weight="bold">{escape(title)}</text>']
    legend = (f"width: {unit} of the candidate ({total:.0f} in all); colour: a frame's own time against the "
              f"baseline's, red grew, blue shrank (full at {scale:.0f} {unit})" if diff else
              f"width: {unit} ({total:.0f} in all); each frame with what it calls above it")
    out.append(f'<text x="4" y="{2 * ROW}" fill="#444">{escape(legend)}</text>')
    if total > 0:
        _draw(root, 0.0, levels - 1, width / total, top, diff, scale, unit, total, out)
    out.append("</svg>")
    return "\n".join(out)


def _walk(node: Node):
    yield node
    for c in node.children.values():
        yield from _walk(c)


def _draw(node: Node, x: float, level: int, px_per: float, top: float, diff: bool, scale: float, unit: str,
          total: float, out: list[str]) -> None:
    w = node.value * px_per
    if w < MIN_PX:
        return
    y = top + level * ROW
    own = node.self_delta()
    fill = _diff(own, scale) if diff else ("#d0d0d0" if node.name == "all" else _hot(node.name))
    tip = f"{node.name}: {node.value:.1f} {unit} ({100 * node.value / total:.1f}%)"
    if diff:
        tip += (f", with callees {node.value - node.base:+.1f} {unit} against the baseline ({node.base:.1f}), "
                f"its own time {own:+.1f}")
    edge = ' stroke="#c8c8c8" stroke-width="0.5"' if diff else ""  # pale frames stay visible
    out.append(f'<g><title>{escape(tip)}</title><rect x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" height="{ROW - 1}" '
               f'fill="{fill}" rx="1"{edge}/>')
    chars = int((w - 4) / CHAR_PX)
    if chars >= 3:
        label = node.name if len(node.name) <= chars else node.name[:chars - 2] + ".."
        out.append(f'<text x="{x + 2:.2f}" y="{y + ROW - 5:.1f}">{escape(label)}</text>')
    out.append("</g>")
    cx = x
    for child in sorted(node.children.values(), key=lambda c: c.name):  # alphabetical, as flamegraph.pl
        _draw(child, cx, level - 1, px_per, top, diff, scale, unit, total, out)
        cx += child.value * px_per


def speedscope(folded: dict[str, float], name: str) -> dict:
    """A speedscope file (https://www.speedscope.app/file-format-schema.json):
    one sampled profile, each folded stack a sample weighted by its value."""
    frames: dict[str, int] = {}
    samples, weights = [], []
    for stack, v in sorted(folded.items()):
        samples.append([frames.setdefault(f, len(frames)) for f in stack.split(";")])  # root first
        weights.append(v)
    total = sum(weights)
    return {"$schema": "https://www.speedscope.app/file-format-schema.json", "name": name, "exporter": "softnet",
            "activeProfileIndex": 0, "shared": {"frames": [{"name": f} for f in frames]},
            "profiles": [{"type": "sampled", "name": name, "unit": "nanoseconds", "startValue": 0,
                          "endValue": total, "samples": samples, "weights": weights}]}
