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
 * Flows (--dst-ips, --dst-ports too): f = seq % (flows * src_ips * dst_ips *
 * dst_ports), read mixed-radix with the source port fastest, then the source
 * address, the destination address, the destination port; with only --flows
 * and --src-ips that is the mapping above, byte for byte.
 *
 * Frame mixes (--mix): seq's frame length comes from a table (seq % mix_n);
 * the frame is built at the largest size and bpf_xdp_adjust_tail() sets each
 * packet's length absolutely (a recycled page's length is not known here;
 * the kernel zeroes a grown tail, so the payload past the stamp stays zero and
 * the checksum bases stay right). Length fields and checksums follow.
 *
 * A rate step (--step-at S --step-rate R2): seq S on is due on a second
 * constant schedule that starts at seq S's own due time.
 *
 * Arrivals (--arrivals poisson|onoff): seq is due at t0 + (seq / arr_m) *
 * period + arr_off[seq % arr_m], a table gen.c fills; the period is exactly
 * arr_m intervals, so the mean rate is the constant schedule's.
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
const volatile __u64 step_seq = ~0ull;   /* --step-at: from this seq on... */
const volatile __u64 step_due_ns = 0;    /* ...due from its own due time (after t0)... */
const volatile __u64 step_interval_fp = 0; /* ...at this interval */
const volatile __u32 csum_base = 0;      /* one's-complement sum with seq=ts=sport=0 */
const volatile __u32 anchor_ifindex = 0; /* idle veth the program stays attached to */
const volatile __u64 stride = 1;         /* --streams: this stream sends every stride-th seq... */
const volatile __u64 first_seq = 0;      /* ...from this one (--stream) */
const volatile __u32 src_ips = 1;        /* source addresses used in turn */
const volatile __u32 src_base = 0;       /* the first: IPv4 host order, or an IPv6 address's last 16 bits */
/* IPv4 header sum with check and the varied fields (saddr, daddr, tot_len) zero, not folded */
const volatile __u32 ip_csum_novar = 0;
const volatile __u64 nflows = 1;         /* flows * src_ips * dst_ips * dst_ports */
const volatile __u32 dst_ips = 1;        /* destination addresses used in turn... */
const volatile __u32 dst_base = 0;       /* ...from this one (as src_base) */
const volatile __u32 dst_ports = 1;      /* UDP destination ports from SN_UDP_DPORT */
const volatile __u32 mix_n = 0;          /* --mix table length (0: one size) */
const volatile __u16 mix_len[SN_MIX_MAX_TABLE] = {}; /* frame length without FCS, per seq % mix_n */
const volatile __u32 arr_m = 0;          /* --arrivals table length (0: constant) */
const volatile __u64 arr_period_ns = 0;  /* arr_m intervals: whole ns... */
const volatile __u64 arr_period_frac = 0; /* ...and the fraction, << GEN_FP_SHIFT */

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

/* --arrivals: the due offset of seq % arr_m within its period (ns); mapped by gen.c */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* resized by gen.c to arr_m */
	__type(key, __u32);
	__type(value, __u64);
} arr_off SEC(".maps");

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

static __always_inline __u64 due_of(__u64 seq)
{
	if (!arr_m) {
		if (seq < step_seq)
			return state.t0 + ((seq * interval_fp) >> GEN_FP_SHIFT);
		return state.t0 + step_due_ns + (((seq - step_seq) * step_interval_fp) >> GEN_FP_SHIFT);
	}
	if (state.due_seq_plus1 == seq + 1)
		return state.due_ns;
	__u64 c = seq / arr_m;
	__u32 k = seq % arr_m;
	__u64 *off = bpf_map_lookup_elem(&arr_off, &k);
	__u64 due = state.t0 + c * arr_period_ns + ((c * arr_period_frac) >> GEN_FP_SHIFT) + (off ? *off : 0);
	state.due_seq_plus1 = seq + 1;
	state.due_ns = due;
	return due;
}

static __always_inline __u32 fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

