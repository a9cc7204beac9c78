// SPDX-License-Identifier: GPL-2.0
/* Stall detection on watched CPUs, two detectors (see stalls.h):
 *
 * runq: sched_wakeup/sched_wakeup_new note when a task bound for a watched
 *   CPU became runnable, sched_switch when a task was preempted there; when a
 *   task is switched in on a watched CPU after waiting >= threshold_ns, an
 *   event names it, the task that held the CPU last, and the wait.
 * gap: a perf cpu-clock event per watched CPU arms an hrtimer that fires
 *   every period_ns. Every timer expiry (tp_btf hrtimer_expire_entry), every
 *   cpu-clock sample (the perf program) and every context switch is a sign
 *   that the CPU ran; a busy CPU (not in the idle task) silent for more than
 *   period + threshold did not run at all: the hypervisor descheduled the
 *   vCPU, or interrupts were off that long. The idle task's silence is no gap.
 *
 * Every runq wait carries the steal time within it (the hypervisor's share:
 * its CPU was runnable but the host ran something else), read from the
 * runqueue (rq->prev_steal_time_rq, which the scheduler brings up to date
 * at every wake-up and switch, the moments a wait opens and closes).
 *
 * Why not the cpu-clock samples alone: the perf program is skipped whenever
 * another BPF program or a BPF syscall (a map read) is in progress on that
 * CPU (bpf_prog_active), and on this kernel it does not run in the idle task
 * either; the timer still fires. tp_btf programs are only kept from recursing
 * into themselves.
 *
 * Every program filters on the CPU it runs on (or the task's CPU for
 * wake-ups) first: on CPUs not watched, each returns after one load. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "stalls.h"

#define TASK_RUNNING 0

const volatile __u8 watched[STALLS_MAX_CPUS];

const volatile __u64 threshold_ns = 200000;
const volatile __u64 period_ns = STALLS_PERIOD_US * 1000ull;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STALLS_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct stall_cpu);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct stall_task);
} tasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); /* ~10 K events; user space drains it every 20 ms */
} events SEC(".maps");

/* The watched CPU's state, or NULL for a CPU not watched. */
static __always_inline struct stall_cpu *watched_cpu(__u32 cpu)
{
	if (cpu >= STALLS_MAX_CPUS || !watched[cpu])
		return NULL;
	return bpf_map_lookup_elem(&cpus, &cpu);
}

/* No wake-up notification (BPF_RB_NO_WAKEUP): no irq_work on the watched
 * CPU; user space polls. */
static __always_inline struct stall_event *reserve(struct stall_cpu *c)
{
	struct stall_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e)
		c->lost++;
	return e;
}

/* The steal time of p's runqueue as of its clock's last update (ns): up to
 * date in sched_wakeup and sched_switch, which come right after one.
 * (kvm_steal_time itself is not reachable: per-CPU data symbols are not in
 * kallsyms without CONFIG_KALLSYMS_ALL.) 0 without paravirt time accounting. */
static __always_inline __u64 steal_ns(struct task_struct *p)
{
	struct cfs_rq *cfs = p->se.cfs_rq;
	struct rq *rq;

	if (!bpf_core_field_exists(struct rq, prev_steal_time_rq) || !cfs)
		return 0;
	rq = cfs->rq;
	return rq ? BPF_CORE_READ(rq, prev_steal_time_rq) : 0;
}

/* The task became runnable now: open its wait. A wake-up of a task already
 * waiting (woken twice, or woken after it was preempted: ttwu_runnable
 * traces sched_wakeup too) keeps the wait open since then; a preemption
 * (woken = 0) always opens a new one. */
