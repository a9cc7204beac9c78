/* softnet-sink: XDP counter for softnet test frames. */
#ifndef SN_SINK_H
#define SN_SINK_H

enum sink_counter {
	SINK_RX_TEST,    /* softnet test frames seen (any seq, incl. duplicates) */
	SINK_RX_WARMUP,  /* first copies with seq < warmup */
	SINK_RX_WINDOW,  /* first copies with seq >= warmup: the measured count */
	SINK_DUP,        /* window: copies of a seq already seen */
	SINK_REORDER,    /* window: first copies arriving after a higher seq */
	SINK_OUT_OF_RANGE, /* seq beyond the expected count: corrupt or foreign */
	SINK_LAT_SUM_NS, /* sum of one-way delays of window packets */
	SINK_LAT_MAX_NS,
	SINK_LAT_MIN_NS, /* 0 = unset */
	SINK_OTHER,      /* frames that are not softnet test frames (passed on) */
	SINK_LAT_PKTS,   /* window packets whose delay went into the histogram */
	SINK_LAT_NEGATIVE, /* window packets sent "after" they arrived: corrupt stamp */
	SINK_LAT_OVER_RANGE, /* delays >= 2^SINK_HIST_RANGE_LOG2 ns: counted, not bucketed */
	SINK_RX_VXLAN,   /* test frames that came VXLAN-encapsulated (counted as the others too) */
	SINK_NCOUNTERS,
};

/* Log-linear (HDR) delay histogram, shared with softnet/analysis/latency_hist.py
 * (a test compares the two). A delay v < 2^(SUB_BITS+1) ns has its own bucket
 * (index v); above, each power of two [2^e, 2^(e+1)) is cut into 2^SUB_BITS
 * equal buckets: index (e - SUB_BITS) * 2^SUB_BITS + (v >> (e - SUB_BITS)).
 * A bucket is at most 1/2^SUB_BITS of its lower edge wide (0.78% at 7 bits). */
#define SINK_HIST_SUB_BITS 7
#define SINK_HIST_RANGE_LOG2 36 /* delays up to 2^36 ns = 68.7 s */
#define SINK_HIST_BUCKETS ((SINK_HIST_RANGE_LOG2 - SINK_HIST_SUB_BITS + 1) << SINK_HIST_SUB_BITS)
/* --exact N: every window packet's delay, in arrival order, up to N of them */
#define SINK_EXACT_MAX (1u << 24)
/* --bin-pkts N: the timeline's bins (ceil(count / N) of them) and what the
 * "timeline" command lists of the lost runs (all are counted) */
#define SINK_TIMELINE_MAX_BINS (1u << 21)
#define SINK_TIMELINE_MAX_RUNS 20000
/* --streams N: reordering is judged per generator stream (seq % N) */
#define SINK_MAX_STREAMS 1024 /* a power of two (a mask in sink.bpf.c) */

#endif
