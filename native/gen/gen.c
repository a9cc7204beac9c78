// SPDX-License-Identifier: GPL-2.0
/* softnet-gen: sends COUNT UDP test frames at RATE pps on an absolute schedule.
 *
 * The pacing lives in the BPF program (gen.bpf.c): this loop only keeps it
 * running, with BPF_PROG_RUN in live-frames mode and a large repeat count, on
 * the pinned CPU, until every packet is out. Why not one small batch per
 * syscall: each live-frames call builds a page pool and registers an XDP
 * memory model (tens of microseconds), and thousands of calls per second
 * exhaust the memory-model IDs (ENOSPC). One call per ~10 ms costs nothing.
 *
 * Every BPF_PROG_RUN with repeat > 1 also adds the program to the kernel's XDP
 * dispatcher and removes it again, each change waiting for an RCU grace
 * period. Keeping the program attached to an idle "anchor" veth for the whole
 * run makes those changes no-ops (the dispatcher refcounts a program it holds).
 *
 * When the generator cannot keep up it sends back to back and reports its lag;
 * the caller decides whether the trial was generator-limited.
 *
 * Several generators drive one interface past one core's rate: N processes
 * with --streams N --stream 0..N-1, one per CPU (one per TX queue on a NIC),
 * each sending the seqs s with s % N == K at the due times of one shared
 * schedule (--t0-ns: the same origin for all). Each needs an anchor of its own
 * (an interface holds one XDP program). The report's counts are this
 * process's; softnet.traffic.native.GeneratorGroup merges them.
 *
 * Traffic shapes (docs/how-to/traffic.md): flows over ports and addresses, frame
 * mixes and arrival processes are tables built here, read per packet by the
 * program; with none of them the program is the constant single-size one. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/netlink.h>
#include <linux/udp.h>
#include <math.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "../common/sn_proto.h"
#include "../common/sn_util.h"
#include "gen.h"
#include "gen.skel.h"

#define REPEAT (1u << 18) /* program iterations per syscall: ~10 ms of idle slots */
#define GAP_REPEAT (1u << 12) /* with --sleep-gaps: ~150 us of idle slots, so a gap is seen soon */
#define GAP_WAKE_EARLY_NS 200000ull /* wake this long before a gap's end, then spin (timer slack, wake-up) */
#define START_DELAY_NS 2000000ull
#define MAX_STREAMS 1024
#define MAX_T0_AHEAD_NS (60ull * 1000000000ull) /* --t0-ns further ahead: a mistake, not a plan */
#define WAKE_EARLY_NS 2000000ull /* sleep until this long before t0, then spin in the program */

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

enum { ARR_CONST, ARR_POISSON, ARR_ONOFF };
static const char *const arrival_names[] = { "const", "poisson", "onoff" };

struct opts {
	const char *netns, *ifname, *anchor, *src_ip, *dst_ip;
	unsigned char src_mac[6], dst_mac[6];
	unsigned size, flows, batch, src_ips, dst_ips, dst_ports;
	double rate, duty, step_rate;
	uint64_t count, warmup, streams, stream, t0_ns, seed, burst, step_at, sleep_gap_ns, hold_ns;
	int cpu, arrivals, has_mix, has_burst, has_duty;
	struct sn_mix mix;
};

/* The addresses --src-ips/--dst-ips vary: the first of each (IPv4: the whole
 * address in host order; IPv6: its last 16 bits), and the IPv4 header's sum
 * without the varied fields (addresses, and the length with --mix). */
struct src_range {
	uint32_t base, dst_base, ip_csum_novar;
};

/* Builds the template frame (with --mix: at its largest size); returns its
 * length and the UDP checksum base (pseudo-header + UDP header + payload with
 * seq, ts, sport and every field the program varies zeroed). */
