#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "sn_util.h"

#define SN_MAX_OPTIONS 48
#define SN_KEY_HELP 'h'
#define SN_KEY_VERBOSE 'v'

int sn_verbose;
static const struct sn_tool *cur_tool; /* for the error prefix and the usage hint */

static __attribute__((noreturn, format(printf, 2, 0))) void vdie(const char *hint, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", cur_tool ? cur_tool->name : "softnet");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "%s\n", hint);
	exit(2);
}

void sn_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vdie("", fmt, ap);
}

void sn_usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vdie(" (see --help)", fmt, ap);
}

/* libbpf's log, as libbpf-tools print it: warnings (a verifier rejection
 * included, with the verifier's log) always, debug lines only with -v. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !sn_verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void print_usage(const struct sn_tool *t, const struct sn_option *all)
{
	int col = printf("usage: %s", t->name), indent = col;
	for (const struct sn_option *o = all; o->name; o++)
		if (o->required) {
			int w = (int)(strlen(o->name) + strlen(o->value) + 4);
			if (col + w > 79) /* wrap under the first option: readable on 80 columns */
				col = printf("\n%*s", indent, "") - 1;
			col += printf(" --%s %s", o->name, o->value);
		}
	printf(" [OPTION]...\n%s\n\noptions:\n", t->about);
	for (const struct sn_option *o = all; o->name; o++) {
		char left[64];
		int n = o->key < 256 ? snprintf(left, sizeof(left), "-%c, --%s", o->key, o->name)
				     : snprintf(left, sizeof(left), "    --%s", o->name);
		if (o->value)
			snprintf(left + n, sizeof(left) - n, " %s", o->value);
		printf("  %-22s %s\n", left, o->help); /* required ones are in the usage line */
	}
	if (t->footer)
		printf("\n%s\n", t->footer);
}

void sn_parse_args(const struct sn_tool *tool, int argc, char **argv,
		   void (*handle)(int key, const char *value, void *arg), void *arg)
{
	struct sn_option all[SN_MAX_OPTIONS + 3] = {};
	struct option lo[SN_MAX_OPTIONS + 3] = {};
	char shorts[3 * SN_MAX_OPTIONS + 8] = ":"; /* leading ':': a missing value returns ':' */
	bool seen[SN_MAX_OPTIONS + 3] = {};
	int n = 0, c, idx;

	cur_tool = tool;
	for (const struct sn_option *o = tool->options; o->name && n < SN_MAX_OPTIONS; o++)
		all[n++] = *o;
	if (tool->bpf)
		all[n++] = (struct sn_option){ "verbose", SN_KEY_VERBOSE, NULL,
					       "libbpf's debug log on stderr (loads, verifier)", false };
	all[n++] = (struct sn_option){ "help", SN_KEY_HELP, NULL, "print this help and exit", false };
	for (int i = 0; i < n; i++) {
		lo[i] = (struct option){ all[i].name, all[i].value ? required_argument : no_argument, NULL, all[i].key };
		if (all[i].key < 256) {
			size_t len = strlen(shorts);
			shorts[len] = (char)all[i].key;
			shorts[len + 1] = all[i].value ? ':' : '\0';
		}
	}
	if (tool->bpf)
		libbpf_set_print(libbpf_print);

	opterr = 0; /* our own one-line messages */
	while ((c = getopt_long(argc, argv, shorts, lo, &idx)) != -1) {
		const char *given = argv[optind - 1];
		if (c == '?') {
			if (optopt && optopt < 256 && given[0] == '-' && given[1] != '-')
				sn_usage_error("unknown option '-%c'", optopt);
			sn_usage_error("unknown option '%s'", given);
		}
		if (c == ':') {
			for (int i = 0; i < n; i++)
				if (all[i].key == optopt)
					sn_usage_error("--%s needs a value (%s)", all[i].name, all[i].value);
			sn_usage_error("'%s' needs a value", given);
		}
		if (c == SN_KEY_HELP) {
			print_usage(tool, all);
			exit(0);
		}
		for (int i = 0; i < n; i++)
			if (all[i].key == c)
				seen[i] = true;
		if (c == SN_KEY_VERBOSE && tool->bpf)
			sn_verbose = 1;
		else
			handle(c, optarg, arg);
	}
	if (optind < argc)
		sn_usage_error("unexpected argument '%s'", argv[optind]);
	for (int i = 0; i < n; i++)
		if (all[i].required && !seen[i])
			sn_usage_error("--%s %s is required", all[i].name, all[i].value);
}