SEC("xdp")
int sn_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	/* A frame really received on the anchor is not ours to rewrite. */
	if (ctx->ingress_ifindex == anchor_ifindex)
		return XDP_PASS;
	if (data + GEN_HDR_V4 + sizeof(struct sn_payload) > end)
		return XDP_ABORTED;

	__u64 seq = state.next_seq;
	if (seq >= count || !state.t0)
		return XDP_DROP;
	__u64 due = due_of(seq);
	__u64 now = bpf_ktime_get_ns();
	if (now < due)
		return XDP_DROP;
	state.next_seq = seq + stride;

	__u32 len = 0;
	if (mix_n) {
		len = mix_len[(seq % mix_n) & (SN_MIX_MAX_TABLE - 1)];
		if (bpf_xdp_adjust_tail(ctx, (int)len - (int)bpf_xdp_get_buff_len(ctx)))
			return XDP_ABORTED;
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
	}
	if (data + GEN_HDR_V4 + sizeof(struct sn_payload) > end)
		return XDP_ABORTED;
	if (payload_off == GEN_HDR_V6) {
		if (data + GEN_HDR_V6 + sizeof(struct sn_payload) > end)
			return XDP_ABORTED;
		__builtin_memcpy(data, tmpl.hdr, GEN_HDR_V6);
	} else
		__builtin_memcpy(data, tmpl.hdr, GEN_HDR_V4);
	struct udphdr *udp = data + udp_off;
	struct sn_payload *p = data + payload_off;
	if ((void *)(udp + 1) > end || (void *)(p + 1) > end)
		return XDP_ABORTED;

	/* the flow: source port fastest, then source, destination, destination port */
	__u32 sport_i = 0, src_i = 0, dst_i = 0, dport_i = 0;
	if (nflows > 1) {
		__u64 f = seq % nflows;
		sport_i = flows > 1 ? (__u32)(f % flows) : 0;
		f /= flows;
		if (src_ips > 1)
			src_i = (__u32)(f % src_ips);
		f /= src_ips;
		if (dst_ips > 1)
			dst_i = (__u32)(f % dst_ips);
		dport_i = (__u32)(f / dst_ips);
	}
	__u16 sport = SN_UDP_SPORT_BASE + (__u16)sport_i;
	p->seq = bpf_cpu_to_be64(seq);
	p->ts = bpf_cpu_to_be64(now);
	udp->source = bpf_htons(sport);
	__u32 sum = csum_base + sport; /* csum_base leaves every varied field out */
	if (dst_ports > 1) {
		__u16 dport = SN_UDP_DPORT + (__u16)dport_i;
		udp->dest = bpf_htons(dport);
		sum += dport;
	}
	__u32 udp_len = len - udp_off;
	if (mix_n) { /* in the pseudo-header and in the UDP header */
		udp->len = bpf_htons((__u16)udp_len);
		sum += 2 * udp_len;
	}
	__u32 sa = src_base + src_i, da = dst_base + dst_i;
	if (payload_off == GEN_HDR_V6) {
		if (data + GEN_HDR_V6 > end)
			return XDP_ABORTED;
		/* Ethernet 14 + the IPv6 source's offset 8 (destination's 24) + 14: their last 16 bits */
		if (src_ips > 1) {
			*(__be16 *)(data + 36) = bpf_htons((__u16)sa);
			sum += sa & 0xffff;
		}
		if (dst_ips > 1) {
			*(__be16 *)(data + 52) = bpf_htons((__u16)da);
			sum += da & 0xffff;
		}
		if (mix_n)
			*(__be16 *)(data + 18) = bpf_htons((__u16)udp_len); /* payload_len */
	} else if (src_ips > 1 || dst_ips > 1 || mix_n) {
		struct iphdr *ip = data + 14;
		__u32 ipsum = ip_csum_novar;
		if (src_ips > 1) {
			ip->saddr = bpf_htonl(sa);
			ipsum += (sa >> 16) + (sa & 0xffff);
			sum += (sa >> 16) + (sa & 0xffff);
		}
		if (dst_ips > 1) {
			ip->daddr = bpf_htonl(da);
			ipsum += (da >> 16) + (da & 0xffff);
			sum += (da >> 16) + (da & 0xffff);
		}
		if (mix_n) {
			ip->tot_len = bpf_htons((__u16)(len - 14));
			ipsum += len - 14;
		}
		ip->check = bpf_htons(~fold(ipsum) & 0xffff);
	}
	sum = add_words64(sum, seq);
	sum = add_words64(sum, now);
	__u16 check = ~fold(sum) & 0xffff;
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
