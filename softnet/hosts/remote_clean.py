"""`softnet clean --inventory FILE`: each host's agent replays the journals
its dead predecessors left (what `softnet clean` does on the host itself)."""
from __future__ import annotations

from softnet.errors import SoftnetError
from softnet.hosts.inventory import Inventory
from softnet.hosts.session import open_sessions


def clean_hosts(inv: Inventory, check: bool) -> dict:
    """host -> {"journals": [{"journal", "pending"}], "errors": [...]}; a host
    that cannot be reached says so under "errors"."""
    out = {}
    for name, host in inv.hosts.items():
        try:
            session = open_sessions({name: host})[name]
        except SoftnetError as exc:
            out[name] = {"journals": [], "errors": [str(exc)]}
            continue
        try:
            out[name] = session.call("clean", check=check, timeout=300)  # the reply, without its envelope
        finally:
            session.close(undo=False)
    return out
