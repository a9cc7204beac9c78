/* Small helpers shared by softnet's native tools (user space only). */
#ifndef SN_UTIL_H
#define SN_UTIL_H
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <linux/types.h>
#include "sn_proto.h"

/* ---- options: one parser for every tool (getopt_long underneath) ---- */

/* One option of a tool. A key below 256 is also its short option (-k);
 * -h and -v are the parser's own (help, verbose). */
struct sn_option {
	const char *name;  /* long name, without the dashes */
	int key;
	const char *value; /* the value's name in the usage; NULL for a flag */
	const char *help;  /* one line */
	bool required;
};

#define SN_OPTION(name, key, value, help) { name, key, value, help, false }
#define SN_REQUIRED(name, key, value, help) { name, key, value, help, true }

struct sn_tool {
	const char *name;    /* "softnet-sink": also the prefix of every error */
	const char *about;   /* what it does: a line or two for --help */
	const char *footer;  /* after the options (stdin protocol, output); may be NULL */
	const struct sn_option *options; /* ends with { 0 } */
	bool bpf;            /* loads BPF programs: offers -v/--verbose */
};

extern int sn_verbose; /* -v given */

/* Parses argv, calling handle(key, value, arg) for each option in order.
 * -h/--help prints the usage and exits 0. With tool->bpf, -v/--verbose sets
 * sn_verbose, and libbpf's log goes to stderr (debug lines only with -v).
 * Unknown options, missing values, stray arguments and missing required
 * options exit 2 with one line naming the option. */
void sn_parse_args(const struct sn_tool *tool, int argc, char **argv,
		   void (*handle)(int key, const char *value, void *arg), void *arg);
/* A bad value or combination of options: one line, exit 2. */
void sn_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* Parse a number option (OPT without dashes) within [min, max] or exit 2 naming it. */
uint64_t sn_parse_u64(const char *opt, const char *val, uint64_t min, uint64_t max);
double sn_parse_double(const char *opt, const char *val, double min, double max);
/* Parse a CPU list option ("0,1", "2-5", "0,2-3") into set[0..max) (1 for
 * each CPU named) or exit 2 naming OPT: every CPU below ncpu, none twice.
 * Returns how many it names. */
int sn_parse_cpus(const char *opt, const char *val, unsigned char *set, int max, int ncpu);
/* Parse a MAC option (aa:bb:cc:dd:ee:ff) into mac[6] or exit 2 naming it. */
void sn_parse_mac(const char *opt, const char *val, unsigned char *mac);

/* ---- packets ---- */

/* Internet checksum: add buf's 16-bit big-endian words to sum (an odd last
 * byte padded with zero), then fold the carries into 16 bits. */
uint32_t sn_csum_add(uint32_t sum, const void *buf, size_t len);
uint16_t sn_csum_fold(uint32_t sum);

/* ---- frame mixes (--mix), shared by softnet-gen and softnet-sink ---- */


struct sn_mix {
	unsigned n;                       /* distinct sizes, in the order given */
	unsigned size[SN_MIX_MAX_SIZES];  /* frame bytes incl. the FCS */
	unsigned weight[SN_MIX_MAX_SIZES];
	unsigned len;                     /* table length: the sum of the weights */
	unsigned char table[SN_MIX_MAX_TABLE]; /* seq % len -> index into size[] */
	char text[256];                   /* canonical form, "64:7,570:4,1518:1" */
};

/* "SIZE[:WEIGHT],..." or "imix" (64:7,570:4,1518:1) into m, sizes 64-1518,
 * weights >= 1, their sum <= SN_MIX_MAX_TABLE; or exit 2 naming OPT. The
 * table spreads each size evenly (smooth weighted round robin), never
 * WEIGHT in a row. */
void sn_parse_mix(const char *opt, const char *val, struct sn_mix *m);
double sn_mix_mean_size(const struct sn_mix *m);

/* ---- perf events ---- */

struct bpf_program;
struct bpf_link;
/* A cpu-clock perf event on CPU firing every period_ns, with prog (a
 * perf_event program) attached: the link owns the event (closed with it).
 * Exits naming the CPU on failure. */
struct bpf_link *sn_attach_cpu_clock(struct bpf_program *prog, int cpu, uint64_t period_ns);

/* ---- output ---- */

/* s (up to max bytes, or its NUL) as a JSON string: quotes, backslashes and
 * control bytes escaped; a kernel name (a comm) is not always valid UTF-8,
 * so bytes >= 0x80 are escaped as \u00XX. */
void sn_print_json_string(const char *s, size_t max);

/* ---- process ---- */

/* Enter the named network namespace (/run/netns/NAME); exits on failure. */
void sn_enter_netns(const char *name);
/* Die with SIGTERM when the parent (the softnet CLI) dies, even by kill -9. */
void sn_die_with_parent(void);
/* Pin the calling thread to one CPU; exits on failure. */
void sn_pin_cpu(int cpu);
uint64_t sn_now_ns(void); /* CLOCK_MONOTONIC, the clock bpf_ktime_get_ns() reads */
uint64_t sn_thread_cpu_ns(void); /* the calling thread's run time as the kernel accounts it */
/* SIGTERM/SIGINT interrupt a blocking stdin read instead of killing the
 * process, so a tool can detach its programs and exit cleanly. */
void sn_catch_stop_signals(void);
/* The tools' stdin protocol: "read" calls read(arg) (which prints one JSON
 * line), "quit", end of input or a stop signal returns. */
void sn_serve_reads(void (*read)(void *), void *arg);
/* The same, handing any other line (newline included) to other(line, arg). */
void sn_serve_commands(void (*read)(void *), void (*other)(char *line, void *), void *arg);
/* A runtime failure: "<tool>: message" on stderr, exit 2. */
void sn_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* The stdin protocol with commands of their own: every line but "quit" goes
 * to on_line(line, arg), without its newline (up to 255 characters; a longer
 * line is cut into pieces). "quit", end of input or a stop signal returns. */
void sn_serve_lines(void (*on_line)(const char *line, void *arg), void *arg);

#endif
