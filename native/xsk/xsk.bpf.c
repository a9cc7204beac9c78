// SPDX-License-Identifier: GPL-2.0
/* softnet-xsk's XDP program: stamps the hook time of each softnet AF_XDP test
 * frame into XDP metadata and redirects the frame to the role's AF_XDP socket
 * (XSKMAP key 0 for --ifname, 1 for --ifname2); everything else passes.
 * Where the driver refuses metadata, the stamp goes into the frame's payload
 * slot for this hop instead, so it still reaches user space. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "xsk.h"

const volatile __u32 ifindex2 = 0; /* the second interface (forward role), 0: none */
const volatile __u32 queue = 0;    /* the queue the sockets are bound to */
const volatile __s32 slot[2] = { -1, -1 }; /* payload slot of this hop per interface */
/* 1: stamp; 0: no stamp (the baseline of --role stamp-cost); 2: stamp, then
 * take the metadata back off, so that BPF_PROG_RUN's repeats (which reuse one
 * frame) all take the metadata path: an upper bound of the stamp's cost. */
const volatile __u8 stamp = 1;

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, XSKC_NCOUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		*v += 1;
}

/* The payload of a test frame, or NULL. */
static __always_inline struct xsk_payload *test_payload(void *data, void *end)
{
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	__u32 *magic = (void *)(udp + 1);

	if ((void *)(magic + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return NULL;
	if (ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return NULL;
	if (udp->dest != bpf_htons(XSK_PORT) && udp->source != bpf_htons(XSK_PORT))
		return NULL;
	if (*magic != bpf_htonl(XSK_MAGIC))
		return NULL;
	return (void *)magic;
}

SEC("xdp")
int sn_xsk(struct xdp_md *ctx)
{
	__u64 now = stamp ? bpf_ktime_get_ns() : 0; /* first: the hook's time */
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;

	if (!test_payload(data, end)) {
		inc(XSKC_OTHER);
		return XDP_PASS;
	}
	inc(XSKC_TEST);
	if (ctx->rx_queue_index != queue) {
		inc(XSKC_OTHER_QUEUE);
		return XDP_PASS;
	}
	__u32 side = ifindex2 && ctx->ingress_ifindex == ifindex2;
	if (!stamp)
		return bpf_redirect_map(&xsks, side, XDP_PASS);

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct xsk_meta)) == 0) {
		struct xsk_meta *meta = (void *)(long)ctx->data_meta;
		if ((void *)(meta + 1) > (void *)(long)ctx->data)
			return XDP_PASS;
		meta->xdp_rx_ns = now;
		meta->magic = XSK_META_MAGIC;
		meta->pad = 0;
		inc(XSKC_META);
		if (stamp == 2)
			bpf_xdp_adjust_meta(ctx, (int)sizeof(struct xsk_meta));
	} else {
		__s32 s = slot[side & 1];
		inc(XSKC_META_FAIL);
		data = (void *)(long)ctx->data;
		end = (void *)(long)ctx->data_end;
		if (s >= 0 && s < XSK_NHOPS) {
			__u64 *hop = data + XSK_HDR_LEN + XSK_OFF_HOP(s);
			if ((void *)(hop + 1) <= end)
				*hop = bpf_cpu_to_be64(now);
			else
				inc(XSKC_NO_SLOT);
		}
	}
	return bpf_redirect_map(&xsks, side, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
