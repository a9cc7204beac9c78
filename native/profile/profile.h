/* softnet-profile: per-CPU aggregates of the kernel's packet path, shared by
 * the BPF side (profile.bpf.c) and the loader (profile.c). */
#ifndef SN_PROFILE_H
#define SN_PROFILE_H

#define PROF_NVEC 10      /* softirq vectors: HI TIMER NET_TX NET_RX BLOCK IRQ_POLL TASKLET SCHED HRTIMER RCU */
#define PROF_NCTX 4       /* the task a softirq ran on top of */
#define PROF_CTX_IDLE 0   /* swapper: the idle task */
#define PROF_CTX_KSOFTIRQD 1
#define PROF_CTX_NAPI 2   /* a threaded NAPI kthread (napi/<dev>-<id>) */
#define PROF_CTX_OTHER 3
#define PROF_NAPI_BUCKETS 9 /* work per poll: 0, 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64-127, 128+ */
#define PROF_MAX_DROP_KEYS 1024 /* distinct (reason, device) pairs kept; more count as drop_keys_full */

/* Where skbs were dropped: the reason and the device the skb was on (its
 * ifindex within its network namespace, named by the namespace's inode). */
struct drop_key {
	__u32 reason; /* enum skb_drop_reason */
	__u32 ifindex;
	__u32 netns_ino;
	__u32 pad;
};

struct prof_stats {
	__u64 softirq_ns[PROF_NVEC][PROF_NCTX];
	__u64 softirq_cnt[PROF_NVEC][PROF_NCTX];
	__u64 hardirq_ns;
	__u64 hardirq_cnt;
	__u64 sysvec_ns;       /* x86 system vectors: IPIs (call function, reschedule), local timer, irq work */
	__u64 sysvec_cnt;
	__u64 busy_ns;         /* a task other than the idle task on the CPU (irq time inside it included) */
	__u64 idle_ns;         /* the idle task on the CPU (irq and softirq time inside it included) */
	__u64 napi_thread_ns;  /* NAPI kthreads on the CPU (irq and softirq time inside them included) */
	__u64 hardirq_in_idle_ns;
	__u64 softirq_in_idle_ns;
	__u64 ctx_switches;
	__u64 napi_polls;
	__u64 napi_work;
	__u64 napi_budget_exhausted;
	__u64 napi_work_hist[PROF_NAPI_BUCKETS];
	__u64 rx_skbs;         /* net:netif_receive_skb */
	__u64 consumed_skbs;   /* skb:consume_skb */
	__u64 dropped_skbs;    /* skb:kfree_skb */
	__u64 unmatched_exits; /* an exit seen without its entry (attached mid-event): lost, not guessed */
	__u64 drop_keys_full;  /* drops not itemized: the (reason, device) map was full */
	__u64 unseen_switches; /* a task switched out that the last switch seen had not switched in */
};

/* The stage clock: per CPU, the time between consecutive packet-path events
 * while the CPU does packet processing (a NET_RX/NET_TX softirq or a NAPI
 * kthread), summed per (previous event, next event) pair. User space names
 * the pairs as stages (softnet/analysis/stages.py). Interrupts and other
 * softirq vectors inside are paused out of the interval they interrupt. */
enum prof_event {
	EV_NONE,
	EV_SIRQ_RX,      /* softirq_entry NET_RX */
	EV_SIRQ_TX,      /* softirq_entry NET_TX */
	EV_SIRQ_EXIT,    /* softirq_exit of NET_RX/NET_TX */
	EV_THREAD_IN,    /* a NAPI kthread switched in */
	EV_THREAD_OUT,   /* ... and out */
	EV_KSOFTIRQD_IN, /* ksoftirqd switched in (closed by its NET softirq's entry) */
	EV_IRQ,          /* hardirq or system vector entry inside packet processing */
	EV_RXIRQ,        /* hardirq or system vector entry whose irq_exit ran a NET softirq */
	EV_IRQ_EXIT,
	EV_GRO,          /* napi_gro_receive_entry */
	EV_GRO_EXIT,
	EV_RCV,          /* netif_receive_skb_entry */
	EV_RCV_EXIT,
	EV_LIST,         /* netif_receive_skb_list_entry */
	EV_LIST_EXIT,
	EV_NETIF_RX,     /* netif_rx_entry: enqueue to a backlog (RPS or non-NAPI veth) */
	EV_CORE,         /* net:netif_receive_skb: __netif_receive_skb_core */
	EV_FIB,          /* fib:fib_table_lookup */
	EV_QUEUE,        /* net:net_dev_queue: __dev_queue_xmit */
	EV_ENQ,          /* qdisc:qdisc_enqueue */
	EV_DEQ,          /* qdisc:qdisc_dequeue */
	EV_START_XMIT,   /* net:net_dev_start_xmit: the driver's ndo_start_xmit begins */
	EV_XMIT,         /* net:net_dev_xmit: ... and returned */
	EV_NAPI_POLL,    /* napi:napi_poll: a driver poll returned */
	EV_CONSUME,      /* skb:consume_skb */
	EV_KFREE,        /* skb:kfree_skb */
	EV_SK_READY,     /* sock:sk_data_ready: a socket got data (local delivery: IP to transport done) */
	PROF_NEV
};

struct stage_matrix {
	__u64 ns[PROF_NEV][PROF_NEV];  /* [previous event][next event] */
	__u64 cnt[PROF_NEV][PROF_NEV];
};

/* The stage clock's state. */
#define CLK_OFF 0
#define CLK_ARMED 1  /* after an RX IRQ or ksoftirqd's switch-in: kept if a NET softirq follows */
#define CLK_THREAD 2 /* in a NAPI kthread */
#define CLK_SIRQ 3   /* in a NET_RX/NET_TX softirq */

/* Per-CPU bookkeeping of the programs (read by the loader for the open
 * busy/idle interval). */
struct cpu_state {
	__u64 sirq_start;
	__u32 sirq_vec;
	__u32 sirq_ctx;
	__u64 hirq_start;
	__u64 sv_start;
	__u32 hirq_in_idle;
	__u32 cur_idle;
	__u64 last_switch;
	/* stage clock */
	__u64 clk_ts;     /* when the open interval began (shifted past pauses) */
	__u64 pause_ts;   /* an interrupt or another softirq vector began */
	__u64 irq_ts;     /* the current interrupt began */
	__u32 clk;        /* CLK_* */
	__u32 clk_outer;  /* the state a NET softirq returns to */
	__u32 ev;         /* the event that opened the interval */
	__u64 irq_pending_ns; /* the last interrupt outside packet processing: an RX IRQ if a NET softirq follows */
	__u32 irq_pending_gen;
	__u32 in_pause;
	__u32 clk_gen;    /* the sampling generation the open interval began in */
	__u32 irq_gen;
	__u32 cur_pid;    /* the task the last switch seen switched in */
	__u32 cur_seen;   /* cur_pid is known (a switch was seen since attaching) */
};

/* Stage sampling: the loader attaches the once-per-packet programs for a
 * share of the time (duty cycle) to bound their overhead. An interval counts
 * only if it began and ended inside one attached period (same generation);
 * the others are summed in stages[EV_NONE][EV_NONE] ("unsampled"). */

#endif
