"""What every SUT personality is: a data path set up inside the SUT namespace
of the local testbed through the change registry, named by a spec string
``name[:key=value,...]`` (e.g. ``nft-fw:rules=10000,conntrack=on``), so that
one matrix knob (`testbed.sut`) compares data paths.

A personality says which kernel features and tools it needs (``requires``,
checked by `softnet doctor` and at spec load), configures the SUT namespace
once the testbed's veths exist (``configure``), and reads counters that prove
the packets took its path (``counters``: read before and after a trial, the
difference kept with the trial).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from softnet.errors import InputError

if TYPE_CHECKING:  # the testbed builds personalities; they only use what it gives them
    from softnet.testbed.local import LocalTestbed


@dataclass(frozen=True)
class Param:
    """One ``key=value`` of a personality's spec string."""

    kind: type  # int | bool | str
    default: Any
    help: str
    lo: int | None = None
    hi: int | None = None
    choices: tuple[str, ...] = ()

    def parse(self, text: str, where: str, key: str) -> Any:
        if self.kind is bool:
            t = text.lower()
            if t in ("on", "yes", "true", "1"):
                return True
            if t in ("off", "no", "false", "0"):
                return False
            raise InputError(where, f"{key}={text}: expected on or off")
        if self.kind is int:
            try:
                v = int(text)
            except ValueError:
                raise InputError(where, f"{key}={text}: expected a whole number") from None
            if (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
                raise InputError(where, f"{key}={v} is outside [{self.lo}, {self.hi}]")
            return v
        if self.choices and text not in self.choices:
            raise InputError(where, f"{key}={text}: accepted: {', '.join(self.choices)}")
        return text

    def show(self, v: Any) -> str:
        return ("on" if v else "off") if self.kind is bool else str(v)


@dataclass(frozen=True)
class Requirement:
    """A kernel feature (a CONFIG_ option, or failing a kernel config, a
    symbol in /proc/kallsyms) or a command the personality needs."""

    what: str  # "CONFIG_BRIDGE" or "tool:nft"
    why: str
    symbol: str | None = None  # kallsyms fallback when the kernel config is not readable


class Personality:
    """Base: no SUT setup of its own. Subclasses set the class attributes."""

    name: ClassVar[str]
    summary: ClassVar[str]
    params: ClassVar[dict[str, Param]] = {}
    requires: ClassVar[tuple[Requirement, ...]] = ()
    ip_version: ClassVar[int] = 4
    # whose MAC the generator sends to: "sut_in" (an L3 hop) or "sink" (a bridge)
    next_hop_role: ClassVar[str] = "sut_in"
    remote: ClassVar[bool] = True  # runs on an inventory's SUT host too (softnet.testbed.sut_lab)
    remote_why: ClassVar[str] = ""  # why not, when it does not
    sink_mtu: ClassVar[int] = 0  # an MTU the sink's port needs (0: as it is)
    bidirectional: ClassVar[bool] = True  # forwards traffic from the sink's side too
    max_dst_ports: ClassVar[int | None] = None  # the destination ports it can take (None: any)
    one_way_why: ClassVar[str] = ""

    def __init__(self, values: dict[str, Any], extra: dict | None = None):
        """``values``: parsed params (all keys present); ``extra``: a spec
        table of its own (the custom personality's commands)."""
        self.values = values
        self.extra = extra or {}

    @property
    def spec(self) -> str:
        """The canonical spec string: name, then the params that differ from
        their defaults, sorted."""
        diff = [f"{k}={p.show(self.values[k])}" for k, p in sorted(self.params.items())
                if self.values[k] != p.default]
        return self.name + (":" + ",".join(diff) if diff else "")

    def validate_traffic(self, flows_total: int, where: str) -> None:
        """Refuse traffic this data path cannot carry (default: anything goes)."""

    def configure(self, tb: "LocalTestbed") -> None:
        """Set the SUT namespace up; every change through tb.changes."""

    def counters(self, tb: "LocalTestbed") -> dict[str, int]:
        """Counters proving the path: monotonic ones (a trial keeps after -
        before), and gauges named ``*_entries`` (kept as read after it)."""
        return {}

    def check_reset(self) -> None:
        """Refuse, before the host is touched, a reset this personality does not have."""
        raise InputError("--reset-at", f"{self.name} has no reset (the personalities that have one: "
                         "docs/explanation/rfc-benchmarks.md)")

    def reset(self, tb: "LocalTestbed") -> str:
        """The data path's reset for the reset benchmark (RFC 2544 26.6): do
        it, and say what was done."""
        self.check_reset()
        raise NotImplementedError

    def require_remote(self, field: str) -> None:
        """Refuse, naming ``field``, a personality that runs on the local testbed only."""
        if not self.remote:
            raise InputError(field, f"{self.name} runs on the local testbed only: {self.remote_why}")

    def dst_ip(self, tb: "LocalTestbed") -> str:
        """The destination address of the test frames (the sink's, by default)."""
        return tb.addr["sink"][0 if self.ip_version == 4 else 1]