uint64_t sn_parse_u64(const char *opt, const char *val, uint64_t min, uint64_t max)
{
	char *endp;
	errno = 0;
	unsigned long long v = strtoull(val, &endp, 10);
	if (errno || *endp || endp == val || val[0] == '-' || v < min || v > max)
		sn_usage_error("--%s: expected an integer in [%llu, %llu], got '%s'", opt,
			       (unsigned long long)min, (unsigned long long)max, val);
	return v;
}

double sn_parse_double(const char *opt, const char *val, double min, double max)
{
	char *endp;
	double v = strtod(val, &endp);
	if (*endp || endp == val || !isfinite(v) || !(v >= min && v <= max))
		sn_usage_error("--%s: expected a number in [%g, %g], got '%s'", opt, min, max, val);
	return v;
}

void sn_enter_netns(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		sn_die("netns %s: %s", name, strerror(errno));
	if (setns(fd, CLONE_NEWNET) < 0)
		sn_die("setns %s: %s", name, strerror(errno));
	close(fd);
}

void sn_die_with_parent(void)
{
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent) /* parent already gone before prctl took effect */
		raise(SIGTERM);
}

void sn_pin_cpu(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		sn_die("pin to cpu %d: %s", cpu, strerror(errno));
}

uint64_t sn_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sn_thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_stop_signal(int sig) { (void)sig; }

void sn_catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal }; /* no SA_RESTART: unblocks fgets */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

void sn_serve_commands(void (*read)(void *), void (*other)(char *line, void *), void *arg)
{
	char line[4096];
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "read", 4))
			read(arg);
		else if (!strncmp(line, "quit", 4))
			break;
		else if (other)
			other(line, arg);
	}
}

void sn_serve_reads(void (*read)(void *), void *arg)
{
	sn_serve_commands(read, NULL, arg);
}

int sn_parse_cpus(const char *opt, const char *val, unsigned char *set, int max, int ncpu)
{
	const char *s = val;
	char *end;
	int n = 0;

	memset(set, 0, max);
	for (;;) {
		errno = 0;
		long a = strtol(s, &end, 10), b;
		if (end == s || errno || a < 0 || *s == '-' || *s == '+')
			goto bad;
		b = a;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || errno || b < a || *s == '-' || *s == '+')
				goto bad;
		}
		for (long c = a; c <= b; c++) {
			if (c >= ncpu || c >= max)
				sn_usage_error("--%s: CPU %ld does not exist (this host has CPUs 0-%d), got '%s'", opt, c,
					       ncpu - 1, val);
			if (set[c])
				sn_usage_error("--%s: CPU %ld named twice, got '%s'", opt, c, val);
			set[c] = 1;
			n++;
		}
		if (!*end)
			return n;
		if (*end != ',')
			goto bad;
		s = end + 1;
	}
bad:
	sn_usage_error("--%s: expected a CPU list such as 0,1 or 0-3, got '%s'", opt, val);
}