static size_t build_frame(const struct opts *o, unsigned char *f, uint32_t *csum_base,
			  struct gen_layout *lay, struct src_range *src)
{
	size_t len = o->size - SN_FCS_LEN; /* with --mix, parse_args made it the largest size */
	struct ethhdr *eth = (struct ethhdr *)f;
	struct in6_addr s6, d6;
	struct in_addr s4, d4;
	int v6 = strchr(o->dst_ip, ':') != NULL;
	size_t l3 = sizeof(*eth), l4 = l3 + (v6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr));
	size_t udp_len = len - l4;
	uint32_t sum = 0;

	memset(f, 0, len);
	memcpy(eth->h_dest, o->dst_mac, 6);
	memcpy(eth->h_source, o->src_mac, 6);
	eth->h_proto = htons(v6 ? ETH_P_IPV6 : ETH_P_IP);
	if (v6) {
		struct ipv6hdr *ip6 = (struct ipv6hdr *)(f + l3);
		if (inet_pton(AF_INET6, o->src_ip, &s6) != 1 || inet_pton(AF_INET6, o->dst_ip, &d6) != 1)
			sn_usage_error("--src-ip/--dst-ip: expected IPv6 addresses, got '%s' '%s'", o->src_ip, o->dst_ip);
		ip6->version = 6;
		ip6->payload_len = htons(udp_len);
		ip6->nexthdr = IPPROTO_UDP;
		ip6->hop_limit = 64;
		ip6->saddr = s6;
		ip6->daddr = d6;
		src->base = (uint32_t)s6.s6_addr[14] << 8 | s6.s6_addr[15];
		src->dst_base = (uint32_t)d6.s6_addr[14] << 8 | d6.s6_addr[15];
		if (o->src_ips > 1) /* the program adds the varied last 16 bits */
			s6.s6_addr[14] = s6.s6_addr[15] = 0;
		if (o->dst_ips > 1)
			d6.s6_addr[14] = d6.s6_addr[15] = 0;
		sum = sn_csum_add(sum, &s6, 16);
		sum = sn_csum_add(sum, &d6, 16);
	} else {
		struct iphdr *ip = (struct iphdr *)(f + l3);
		if (inet_pton(AF_INET, o->src_ip, &s4) != 1 || inet_pton(AF_INET, o->dst_ip, &d4) != 1)
			sn_usage_error("--src-ip/--dst-ip: expected IPv4 addresses, got '%s' '%s'", o->src_ip, o->dst_ip);
		ip->version = 4;
		ip->ihl = 5;
		ip->ttl = 64;
		ip->protocol = IPPROTO_UDP;
		if (o->src_ips == 1)
			ip->saddr = s4.s_addr;
		if (o->dst_ips == 1)
			ip->daddr = d4.s_addr;
		if (!o->has_mix)
			ip->tot_len = htons(len - l3);
		src->ip_csum_novar = sn_csum_add(0, ip, sizeof(*ip)); /* check and what varies zero */
		ip->tot_len = htons(len - l3);
		ip->daddr = d4.s_addr;
		ip->saddr = s4.s_addr;
		ip->check = htons(~sn_csum_fold(sn_csum_add(0, ip, sizeof(*ip))) & 0xffff);
		src->base = ntohl(s4.s_addr);
		src->dst_base = ntohl(d4.s_addr);
		if (o->src_ips == 1) /* else the program adds each packet's source */
			sum = sn_csum_add(sum, &s4, 4);
		if (o->dst_ips == 1)
			sum = sn_csum_add(sum, &d4, 4);
	}
	sum += IPPROTO_UDP + (o->has_mix ? 0 : udp_len); /* with --mix the program adds the length */
	struct udphdr *udp = (struct udphdr *)(f + l4);
	if (o->dst_ports == 1)
		udp->dest = htons(SN_UDP_DPORT);
	if (!o->has_mix)
		udp->len = htons(udp_len);
	/* source, check, seq, ts and the varied fields are still zero; the payload
	 * past the stamp is zero at every size */
	sum = sn_csum_add(sum, udp, udp_len);
	udp->dest = htons(SN_UDP_DPORT);
	udp->len = htons(udp_len);
	*csum_base = sn_csum_fold(sum);
	lay->udp_off = l4;
	lay->payload_off = l4 + sizeof(*udp);
	return len;
}

enum { OPT_SRC_MAC = 256, OPT_DST_MAC, OPT_SRC_IP, OPT_DST_IP, OPT_CPU, OPT_BATCH, OPT_ANCHOR, OPT_STREAMS,
       OPT_STREAM, OPT_T0, OPT_SRC_IPS, OPT_DST_IPS, OPT_DST_PORTS, OPT_MIX, OPT_ARRIVALS, OPT_SEED, OPT_BURST,
       OPT_DUTY, OPT_STEP_AT, OPT_STEP_RATE, OPT_SLEEP_GAPS, OPT_HOLD_UNTIL };

