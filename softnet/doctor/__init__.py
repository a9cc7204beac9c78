"""`softnet doctor`: probe what this host can actually do for softnet.

Every answer comes from trying the thing, not from assuming it: namespaces,
veth, XDP, threaded NAPI, RPS, qdiscs and tc classifiers are exercised inside
one temporary namespace `sn-doctor-<hex>` that is always deleted (it is a
change recorded in a `HostChanges` registry, so an exception, Ctrl-C or
SIGTERM still removes it and stops any helper process). eBPF attach types are
tried with tiny no-op programs loaded through the bpf(2) syscall; tracefs is
mounted only inside a private mount namespace (`unshare --mount`), never on
the host. Where only the kernel configuration can answer (kprobes when the
kernel has no tracefs entry for them, IRQ time accounting), the detail says
so.

    checks = run_probes()            # list[Check], a few seconds
    console.print(render_table(checks))
    json.dumps([c.to_dict() for c in checks])
"""
from __future__ import annotations

import os

from softnet.doctor import lab  # noqa: F401  (tests patch lab._xdp_state)
from softnet.doctor.bpf import BTF_KIND_FUNC, BTF_KIND_TYPEDEF, btf_ids
from softnet.doctor.checks import (ACTIONS, CLASSIFIERS, NS_PREFIX, QDISCS, TOOLS, _DENIED, Check, _check,
                                   check_names, kernel_config, render_table)
from softnet.doctor.host import (_probe_af_xdp, _probe_bpf_raw_tracepoint, _probe_fentry_fexit,
                                 _probe_hw_perf, _probe_irq_time, _probe_kernel_btf, _probe_kprobes,
                                 _probe_rapl, _probe_tools, _probe_tracefs, tracefs_info)
from softnet.doctor.lab import (_Lab, _probe_actions, _probe_classifiers, _probe_netns, _probe_nic_knobs,
                                _probe_qdiscs, _probe_root, _probe_rps, _probe_threaded_napi, _probe_veth,
                                _probe_xdp_veth)
from softnet.doctor.personalities import probe_personalities
from softnet.tools.changes import HostChanges

__all__ = ["BTF_KIND_FUNC", "BTF_KIND_TYPEDEF", "NS_PREFIX", "Check", "btf_ids", "check_names", "render_table",
           "run_probes", "tracefs_info"]


# ---- entry points -------------------------------------------------------------
def _guard(fn, names: list[str], *args):
    """Run one probe; an exception becomes 'unknown' answers for its checks (BaseException passes)."""
    try:
        res = fn(*args)
    except Exception as exc:
        return [_check(n, None, f"probe error: {type(exc).__name__}: {exc}") for n in names]
    return res if isinstance(res, list) else [res]


def run_probes() -> list[Check]:
    """Probe this host; the temporary namespace and any helper process are gone when this returns or raises."""
    checks = _guard(_probe_root, ["root"])
    with HostChanges() as changes:
        ns_lab = _Lab(changes)
        checks += _guard(_probe_netns, ["netns"], ns_lab)
        checks += _guard(_probe_veth, ["veth"], ns_lab)
        checks += _guard(_probe_xdp_veth, ["xdp_veth"], ns_lab)
        checks += _guard(_probe_af_xdp, ["af_xdp"])
        checks += _guard(_probe_threaded_napi, ["threaded_napi"], ns_lab)
        checks += _guard(_probe_rps, ["rps"], ns_lab)
        checks += _guard(_probe_nic_knobs, ["nic_knobs"], ns_lab)
        qdiscs = _guard(_probe_qdiscs, [f"qdisc:{k}" for k in QDISCS], ns_lab)
        checks += qdiscs
        have_clsact = any(c.name == "qdisc:clsact" and c.ok for c in qdiscs)
        checks += _guard(_probe_classifiers, [f"tc_filter:{k}" for k in CLASSIFIERS], ns_lab, have_clsact)
        checks += _guard(_probe_actions, [f"tc_action:{k}" for k in ACTIONS], ns_lab)
    config = kernel_config()
    tfs = tracefs_info()
    checks += _guard(_probe_tracefs, ["tracefs"], tfs)
    checks += _guard(_probe_bpf_raw_tracepoint, ["bpf_raw_tracepoint"])
    checks += _guard(_probe_kprobes, ["kprobes"], config, tfs)
    checks += _guard(_probe_fentry_fexit, ["fentry_fexit"], config)
    checks += _guard(_probe_kernel_btf, ["kernel_btf"])
    checks += _guard(_probe_hw_perf, ["hw_perf_counters"])
    checks += _guard(_probe_rapl, ["rapl_power"])
    checks += _guard(_probe_irq_time, ["irq_time_accounting"], config)
    checks += _guard(_probe_tools, [f"tool:{k}" for k in TOOLS])
    checks += probe_personalities()
    if os.geteuid() != 0:  # a refusal to a non-root user says nothing about the host
        for c in checks:
            if c.name != "root" and c.ok is False and any(w in c.detail for w in _DENIED):
                c.ok = None
                c.detail += " (not root: unknown; run softnet doctor as root)"
    return checks