void sn_print_json_string(const char *s, size_t max)
{
	putchar('"');
	for (size_t i = 0; i < max && s[i]; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

void sn_parse_mac(const char *opt, const char *val, unsigned char *mac)
{
	int end = 0;
	if (sscanf(val, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx%n", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4], &mac[5],
		   &end) != 6 || val[end])
		sn_usage_error("--%s: expected a MAC address aa:bb:cc:dd:ee:ff, got '%s'", opt, val);
}

uint32_t sn_csum_add(uint32_t sum, const void *buf, size_t len)
{
	const unsigned char *b = buf;
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (len & 1)
		sum += (uint32_t)b[len - 1] << 8;
	return sum;
}

uint16_t sn_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

void sn_serve_lines(void (*on_line)(const char *line, void *arg), void *arg)
{
	char line[256];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (!strcmp(line, "quit"))
			break;
		on_line(line, arg);
	}
}

void sn_parse_mix(const char *opt, const char *val, struct sn_mix *m)
{
	const char *p = strcmp(val, "imix") ? val : "64:7,570:4,1518:1";
	long cur[SN_MIX_MAX_SIZES] = { 0 };
	size_t used = 0;

	memset(m, 0, sizeof(*m));
	while (*p) {
		char *end;
		errno = 0;
		unsigned long size = strtoul(p, &end, 10), w = 1;
		if (end == p || errno || *p == '-' || size < 64 || size > 1518)
			sn_usage_error("--%s: '%s': expected SIZE[:WEIGHT],... with sizes 64-1518 B, or imix", opt, val);
		p = end;
		if (*p == ':') {
			w = strtoul(++p, &end, 10);
			if (end == p || *p == '-' || !w || w > SN_MIX_MAX_TABLE)
				sn_usage_error("--%s: '%s': expected a weight 1-%u after %lu:", opt, val, SN_MIX_MAX_TABLE, size);
			p = end;
		}
		if (*p && *p != ',')
			sn_usage_error("--%s: '%s': expected SIZE[:WEIGHT],... (e.g. 64:7,570:4,1518:1)", opt, val);
		if (*p)
			p++;
		for (unsigned i = 0; i < m->n; i++)
			if (m->size[i] == size)
				sn_usage_error("--%s: '%s': size %lu appears twice", opt, val, size);
		if (m->n == SN_MIX_MAX_SIZES)
			sn_usage_error("--%s: '%s': at most %d sizes", opt, val, SN_MIX_MAX_SIZES);
		m->size[m->n] = size;
		m->weight[m->n++] = w;
		m->len += w;
		if (m->len > SN_MIX_MAX_TABLE)
			sn_usage_error("--%s: '%s': the weights sum to more than %u", opt, val, SN_MIX_MAX_TABLE);
		used += snprintf(m->text + used, sizeof(m->text) - used, "%s%lu:%lu", used ? "," : "", size, w);
	}
	if (!m->n)
		sn_usage_error("--%s: empty; expected SIZE[:WEIGHT],... or imix", opt);
	/* smooth weighted round robin (as nginx balances upstreams): each step
	 * every size gains its weight, the largest credit goes and pays the total */
	for (unsigned k = 0; k < m->len; k++) {
		unsigned best = 0;
		for (unsigned i = 0; i < m->n; i++) {
			cur[i] += m->weight[i];
			if (cur[i] > cur[best])
				best = i;
		}
		cur[best] -= m->len;
		m->table[k] = best;
	}
}

double sn_mix_mean_size(const struct sn_mix *m)
{
	double sum = 0;
	for (unsigned i = 0; i < m->n; i++)
		sum += (double)m->size[i] * m->weight[i];
	return m->len ? sum / m->len : 0;
}

struct bpf_link *sn_attach_cpu_clock(struct bpf_program *prog, int cpu, uint64_t period_ns)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = period_ns,
	};
	int fd = (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		sn_die("perf_event_open(cpu-clock) on CPU %d: %s", cpu, strerror(errno));
	struct bpf_link *link = bpf_program__attach_perf_event(prog, fd);
	if (!link)
		sn_die("attach %s on CPU %d's cpu-clock: %s", bpf_program__name(prog), cpu, strerror(errno));
	return link;
}
