// SPDX-License-Identifier: GPL-2.0
/* softnet-stacks: samples the kernel stacks of chosen CPUs at a fixed rate
 * (a CPU-clock perf event per CPU, as libbpf-tools' profile does, since this
 * VM has no hardware counters) and counts them by (CPU, thread, stack).
 *
 * The period is fixed (not a frequency the kernel adapts), so each sample
 * stands for exactly period_ns of that CPU's time: samples x period is time.
 * "read" answers the counts so far (cheap: no symbols, fit for a window's
 * edge); "stacks" answers every stack seen, symbolized from /proc/kallsyms
 * read then, so that BPF programs loaded after the start are named too.
 * The attachments are links owned by this process: they go when it exits,
 * kill -9 included. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "../common/sn_util.h"
#include "stacks.h"
#include "stacks.skel.h"

#define STR_(x) #x
#define STR(x) STR_(x)

struct opts {
	unsigned char cpus[STACKS_MAX_CPUS];
	int ncpu, nsampled, cpu;
	__u64 freq_hz;
};

struct sampler {
	struct stacks_bpf *skel;
	const struct opts *o;
	__u64 period_ns, started_ns;
};

/* ---- /proc/kallsyms: text symbols sorted by address ---- */

struct ksym {
	unsigned long long addr;
	char *name;
};

struct ksyms {
	struct ksym *v;
	size_t n, cap;
};

static int by_addr(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void ksyms_load(struct ksyms *ks)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[512], name[256], type;
	unsigned long long addr;

	if (!f)
		sn_die("open /proc/kallsyms: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3 || !addr)
			continue;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue; /* text only: a stack's frames are code */
		if (!strncmp(name, "__pfx_", 6))
			continue; /* a function's padding: a return address after a call that never returns lands there */
		if (ks->n == ks->cap) {
			ks->cap = ks->cap ? 2 * ks->cap : 65536;
			ks->v = realloc(ks->v, ks->cap * sizeof(*ks->v));
			if (!ks->v)
				sn_die("out of memory for kernel symbols");
		}
		ks->v[ks->n].addr = addr;
		ks->v[ks->n].name = strdup(name);
		if (!ks->v[ks->n++].name)
			sn_die("out of memory for kernel symbols");
	}
	fclose(f);
	if (!ks->n)
		sn_die("/proc/kallsyms has no addresses (kptr_restrict hides them: run as root)");
	qsort(ks->v, ks->n, sizeof(*ks->v), by_addr);
}

static void ksyms_free(struct ksyms *ks)
{
	for (size_t i = 0; i < ks->n; i++)
		free(ks->v[i].name);
	free(ks->v);
	memset(ks, 0, sizeof(*ks));
}

/* The symbol an address falls in (the last one at or below it), or NULL. */
static const char *ksym_of(const struct ksyms *ks, unsigned long long addr)
{
	size_t lo = 0, hi = ks->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ks->v[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? ks->v[lo - 1].name : NULL;
}

/* ---- the protocol ---- */

static void print_counts(void *arg)
{
	struct sampler *s = arg;
	const struct opts *o = s->o;
	struct stack_totals t[o->ncpu];
	__u32 zero = 0;
	__u64 missed = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.totals), &zero, t))
		sn_die("read the totals: %s", strerror(errno));
	printf("{\"monotonic_ns\": %llu, \"samples_per_cpu\": {", (unsigned long long)sn_now_ns());
	for (int c = 0, n = 0; c < o->ncpu; c++)
		if (o->cpus[c]) {
			printf("%s\"%d\": %llu", n++ ? ", " : "", c, (unsigned long long)t[c].samples);
			missed += t[c].missed;
		}
	printf("}, \"missed\": %llu, \"counts\": [", (unsigned long long)missed);
	int fd = bpf_map__fd(s->skel->maps.counts), first = 1;
	struct stack_key key, next, *prev = NULL;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		__u64 n;
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &n))
			continue; /* nothing deletes, but never trust a race */
		printf("%s[%u, %u, ", first ? "" : ", ", key.cpu, key.pid);
		sn_print_json_string(key.comm, STACKS_COMM_LEN);
		printf(", %d, %llu]", key.kstack, (unsigned long long)n);
		first = 0;
	}
	printf("]}\n");
	fflush(stdout);
}

/* Every stack in the map, root first and ";"-joined (the folded format's
 * order); a frame outside every symbol is "[unknown]". */
