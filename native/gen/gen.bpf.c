// SPDX-License-Identifier: GPL-2.0
/* The generator's pacer and stamper. gen.c runs this program back to back
 * under BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (hundreds of thousands of
 * iterations per call). Each iteration either finds the next packet not yet
 * due and returns XDP_DROP (an idle slot: the page goes straight back to the
 * pool), or stamps sequence number, send time and flow port into the frame,
 * fixes the UDP checksum, and returns XDP_TX (the kernel turns it into a
 * transmit on the generator's veth). Packet k is due at t0 + k * interval: an
 * absolute schedule, per packet, that cannot drift.
 *
 * Streams (--streams N --stream K): this program sends only the seqs with
 * seq % N == K, each at the due time of the one schedule all N share (same t0,
 * same interval), so N programs on N CPUs send the aggregate rate together.
 * Everything below is per stream: "consecutive" packets are seq and seq + N.
 *
 * Source addresses (--src-ips N): seq % (flows * N) picks the UDP source port
 * (index % flows) and the source address (index / flows, added to the first
 * address; IPv6: to its last 16 bits); the IPv4 header checksum and the UDP
 * checksum follow.
 *
 * Page contents are not reset between iterations, and a page the SUT forwarded
 * comes back to our page pool with the SUT's rewrites in it (next-hop MACs,
 * TTL, IP checksum). So every send copies the whole header template in and
 * writes every variable field absolutely. */
#include <linux/bpf.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../common/sn_proto.h"
#include "gen.h"

const volatile __u32 udp_off = 34;
const volatile __u32 payload_off = 42;
const volatile __u32 flows = 1;
const volatile __u64 count = 0;          /* packets to send in all */
const volatile __u64 mark_seq = 0;       /* first packet of the measurement window */
const volatile __u64 interval_fp = 0;    /* ns between packets, fixed point << GEN_FP_SHIFT */
const volatile __u32 csum_base = 0;      /* one's-complement sum with seq=ts=sport=0 */
const volatile __u32 anchor_ifindex = 0; /* idle veth the program stays attached to */
const volatile __u64 stride = 1;         /* --streams: this stream sends every stride-th seq... */
const volatile __u64 first_seq = 0;      /* ...from this one (--stream) */
const volatile __u32 src_ips = 1;        /* source addresses used in turn */
const volatile __u32 src_base = 0;       /* the first: IPv4 host order, or an IPv6 address's last 16 bits */
const volatile __u32 ip_csum_nosrc = 0;  /* IPv4 header sum with saddr = check = 0 (not folded) */

/* Ethernet + IP + UDP header of the template frame, written by gen.c. */
struct gen_template tmpl SEC(".data");

/* One user thread drives the program on one CPU: plain globals are enough
 * (each stream is a process of its own, with its own copy of this program). */
struct gen_state state = {};

/* Closed late episodes, in order; gen.c adds the one still open at the end. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GEN_MAX_EPISODES);
	__type(key, __u32);
	__type(value, struct gen_episode);
} episodes SEC(".maps");

/* A late episode: a run of consecutive late packets (of this stream: seq,
 * seq + stride, ...). One branch per packet on time, a compare per late one;
 * a map write when an episode ends. */
static __always_inline void track_late(__u64 seq, __u64 lag)
{
	if (lag > GEN_LATE_NS) {
		if (!state.ep_open) {
			state.ep_open = 1;
			state.ep_first_seq = seq;
			state.ep_max_lag_ns = lag;
		} else if (lag > state.ep_max_lag_ns) {
			state.ep_max_lag_ns = lag;
		}
	} else if (state.ep_open) {
		state.ep_closed++;
		state.ep_open = 0;
		if (state.ep_max_lag_ns >= GEN_EPISODE_KEEP_NS && state.ep_kept < GEN_MAX_EPISODES) {
			__u32 k = state.ep_kept++;
			struct gen_episode *e = bpf_map_lookup_elem(&episodes, &k);
			if (e) {
				e->first_seq = state.ep_first_seq;
				e->last_seq = seq - stride;
				e->max_lag_ns = state.ep_max_lag_ns;
			}
		}
	}
}

static __always_inline __u32 add_words64(__u32 sum, __u64 v)
{
	return sum + (__u32)(v >> 48) + (__u32)((v >> 32) & 0xffff) +
	       (__u32)((v >> 16) & 0xffff) + (__u32)(v & 0xffff);
}

SEC("xdp")
int sn_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct udphdr *udp = data + udp_off;
	struct sn_payload *p = data + payload_off;

	/* A frame really received on the anchor is not ours to rewrite. */
	if (ctx->ingress_ifindex == anchor_ifindex)
		return XDP_PASS;
	if ((void *)(udp + 1) > end || (void *)(p + 1) > end || data + GEN_HDR_V4 > end)
		return XDP_ABORTED;

	__u64 seq = state.next_seq;
	if (seq >= count || !state.t0)
		return XDP_DROP;
	__u64 due = state.t0 + ((seq * interval_fp) >> GEN_FP_SHIFT);
	__u64 now = bpf_ktime_get_ns();
	if (now < due)
		return XDP_DROP;
	state.next_seq = seq + stride;

	if (payload_off == GEN_HDR_V6) {
		if (data + GEN_HDR_V6 > end)
			return XDP_ABORTED;
		__builtin_memcpy(data, tmpl.hdr, GEN_HDR_V6);
	} else
		__builtin_memcpy(data, tmpl.hdr, GEN_HDR_V4);

	__u16 sport = SN_UDP_SPORT_BASE + (flows > 1 ? (__u16)(seq % flows) : 0);
	p->seq = bpf_cpu_to_be64(seq);
	p->ts = bpf_cpu_to_be64(now);
	udp->source = bpf_htons(sport);
	__u32 sum = csum_base + sport;
	if (src_ips > 1) { /* csum_base then leaves the varied part of the address out */
		__u32 a = src_base + (__u32)((seq / flows) % src_ips);
		if (payload_off == GEN_HDR_V6) {
			if (data + GEN_HDR_V6 > end)
				return XDP_ABORTED;
			/* Ethernet 14 + the IPv6 source's offset 8 + 14: its last 16 bits */
			*(__be16 *)(data + 36) = bpf_htons((__u16)a);
			sum += a & 0xffff;
		} else {
			struct iphdr *ip = data + 14;
			ip->saddr = bpf_htonl(a);
			__u32 ipsum = ip_csum_nosrc + (a >> 16) + (a & 0xffff);
			ipsum = (ipsum & 0xffff) + (ipsum >> 16);
			ipsum = (ipsum & 0xffff) + (ipsum >> 16);
			ip->check = bpf_htons(~ipsum & 0xffff);
			sum += (a >> 16) + (a & 0xffff);
		}
	}
	sum = add_words64(sum, seq);
	sum = add_words64(sum, now);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	__u16 check = ~sum & 0xffff;
	udp->check = bpf_htons(check ? check : 0xffff);

	__u64 lag = now - due;
	track_late(seq, lag);
	if (seq == first_seq)
		state.first_ns = now;
	if (seq >= mark_seq) {
		if (seq == mark_seq)
			state.mark_ns = now;
		state.lag_sum_ns += lag;
		if (lag > state.lag_max_ns)
			state.lag_max_ns = lag;
		if (lag > GEN_LATE_NS)
			state.late_pkts++;
	}
	state.last_ns = now;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
