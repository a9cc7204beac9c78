/* Small helpers shared by softnet's native tools (user space only). */
#ifndef SN_UTIL_H
#define SN_UTIL_H
#include <stdint.h>
#include <stddef.h>

/* Enter the named network namespace (/run/netns/NAME); exits on failure. */
void sn_enter_netns(const char *name);
/* Die with SIGTERM when the parent (the softnet CLI) dies, even by kill -9. */
void sn_die_with_parent(void);
/* Pin the calling thread to one CPU; exits on failure. */
void sn_pin_cpu(int cpu);
uint64_t sn_now_ns(void); /* CLOCK_MONOTONIC, the clock bpf_ktime_get_ns() reads */
/* Parse a non-negative integer option or exit naming the option. */
uint64_t sn_parse_u64(const char *opt, const char *val, uint64_t min, uint64_t max);
/* SIGTERM/SIGINT interrupt a blocking stdin read instead of killing the
 * process, so a tool can detach its programs and exit cleanly. */
void sn_catch_stop_signals(void);
/* The tools' stdin protocol: "read" calls read(arg) (which prints one JSON
 * line), "quit", end of input or a stop signal returns. */
void sn_serve_reads(void (*read)(void *), void *arg);
void sn_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#endif
