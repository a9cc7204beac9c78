"""Count string-key lookups in softnet/ (d["key"], d.get("key"), "key" in d):
data passed along by key instead of typed attributes. Prints the total and
the files with the most; --json for a script.

    python tools/key_lookups.py [--json] [PATH]
"""
from __future__ import annotations

import ast
import json
import sys
from collections import Counter
from pathlib import Path


def lookups(tree: ast.AST) -> int:
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            n += 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("get", "pop", "setdefault") and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            n += 1
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and not isinstance(node.comparators[0], (ast.Constant, ast.Tuple, ast.List, ast.Set)):
            n += 1
    return n


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    paths = [a for a in argv if not a.startswith("--")]
    root = Path(paths[0]) if paths else Path(__file__).resolve().parents[1] / "softnet"
    per_file = Counter({str(p.relative_to(root.parent)): lookups(ast.parse(p.read_text()))
                        for p in sorted(root.rglob("*.py"))})
    total = sum(per_file.values())
    if as_json:
        print(json.dumps({"total": total, "files": dict(per_file.most_common())}))
    else:
        print(f"string-key lookups in {root.name}/: {total}")
        for name, n in per_file.most_common(15):
            print(f"{n:6d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
