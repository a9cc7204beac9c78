/* SPDX-License-Identifier: GPL-2.0 */
/* The eBPF router's counters: one slot each of a per-CPU array
 * (sn_router_stats). softnet/testbed/personalities/xdp_router.py reads them
 * by these positions (ROUTER_STATS there): keep the two in the same order. */
#ifndef SN_ROUTER_H
#define SN_ROUTER_H

enum sn_router_stat {
	SN_RT_REDIRECTED = 0,      /* FIB hit: TTL decremented, MACs rewritten, redirected */
	SN_RT_PASS_NO_ROUTE,       /* FIB: blackhole, unreachable, prohibit, not forwarded */
	SN_RT_PASS_NO_NEIGH,       /* FIB: route found, no neighbour entry for its next hop */
	SN_RT_PASS_FWD_DISABLED,   /* FIB: forwarding off on the ingress device */
	SN_RT_PASS_FRAG_NEEDED,    /* FIB: longer than the egress MTU */
	SN_RT_PASS_OTHER,          /* FIB: lightweight tunnel, or a code this build does not know */
	SN_RT_TTL_EXPIRED,         /* TTL / hop limit <= 1: the stack answers with ICMP */
	SN_RT_NON_IP,              /* not IPv4 or IPv6 (ARP, ...), or a header cut short */
	SN_RT_STATS_MAX,
};

#endif