static const struct sn_option options[] = {
	SN_OPTION("netns", 'n', "NS", "run in network namespace NS (/run/netns/NS)"),
	SN_REQUIRED("ifname", 'i', "DEV", "send on interface DEV"),
	SN_REQUIRED("src-mac", OPT_SRC_MAC, "MAC", "Ethernet source address"),
	SN_REQUIRED("dst-mac", OPT_DST_MAC, "MAC", "Ethernet destination (the next hop)"),
	SN_REQUIRED("src-ip", OPT_SRC_IP, "IP", "IPv4 or IPv6 source address"),
	SN_REQUIRED("dst-ip", OPT_DST_IP, "IP", "destination address, same IP version"),
	SN_OPTION("size", 's', "BYTES", "frame size with the 4-byte FCS, 64-1518 (or --mix)"),
	SN_OPTION("mix", OPT_MIX, "SIZES", "frame mix SIZE:WEIGHT,...; imix: 64:7,570:4,1518:1"),
	SN_REQUIRED("rate", 'r', "PPS", "packets per second, all streams (an absolute schedule)"),
	SN_REQUIRED("count", 'c', "N", "packets to send, warm-up included"),
	SN_OPTION("warmup", 'w', "N", "the first N packets are warm-up (default 0)"),
	SN_OPTION("flows", 'f', "N", "UDP source ports used in turn (default 1)"),
	SN_OPTION("src-ips", OPT_SRC_IPS, "N", "source addresses from --src-ip up, in turn (default 1)"),
	SN_OPTION("dst-ips", OPT_DST_IPS, "N", "destination addresses from --dst-ip up (default 1)"),
	SN_OPTION("dst-ports", OPT_DST_PORTS, "N", "UDP destination ports from 7 up (default 1)"),
	SN_OPTION("arrivals", OPT_ARRIVALS, "KIND", "const (default), poisson or onoff; same mean rate"),
	SN_OPTION("seed", OPT_SEED, "S", "poisson: the gaps' random seed (default 1)"),
	SN_OPTION("burst", OPT_BURST, "N", "onoff: packets per on period (default 32)"),
	SN_OPTION("duty", OPT_DUTY, "D", "onoff: share of time on, 0-1 (default 0.5)"),
	SN_OPTION("step-at", OPT_STEP_AT, "SEQ", "from this seq on, send at --step-rate (const arrivals)"),
	SN_OPTION("step-rate", OPT_STEP_RATE, "PPS", "the rate after --step-at, all streams"),
	SN_OPTION("streams", OPT_STREAMS, "N", "N generators share the schedule (default 1)..."),
	SN_OPTION("stream", OPT_STREAM, "K", "...this one sends the seqs s with s % N == K"),
	SN_OPTION("t0-ns", OPT_T0, "NS", "schedule origin, CLOCK_MONOTONIC ns (default: now)"),
	SN_OPTION("sleep-gaps", OPT_SLEEP_GAPS, "NS", "sleep through gaps in the schedule longer than NS"),
	SN_OPTION("hold-until", OPT_HOLD_UNTIL, "NS", "when done, sleep until CLOCK_MONOTONIC NS, then exit"),
	SN_OPTION("cpu", OPT_CPU, "N", "pin the sending thread to CPU N"),
	SN_OPTION("batch", OPT_BATCH, "N", "frames per flush, 1-256 (default: from the rate)"),
	SN_OPTION("anchor", OPT_ANCHOR, "DEV", "idle veth that keeps the program attached"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-gen",
	.about = "Sends COUNT UDP test frames at RATE packets per second from a BPF program\n"
		 "(BPF_PROG_RUN live frames), stamped with sequence number and send time.",
	.footer = "Prints one JSON line when done: packets sent, schedule lag, late episodes,\n"
		  "interrupted, error (counts are this stream's with --streams).\n"
		  "Flow f = seq % (flows x src-ips x dst-ips x dst-ports), source port fastest.\n"
		  "SIGINT/SIGTERM stop it early (the report then says interrupted).",
	.options = options,
	.bpf = true,
};

static void on_option(int key, const char *val, void *arg)
{
	struct opts *o = arg;
	switch (key) {
	case 'n': o->netns = val; break;
	case 'i': o->ifname = val; break;
	case OPT_ANCHOR: o->anchor = val; break;
	case OPT_SRC_MAC: sn_parse_mac("src-mac", val, o->src_mac); break;
	case OPT_DST_MAC: sn_parse_mac("dst-mac", val, o->dst_mac); break;
	case OPT_SRC_IP: o->src_ip = val; break;
	case OPT_DST_IP: o->dst_ip = val; break;
	case 's': o->size = sn_parse_u64("size", val, 64, 1518); break;
	case 'c': o->count = sn_parse_u64("count", val, 1, 1ull << 40); break;
	case 'w': o->warmup = sn_parse_u64("warmup", val, 0, 1ull << 40); break;
	case 'f': o->flows = sn_parse_u64("flows", val, 1, 65535 - SN_UDP_SPORT_BASE); break;
	case OPT_SRC_IPS: o->src_ips = sn_parse_u64("src-ips", val, 1, 65536); break;
	case OPT_DST_IPS: o->dst_ips = sn_parse_u64("dst-ips", val, 1, 65536); break;
	case OPT_DST_PORTS: o->dst_ports = sn_parse_u64("dst-ports", val, 1, SN_MAX_DST_PORTS); break;
	case OPT_MIX: sn_parse_mix("mix", val, &o->mix); o->has_mix = 1; break;
	case OPT_SEED: o->seed = sn_parse_u64("seed", val, 0, UINT64_MAX); break;
	case OPT_BURST: o->burst = sn_parse_u64("burst", val, 1, GEN_ARRIVALS_MAX); o->has_burst = 1; break;
	case OPT_STEP_AT: o->step_at = sn_parse_u64("step-at", val, 1, 1ull << 40); break;
	case OPT_STEP_RATE: o->step_rate = sn_parse_double("step-rate", val, 1e-3, 1e9); break;
	case OPT_DUTY: o->duty = sn_parse_double("duty", val, 1e-6, 1); o->has_duty = 1; break;
	case OPT_ARRIVALS:
		for (o->arrivals = 0; o->arrivals < 3 && strcmp(val, arrival_names[o->arrivals]); o->arrivals++)
			;
		if (o->arrivals == 3)
			sn_usage_error("--arrivals: '%s': expected const, poisson or onoff", val);
		break;
	case OPT_STREAMS: o->streams = sn_parse_u64("streams", val, 1, MAX_STREAMS); break;
	case OPT_STREAM: o->stream = sn_parse_u64("stream", val, 0, MAX_STREAMS - 1); break;
	case OPT_T0: o->t0_ns = sn_parse_u64("t0-ns", val, 1, UINT64_MAX >> 1); break;
	case OPT_SLEEP_GAPS: o->sleep_gap_ns = sn_parse_u64("sleep-gaps", val, 2 * GAP_WAKE_EARLY_NS, UINT64_MAX >> 2);
		break;
	case OPT_HOLD_UNTIL: o->hold_ns = sn_parse_u64("hold-until", val, 1, UINT64_MAX >> 1); break;
	case OPT_CPU: o->cpu = sn_parse_u64("cpu", val, 0, CPU_SETSIZE - 1); break;
	case OPT_BATCH: o->batch = sn_parse_u64("batch", val, 1, 256); break;
	/* below 1e-3 pps the fixed-point interval overflows */
	case 'r': o->rate = sn_parse_double("rate", val, 1e-3, 1e9); break;
	}
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->flows = 1;
	o->src_ips = o->dst_ips = o->dst_ports = 1;
	o->streams = 1;
	o->seed = 1;
	o->burst = 32;
	o->duty = 0.5;
	o->cpu = -1;
	o->batch = 0; /* auto, from the rate */
	sn_parse_args(&tool, argc, argv, on_option, o);
	if (!o->size == !o->has_mix)
		sn_usage_error("--size/--mix: give one of them (one frame size, or a mix of sizes)");
	if (o->has_mix)
		for (unsigned i = 0; i < o->mix.n; i++)
			o->size = o->mix.size[i] > o->size ? o->mix.size[i] : o->size; /* the frame is built at the largest */
	if ((o->has_burst || o->has_duty) && o->arrivals != ARR_ONOFF)
		sn_usage_error("--burst/--duty: only with --arrivals onoff");
	if (!o->step_at != !o->step_rate)
		sn_usage_error("--step-at/--step-rate: give both (the seq the rate changes at, and the new rate)");
	if (o->step_at && o->arrivals != ARR_CONST)
		sn_usage_error("--step-at: only with constant arrivals");
	if (o->dst_ips > 1 || o->dst_ports > 1) {
		uint64_t f = (uint64_t)o->flows * o->src_ips * o->dst_ips * o->dst_ports;
		if (f > SN_MAX_FLOWS)
			sn_usage_error("--flows x --src-ips x --dst-ips x --dst-ports: %llu flows, at most %u",
				       (unsigned long long)f, SN_MAX_FLOWS);
	}
	int v6 = strchr(o->dst_ip, ':') != NULL;
	unsigned char addr[16];
	if (inet_pton(v6 ? AF_INET6 : AF_INET, o->src_ip, addr) != 1 ||
	    inet_pton(v6 ? AF_INET6 : AF_INET, o->dst_ip, addr) != 1)
		sn_usage_error("--src-ip/--dst-ip: expected two IPv%d addresses, got '%s' '%s'", v6 ? 6 : 4,
			       o->src_ip, o->dst_ip);
	if (v6) { /* --src-ips varies the last 16 bits of an IPv6 source, and never carries out of them */
		inet_pton(AF_INET6, o->src_ip, addr);
		unsigned first = (unsigned)addr[14] << 8 | addr[15];
		if (first + (uint64_t)o->src_ips - 1 > 0xffff)
			sn_usage_error("--src-ips: %u IPv6 sources from %s overflow its last 16 bits (at most %u from there)",
				       o->src_ips, o->src_ip, 0x10000 - first);
		inet_pton(AF_INET6, o->dst_ip, addr);
		first = (unsigned)addr[14] << 8 | addr[15];
		if (first + (uint64_t)o->dst_ips - 1 > 0xffff)
			sn_usage_error("--dst-ips: %u IPv6 destinations from %s overflow its last 16 bits (at most %u from there)",
				       o->dst_ips, o->dst_ip, 0x10000 - first);
	} else {
		inet_pton(AF_INET, o->src_ip, addr);
		uint64_t first = (uint64_t)addr[0] << 24 | addr[1] << 16 | addr[2] << 8 | addr[3];
		if (first + o->src_ips - 1 > 0xffffffffull)
			sn_usage_error("--src-ips: %u IPv4 sources from %s run past 255.255.255.255", o->src_ips,
				       o->src_ip);
		inet_pton(AF_INET, o->dst_ip, addr);
		first = (uint64_t)addr[0] << 24 | addr[1] << 16 | addr[2] << 8 | addr[3];
		if (first + o->dst_ips - 1 > 0xffffffffull)
			sn_usage_error("--dst-ips: %u IPv4 destinations from %s run past 255.255.255.255", o->dst_ips,
				       o->dst_ip);
	}
	size_t min = (strchr(o->dst_ip, ':') ? 14 + 40 : 14 + 20) + 8 + sizeof(struct sn_payload) + SN_FCS_LEN;
	for (unsigned i = 0; i < (o->has_mix ? o->mix.n : 1); i++) {
		unsigned size = o->has_mix ? o->mix.size[i] : o->size;
		if (size < min)
			sn_usage_error("--%s: %u B cannot carry the softnet payload; at least %zu B for this IP version",
				       o->has_mix ? "mix" : "size", size, min);
	}
	if (o->stream >= o->streams)
		sn_usage_error("--stream: %llu is not below --streams %llu (streams are numbered 0..N-1)",
			       (unsigned long long)o->stream, (unsigned long long)o->streams);
	if (o->t0_ns && o->t0_ns > sn_now_ns() + MAX_T0_AHEAD_NS)
		sn_usage_error("--t0-ns: %llu is %.0f s ahead of CLOCK_MONOTONIC now (at most %llu s)",
			       (unsigned long long)o->t0_ns, (double)(o->t0_ns - sn_now_ns()) / 1e9,
			       MAX_T0_AHEAD_NS / 1000000000ull);
}

/* This stream's share of seqs [0, n): those s < n with s % streams == stream. */
static uint64_t stream_share(const struct opts *o, uint64_t n)
{
	return n > o->stream ? (n - o->stream + o->streams - 1) / o->streams : 0;
}

/* How frames leave through ifindex. BPF_PROG_RUN's XDP_TX always goes to the
 * driver's XDP transmit (ndo_xdp_xmit; there is no generic fallback), so it is
 * "native" when the device advertises that (NETDEV_XDP_ACT_NDO_XMIT, asked of
 * the "netdev" generic netlink family), "none" when it does not (every frame
 * would be dropped: a veth whose peer has neither GRO nor an XDP program), and
 * "unknown" when the kernel cannot say (before 6.3). */
#define SN_NETDEV_CMD_DEV_GET 1
#define SN_NETDEV_A_DEV_IFINDEX 1
#define SN_NETDEV_A_DEV_XDP_FEATURES 3
#define SN_NETDEV_XDP_ACT_NDO_XMIT 4

struct nl_req {
	struct nlmsghdr nh;
	struct genlmsghdr gh;
	char attrs[64];
};

static void nl_put_attr(struct nl_req *r, unsigned short type, const void *data, unsigned short len)
{
	struct nlattr *a = (struct nlattr *)((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));
	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/* One request, one reply; calls found(type, payload, len, arg) for each top-level
 * attribute of the reply. Returns 0, or -1 (the kernel said no, or no reply). */
static int nl_ask(int fd, struct nl_req *r, void (*found)(int, const void *, int, void *), void *arg)
{
	char buf[8192];
	if (send(fd, r, r->nh.nlmsg_len, 0) < 0)
		return -1;
	int n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return -1;
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE)
			return -1;
		int len = h->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);
		struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(h) + GENL_HDRLEN);
		while (len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= len) {
			found(a->nla_type & NLA_TYPE_MASK, (char *)a + NLA_HDRLEN, a->nla_len - NLA_HDRLEN, arg);
			len -= NLA_ALIGN(a->nla_len);
			a = (struct nlattr *)((char *)a + NLA_ALIGN(a->nla_len));
		}
		return 0;
	}
	return -1;
}

