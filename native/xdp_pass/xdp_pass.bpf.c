// SPDX-License-Identifier: GPL-2.0
/* XDP_PASS on a SUT interface: the per-side `xdp = "pass"` knob. It puts the
 * interface's receive path through XDP (native on veth, which then keeps
 * NAPI on with GRO off) without changing where packets go, so a trial
 * measures what attaching XDP costs the kernel path. Loaded by `ip link set
 * ... xdp obj`, no user-space loader. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int sn_xdp_pass(struct xdp_md *ctx)
{
	(void)ctx;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
