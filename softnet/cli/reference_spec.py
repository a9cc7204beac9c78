"""The spec and result reference pages and the JSON schemas, written from
the pydantic models themselves (their fields, types, defaults, limits, and
the comment beside each field), so the pages cannot drift from what
softnet accepts and writes (a test compares them).

    python -m softnet.cli.reference_spec docs/reference
"""
from __future__ import annotations

import ast
import inspect
import io
import json
import sys
import tokenize
from pathlib import Path
from typing import Any

from pydantic import BaseModel

SCHEMAS = {  # file name -> the model, imported late (they pull in most of softnet)
    "campaign-spec.schema.json": ("softnet.campaign.spec", "CampaignSpec"),
    "trial-result.schema.json": ("softnet.results.trial", "TrialResult"),
    "latency-run.schema.json": ("softnet.results.latency", "LatencyRunResult"),
    "search-goal.schema.json": ("softnet.results.search", "SearchGoalRow"),
}


def _model(module: str, name: str) -> type[BaseModel]:
    import importlib

    return getattr(importlib.import_module(module), name)


def field_comments(cls: type) -> dict[str, str]:
    """Each field's comment: the one on its line, or the lines just above it."""
    try:
        src = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = src.splitlines()
    out = {}
    for node in ast.parse(src).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            text = comments.get(node.lineno, "")
            above, n = [], node.lineno - 1
            while not text and n >= 1 and lines[n - 1].strip().startswith("#"):
                above.insert(0, comments.get(n, ""))
                n -= 1
            out[node.target.id] = text or " ".join(above)
    return out


TOML_TYPES = {str: "string", int: "integer", float: "number", bool: "true/false", type(None): ""}


def _type_text(annotation: Any) -> str:
    """The type as a spec's author writes it in TOML: "number", "integer or
    absent", "table", "array of strings", one of a few literal values."""
    import typing

    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        parts = [_type_text(a) for a in args if a is not type(None)]
        text = " or ".join(dict.fromkeys(p for p in parts if p))
        return f"{text} (optional)" if type(None) in args else text
    if origin in (list, tuple, set):
        inner = _type_text(args[0]) if args else "values"
        return f"array of {inner}s" if inner and " " not in inner else "array"
    if origin is dict or annotation is dict:
        return "table"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if annotation in TOML_TYPES:
        return TOML_TYPES[annotation]
    if annotation is typing.Any:
        return "any"
    return str(annotation).replace("typing.", "")


def _limits(field) -> str:
    parts = []
    for m in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "len >="),
                           ("max_length", "len <=")):
            v = getattr(m, attr, None)
            if v is not None:
                parts.append(f"{sign} {v:,}" if isinstance(v, int) and abs(v) >= 10_000 else f"{sign} {v}")
    return ", ".join(parts)


def _default(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        try:
            v = field.default_factory()
        except TypeError:
            return "-"
    else:
        v = field.default
    if isinstance(v, BaseModel):
        return "(section)"
    return "-" if v is None else f"`{json.dumps(v, default=str)}`"


def cell(text: str) -> str:
    """Text as one markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def model_tables(model: type[BaseModel], prefix: str = "") -> list[str]:
    """A table of ``model``'s fields, then one per nested model (as TOML sections)."""
    notes = {}
    for klass in reversed(model.__mro__):
        if isinstance(klass, type) and issubclass(klass, BaseModel) and klass is not BaseModel:
            notes.update(field_comments(klass))
    out = [f"### `[{prefix}]`" if prefix else "### top level", ""]
    if model.__doc__ and model.__doc__.strip():
        out += [cell(inspect.cleandoc(model.__doc__)), ""]
    out += ["| key | type | default | limits | what it is |", "|---|---|---|---|---|"]
    nested = []
    for name, f in model.model_fields.items():
        ann = f.annotation
        sub = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if sub is None:
            args = [a for a in getattr(ann, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)]
            sub = args[0] if len(args) == 1 else None
        if sub is not None:
            nested.append((f"{prefix}.{name}" if prefix else name, sub))
        what = f.description or notes.get(name, "") or (f"the `[{nested[-1][0]}]` table below" if sub else "")
        out.append(f"| `{name}` | {cell(_type_text(ann))} | {_default(f)} | {cell(_limits(f))} | {cell(what)} |")
    out.append("")
    for path, sub in nested:
        out += model_tables(sub, path)
    return out


SPEC_HEAD = """# Campaign spec reference

Every key of a campaign spec (TOML), its type, default and limits, as
softnet validates them (`softnet.campaign.spec.CampaignSpec`). A key
softnet does not know is refused, naming it. This page is generated
(`python -m softnet.cli.reference_spec docs/reference`; a test checks it
is current); the JSON schema is
[schemas/campaign-spec.schema.json](schemas/campaign-spec.schema.json).
Matrix knobs are these keys written as `"section.key"`; the tutorials
show whole specs ([your first campaign](../tutorials/first-campaign.md)).
"""

RESULT_HEAD = """# Result reference

The fields of a trial's result (`softnet trial --json`, the `result_json`
of a stored trial, `softnet evaluate`), generated from the model that
writes them (`softnet.results.trial.TrialResult`; a test checks this page
is current). A field a trial did not measure is left out. The JSON
schemas of trials, latency runs and search goals are in
[schemas/](schemas/); what the flags mean is in
[the method](../explanation/method.md).
"""


MAX_LINES = 390  # a docs page stays readable: a long reference goes on over numbered pages


def paged(name: str, head: str, lines: list[str]) -> dict[str, str]:
    """``lines`` (sections starting with "#") after ``head`` on as many pages
    as MAX_LINES asks: name.md, name-2.md, ..., each linking the next."""
    sections: list[list[str]] = []
    for line in lines:
        if line.startswith("#") or not sections:
            sections.append([])
        sections[-1].append(line)
    pages_: list[list[str]] = [head.rstrip("\n").splitlines() + [""]]
    for sec in sections:
        if len(pages_[-1]) + len(sec) > MAX_LINES and len(pages_[-1]) > 2:
            pages_.append([f"# {head.splitlines()[0].lstrip('# ')} (continued)", ""])
        pages_[-1] += sec
    out = {}
    for i, body in enumerate(pages_):
        file = f"{name}.md" if i == 0 else f"{name}-{i + 1}.md"
        more = [f"Continued in [{name}-{i + 2}.md]({name}-{i + 2}.md)."] if i + 1 < len(pages_) else []
        out[file] = "\n".join(body + more).rstrip() + "\n"
    return out


def pages() -> dict[str, str]:
    spec = _model(*SCHEMAS["campaign-spec.schema.json"])
    trial = _model(*SCHEMAS["trial-result.schema.json"])
    out = {**paged("spec", SPEC_HEAD, model_tables(spec)),
           **paged("results", RESULT_HEAD, model_tables(trial, "result"))}
    for file, (module, name) in SCHEMAS.items():
        out[f"schemas/{file}"] = json.dumps(_model(module, name).model_json_schema(), indent=1, sort_keys=True,
                                            default=str) + "\n"
    return out


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference")
    for name, text in pages().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
        print(folder / name)
