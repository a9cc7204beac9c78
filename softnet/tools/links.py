"""A testbed interface as the tools that sample it see it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LinkRef:
    role: str  # gen | sut_in | sut_out | sink
    ns: str | None  # None: the current network namespace (a remote host's own)
    ifname: str
