// SPDX-License-Identifier: GPL-2.0
/* The eBPF router (the xdp-router and tc-router SUT personalities): IPv4 and
 * IPv6 forwarding done by one FIB lookup per packet, the kernel stack
 * bypassed. The same code runs at XDP (SEC "xdp") and at the tc ingress hook
 * (SEC "tc", a clsact direct-action filter):
 *
 *   parse Ethernet + IPv4/IPv6 -> bpf_fib_lookup(ingress ifindex)
 *     SUCCESS: TTL/hop limit - 1 (IPv4 checksum fixed incrementally),
 *              MACs from the lookup, bpf_redirect(egress ifindex)
 *     else:    to the stack (it routes, resolves or answers with ICMP)
 *
 * bpf_fib_lookup needs forwarding enabled on the ingress device and resolves
 * the next hop from the neighbour table only (no resolution of its own), so
 * the testbed's static neighbours are what it finds. Loaded by ip(8) / tc(8),
 * no user-space loader; the counters are read with bpftool. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "router.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#define IPV6_FLOWINFO_MASK bpf_htonl(0x0FFFFFFF)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SN_RT_STATS_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sn_router_stats SEC(".maps");

enum verdict { V_PASS, V_REDIRECT };

static __always_inline void count(__u32 stat)
{
	__u64 *v = bpf_map_lookup_elem(&sn_router_stats, &stat);

	if (v)
		*v += 1; /* per-CPU: no atomic needed */
}

/* ip_decrease_ttl() of the kernel: the checksum fixed for TTL - 1 */
static __always_inline void ipv4_decrease_ttl(struct iphdr *iph)
{
	__u32 check = (__u32)iph->check;

	check += (__u32)bpf_htons(0x0100);
	iph->check = (__sum16)(check + (check >= 0xFFFF));
	iph->ttl--;
}

static __always_inline __u32 fib_stat(int rc)
{
	switch (rc) {
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		return SN_RT_PASS_NO_ROUTE;
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return SN_RT_PASS_NO_NEIGH;
	case BPF_FIB_LKUP_RET_FWD_DISABLED:
		return SN_RT_PASS_FWD_DISABLED;
	case BPF_FIB_LKUP_RET_FRAG_NEEDED:
		return SN_RT_PASS_FRAG_NEEDED;
	default:
		return SN_RT_PASS_OTHER;
	}
}

/* The shared router: on V_REDIRECT, *oif is the egress ifindex. ctx is the
 * xdp_md or the __sk_buff (bpf_fib_lookup takes either). */
static __always_inline enum verdict route(void *ctx, void *data, void *data_end, __u32 iif, __u32 *oif)
{
	struct bpf_fib_lookup fib = {};
	struct ethhdr *eth = data;
	struct iphdr *iph = NULL;
	struct ipv6hdr *ip6h = NULL;
	int rc;

	if ((void *)(eth + 1) > data_end)
		goto non_ip;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		iph = (void *)(eth + 1);
		if ((void *)(iph + 1) > data_end || iph->version != 4)
			goto non_ip;
		if (iph->ttl <= 1) {
			count(SN_RT_TTL_EXPIRED);
			return V_PASS;
		}
		fib.family = AF_INET;
		fib.tos = iph->tos;
		fib.l4_protocol = iph->protocol;
		fib.tot_len = bpf_ntohs(iph->tot_len);
		fib.ipv4_src = iph->saddr;
		fib.ipv4_dst = iph->daddr;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		ip6h = (void *)(eth + 1);
		if ((void *)(ip6h + 1) > data_end || ip6h->version != 6)
			goto non_ip;
		if (ip6h->hop_limit <= 1) {
			count(SN_RT_TTL_EXPIRED);
			return V_PASS;
		}
		fib.family = AF_INET6;
		fib.flowinfo = *(__be32 *)ip6h & IPV6_FLOWINFO_MASK;
		fib.l4_protocol = ip6h->nexthdr;
		fib.tot_len = bpf_ntohs(ip6h->payload_len);
		__builtin_memcpy(fib.ipv6_src, &ip6h->saddr, sizeof(fib.ipv6_src));
		__builtin_memcpy(fib.ipv6_dst, &ip6h->daddr, sizeof(fib.ipv6_dst));
	} else {
		goto non_ip;
	}
	fib.ifindex = iif;

	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS) {
		count(fib_stat(rc));
		return V_PASS;
	}
	if (iph)
		ipv4_decrease_ttl(iph);
	else if (ip6h)
		ip6h->hop_limit--;
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	*oif = fib.ifindex;
	count(SN_RT_REDIRECTED);
	return V_REDIRECT;

non_ip:
	count(SN_RT_NON_IP);
	return V_PASS;
}

SEC("xdp")
int sn_router_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 oif = 0;

	if (route(ctx, data, data_end, ctx->ingress_ifindex, &oif) == V_REDIRECT)
		return bpf_redirect(oif, 0);
	return XDP_PASS;
}

SEC("tc")
int sn_router_tc(struct __sk_buff *skb)
{
	const __u32 hdrs = sizeof(struct ethhdr) + sizeof(struct ipv6hdr);
	void *data, *data_end;
	__u32 oif = 0;

	/* the headers in the linear part, for direct access (best effort: a
	 * shorter packet fails the bounds checks and goes to the stack) */
	if (skb->data + hdrs > skb->data_end && skb->len >= hdrs)
		bpf_skb_pull_data(skb, hdrs);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (route(skb, data, data_end, skb->ingress_ifindex, &oif) == V_REDIRECT)
		return bpf_redirect(oif, 0);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
