"""SUT personalities: the data paths softnet measures (see base.py).

    parse_sut("nft-fw:rules=100,conntrack=on", "testbed.sut") -> Personality

Each lives in a module of its own; PERSONALITIES maps names to classes.
"""
from __future__ import annotations

from typing import Any

from softnet.errors import InputError
from softnet.testbed.personalities.base import Param, Personality, Requirement  # noqa: F401
from softnet.testbed.personalities.kernel_fwd import Ipv4Fwd, Ipv6Fwd, NoSut

PERSONALITIES: dict[str, type[Personality]] = {p.name: p for p in (Ipv4Fwd, Ipv6Fwd, NoSut)}


def register(cls: type[Personality]) -> type[Personality]:
    PERSONALITIES[cls.name] = cls
    return cls


def _load_all() -> None:
    """Import the personality modules (each registers itself)."""
    import importlib
    import pkgutil

    for m in pkgutil.iter_modules(__path__):
        if m.name not in ("base", "kernel_fwd"):
            importlib.import_module(f"{__name__}.{m.name}")


def names() -> list[str]:
    """The kernel's forwarding first, then the rest by name: one order
    whichever module happened to register first (help texts show it)."""
    _load_all()
    return sorted(PERSONALITIES, key=lambda n: (n not in ("ipv4-fwd", "ipv6-fwd", "none"), n))


def parse_sut(text: str, where: str = "--sut", extra: dict | None = None) -> Personality:
    """A personality from its spec string; errors name ``where`` and list what
    is accepted."""
    _load_all()
    if not isinstance(text, str) or not text:
        raise InputError(where, f"{text!r}: expected a SUT personality name; accepted: {', '.join(PERSONALITIES)}")
    name, _, rest = text.partition(":")
    cls = PERSONALITIES.get(name)
    if cls is None:
        raise InputError(where, f"unknown SUT personality '{name}'; accepted: {', '.join(PERSONALITIES)}")
    values: dict[str, Any] = {k: p.default for k, p in cls.params.items()}
    for item in filter(None, rest.split(",")):
        key, eq, val = item.partition("=")
        key = key.strip()
        if key not in cls.params:
            accepted = ", ".join(cls.params) or "none"
            raise InputError(where, f"{name} has no parameter '{key}'; accepted: {accepted}")
        p = cls.params[key]
        if not eq:
            if p.kind is not bool:
                raise InputError(where, f"{key}: expected {key}=VALUE")
            val = "on"
        values[key] = p.parse(val.strip(), where, key)
    return cls(values, extra)
