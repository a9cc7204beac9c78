// SPDX-License-Identifier: GPL-2.0
/* Per-CPU time and counts of the kernel's packet path from BTF tracepoints
 * (tp_btf: no tracefs, no kprobes, no fentry needed). Everything is summed in
 * per-CPU arrays in the kernel; user space reads them when asked. Arguments
 * are read from the raw tracepoint context in the order of the kernel's
 * btf_trace_<name> prototypes (checked against this kernel's BTF). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "profile.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prof_stats);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, PROF_MAX_DROP_KEYS);
	__type(key, struct drop_key);
	__type(value, __u64);
} drops SEC(".maps");

static __always_inline struct prof_stats *st(void)
{
	__u32 k = 0;
	return bpf_map_lookup_elem(&stats, &k);
}

static __always_inline struct cpu_state *cs(void)
{
	__u32 k = 0;
	return bpf_map_lookup_elem(&state, &k);
}

static __always_inline __u32 task_ctx(struct task_struct *t)
{
	char comm[16];

	if (BPF_CORE_READ(t, pid) == 0)
		return PROF_CTX_IDLE;
	BPF_CORE_READ_STR_INTO(&comm, t, comm);
	if (comm[0] == 'k' && comm[1] == 's' && comm[2] == 'o' && comm[3] == 'f' && comm[4] == 't' &&
	    comm[5] == 'i' && comm[6] == 'r' && comm[7] == 'q' && comm[8] == 'd')
		return PROF_CTX_KSOFTIRQD;
	if (comm[0] == 'n' && comm[1] == 'a' && comm[2] == 'p' && comm[3] == 'i' && comm[4] == '/')
		return PROF_CTX_NAPI;
	return PROF_CTX_OTHER;
}

SEC("tp_btf/softirq_entry")
int sn_softirq_entry(__u64 *ctx)
{
	unsigned int vec = (unsigned int)ctx[0];
	struct cpu_state *c = cs();

	if (!c || vec >= PROF_NVEC)
		return 0;
	c->sirq_start = bpf_ktime_get_ns();
	c->sirq_vec = vec;
	c->sirq_ctx = task_ctx(bpf_get_current_task_btf());
	return 0;
}

SEC("tp_btf/softirq_exit")
int sn_softirq_exit(__u64 *ctx)
{
	unsigned int vec = (unsigned int)ctx[0];
	struct cpu_state *c = cs();
	struct prof_stats *s = st();

	if (!c || !s || vec >= PROF_NVEC)
		return 0;
	if (!c->sirq_start || c->sirq_vec != vec) {
		s->unmatched_exits++;
		return 0;
	}
	__u64 d = bpf_ktime_get_ns() - c->sirq_start;
	__u32 x = c->sirq_ctx & (PROF_NCTX - 1);
	s->softirq_ns[vec][x] += d;
	s->softirq_cnt[vec][x]++;
	if (x == PROF_CTX_IDLE)
		s->softirq_in_idle_ns += d;
	c->sirq_start = 0;
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int sn_irq_entry(__u64 *ctx)
{
	(void)ctx;
	struct cpu_state *c = cs();

	if (!c)
		return 0;
	c->hirq_start = bpf_ktime_get_ns();
	c->hirq_in_idle = c->cur_idle;
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int sn_irq_exit(__u64 *ctx)
{
	(void)ctx;
	struct cpu_state *c = cs();
	struct prof_stats *s = st();

	if (!c || !s)
		return 0;
	if (!c->hirq_start) {
		s->unmatched_exits++;
		return 0;
	}
	__u64 d = bpf_ktime_get_ns() - c->hirq_start;
	s->hardirq_ns += d;
	s->hardirq_cnt++;
	if (c->hirq_in_idle)
		s->hardirq_in_idle_ns += d;
	c->hirq_start = 0;
	return 0;
}

/* x86 system vectors: handler time without device IRQs' irq_handler_* events.
 * The softirqs an IPI raises run after the exit event (irq_exit): not counted twice. */
static __always_inline int sv_entry(void)
{
	struct cpu_state *c = cs();

	if (c)
		c->sv_start = bpf_ktime_get_ns();
	return 0;
}

static __always_inline int sv_exit(void)
{
	struct cpu_state *c = cs();
	struct prof_stats *s = st();

	if (!c || !s)
		return 0;
	if (!c->sv_start) {
		s->unmatched_exits++;
		return 0;
	}
	s->sysvec_ns += bpf_ktime_get_ns() - c->sv_start;
	s->sysvec_cnt++;
	c->sv_start = 0;
	return 0;
}

#define SYSVEC(name)                                                  \
	SEC("tp_btf/" #name "_entry")                                 \
	int sn_##name##_entry(__u64 *ctx) { (void)ctx; return sv_entry(); } \
	SEC("tp_btf/" #name "_exit")                                  \
	int sn_##name##_exit(__u64 *ctx) { (void)ctx; return sv_exit(); }
SYSVEC(call_function)
SYSVEC(call_function_single)
SYSVEC(reschedule)
SYSVEC(local_timer)
SYSVEC(irq_work)

SEC("tp_btf/sched_switch")
int sn_sched_switch(__u64 *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx[1], *next = (struct task_struct *)ctx[2];
	struct cpu_state *c = cs();
	struct prof_stats *s = st();

	if (!c || !s)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (c->last_switch) {
		if (BPF_CORE_READ(prev, pid) == 0)
			s->idle_ns += now - c->last_switch;
		else
			s->busy_ns += now - c->last_switch;
	}
	c->last_switch = now;
	c->cur_idle = BPF_CORE_READ(next, pid) == 0;
	s->ctx_switches++;
	return 0;
}

SEC("tp_btf/napi_poll")
int sn_napi_poll(__u64 *ctx)
{
	int work = (int)ctx[1], budget = (int)ctx[2];
	struct prof_stats *s = st();

	if (!s)
		return 0;
	s->napi_polls++;
	s->napi_work += work > 0 ? work : 0;
	if (work >= budget)
		s->napi_budget_exhausted++;
	__u32 b = 0;
	for (int w = work; w > 0 && b < PROF_NAPI_BUCKETS - 1; w >>= 1)
		b++;
	s->napi_work_hist[b]++;
	return 0;
}

SEC("tp_btf/netif_receive_skb")
int sn_netif_receive_skb(__u64 *ctx)
{
	(void)ctx;
	struct prof_stats *s = st();

	if (s)
		s->rx_skbs++;
	return 0;
}

SEC("tp_btf/consume_skb")
int sn_consume_skb(__u64 *ctx)
{
	(void)ctx;
	struct prof_stats *s = st();

	if (s)
		s->consumed_skbs++;
	return 0;
}

SEC("tp_btf/kfree_skb")
int sn_kfree_skb(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct prof_stats *s = st();
	struct drop_key k = { .reason = (__u32)ctx[2] };
	__u64 one = 1, *n;

	if (!s)
		return 0;
	s->dropped_skbs++;
	k.ifindex = BPF_CORE_READ(skb, dev, ifindex);
	k.netns_ino = BPF_CORE_READ(skb, dev, nd_net.net, ns.inum);
	n = bpf_map_lookup_elem(&drops, &k);
	if (n)
		(*n)++;
	else if (bpf_map_update_elem(&drops, &k, &one, BPF_NOEXIST))
		s->drop_keys_full++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
