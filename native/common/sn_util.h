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
void sn_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#endif
