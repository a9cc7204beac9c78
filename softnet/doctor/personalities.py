"""Which SUT personalities this host can run: each one's requirements
(kernel config options, tools) checked against the running kernel."""
from __future__ import annotations

import shutil
from functools import lru_cache

from softnet.doctor.checks import Check, kernel_config
from softnet.errors import InputError
from softnet.testbed.personalities import PERSONALITIES, Personality, Requirement, names


@lru_cache(maxsize=1)
def _kallsyms() -> frozenset[str]:
    try:
        with open("/proc/kallsyms") as f:
            return frozenset(line.split()[2] for line in f if line.count(" ") >= 2)
    except OSError:
        return frozenset()


def unmet(req: Requirement) -> str | None:
    """Why ``req`` is not met here, or None."""
    if req.what.startswith("tool:"):
        tool = req.what[5:]
        return None if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") else f"{tool} not installed"
    config = kernel_config()
    if config.values is not None:
        val = config.setting(req.what)
        return None if val in ("y", "m") else f"{req.what}={val} in {config.source}"
    if req.symbol and req.symbol in _kallsyms():
        return None
    return f"{req.what}: no kernel config readable and {req.symbol or 'no symbol'} not in /proc/kallsyms"


def missing(p: Personality | type[Personality]) -> list[str]:
    """The unmet requirements of a personality, each with what it is for.
    ``requires`` may depend on the params (nft-fw's conntrack): a class then
    lists every requirement any configuration has, an instance its own."""
    return [f"{why} ({r.why})" for r in p.requires if (why := unmet(r))]


def require(p: Personality, where: str) -> None:
    """Refuse, naming the field, a personality this host cannot run (or, for
    one with a ``check(where)`` of its own, whose input it refuses)."""
    check = getattr(p, "check", None)
    if callable(check):
        check(where)
    gaps = missing(p)
    if gaps:
        raise InputError(where, f"{p.name} cannot run on this host: " + "; ".join(gaps))


def probe_personalities() -> list[Check]:
    """One doctor line per personality."""
    out = []
    for name in names():
        cls = PERSONALITIES[name]
        gaps = missing(cls)
        detail = "; ".join(gaps) if gaps else "requirements met" + (
            ": " + ", ".join(r.what for r in cls.requires) if cls.requires else "")
        out.append(Check(f"sut:{name}", not gaps, detail, f"SUT personality {name}: {cls.summary}"))
    return out