static void print_stacks(struct sampler *s)
{
	struct ksyms ks = { 0 };
	__u64 ips[STACKS_DEPTH];
	__u32 id, *prev = NULL;
	int fd = bpf_map__fd(s->skel->maps.stacks), first = 1;
	unsigned long long unknown = 0;

	ksyms_load(&ks);
	printf("{\"stacks\": {");
	while (!bpf_map_get_next_key(fd, prev, &id)) {
		prev = &id;
		if (bpf_map_lookup_elem(fd, &id, ips))
			continue;
		int depth = 0;
		while (depth < STACKS_DEPTH && ips[depth])
			depth++;
		printf("%s\"%u\": \"", first ? "" : ", ", id);
		for (int i = depth - 1; i >= 0; i--) {
			const char *name = ksym_of(&ks, ips[i]);
			unknown += !name;
			printf("%s%s", i == depth - 1 ? "" : ";", name ? name : "[unknown]");
		}
		printf("\"");
		first = 0;
	}
	printf("}, \"symbols\": %zu, \"unknown_frames\": %llu}\n", ks.n, unknown);
	fflush(stdout);
	ksyms_free(&ks);
}

static void on_command(char *line, void *arg)
{
	if (!strncmp(line, "stacks", 6))
		print_stacks(arg);
	else
		sn_die("unknown command '%.*s': expected read, stacks or quit", (int)strcspn(line, "\n"), line);
}

/* ---- options ---- */

enum { OPT_CPUS = 256, OPT_FREQ, OPT_CPU };

static const struct sn_option options[] = {
	SN_REQUIRED("cpus", OPT_CPUS, "LIST", "sample these CPUs, e.g. 1 or 0-3"),
	SN_OPTION("freq", OPT_FREQ, "HZ", "samples per second per CPU, 10-20000 (default " STR(STACKS_HZ) ")"),
	SN_OPTION("cpu", OPT_CPU, "N", "pin this tool to CPU N (off the sampled ones)"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-stacks",
	.about = "Samples the kernel stacks of chosen CPUs on a cpu-clock timer (a fixed\n"
		 "period: each sample is period_ns of the CPU's time) and counts them by\n"
		 "CPU, thread and stack.",
	.footer = "Prints {\"ready\": ...} once attached; then for each \"read\" line on stdin one\n"
		  "JSON line of the counts so far ([cpu, tid, comm, stack id, samples]; a\n"
		  "negative id: no kernel stack, as bpf_get_stackid's -errno), and for\n"
		  "\"stacks\" every stack seen, root first, named from /proc/kallsyms;\n"
		  "\"quit\", end of input or SIGTERM detach and exit.",
	.options = options,
	.bpf = true,
};

static void on_option(int key, const char *val, void *arg)
{
	struct opts *o = arg;
	switch (key) {
	case OPT_CPUS: o->nsampled = sn_parse_cpus("cpus", val, o->cpus, STACKS_MAX_CPUS, o->ncpu); break;
	case OPT_FREQ: o->freq_hz = sn_parse_u64("freq", val, 10, 20000); break;
	case OPT_CPU: o->cpu = (int)sn_parse_u64("cpu", val, 0, STACKS_MAX_CPUS - 1); break;
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .cpu = -1, .freq_hz = STACKS_HZ };
	o.ncpu = libbpf_num_possible_cpus();
	if (o.ncpu <= 0)
		sn_die("count the CPUs: %s", strerror(-o.ncpu));
	sn_parse_args(&tool, argc, argv, on_option, &o);
	if (o.cpu >= o.ncpu)
		sn_usage_error("--cpu: CPU %d does not exist (this host has CPUs 0-%d)", o.cpu, o.ncpu - 1);
	if (o.cpu >= 0)
		sn_pin_cpu(o.cpu);
	sn_die_with_parent();
	sn_catch_stop_signals();

	struct sampler s = { .o = &o, .period_ns = 1000000000ull / o.freq_hz };
	s.skel = stacks_bpf__open_and_load();
	if (!s.skel)
		sn_die("load the BPF program: %s", strerror(errno));
	struct bpf_link *links[o.ncpu];
	memset(links, 0, sizeof(links));
	for (int c = 0; c < o.ncpu; c++) {
		if (!o.cpus[c])
			continue;
		links[c] = sn_attach_cpu_clock(s.skel->progs.sn_stack_sample, c, s.period_ns);
	}
	s.started_ns = sn_now_ns();
	printf("{\"ready\": true, \"ncpu\": %d, \"cpus\": [", o.ncpu);
	for (int c = 0, n = 0; c < o.ncpu; c++)
		if (o.cpus[c])
			printf("%s%d", n++ ? ", " : "", c);
	printf("], \"freq_hz\": %llu, \"period_ns\": %llu, \"depth\": %d, \"started_ns\": %llu}\n",
	       (unsigned long long)o.freq_hz, (unsigned long long)s.period_ns, STACKS_DEPTH,
	       (unsigned long long)s.started_ns);
	fflush(stdout);

	sn_serve_commands(print_counts, on_command, &s);
	for (int c = 0; c < o.ncpu; c++)
		bpf_link__destroy(links[c]);
	stacks_bpf__destroy(s.skel);
	return 0;
}
