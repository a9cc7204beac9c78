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
};

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
};

#endif
