// SPDX-License-Identifier: GPL-2.0
/* One program on a CPU-clock perf event per sampled CPU: the interrupted
 * context's kernel stack into a stack map, counted by (CPU, thread, stack). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "stacks.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, STACKS_MAX);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, STACKS_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STACKS_MAX_KEYS);
	__type(key, struct stack_key);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_totals);
} totals SEC(".maps");

SEC("perf_event")
int sn_stack_sample(struct bpf_perf_event_data *ctx)
{
	struct stack_key k = {};
	__u32 zero = 0;
	__u64 one = 1, *n;
	struct stack_totals *t = bpf_map_lookup_elem(&totals, &zero);

	if (!t)
		return 0;
	t->samples++;
	k.cpu = bpf_get_smp_processor_id();
	k.pid = (__u32)bpf_get_current_pid_tgid();
	bpf_get_current_comm(k.comm, sizeof(k.comm));
	k.kstack = bpf_get_stackid(ctx, &stacks, 0);
	n = bpf_map_lookup_elem(&counts, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return 0;
	}
	if (bpf_map_update_elem(&counts, &k, &one, BPF_NOEXIST)) {
		n = bpf_map_lookup_elem(&counts, &k); /* another CPU added it meanwhile */
		if (n)
			__sync_fetch_and_add(n, 1);
		else
			t->missed++;
	}
	return 0;
}