static void found_family(int type, const void *p, int len, void *arg)
{
	if (type == CTRL_ATTR_FAMILY_ID && len >= 2)
		memcpy(arg, p, 2);
}

static void found_features(int type, const void *p, int len, void *arg)
{
	if (type == SN_NETDEV_A_DEV_XDP_FEATURES && len >= 8) {
		memcpy(arg, p, 8);
		((uint64_t *)arg)[1] = 1; /* seen */
	}
}

static const char *tx_xdp_mode(unsigned ifindex)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	struct timeval tv = { .tv_sec = 1 };
	uint16_t family = 0;
	uint64_t features[2] = { 0, 0 };
	struct nl_req r;

	if (fd < 0)
		return "unknown";
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(&r, 0, sizeof(r));
	r.nh = (struct nlmsghdr){ .nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN), .nlmsg_type = GENL_ID_CTRL,
				  .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 };
	r.gh = (struct genlmsghdr){ .cmd = CTRL_CMD_GETFAMILY, .version = 1 };
	nl_put_attr(&r, CTRL_ATTR_FAMILY_NAME, "netdev", 7);
	if (nl_ask(fd, &r, found_family, &family) || !family) {
		close(fd);
		return "unknown";
	}
	memset(&r, 0, sizeof(r));
	r.nh = (struct nlmsghdr){ .nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN), .nlmsg_type = family,
				  .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 2 };
	r.gh = (struct genlmsghdr){ .cmd = SN_NETDEV_CMD_DEV_GET, .version = 1 };
	uint32_t idx = ifindex;
	nl_put_attr(&r, SN_NETDEV_A_DEV_IFINDEX, &idx, 4);
	int err = nl_ask(fd, &r, found_features, features);
	close(fd);
	if (err || !features[1])
		return "unknown";
	return features[0] & SN_NETDEV_XDP_ACT_NDO_XMIT ? "native" : "none";
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Entries of the arrival table (0: constant arrivals). Poisson: the whole
 * trial, in blocks, up to GEN_ARRIVALS_MAX (then it repeats); every stream of
 * a group computes the same table (same count and seed). Onoff: one cycle. */
