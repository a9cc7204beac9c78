"""The kernel statistics and eBPF profile of a trial result as `softnet
trial` reads them: only the fields it shows, parsed once from the JSON
TrialResult.kernel and .profile hold (softnet.analysis.kernel_stats,
softnet.analysis.trial_eval's profile part). Unknown keys are ignored:
a view, never written back."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from softnet.results.trial import Number


class View(BaseModel):
    model_config = ConfigDict(frozen=True)


class KernelCpuView(View):
    utilization_pct: Number | None = None
    cpu_time_pct: Number | None = None
    softirq_tick_pct: Number | None = None
    irqs_per_s: Number | None = None
    net_rx_softirqs_per_s: Number | None = None
    net_tx_softirqs_per_s: Number | None = None
    pkts_per_rx_softirq: Number | None = None
    time_squeeze_per_s: Number | None = None
    context_switches_per_s: Number | None = None


class NormalizedView(View):
    """Costs per Mbps over the SUT CPUs; the costs only when packets were forwarded."""

    cpus: list[int]
    throughput_mbps: Number
    utilization_per_mbps: Number | None = None
    cycles_per_mbps: Number | None = None
    cost_basis: str | None = None


class KernelView(View):
    """Without window marks only why (missing)."""

    window_s: Number | None = None
    interval_s: Number | None = None
    samples: int | None = None
    per_cpu: dict[int, KernelCpuView] | None = None
    normalized: NormalizedView | None = None
    dev_weight: int | None = None
    missing: dict[str, str]


class CpuProfileView(View):
    busy_pct: Number | None
    softirq_pct: Number | None
    net_rx_pct_by_context: dict[str, Number | None]
    napi_polls_per_s: Number | None
    napi_work_per_poll: Number | None


class CpuAuditView(View):
    """Only the verdict when the CPU had no ticks."""

    reported_busy_pct: Number | None = None
    reported_softirq_pct: Number | None = None
    verdict: str


class DropView(View):
    reason: str
    device: str
    skbs: int
    estimated_skbs: int


class StageRowView(View):
    stage: str
    exactness: str
    ns: Number
    pct_of_cpu: Number | None
    ns_per_packet: Number | None


class CpuStagesView(View):
    wifi_ap: list[StageRowView]
    qdisc_enqueued_share: Number | None = None
    packet_time_pct: Number | None
    coverage: Number | None


class ProfileView(View):
    plan: str
    window_s: Number
    per_cpu: dict[int, CpuProfileView]
    audit: dict[int, CpuAuditView]
    drops: list[DropView]
    duty: Number
    stages: dict[int, CpuStagesView] = {}
    stages_missing: str | None = None
