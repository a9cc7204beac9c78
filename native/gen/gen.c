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
 * the caller decides whether the trial was generator-limited. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <math.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "../common/sn_proto.h"
#include "../common/sn_util.h"
#include "gen.h"
#include "gen.skel.h"

#define REPEAT (1u << 18) /* program iterations per syscall: ~10 ms of idle slots */
#define START_DELAY_NS 2000000ull

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

struct opts {
	const char *netns, *ifname, *anchor, *src_ip, *dst_ip;
	unsigned char src_mac[6], dst_mac[6];
	unsigned size, flows, batch;
	double rate;
	uint64_t count, warmup;
	int cpu;
};

/* Builds the template frame; returns its length and the UDP checksum base
 * (pseudo-header + UDP header + payload with seq, ts and sport zeroed). */
static size_t build_frame(const struct opts *o, unsigned char *f, uint32_t *csum_base,
			  struct gen_layout *lay)
{
	size_t len = o->size - SN_FCS_LEN;
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
		sum = sn_csum_add(sum, &s6, 16);
		sum = sn_csum_add(sum, &d6, 16);
	} else {
		struct iphdr *ip = (struct iphdr *)(f + l3);
		if (inet_pton(AF_INET, o->src_ip, &s4) != 1 || inet_pton(AF_INET, o->dst_ip, &d4) != 1)
			sn_usage_error("--src-ip/--dst-ip: expected IPv4 addresses, got '%s' '%s'", o->src_ip, o->dst_ip);
		ip->version = 4;
		ip->ihl = 5;
		ip->tot_len = htons(len - l3);
		ip->ttl = 64;
		ip->protocol = IPPROTO_UDP;
		ip->saddr = s4.s_addr;
		ip->daddr = d4.s_addr;
		ip->check = htons(~sn_csum_fold(sn_csum_add(0, ip, sizeof(*ip))) & 0xffff);
		sum = sn_csum_add(sum, &s4, 4);
		sum = sn_csum_add(sum, &d4, 4);
	}
	sum += IPPROTO_UDP + udp_len;
	struct udphdr *udp = (struct udphdr *)(f + l4);
	udp->dest = htons(SN_UDP_DPORT);
	udp->len = htons(udp_len);
	sum = sn_csum_add(sum, udp, udp_len); /* source, check, seq and ts are still zero */
	*csum_base = sn_csum_fold(sum);
	lay->udp_off = l4;
	lay->payload_off = l4 + sizeof(*udp);
	return len;
}

enum { OPT_SRC_MAC = 256, OPT_DST_MAC, OPT_SRC_IP, OPT_DST_IP, OPT_CPU, OPT_BATCH, OPT_ANCHOR };

