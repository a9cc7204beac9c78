// SPDX-License-Identifier: GPL-2.0
/* softnet-victim: a CPU-bound loop pinned to one CPU, for the eBPF-profile
 * paper's cross-check. Unlike the Python victim it touches no memory in its
 * loop (a few registers), so what packet processing takes from it is CPU
 * time alone, not cache refill. Prints "<CLOCK_MONOTONIC s> <iterations>
 * <its run time in ns>" every 50 ms until --seconds have passed: the run time
 * (the kernel's account) tells a rest that another task shared from one the
 * host slowed. */
#define _GNU_SOURCE
#include <stdio.h>
#include "../common/sn_util.h"
#include "victim.h"

enum { OPT_CPU = 256, OPT_SECONDS }; /* long only: -c and -s mean count and size elsewhere */

struct opts {
	int cpu;
	double seconds;
};

static const struct sn_option options[] = {
	SN_REQUIRED("cpu", OPT_CPU, "N", "pin the loop to CPU N"),
	SN_REQUIRED("seconds", OPT_SECONDS, "S", "run for S seconds, 0.01-3600 (a last line at the end)"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-victim",
	.about = "A CPU-bound loop pinned to one CPU: the time packet processing takes from it\n"
		 "shows as fewer iterations.",
	.footer = "Prints \"<CLOCK_MONOTONIC s> <iterations so far> <its run time, ns>\"\n"
		  "every 50 ms.",
	.options = options,
};

static void on_option(int key, const char *val, void *arg)
{
	struct opts *o = arg;
	switch (key) {
	case OPT_CPU: o->cpu = (int)sn_parse_u64("cpu", val, 0, 4095); break;
	case OPT_SECONDS: o->seconds = sn_parse_double("seconds", val, 0.01, 3600); break;
	}
}

int main(int argc, char **argv)
{
	struct opts o = {};
	sn_parse_args(&tool, argc, argv, on_option, &o);
	sn_die_with_parent();
	sn_pin_cpu(o.cpu);
	uint64_t start = sn_now_ns(), end = start + (uint64_t)(o.seconds * 1e9), next = start;
	volatile uint64_t n = 0; /* volatile: the loop is not folded away, and stays in L1 */
	for (;;) {
		for (int i = 0; i < VICTIM_BATCH; i++)
			n = n + 1;
		uint64_t t = sn_now_ns();
		if (t >= next || t >= end) { /* and once at the end: a short run's pace spans all of it */
			printf("%.9f %llu %llu\n", t / 1e9, (unsigned long long)n,
			       (unsigned long long)sn_thread_cpu_ns());
			fflush(stdout);
			next += VICTIM_REPORT_NS;
		}
		if (t >= end)
			return 0;
	}
}