static uint32_t arrivals_len(const struct opts *o)
{
	if (o->arrivals == ARR_POISSON) {
		uint64_t m = (o->count + GEN_POISSON_BLOCK - 1) / GEN_POISSON_BLOCK * GEN_POISSON_BLOCK;
		return m < GEN_ARRIVALS_MAX ? m : GEN_ARRIVALS_MAX;
	}
	return o->arrivals == ARR_ONOFF ? o->burst : 0;
}

/* off[k]: packet k's due offset (ns) within a period of m intervals.
 * Poisson: exponential gaps, scaled per block of GEN_POISSON_BLOCK packets to
 * fill the block's exact share of the period (the mean rate is exact over
 * every block, and a window's within about a block's). Onoff: burst packets
 * at rate / duty, then silence for the rest of the cycle. */
static void fill_arrivals(const struct opts *o, uint64_t *off, uint32_t m)
{
	double ivl = 1e9 / o->rate, g[GEN_POISSON_BLOCK];
	uint64_t x = o->seed;

	if (o->arrivals == ARR_ONOFF) {
		for (uint32_t k = 0; k < m; k++)
			off[k] = llround(k * o->duty * ivl);
		return;
	}
	for (uint32_t b = 0; b < m; b += GEN_POISSON_BLOCK) {
		double total = 0, acc = 0;
		for (int j = 0; j < GEN_POISSON_BLOCK; j++) {
			double u = (double)(splitmix64(&x) >> 11) * 0x1.0p-53; /* [0, 1) */
			g[j] = -log1p(-u);
			total += g[j];
		}
		for (int j = 0; j < GEN_POISSON_BLOCK; j++) {
			off[b + j] = llround((b + acc / total * GEN_POISSON_BLOCK) * ivl);
			acc += g[j];
		}
	}
}