static const struct sn_option options[] = {
	SN_OPTION("netns", 'n', "NS", "run in network namespace NS (/run/netns/NS)"),
	SN_REQUIRED("ifname", 'i', "DEV", "send on interface DEV"),
	SN_REQUIRED("src-mac", OPT_SRC_MAC, "MAC", "Ethernet source address"),
	SN_REQUIRED("dst-mac", OPT_DST_MAC, "MAC", "Ethernet destination (the next hop)"),
	SN_REQUIRED("src-ip", OPT_SRC_IP, "IP", "IPv4 or IPv6 source address"),
	SN_REQUIRED("dst-ip", OPT_DST_IP, "IP", "destination address, same IP version"),
	SN_REQUIRED("size", 's', "BYTES", "frame size with the 4-byte FCS, 64-1518"),
	SN_REQUIRED("rate", 'r', "PPS", "packets per second (an absolute schedule)"),
	SN_REQUIRED("count", 'c', "N", "packets to send, warm-up included"),
	SN_OPTION("warmup", 'w', "N", "the first N packets are warm-up (default 0)"),
	SN_OPTION("flows", 'f', "N", "UDP source ports used in turn (default 1)"),
	SN_OPTION("cpu", OPT_CPU, "N", "pin the sending thread to CPU N"),
	SN_OPTION("batch", OPT_BATCH, "N", "frames per flush, 1-256 (default: from the rate)"),
	SN_OPTION("anchor", OPT_ANCHOR, "DEV", "idle veth that keeps the program attached"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-gen",
	.about = "Sends COUNT UDP test frames at RATE packets per second from a BPF program\n"
		 "(BPF_PROG_RUN live frames), stamped with sequence number and send time.",
	.footer = "Prints one JSON line when done: packets sent, schedule lag, late episodes,\n"
		  "interrupted, error.\n"
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
	o->cpu = -1;
	o->batch = 0; /* auto, from the rate */
	sn_parse_args(&tool, argc, argv, on_option, o);
	int v6 = strchr(o->dst_ip, ':') != NULL;
	unsigned char addr[16];
	if (inet_pton(v6 ? AF_INET6 : AF_INET, o->src_ip, addr) != 1 ||
	    inet_pton(v6 ? AF_INET6 : AF_INET, o->dst_ip, addr) != 1)
		sn_usage_error("--src-ip/--dst-ip: expected two IPv%d addresses, got '%s' '%s'", v6 ? 6 : 4,
			       o->src_ip, o->dst_ip);
	size_t min = (strchr(o->dst_ip, ':') ? 14 + 40 : 14 + 20) + 8 + sizeof(struct sn_payload) + SN_FCS_LEN;
	if (o->size < min)
		sn_usage_error("--size: %u B cannot carry the softnet payload; at least %zu B for this IP version",
			       o->size, min);
}

/* The late episodes, warm-up included: the closed ones from the map, then
 * the one still open when the last packet went out (late up to it). */
static void print_episodes(struct gen_bpf *skel, const struct gen_state *st, uint64_t sent)
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
		       (unsigned long long)(sent - 1), (unsigned long long)st->ep_max_lag_ns);
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
	size_t len = build_frame(&o, frame, &csum_base, &lay);

	struct gen_bpf *skel = gen_bpf__open();
	if (!skel)
		sn_die("open BPF object: %s", strerror(errno));
	skel->rodata->udp_off = lay.udp_off;
	skel->rodata->payload_off = lay.payload_off;
	skel->rodata->flows = o.flows;
	skel->rodata->count = o.count;
	skel->rodata->mark_seq = o.warmup;
	skel->rodata->interval_fp = (uint64_t)llround(1e9 / o.rate * (double)(1ull << GEN_FP_SHIFT));
	skel->rodata->csum_base = csum_base;
	skel->rodata->anchor_ifindex = anchor;
	memcpy(skel->data->tmpl.hdr, frame, lay.payload_off);
	if (gen_bpf__load(skel))
		sn_die("load BPF program: %s", strerror(errno));
	/* bpf_link: detached by the kernel when this process exits, however. */
	struct bpf_link *anchor_link = NULL;
	if (anchor && !(anchor_link = bpf_program__attach_xdp(skel->progs.sn_gen, anchor)))
		sn_die("attach to anchor %s: %s", o.anchor, strerror(errno));

	/* batch_size is also the size of the run's page pool. Frames are flushed
	 * to the peer every `batch` iterations, so at low rates a small batch
	 * bounds the delay a stamped frame waits (~1 us at 16); at high rates up
	 * to 256 frames sit in the peer's ring, and a pool that small recycles few
	 * of them: every send then allocates and initialises a fresh page
	 * (docs/measurements.md: how far behind a small batch falls). */
	if (!o.batch)
		o.batch = o.rate < 500e3 ? 16 : o.rate < 2e6 ? 64 : 256;
	struct xdp_md ctx = { .data = 0, .data_end = len, .ingress_ifindex = ifindex };
	LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = frame, .data_size_in = len,
		    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = REPEAT,
		    .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = o.batch);
	int fd = bpf_program__fd(skel->progs.sn_gen);
	struct gen_state *st = &skel->bss->state;
	uint64_t calls = 0;
	int err = 0;

	st->t0 = sn_now_ns() + START_DELAY_NS;
	while (st->next_seq < o.count && !stop) {
		if (bpf_prog_test_run_opts(fd, &run)) {
			if (errno != EINTR)
				err = errno;
			break;
		}
		calls++;
	}
	uint64_t sent = st->next_seq, window = sent > o.warmup ? sent - o.warmup : 0;
	printf("{\"sent_pkts\": %llu, \"intended_pkts\": %llu, \"warmup_pkts\": %llu, "
	       "\"intended_rate_pps\": %.3f, \"schedule_start_ns\": %llu, \"first_send_ns\": %llu, "
	       "\"window_start_ns\": %llu, \"last_send_ns\": %llu, \"calls\": %llu, \"batch\": %u, "
	       "\"window_lag_mean_ns\": %.1f, \"window_lag_max_ns\": %llu, \"window_late_pkts\": %llu, ",
	       (unsigned long long)sent, (unsigned long long)o.count, (unsigned long long)o.warmup,
	       o.rate, (unsigned long long)st->t0, (unsigned long long)st->first_ns,
	       (unsigned long long)st->mark_ns, (unsigned long long)st->last_ns,
	       (unsigned long long)calls, o.batch, window ? (double)st->lag_sum_ns / window : 0.0,
	       (unsigned long long)st->lag_max_ns, (unsigned long long)st->late_pkts);
	print_episodes(skel, st, sent);
	printf(", \"frame_bytes\": %u, \"cpu\": %d, \"interrupted\": %s, \"error\": \"%s\"}\n",
	       o.size, sched_getcpu(), stop ? "true" : "false", err ? strerror(err) : "");
	bpf_link__destroy(anchor_link);
	gen_bpf__destroy(skel);
	return err ? 1 : 0;
}
