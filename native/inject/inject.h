/* softnet-inject: a stall injector (see inject.c). */
#ifndef SN_INJECT_H
#define SN_INJECT_H

#define INJECT_MAX_RECORDS (1u << 20) /* stalls kept for reads (24 MiB); more are counted */
#define INJECT_MIN_BUSY_MS 0.1
#define INJECT_MAX_BUSY_MS 100.0
#define INJECT_MAX_EVERY_MS 60000.0

/* One stall as it happened: the spin's first and last clock reads
 * (CLOCK_MONOTONIC ns), and the run time the kernel gave the spinner in
 * between: what it took from the CPU's other tasks, short of the span when
 * the hypervisor stole the vCPU meanwhile. */
struct inject_record {
	unsigned long long start_ns, end_ns, cpu_ns;
};

#endif