static __always_inline void runnable(struct task_struct *p, __u32 cpu, __u64 now, int woken)
{
	struct stall_task *t = bpf_task_storage_get(&tasks, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	__u64 switches = p->nvcsw + p->nivcsw;

	if (!t) /* no memory, or the storage is busy (recursion): that wait is not seen */
		return;
	if (woken && t->since && t->switches == switches && now >= t->since)
		return;
	t->since = now;
	t->switches = switches;
	t->steal = steal_ns(p);
	t->cpu = cpu;
}

/* A sign of life of the CPU at now, with cur on it (for a context switch:
 * the task switched out). The CPU was busy since the last sign when the idle
 * task was not on it then and is not now: every switch to the idle task is
 * a sign of life, and so is every switch from it. Not every switch away
 * from a task is traced, though (this VM's own init threads switch out
 * unseen: the tracepoint does not fire, for perf either): a CPU that went
 * idle unseen is idle when the next sign comes (a timer in the idle task,
 * the switch from it), and its silence is no gap. */
static __always_inline void alive(struct stall_cpu *c, __u32 cpu, __u64 now, struct task_struct *cur)
{
	__u64 last = c->last_alive;
	__u32 was_idle = c->idle;

	c->last_alive = now;
	c->idle = cur->pid == 0; /* a switch sets it again to the task switched in */
	if (!last || was_idle || c->idle || now < last || now - last <= period_ns + threshold_ns)
		return;
	struct stall_event *e = reserve(c);
	if (!e)
		return;
	e->start_ns = last;
	e->end_ns = now;
	e->stolen_ns = 0;
	e->cpu = cpu;
	e->kind = STALL_GAP;
	e->pid = cur->pid;
	e->by_pid = 0;
	e->prio = cur->prio;
	e->by_policy = -1;
	e->flags = STALL_STEAL_UNKNOWN; /* the runqueue's steal time is not up to date in an interrupt */
	e->pad = 0;
	__builtin_memcpy(e->task, cur->comm, STALLS_COMM_LEN);
	__builtin_memset(e->by, 0, STALLS_COMM_LEN);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

static __always_inline int on_wakeup(struct task_struct *p)
{
	__u32 cpu = p->thread_info.cpu; /* the CPU it was queued on */

	if (cpu < STALLS_MAX_CPUS && watched[cpu])
		runnable(p, cpu, bpf_ktime_get_ns(), 1);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sn_stall_wakeup, struct task_struct *p)
{
	return on_wakeup(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sn_stall_wakeup_new, struct task_struct *p)
{
	return on_wakeup(p);
}

/* A runq event: the wait t of task, ended at end (the CPU's steal time
 * then: steal) by the CPU's handing over from `by` (pid, policy, comm). */
static __always_inline void runq_event(struct stall_cpu *c, __u32 cpu, struct task_struct *task,
				       const struct stall_task *t, __u64 end, __u64 steal, __u32 by_pid,
				       __s32 by_policy, const char *by_comm, __u32 flags)
{
	struct stall_event *e = reserve(c);

	if (!e)
		return;
	if (t->cpu != cpu || steal < t->steal) /* it waited for another CPU first */
		flags |= STALL_STEAL_UNKNOWN;
	e->start_ns = t->since;
	e->end_ns = end;
	/* The clock's update that t->steal comes from precedes the wake-up a
	 * little: steal landing in between (a vCPU stall there) is credited to
	 * the wait later. No more than the wait itself can have been stolen. */
	e->stolen_ns = flags & STALL_STEAL_UNKNOWN ? 0 : steal - t->steal;
	if (e->stolen_ns > end - t->since)
		e->stolen_ns = end - t->since;
	e->cpu = cpu;
	e->kind = STALL_RUNQ;
	e->pid = task->pid;
	e->by_pid = by_pid;
	e->prio = task->prio;
	e->by_policy = by_policy;
	e->flags = flags;
	e->pad = 0;
	__builtin_memcpy(e->task, task->comm, STALLS_COMM_LEN);
	bpf_probe_read_kernel(e->by, STALLS_COMM_LEN, by_comm);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sn_stall_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct stall_cpu *c = watched_cpu(cpu);
	struct stall_task *t;

	if (!c)
		return 0;
	__u64 now = bpf_ktime_get_ns(), steal = steal_ns(next) ?: steal_ns(prev); /* __schedule updated the clock */
	c->switches++;
	alive(c, cpu, now, prev);
	c->idle = next->pid == 0;
	if (c->last_switch && (__u32)prev->pid != c->last_pid) {
		/* prev came on the CPU unseen (after c->last_pid, which switched
		 * out untraced): if it had been waiting, its wait ended then. Its
		 * switch count went up for this switch-out already. */
		c->unseen++;
		t = prev->pid ? bpf_task_storage_get(&tasks, prev, 0, 0) : NULL;
		if (t && t->since && t->switches + 1 == prev->nvcsw + prev->nivcsw) {
			if (c->last_switch >= t->since && c->last_switch - t->since >= threshold_ns)
				runq_event(c, cpu, prev, t, c->last_switch, c->last_switch_steal, c->last_pid,
					   c->last_policy, c->last_comm, STALL_END_UNSEEN);
			t->since = 0;
		}
	}
	c->last_switch = now;
	c->last_switch_steal = steal;
	c->last_pid = next->pid;
	c->last_policy = next->policy;
	__builtin_memcpy(c->last_comm, next->comm, STALLS_COMM_LEN);
	if (prev->pid != 0 && (preempt || prev_state == TASK_RUNNING))
		runnable(prev, cpu, now, 0); /* still on the runqueue: it waits from now */
	if (next->pid == 0)
		return 0;
	t = bpf_task_storage_get(&tasks, next, 0, 0);
	if (!t || !t->since)
		return 0;
	/* switched in since (on a CPU not watched): that wait was over */
	if (t->switches == next->nvcsw + next->nivcsw && now >= t->since && now - t->since >= threshold_ns)
		runq_event(c, cpu, next, t, now, steal, prev->pid, prev->policy, prev->comm, 0);
	t->since = 0;
	return 0;
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(sn_stall_timer)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct stall_cpu *c = watched_cpu(cpu);

	if (c) {
		c->timers++;
		alive(c, cpu, bpf_ktime_get_ns(), bpf_get_current_task_btf());
	}
	return 0;
}

SEC("perf_event")
int sn_stall_tick(struct bpf_perf_event_data *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct stall_cpu *c = watched_cpu(cpu);

	if (c) {
		c->samples++;
		alive(c, cpu, bpf_ktime_get_ns(), bpf_get_current_task_btf());
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
