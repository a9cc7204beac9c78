/* softnet-gen: constant-rate UDP generator on BPF_PROG_RUN live frames. */
#ifndef SN_GEN_H
#define SN_GEN_H

#define GEN_FP_SHIFT 20        /* interval fixed point: 1/2^20 ns resolution */
#define GEN_LATE_NS 10000      /* a packet sent 10 us after its due time is late */
#define GEN_MAX_EPISODES 4096  /* late episodes kept (the rest are counted) */
/* An episode is kept only when it was this late at its worst: the many short
 * ones (10-60 us, thousands per second on a VM) are counted, not listed. */
#define GEN_EPISODE_KEEP_NS 100000

#define GEN_HDR_V4 42 /* Ethernet 14 + IPv4 20 + UDP 8 */
#define GEN_HDR_V6 62 /* Ethernet 14 + IPv6 40 + UDP 8 */
/* --arrivals poisson: gaps normalised per block of this many packets, so any
 * window's mean rate is within a block's worth of the intended one */
#define GEN_POISSON_BLOCK 4096
#define GEN_ARRIVALS_MAX (1u << 20) /* arrival table entries (8 MiB) */

struct gen_template {
	__u8 hdr[64];
};

/* Offsets into the frame the BPF program rewrites. */
struct gen_layout {
	__u32 udp_off;
	__u32 payload_off;
};

/* Shared with user space through the skeleton's mmapped .bss. */
struct gen_state {
	__u64 t0;          /* schedule origin (CLOCK_MONOTONIC ns), set by gen.c */
	__u64 next_seq;    /* packets sent so far */
	__u64 first_ns;    /* send time of seq 0 */
	__u64 mark_ns;     /* send time of the first window packet */
	__u64 last_ns;     /* send time of the latest packet */
	__u64 lag_sum_ns;  /* window: sum of (send time - due time) */
	__u64 lag_max_ns;
	__u64 late_pkts;   /* window: packets later than GEN_LATE_NS */
	/* Late episodes, warm-up included: maximal runs of consecutive late
	 * packets. The open one lives here; closed ones go to the `episodes` map. */
	__u64 ep_open;     /* the latest packet sent was late */
	__u64 ep_first_seq;
	__u64 ep_max_lag_ns;
	__u64 ep_closed;   /* episodes closed so far */
	__u64 ep_kept;     /* of them, late by GEN_EPISODE_KEEP_NS (the first GEN_MAX_EPISODES kept) */
	/* --arrivals: the due time of next_seq, looked up once, not per idle slot */
	__u64 due_seq_plus1;
	__u64 due_ns;
};

struct gen_episode {
	__u64 first_seq, last_seq, max_lag_ns;
};

#endif
