/* softnet-stacks: kernel stacks sampled on a CPU-clock timer, shared by the
 * BPF side (stacks.bpf.c) and the loader (stacks.c). */
#ifndef SN_STACKS_H
#define SN_STACKS_H

#define STACKS_MAX_CPUS 1024  /* CPUs a --cpus list may name */
#define STACKS_COMM_LEN 16    /* TASK_COMM_LEN */
#define STACKS_DEPTH 127      /* frames kept per stack: the kernel's perf_event_max_stack default */
#define STACKS_MAX 16384      /* distinct stacks the stack map holds */
#define STACKS_MAX_KEYS 65536 /* distinct (CPU, thread, stack) counted */
#define STACKS_HZ 499         /* the default rate: off the 250 Hz tick's multiples; ~11 us a sample here */

/* One count: a kernel stack seen on a CPU while a thread was current. A
 * negative kstack is bpf_get_stackid()'s error: -EFAULT when the sample
 * interrupted user space (no kernel frames), -EEXIST when two stacks hashed
 * to one slot, -ENOMEM when the stack map was full. */
struct stack_key {
	__u32 cpu;
	__u32 pid;  /* the thread (0: the CPU's idle task) */
	__s32 kstack;
	__u32 pad;
	char comm[STACKS_COMM_LEN];
};

/* Per CPU: every sample taken, and those not counted (the counts map full). */
struct stack_totals {
	__u64 samples;
	__u64 missed;
};

#endif
