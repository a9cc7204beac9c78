// SPDX-License-Identifier: GPL-2.0
/* softnet-victim: a CPU-bound loop pinned to one CPU, for the eBPF-profile
 * paper's cross-check. Unlike the Python victim it touches no memory in its
 * loop (a few registers), so what packet processing takes from it is CPU
 * time alone, not cache refill. Prints "<CLOCK_MONOTONIC s> <iterations>"
 * every 50 ms until <seconds> have passed. */
#define _GNU_SOURCE
#include <stdio.h>
#include "../common/sn_util.h"
#include "victim.h"

int main(int argc, char **argv)
{
	if (argc != 3)
		sn_die("usage: softnet-victim <cpu> <seconds>");
	int cpu = (int)sn_parse_u64("cpu", argv[1], 0, 4095);
	uint64_t seconds = sn_parse_u64("seconds", argv[2], 1, 3600);
	sn_die_with_parent();
	sn_pin_cpu(cpu);
	uint64_t start = sn_now_ns(), end = start + seconds * 1000000000ull, next = start;
	volatile uint64_t n = 0; /* volatile: the loop is not folded away, and stays in L1 */
	for (;;) {
		for (int i = 0; i < VICTIM_BATCH; i++)
			n = n + 1;
		uint64_t t = sn_now_ns();
		if (t >= next) {
			printf("%.9f %llu\n", t / 1e9, (unsigned long long)n);
			fflush(stdout);
			next += VICTIM_REPORT_NS;
		}
		if (t >= end)
			return 0;
	}
}