/* Sleep (not spin) until CLOCK_MONOTONIC ns, or until a stop signal */
static void sleep_until(uint64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000ull, .tv_nsec = ns % 1000000000ull };
	while (!stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* seq's due time, as the program computes it */
static uint64_t due_of(const struct gen_bpf *skel, const uint64_t *off, uint64_t t0, uint64_t seq)
{
	const typeof(*skel->rodata) *r = skel->rodata;
	if (!r->arr_m)
		return seq < r->step_seq ? t0 + ((seq * r->interval_fp) >> GEN_FP_SHIFT)
					 : t0 + r->step_due_ns + (((seq - r->step_seq) * r->step_interval_fp) >> GEN_FP_SHIFT);
	uint64_t c = seq / r->arr_m;
	return t0 + c * r->arr_period_ns + ((c * r->arr_period_frac) >> GEN_FP_SHIFT) + off[seq % r->arr_m];
}

/* The late episodes, warm-up included: the closed ones from the map, then
 * the one still open when the last packet went out (late up to it). */
static void print_episodes(struct gen_bpf *skel, const struct gen_state *st, uint64_t last_seq)
{
	uint64_t kept = st->ep_kept;
	int open = st->ep_open && st->ep_max_lag_ns >= GEN_EPISODE_KEEP_NS;
	int fd = bpf_map__fd(skel->maps.episodes);
	struct gen_episode e;

	printf("\"late_episodes_total\": %llu, \"late_episodes_min_lag_ns\": %u, \"late_episodes\": [",
	       (unsigned long long)(st->ep_closed + (st->ep_open ? 1 : 0)), GEN_EPISODE_KEEP_NS);
	for (__u32 k = 0; k < kept; k++) {
		if (bpf_map_lookup_elem(fd, &k, &e))
			sn_die("read late episode %u: %s", k, strerror(errno));
		printf("%s[%llu, %llu, %llu]", k ? ", " : "", (unsigned long long)e.first_seq,
		       (unsigned long long)e.last_seq, (unsigned long long)e.max_lag_ns);
	}
	if (open && kept < GEN_MAX_EPISODES)
		printf("%s[%llu, %llu, %llu]", kept ? ", " : "", (unsigned long long)st->ep_first_seq,
		       (unsigned long long)last_seq, (unsigned long long)st->ep_max_lag_ns);
	printf("]");
}

int main(int argc, char **argv)
{
	struct opts o;
	unsigned char frame[1518];
	struct gen_layout lay;
	uint32_t csum_base;

	parse_args(argc, argv, &o);
	sn_die_with_parent();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (o.netns)
		sn_enter_netns(o.netns);
	if (o.cpu >= 0)
		sn_pin_cpu(o.cpu);
	unsigned ifindex = if_nametoindex(o.ifname);
	if (!ifindex)
		sn_die("--ifname: no interface '%s' in this namespace", o.ifname);
	unsigned anchor = o.anchor ? if_nametoindex(o.anchor) : 0;
	if (o.anchor && !anchor)
		sn_die("--anchor: no interface '%s' in this namespace", o.anchor);
	struct src_range src = { 0, 0, 0 };
	size_t len = build_frame(&o, frame, &csum_base, &lay, &src);
	const char *xdp_mode = tx_xdp_mode(ifindex);
	/* this stream's warm-up boundary: its first seq at or past --warmup */
	uint64_t mark = o.warmup + (o.stream + o.streams - o.warmup % o.streams) % o.streams;

	struct gen_bpf *skel = gen_bpf__open();
	if (!skel)
		sn_die("open BPF object: %s", strerror(errno));
	skel->rodata->udp_off = lay.udp_off;
	skel->rodata->payload_off = lay.payload_off;
	skel->rodata->flows = o.flows;
	skel->rodata->count = o.count;
	skel->rodata->mark_seq = mark;
	skel->rodata->stride = o.streams;
	skel->rodata->first_seq = o.stream;
	skel->rodata->src_ips = o.src_ips;
	skel->rodata->src_base = src.base;
	skel->rodata->ip_csum_novar = src.ip_csum_novar;
	skel->rodata->interval_fp = (uint64_t)llround(1e9 / o.rate * (double)(1ull << GEN_FP_SHIFT));
	if (o.step_at) {
		skel->rodata->step_seq = o.step_at;
		skel->rodata->step_due_ns = (o.step_at * skel->rodata->interval_fp) >> GEN_FP_SHIFT;
		skel->rodata->step_interval_fp = (uint64_t)llround(1e9 / o.step_rate * (double)(1ull << GEN_FP_SHIFT));
	}
	skel->rodata->dst_ips = o.dst_ips;
	skel->rodata->dst_base = src.dst_base;
	skel->rodata->dst_ports = o.dst_ports;
	uint64_t nflows = (uint64_t)o.flows * o.src_ips * o.dst_ips * o.dst_ports;
	skel->rodata->nflows = nflows;
	if (o.has_mix) {
		skel->rodata->mix_n = o.mix.len;
		for (unsigned k = 0; k < o.mix.len; k++)
			skel->rodata->mix_len[k] = o.mix.size[o.mix.table[k]] - SN_FCS_LEN;
	}
	uint32_t arr_m = arrivals_len(&o);
	skel->rodata->arr_m = arr_m;
	if (arr_m) { /* the period: exactly arr_m intervals of the fixed-point schedule */
		unsigned __int128 period = (unsigned __int128)arr_m * skel->rodata->interval_fp;
		skel->rodata->arr_period_ns = (uint64_t)(period >> GEN_FP_SHIFT);
		skel->rodata->arr_period_frac = (uint64_t)(period & ((1u << GEN_FP_SHIFT) - 1));
	}
	bpf_map__set_max_entries(skel->maps.arr_off, arr_m ? arr_m : 1);
	skel->rodata->csum_base = csum_base;
	skel->rodata->anchor_ifindex = anchor;
	memcpy(skel->data->tmpl.hdr, frame, lay.payload_off);
	if (gen_bpf__load(skel))
		sn_die("load BPF program: %s", strerror(errno));
	/* bpf_link: detached by the kernel when this process exits, however. */
	struct bpf_link *anchor_link = NULL;
	uint64_t *arr_off = NULL;
	if (arr_m) {
		arr_off = mmap(NULL, (size_t)arr_m * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED,
			       bpf_map__fd(skel->maps.arr_off), 0);
		if (arr_off == MAP_FAILED)
			sn_die("mmap the arrivals map: %s", strerror(errno));
		fill_arrivals(&o, arr_off, arr_m);
	}
	if (anchor && !(anchor_link = bpf_program__attach_xdp(skel->progs.sn_gen, anchor)))
		sn_die("attach to anchor %s: %s", o.anchor, strerror(errno));

	/* batch_size is also the size of the run's page pool. Frames are flushed
	 * to the peer every `batch` iterations, so at low rates a small batch
	 * bounds the delay a stamped frame waits (~1 us at 16); at high rates up
	 * to 256 frames sit in the peer's ring, and a pool that small recycles few
	 * of them: every send then allocates and initialises a fresh page
	 * (docs/reference/measurements.md: how far behind a small batch falls). */
	double stream_rate = o.rate / (double)o.streams; /* what this process sends */
	if (!o.batch)
		o.batch = stream_rate < 500e3 ? 16 : stream_rate < 2e6 ? 64 : 256;
	struct xdp_md ctx = { .data = 0, .data_end = len, .ingress_ifindex = ifindex };
	LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = frame, .data_size_in = len,
		    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = o.sleep_gap_ns ? GAP_REPEAT : REPEAT,
		    .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = o.batch);
	int fd = bpf_program__fd(skel->progs.sn_gen);
	struct gen_state *st = &skel->bss->state;
	uint64_t calls = 0, sleeps = 0;
	int err = 0;

	st->next_seq = o.stream;
	if (o.t0_ns) { /* a shared origin: sleep (not spin) until just before it */
		uint64_t wake = o.t0_ns > WAKE_EARLY_NS ? o.t0_ns - WAKE_EARLY_NS : 0;
		sleep_until(wake); /* at once when wake has passed */
		st->t0 = o.t0_ns;
	} else {
		st->t0 = sn_now_ns() + START_DELAY_NS;
	}
	while (st->next_seq < o.count && !stop) {
		/* Another process may need this CPU in the gap (a generator whose
		 * bursts interleave with these): sleep through it, do not spin. */
		if (o.sleep_gap_ns) {
			uint64_t due = due_of(skel, arr_off, st->t0, st->next_seq), now = sn_now_ns();
			if (due > now + o.sleep_gap_ns) {
				sleep_until(due - GAP_WAKE_EARLY_NS);
				sleeps++;
			}
		}
		if (bpf_prog_test_run_opts(fd, &run)) {
			if (errno != EINTR)
				err = errno;
			break;
		}
		calls++;
	}
	/* Generators taking turns on one CPU: an exit (the program's teardown)
	 * must not fall in a partner's burst, so all leave at one time. */
	if (o.hold_ns)
		sleep_until(o.hold_ns);
	uint64_t sent = (st->next_seq - o.stream) / o.streams, warmup = stream_share(&o, o.warmup);
	uint64_t window = sent > warmup ? sent - warmup : 0;
	printf("{\"sent_pkts\": %llu, \"intended_pkts\": %llu, \"warmup_pkts\": %llu, "
	       "\"intended_rate_pps\": %.3f, \"schedule_start_ns\": %llu, \"first_send_ns\": %llu, "
	       "\"window_start_ns\": %llu, \"last_send_ns\": %llu, \"calls\": %llu, \"batch\": %u, "
	       "\"window_lag_mean_ns\": %.1f, \"window_lag_max_ns\": %llu, \"window_late_pkts\": %llu, ",
	       (unsigned long long)sent, (unsigned long long)stream_share(&o, o.count), (unsigned long long)warmup,
	       o.rate, (unsigned long long)st->t0, (unsigned long long)st->first_ns,
	       (unsigned long long)st->mark_ns, (unsigned long long)st->last_ns,
	       (unsigned long long)calls, o.batch, window ? (double)st->lag_sum_ns / window : 0.0,
	       (unsigned long long)st->lag_max_ns, (unsigned long long)st->late_pkts);
	print_episodes(skel, st, st->next_seq - o.streams);
	printf(", \"frame_bytes\": %u, \"cpu\": %d, \"stream\": %llu, \"streams\": %llu, \"src_ips\": %u, ",
	       o.size, sched_getcpu(), (unsigned long long)o.stream, (unsigned long long)o.streams, o.src_ips);
	/* the shape sent; due times let a caller judge pacing against the schedule,
	 * whatever the arrivals (achieved / intended = due span / send span) */
	uint64_t last_seq = st->next_seq - o.streams;
	printf("\"flows\": %u, \"dst_ips\": %u, \"dst_ports\": %u, \"flows_total\": %llu, ", o.flows, o.dst_ips,
	       o.dst_ports, (unsigned long long)nflows);
	if (o.has_mix)
		printf("\"mix\": \"%s\", \"mix_mean_frame_bytes\": %.4f, ", o.mix.text, sn_mix_mean_size(&o.mix));
	else
		printf("\"mix\": null, \"mix_mean_frame_bytes\": %u, ", o.size);
	printf("\"arrivals\": \"%s\", \"seed\": %llu, ", arrival_names[o.arrivals], (unsigned long long)o.seed);
	if (o.arrivals == ARR_ONOFF)
		printf("\"burst_pkts\": %llu, \"on_duty\": %g, ", (unsigned long long)o.burst, o.duty);
	if (o.step_at)
		printf("\"step_seq\": %llu, \"step_rate_pps\": %.3f, ", (unsigned long long)o.step_at, o.step_rate);
	printf("\"window_due_start_ns\": %llu, \"last_due_ns\": %llu, ",
	       window ? (unsigned long long)due_of(skel, arr_off, st->t0, mark) : 0ull,
	       sent ? (unsigned long long)due_of(skel, arr_off, st->t0, last_seq) : 0ull);
	if (o.sleep_gap_ns)
		printf("\"gap_sleeps\": %llu, ", (unsigned long long)sleeps);
	printf("\"xdp_mode\": \"%s\", \"interrupted\": %s, \"error\": \"%s\"}\n",
	       xdp_mode, stop ? "true" : "false", err ? strerror(err) : "");
	if (arr_off)
		munmap(arr_off, (size_t)arr_m * sizeof(uint64_t));
	bpf_link__destroy(anchor_link);
	gen_bpf__destroy(skel);
	return err ? 1 : 0;
}
