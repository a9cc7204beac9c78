"""Traffic shapes of the native generator (docs/how-to/traffic.md): frame mixes,
arrival processes and the flow mapping, as softnet-gen and softnet-sink see
them. Pure functions, no I/O: TrialSpec.validate and evaluate use them."""
from __future__ import annotations

import math
import re
from functools import reduce

from softnet.errors import InputError

MIX_MAX_TABLE = 1024  # native/common/sn_proto.h SN_MIX_MAX_TABLE: the mix table's length (sum of weights)
MIX_MAX_SIZES = 16  # SN_MIX_MAX_SIZES
MAX_FLOWS = 65536  # SN_MAX_FLOWS: flows x src_ips x dst_ips x dst_ports when destinations vary
MAX_DST_PORTS = 1024  # SN_MAX_DST_PORTS: UDP destination ports 7 .. 7 + N - 1
ARRIVALS = ("const", "poisson", "onoff")
ARRIVALS_MAX = 1 << 20  # GEN_ARRIVALS_MAX: an onoff burst is one table
IMIX = "64:7,570:4,1518:1"
PERCENT_RESOLUTION = 10  # a percentage mix is kept to 0.1 % (weights in permille)

_ITEM = re.compile(r"^\s*(\d+)\s*(?::\s*(\d+(?:\.\d*)?)\s*(%?))?\s*$")


def parse_mix(text: str, min_frame: int, max_frame: int = 1518, field: str = "mix") -> list[tuple[int, int]]:
    """``"64:7,570:4,1518:1"``, ``"imix"``, ``"64"`` or percentages
    (``"64:58.33%,570:33.33%,1518:8.34%"``, summing to 100) -> [(size, weight)]
    in the order given, integer weights whose sum is at most MIX_MAX_TABLE
    (percentages become permille, reduced by their gcd). Bad input raises
    InputError(field, ...) saying what is accepted."""
    accepted = (f"accepted: SIZE[:WEIGHT],... with sizes in [{min_frame}, {max_frame}] B and whole weights >= 1 "
                f"summing to at most {MIX_MAX_TABLE}, percentages SIZE:P%,... summing to 100, or imix")
    if not isinstance(text, str) or not text.strip():
        raise InputError(field, f"{text!r}: empty; {accepted}")
    src = IMIX if text.strip().lower() == "imix" else text
    items, percent = [], []
    for part in src.split(","):
        m = _ITEM.match(part)
        if not m:
            raise InputError(field, f"{text!r}: '{part.strip()}' does not parse; {accepted}")
        size, weight, pct = int(m[1]), m[2], m[3] == "%"
        if not min_frame <= size <= max_frame:
            raise InputError(field, f"{text!r}: size {size} B is outside [{min_frame}, {max_frame}] B")
        if any(s == size for s, _ in items):
            raise InputError(field, f"{text!r}: size {size} appears twice")
        w = float(weight) if weight is not None else 1.0
        if w <= 0:
            raise InputError(field, f"{text!r}: weight {weight} of {size} B is not positive; {accepted}")
        if not pct and w != int(w):
            raise InputError(field, f"{text!r}: weight {weight} of {size} B is not a whole number (or give "
                             "percentages with %)")
        percent.append(pct)
        items.append((size, w))
    if len(items) > MIX_MAX_SIZES:
        raise InputError(field, f"{text!r}: {len(items)} sizes, at most {MIX_MAX_SIZES}")
    if any(percent):
        if not all(percent):
            raise InputError(field, f"{text!r}: give every weight as a percentage or none")
        total = sum(w for _, w in items)
        if abs(total - 100) > 0.01:
            raise InputError(field, f"{text!r}: the percentages sum to {total:g}, not 100")
        weights = [round(w * PERCENT_RESOLUTION) for _, w in items]
        if min(weights) < 1:
            raise InputError(field, f"{text!r}: a share below {1 / PERCENT_RESOLUTION:g} % (the resolution)")
        g = reduce(math.gcd, weights)
        return [(s, w // g) for (s, _), w in zip(items, weights)]
    out = [(s, int(w)) for s, w in items]
    if sum(w for _, w in out) > MIX_MAX_TABLE:
        raise InputError(field, f"{text!r}: the weights sum to {sum(w for _, w in out)}, at most {MIX_MAX_TABLE}")
    return out


def mix_text(mix: list[tuple[int, int]]) -> str:
    """The generator's --mix form: "64:7,570:4,1518:1"."""
    return ",".join(f"{s}:{w}" for s, w in mix)


def mix_table(mix: list[tuple[int, int]]) -> list[int]:
    """The frame size of seq % len(table): smooth weighted round robin, as
    softnet-gen builds it (sn_parse_mix): each size spread evenly."""
    total = sum(w for _, w in mix)
    cur = [0] * len(mix)
    out = []
    for _ in range(total):
        best = 0
        for i, (_, w) in enumerate(mix):
            cur[i] += w
            if cur[i] > cur[best]:
                best = i
        cur[best] -= total
        out.append(mix[best][0])
    return out


def mean_frame_bytes(mix: list[tuple[int, int]]) -> float:
    return sum(s * w for s, w in mix) / sum(w for _, w in mix)


def sent_per_size(mix: list[tuple[int, int]], first_seq: int, end_seq: int) -> dict[int, int]:
    """How many of the seqs [first_seq, end_seq) were sent at each size."""
    table = mix_table(mix)
    n = len(table)
    out = {s: 0 for s, _ in mix}
    if end_seq <= first_seq:
        return out
    full, rest = divmod(end_seq - first_seq, n)
    for s in table:  # each whole table: every size `weight` times
        out[s] += full
    for k in range(rest):
        out[table[(first_seq + full * n + k) % n]] += 1
    return out


def total_flows(flows: int, src_ips: int, dst_ips: int, dst_ports: int) -> int:
    return flows * src_ips * dst_ips * dst_ports


def flow_tuple(seq: int, flows: int, src_ips: int, dst_ips: int, dst_ports: int) -> tuple[int, int, int, int]:
    """(source port index, source address index, destination address index,
    destination port index) of seq: mixed radix, source port fastest."""
    f = seq % total_flows(flows, src_ips, dst_ips, dst_ports)
    f, sport = divmod(f, flows)
    f, src = divmod(f, src_ips)
    dport, dst = divmod(f, dst_ips)
    return sport, src, dst, dport
