/* Detours of a pinned busy loop: gaps between consecutive CLOCK_MONOTONIC
 * reads above 300 ns are time taken from the loop (interrupts, the probe's
 * programs, the hypervisor). Prints per second: detours and their time in
 * classes < 20 us (interrupt-like), 20 us - 1 ms, >= 1 ms. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static inline unsigned long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
int main(int argc, char **argv) {
	int cpu = atoi(argv[1]); double secs = atof(argv[2]);
	cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof(s), &s);
	unsigned long long t0 = now(), end = t0 + (unsigned long long)(secs * 1e9), prev = t0, n[3] = {0}, ns[3] = {0}, loops = 0;
	for (;;) {
		unsigned long long t = now(), d = t - prev;
		loops++;
		if (d > 300) { int c = d < 20000 ? 0 : d < 1000000 ? 1 : 2; n[c]++; ns[c] += d; }
		prev = t;
		if (t >= end) break;
	}
	double span = (prev - t0) / 1e9;
	printf("%.0f %.0f %.0f %.0f %.0f %.0f %.4g\n", n[0] / span, ns[0] / span, n[1] / span, ns[1] / span, n[2] / span, ns[2] / span, loops / span);
	return 0;
}
