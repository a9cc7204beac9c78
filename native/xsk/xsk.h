/* softnet-xsk: the AF_XDP latency tool's packet format, shared by the XDP
 * program (xsk.bpf.c) and user space (xsk.c).
 *
 * Test frames are IPv4 UDP to or from port XSK_PORT whose UDP payload starts
 * with struct xsk_payload (every field big-endian, readable in a capture).
 * The payload is cut at the frame size: a 64 B frame carries the magic and
 * the sequence number only; t0_ns needs 66 B; all hop slots need
 * XSK_FULL_FRAME_BYTES. A hop slot that does not fit is not written. */
#ifndef SN_XSK_H
#define SN_XSK_H

#define XSK_PORT 7                /* UDP echo, as softnet-gen's test frames */
#define XSK_SPORT 1024            /* the ping's source port */
#define XSK_MAGIC 0x534e584bu     /* "SNXK" */
#define XSK_META_MAGIC 0x4d455441u /* "META": the XDP program's metadata is there */
#define XSK_FCS_LEN 4             /* frame sizes include the FCS, veth carries none */
#define XSK_HDR_LEN (14 + 20 + 8) /* Ethernet, IPv4 without options, UDP */

/* Hop stamps, in path order: the same order and meaning as HOPS in
 * softnet/results/latency.py (tests/test_xsk_tool.py checks the names). */
enum xsk_hop {
	HOP_B_XDP_RX_FWD,
	HOP_B_USER_RX_FWD,
	HOP_B_USER_TX_FWD,
	HOP_C_XDP_RX,
	HOP_C_USER_RX,
	HOP_C_USER_TX,
	HOP_B_XDP_RX_RET,
	HOP_B_USER_RX_RET,
	HOP_B_USER_TX_RET,
	HOP_A_XDP_RX,
	XSK_NHOPS,
};

struct xsk_payload {
	__u32 magic;             /* XSK_MAGIC */
	__u64 seq;               /* from 0 */
	__u64 t0_ns;             /* A's application, just before the TX ring submit */
	__u64 hop_ns[XSK_NHOPS]; /* 0: not stamped */
} __attribute__((packed));

#define XSK_OFF_SEQ 4
#define XSK_OFF_T0 12
#define XSK_OFF_HOP(i) (20 + 8 * (i))
#define XSK_FULL_FRAME_BYTES (XSK_HDR_LEN + (int)sizeof(struct xsk_payload) + XSK_FCS_LEN)
#define XSK_MIN_FRAME_BYTES 64

/* In front of the packet (bpf_xdp_adjust_meta): the XDP hook's stamp. */
struct xsk_meta {
	__u64 xdp_rx_ns; /* bpf_ktime_get_ns() on entry to the XDP program */
	__u32 magic;     /* XSK_META_MAGIC; user space clears it after reading */
	__u32 pad;
};

/* The XDP program's per-CPU counters. */
enum xsk_counter {
	XSKC_TEST,         /* test frames seen (redirected or not) */
	XSKC_OTHER,        /* other frames: XDP_PASS */
	XSKC_OTHER_QUEUE,  /* test frames on a queue without a socket: XDP_PASS */
	XSKC_META,         /* stamp in metadata */
	XSKC_META_FAIL,    /* bpf_xdp_adjust_meta refused: stamp in the payload slot */
	XSKC_NO_SLOT,      /* ... and the frame was too short for the slot: no stamp */
	XSKC_NCOUNTERS,
};

#endif
