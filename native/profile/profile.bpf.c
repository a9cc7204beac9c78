// SPDX-License-Identifier: GPL-2.0
/* Per-CPU time and counts of the kernel's packet path from BTF tracepoints
 * (tp_btf: no tracefs, no kprobes, no fentry needed). Everything is summed in
 * per-CPU arrays in the kernel; user space reads them when asked. BPF_PROG
 * names the arguments of each tracepoint as its btf_trace_<name> prototype
 * has them (the verifier checks them against the kernel's BTF). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "profile.h"

/* prof_stats is laid out by softirq vector (profile.h has no vmlinux.h) */
_Static_assert(PROF_NVEC == NR_SOFTIRQS, "PROF_NVEC must be the kernel's NR_SOFTIRQS");

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

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stage_matrix);
} stages SEC(".maps");

/* Set by the loader (see profile.h): the generation changes at each attach
 * and detach of the once-per-packet programs. */
volatile __u32 sample_gen;
volatile __u32 sampling;

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

/* tp_btf arguments are typed kernel pointers: read directly (the verifier
 * makes each load fault-safe), cheaper than bpf_probe_read_kernel calls. */
static __always_inline __u32 task_ctx(struct task_struct *t)
{
	const char *comm = t->comm;

	if (t->pid == 0)
		return PROF_CTX_IDLE;
	if (comm[0] == 'k' && comm[1] == 's' && comm[2] == 'o' && comm[3] == 'f' && comm[4] == 't' &&
	    comm[5] == 'i' && comm[6] == 'r' && comm[7] == 'q' && comm[8] == 'd')
		return PROF_CTX_KSOFTIRQD;
	if (comm[0] == 'n' && comm[1] == 'a' && comm[2] == 'p' && comm[3] == 'i' && comm[4] == '/')
		return PROF_CTX_NAPI;
	return PROF_CTX_OTHER;
}


/* ---- the stage clock (see profile.h) ---- */

#define PAUSE_IRQ 1
#define PAUSE_SIRQ 2

static __always_inline void clk_charge(struct cpu_state *c, __u32 ev, __u64 now)
{
	__u32 k = 0, prev = c->ev;
	struct stage_matrix *m = bpf_map_lookup_elem(&stages, &k);

	if (m && prev < PROF_NEV && ev < PROF_NEV) {
		if (!sampling || c->clk_gen != sample_gen)
			prev = ev = EV_NONE; /* not inside one sampled period: its boundaries may be missing */
		/* never a wrapped interval: a pause whose resume moved clk_ts past now (an exit the
		 * profiler missed) would otherwise add 2^64 ns */
		if (now > c->clk_ts)
			m->ns[prev][ev] += now - c->clk_ts;
		m->cnt[prev][ev]++;
	}
	c->ev = ev;
	c->clk_ts = now;
	c->clk_gen = sample_gen;
	/* charged inside a pause (its exit unseen, or a NET softirq run from it): the pause
	 * counts from here, not from before the time just charged */
	if (c->in_pause)
		c->pause_ts = now;
}

static __always_inline void clk_open(struct cpu_state *c, __u32 clk, __u32 ev, __u64 now)
{
	c->clk = clk;
	c->ev = ev;
	c->clk_ts = now;
	c->clk_gen = sample_gen;
	c->in_pause = 0;
}

/* Interrupts and other softirq vectors stop the clock: their time is not
 * part of the interval they interrupt. */
static __always_inline void clk_pause(struct cpu_state *c, __u32 why, __u64 now)
{
	if (c->clk == CLK_OFF || (c->in_pause & why))
		return;
	if (!c->in_pause)
		c->pause_ts = now;
	c->in_pause |= why;
}

static __always_inline void clk_resume(struct cpu_state *c, __u32 why, __u64 now)
{
	if (!(c->in_pause & why))
		return;
	c->in_pause &= ~why;
	if (!c->in_pause)
		c->clk_ts += now - c->pause_ts;
}

/* A packet-path event: closes the open interval, opens the next. Outside a
 * sampled period (attached, settling) nothing would be kept: return at once. */
