// SPDX-License-Identifier: GPL-2.0
/* wire: an XDP "router" a user brings to softnet's custom SUT.
 *
 * Every IPv4 frame arriving on SN_IN is sent straight out of SN_OUT with its
 * MACs rewritten (source: SN_OUT's, destination: the sink's); everything
 * else (ARP, IPv6) goes on to the kernel. No routing lookup, no TTL: a wire
 * with addresses, enough to compare XDP against the kernel's forwarding.
 *
 * The addresses are compile-time constants, set by setup.sh from the
 * testbed's SN_* variables:
 *   -DOUT_IFINDEX=7 -DOUT_MAC=0x02,0x53,... -DDST_MAC=0x02,0x53,...
 *
 * wire_stats, a per-CPU array, counts what the program did:
 *   0: frames redirected to SN_OUT, 1: frames passed to the kernel.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#if !defined(OUT_IFINDEX) || !defined(OUT_MAC) || !defined(DST_MAC)
#error "build with -DOUT_IFINDEX=N -DOUT_MAC=0x..,... -DDST_MAC=0x..,... (setup.sh does)"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} wire_stats SEC(".maps");

static __always_inline void count(__u32 key)
{
	__u64 *n = bpf_map_lookup_elem(&wire_stats, &key);

	if (n)
		*n += 1; /* per-CPU: no other CPU writes this slot */
}

SEC("xdp")
int wire(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	const unsigned char out_mac[ETH_ALEN] = { OUT_MAC };
	const unsigned char dst_mac[ETH_ALEN] = { DST_MAC };

	if ((void *)(eth + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP)) {
		count(1);
		return XDP_PASS;
	}
	__builtin_memcpy(eth->h_dest, dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, out_mac, ETH_ALEN);
	count(0);
	return bpf_redirect(OUT_IFINDEX, 0);
}

char LICENSE[] SEC("license") = "GPL";
