/* softnet-stalls: periods when a watched CPU did not run what needed it,
 * shared by the BPF side (stalls.bpf.c) and the loader (stalls.c). */
#ifndef SN_STALLS_H
#define SN_STALLS_H

#define STALLS_MAX_CPUS 1024 /* CPUs a --cpus list may name (the watched set is indexed by CPU) */
#define STALLS_COMM_LEN 16   /* TASK_COMM_LEN */
/* The default cpu-clock period: a busy CPU silent for longer than this plus
 * the threshold did not run. Each timer interrupt costs a vCPU 5-10 us here
 * (VM exits): at 1 ms the probe took 1.0-1.9% of a busy CPU, at 4 ms (the
 * 250 Hz tick's own period) 0.2-0.4% (docs/reference/native-tools.md). */
#define STALLS_PERIOD_US 4000

#define STALL_RUNQ 1 /* a task waited on the runqueue (woken or preempted) before it ran */
#define STALL_GAP 2  /* a busy CPU showed no sign of life (timer, sample, switch): the vCPU did not run */

/* One stall, as the ring buffer carries it. Times are bpf_ktime_get_ns():
 * CLOCK_MONOTONIC. */
struct stall_event {
	__u64 start_ns;  /* runq: runnable since (woken or preempted); gap: the last sign of life */
	__u64 end_ns;    /* runq: switched in (see STALL_END_UNSEEN); gap: the next sign of life */
	__u64 stolen_ns; /* runq: the CPU's steal time within the wait (see STALL_STEAL_UNKNOWN) */
	__u32 cpu;
	__u32 kind;      /* STALL_* */
	__u32 pid;       /* runq: the task that waited; gap: the task on the CPU */
	__u32 by_pid;    /* runq: the task that held the CPU last (prev at the switch); gap: 0 */
	__s32 prio;      /* the waiting (runq) or current (gap) task's kernel priority (0-139; 120 = nice 0) */
	__s32 by_policy; /* SCHED_* of by_pid; gap: -1 */
	__u32 flags;     /* STALL_END_UNSEEN, STALL_STEAL_UNKNOWN */
	__u32 pad;
	char task[STALLS_COMM_LEN];
	char by[STALLS_COMM_LEN];
};

/* runq: the switch to the waiting task was not traced (the kernel does not
 * trace every switch: this VM's own init threads switch out unseen). It is
 * found when the task switches out: its wait ended after end_ns, when the
 * CPU went to by_pid (the task that handed the CPU over unseen), and before
 * that switch-out. end_ns is the earliest the wait can have ended. */
#define STALL_END_UNSEEN 1
/* The steal time within the event is not known: a gap (the runqueue's
 * steal time is brought up to date by the scheduler, not in the timer
 * interrupt that ends a gap), or a task woken for one CPU that ran on another. */
#define STALL_STEAL_UNKNOWN 2

/* Per watched CPU (an array indexed by CPU, each entry written only by its
 * own CPU: sched_switch holds the runqueue lock with interrupts off, the
 * timer programs run in the timer interrupt). */
struct stall_cpu {
	__u64 last_alive;   /* the CPU's last sign of life: a timer expiry, a sample, a context switch (0: none yet) */
	__u64 samples;      /* cpu-clock samples the perf program saw */
	__u64 timers;       /* hrtimer expiries seen (the cpu-clock event's own timer among them) */
	__u64 switches;     /* context switches seen */
	__u64 unseen;       /* switches found missing: a task switched out that no traced switch put on the CPU */
	__u64 lost;         /* events the ring buffer had no room for */
	__u64 last_switch;  /* the last traced switch (and the steal time then) ... */
	__u64 last_switch_steal;
	__u32 last_pid;     /* ... and the task it put on the CPU */
	__s32 last_policy;
	char last_comm[STALLS_COMM_LEN];
	__u32 idle;         /* the idle task is on the CPU */
	__u32 pad;
};

/* Steal time: a KVM guest's per-CPU cumulative time during which the host
 * did not run the vCPU although it was runnable (kvm_steal_time, written by
 * the host when it runs the vCPU again; the scheduler copies it to the
 * runqueue). Zero without paravirt time accounting. */

/* Per task (task storage): when it became runnable, and its context switch
 * count then. A task that ran meanwhile on a CPU not watched (so its switch-in
 * was not seen) has a different count by now: its stale time is ignored. */
struct stall_task {
	__u64 since;     /* 0: no wait open */
	__u64 switches;  /* nvcsw + nivcsw when it became runnable */
	__u64 steal;     /* the steal time of the CPU it waited for, then */
	__u32 cpu;       /* that CPU */
	__u32 pad;
};

#endif