static __always_inline void clk_event(__u32 ev)
{
	if (!sampling)
		return;
	struct cpu_state *c = cs();

	if (c && c->clk >= CLK_THREAD && !c->in_pause)
		clk_charge(c, ev, bpf_ktime_get_ns());
}

static __always_inline void clk_irq_entry(struct cpu_state *c, __u64 now)
{
	if (c->irq_ts)
		return; /* nested: the outer one times it */
	c->irq_ts = now;
	c->irq_gen = sample_gen;
	clk_pause(c, PAUSE_IRQ, now);
}

/* irq_exit runs pending softirqs at once: a longer gap means the NET softirq
 * was raised elsewhere, not by that interrupt. */
#define IRQ_SOFTIRQ_MAX_GAP_NS 20000

/* An interrupt's handler time, as the pair (from, irq_exit); unsampled if its
 * generation is not the current sampled one. */
static __always_inline void clk_add_irq(__u32 from, __u32 gen, __u64 d)
{
	__u32 k = 0, to = EV_IRQ_EXIT;
	struct stage_matrix *m = bpf_map_lookup_elem(&stages, &k);

	if (!m)
		return;
	if (!sampling || gen != sample_gen)
		from = to = EV_NONE;
	m->ns[from][to] += d;
	m->cnt[from][to]++;
}

static __always_inline void clk_irq_commit(struct cpu_state *c)
{
	clk_add_irq(EV_RXIRQ, c->irq_pending_gen, c->irq_pending_ns);
}

