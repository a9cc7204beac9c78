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
	SINK_NCOUNTERS,
};

#define SINK_HIST_BUCKETS 40 /* log2(ns) buckets: bucket b holds [2^b, 2^(b+1)) */

#endif