static __always_inline void clk_irq_exit(struct cpu_state *c, __u64 now)
{
	if (!c->irq_ts)
		return;
	__u64 d = now - c->irq_ts;
	c->irq_ts = 0;
	clk_resume(c, PAUSE_IRQ, now);
	if (c->clk >= CLK_THREAD) { /* inside packet processing */
		clk_add_irq(EV_IRQ, c->irq_gen, d);
		return;
	}
	/* Outside packet processing: an RX IRQ if irq_exit runs a NET softirq
	 * next (softirq_entry commits it), else forgotten. */
	clk_open(c, CLK_ARMED, EV_IRQ_EXIT, now);
	c->irq_pending_ns = d;
	c->irq_pending_gen = c->irq_gen;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(sn_softirq_entry, unsigned int vec)
{
	struct cpu_state *c = cs();

	if (!c || vec >= PROF_NVEC)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct task_struct *cur = bpf_get_current_task_btf();
	c->sirq_start = now;
	c->sirq_vec = vec;
	c->sirq_ctx = task_ctx(cur);
	if (!c->last_switch) { /* attached since the last switch: busy or idle time counts from here */
		c->last_switch = now;
		c->cur_idle = cur->pid == 0;
	}
	if (vec != NET_RX_SOFTIRQ && vec != NET_TX_SOFTIRQ) {
		if (c->clk == CLK_ARMED && c->ev == EV_IRQ_EXIT)
			c->clk = CLK_OFF; /* that interrupt raised another softirq first: not taken as an RX IRQ */
		clk_pause(c, PAUSE_SIRQ, now);
		return 0;
	}
	__u32 ev = vec == NET_RX_SOFTIRQ ? EV_SIRQ_RX : EV_SIRQ_TX;
	if (c->clk == CLK_ARMED && c->ev == EV_IRQ_EXIT) {
		if (now - c->clk_ts > IRQ_SOFTIRQ_MAX_GAP_NS)
			c->clk = CLK_OFF; /* not run by that interrupt's irq_exit */
		else
			clk_irq_commit(c);
	}
	if (c->clk == CLK_OFF) {
		clk_open(c, CLK_SIRQ, ev, now);
		c->clk_outer = CLK_OFF;
		return 0;
	}
	c->clk_outer = c->clk == CLK_THREAD ? CLK_THREAD : CLK_OFF;
	clk_charge(c, ev, now); /* from an RX IRQ's exit, ksoftirqd's switch-in, or the NAPI kthread */
	c->clk = CLK_SIRQ;
	return 0;
}


SEC("tp_btf/softirq_exit")
int BPF_PROG(sn_softirq_exit, unsigned int vec)
{
	struct cpu_state *c = cs();
	struct prof_stats *s = st();

	if (!c || !s || vec >= PROF_NVEC)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (vec != NET_RX_SOFTIRQ && vec != NET_TX_SOFTIRQ)
		clk_resume(c, PAUSE_SIRQ, now);
	else if (c->clk == CLK_SIRQ) {
		clk_charge(c, EV_SIRQ_EXIT, now);
		c->clk = c->clk_outer; /* back in the NAPI kthread, or off */
	}
	if (!c->sirq_start || c->sirq_vec != vec) {
		s->unmatched_exits++;
		return 0;
	}
	__u64 d = now - c->sirq_start;
	__u32 x = c->sirq_ctx & (PROF_NCTX - 1);
	s->softirq_ns[vec][x] += d;
	s->softirq_cnt[vec][x]++;
	if (x == PROF_CTX_IDLE)
		s->softirq_in_idle_ns += d;
	c->sirq_start = 0;
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(sn_irq_entry)
{
	struct cpu_state *c = cs();

	if (!c)
		return 0;
	c->hirq_start = bpf_ktime_get_ns();
	c->hirq_in_idle = c->cur_idle;
	clk_irq_entry(c, c->hirq_start);
	return 0;
}

/* An interrupt's exit (device IRQ or system vector): clocked out of the stage
 * interval it paused, its time added to (ns, cnt). Returns that time; 0 for an
 * exit without its entry (attached mid-event: lost, not guessed). */
static __always_inline __u64 irq_done(struct cpu_state *c, struct prof_stats *s, __u64 *start, __u64 *ns,
				      __u64 *cnt)
{
	__u64 now = bpf_ktime_get_ns();

	clk_irq_exit(c, now);
	if (!*start) {
		s->unmatched_exits++;
		return 0;
	}
	__u64 d = now - *start;
	*ns += d;
	(*cnt)++;
	*start = 0;
	return d;
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(sn_irq_exit)
{
	struct cpu_state *c = cs();
	struct prof_stats *s = st();

	if (!c || !s)
		return 0;
	__u64 d = irq_done(c, s, &c->hirq_start, &s->hardirq_ns, &s->hardirq_cnt);
	if (c->hirq_in_idle)
		s->hardirq_in_idle_ns += d;
	return 0;
}

/* x86 system vectors: handler time without device IRQs' irq_handler_* events.
 * The softirqs an IPI raises run after the exit event (irq_exit): not counted twice. */
static __always_inline int sv_entry(void)
{
	struct cpu_state *c = cs();

	if (c) {
		c->sv_start = bpf_ktime_get_ns();
		clk_irq_entry(c, c->sv_start);
	}
	return 0;
}

static __always_inline int sv_exit(void)
{
	struct cpu_state *c = cs();
	struct prof_stats *s = st();

	if (!c || !s)
		return 0;
	irq_done(c, s, &c->sv_start, &s->sysvec_ns, &s->sysvec_cnt);
	return 0;
}

#define SYSVEC(name)                                                  \
	SEC("tp_btf/" #name "_entry")                                 \
	int BPF_PROG(sn_sv_##name##_entry) { return sv_entry(); }     \
	SEC("tp_btf/" #name "_exit")                                  \
	int BPF_PROG(sn_sv_##name##_exit) { return sv_exit(); }
SYSVEC(call_function)
SYSVEC(call_function_single)
SYSVEC(reschedule)
SYSVEC(local_timer)
SYSVEC(irq_work)

SEC("tp_btf/sched_switch")
int BPF_PROG(sn_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct cpu_state *c = cs();
	struct prof_stats *s = st();

	if (!c || !s)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	/* A switch the program did not see (this VM loses some: the stall probe
	 * sees the same) leaves the time since the last one seen to more than one
	 * task: a NAPI kthread's time counts only from its own switch-in, which
	 * the stage clock opens at too. */
	__u32 seen = c->cur_seen && c->cur_pid == (__u32)prev->pid;
	if (c->cur_seen && !seen)
		s->unseen_switches++;
	if (c->last_switch) {
		if (prev->pid == 0)
			s->idle_ns += now - c->last_switch;
		else
			s->busy_ns += now - c->last_switch;
		if (seen && task_ctx(prev) == PROF_CTX_NAPI)
			s->napi_thread_ns += now - c->last_switch;
	}
	c->cur_pid = next->pid;
	c->cur_seen = 1;
	c->last_switch = now;
	c->cur_idle = next->pid == 0;
	s->ctx_switches++;
	if (c->clk == CLK_THREAD)
		clk_charge(c, EV_THREAD_OUT, now);
	c->clk = CLK_OFF;
	switch (task_ctx(next)) {
	case PROF_CTX_NAPI:
		clk_open(c, CLK_THREAD, EV_THREAD_IN, now);
		break;
	case PROF_CTX_KSOFTIRQD:
		clk_open(c, CLK_ARMED, EV_KSOFTIRQD_IN, now);
		break;
	}
	return 0;
}

SEC("tp_btf/napi_poll")
int BPF_PROG(sn_napi_poll, struct napi_struct *napi, int work, int budget)
{
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
	clk_event(EV_NAPI_POLL);
	return 0;
}

/* The once-per-packet tracepoints (prefix sn_pp_: left out by --no-per-packet). */
#define PP_EVENT(tp, ev)                                     \
	SEC("tp_btf/" #tp)                                   \
	int BPF_PROG(sn_pp_##tp) { clk_event(ev); return 0; }
PP_EVENT(napi_gro_receive_entry, EV_GRO)
PP_EVENT(napi_gro_receive_exit, EV_GRO_EXIT)
PP_EVENT(netif_receive_skb_entry, EV_RCV)
PP_EVENT(netif_receive_skb_exit, EV_RCV_EXIT)
PP_EVENT(netif_receive_skb_list_entry, EV_LIST)
PP_EVENT(netif_receive_skb_list_exit, EV_LIST_EXIT)
PP_EVENT(netif_rx_entry, EV_NETIF_RX)
PP_EVENT(fib_table_lookup, EV_FIB)
PP_EVENT(net_dev_queue, EV_QUEUE)
PP_EVENT(qdisc_enqueue, EV_ENQ)
PP_EVENT(qdisc_dequeue, EV_DEQ)
PP_EVENT(net_dev_start_xmit, EV_START_XMIT)
PP_EVENT(net_dev_xmit, EV_XMIT)
PP_EVENT(sk_data_ready, EV_SK_READY)

/* A packet event that is also counted (over the sampled periods). */
#define PP_COUNTED_EVENT(tp, field, ev)                      \
	SEC("tp_btf/" #tp)                                   \
	int BPF_PROG(sn_pp_##tp)                             \
	{                                                    \
		struct prof_stats *s = st();                 \
		if (s && sampling)                           \
			s->field++;                          \
		clk_event(ev);                               \
		return 0;                                    \
	}
PP_COUNTED_EVENT(netif_receive_skb, rx_skbs, EV_CORE)
PP_COUNTED_EVENT(consume_skb, consumed_skbs, EV_CONSUME)

/* Duty-cycled like the stage events: drop counts are exact at duty 1,
 * counted over the sampled periods otherwise. */
SEC("tp_btf/kfree_skb")
int BPF_PROG(sn_pp_kfree_skb, struct sk_buff *skb, void *location, enum skb_drop_reason reason)
{
	struct prof_stats *s = st();
	struct drop_key k = { .reason = reason };
	__u64 one = 1, *n;

	if (!s || !sampling) /* attached but not yet (or no longer) counted: outside the sampled time */
		return 0;
	clk_event(EV_KFREE);
	s->dropped_skbs++;
	struct net_device *dev = skb->dev;
	if (dev) {
		k.ifindex = dev->ifindex;
		k.netns_ino = dev->nd_net.net->ns.inum;
	}
	n = bpf_map_lookup_elem(&drops, &k);
	if (n) {
		(*n)++;
	} else if (bpf_map_update_elem(&drops, &k, &one, BPF_NOEXIST)) {
		/* another CPU may have added the key since the lookup: count it there; full only if still absent */
		n = bpf_map_lookup_elem(&drops, &k);
		if (n)
			(*n)++;
		else
			s->drop_keys_full++;
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
