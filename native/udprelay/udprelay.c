// SPDX-License-Identifier: GPL-2.0
/* softnet-udprelay: a UDP socket application in the SUT namespace. Every
 * datagram that reaches its socket (the kernel's local delivery: IP, UDP, the
 * socket's queue) is read with recvmmsg and sent on, unchanged, to --to with
 * sendmmsg. The packet path then ends at a socket, as the eBPF receive-path
 * study's does, and the sink still sees every packet to count it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../common/sn_util.h"
#include "udprelay.h"

enum { OPT_BIND = 256, OPT_TO, OPT_CPU, OPT_NETNS, OPT_RCVBUF };

struct opts {
	const char *netns;
	struct sockaddr_in bind, to;
	int cpu;
	int rcvbuf;
};

static const struct sn_option options[] = {
	SN_REQUIRED("bind", OPT_BIND, "IP:PORT", "the socket's address (the test frames' destination)"),
	SN_REQUIRED("to", OPT_TO, "IP:PORT", "where each datagram is sent on (the sink)"),
	SN_OPTION("netns", OPT_NETNS, "NAME", "run in this network namespace"),
	SN_OPTION("cpu", OPT_CPU, "N", "pin the relay to CPU N (default: not pinned)"),
	SN_OPTION("rcvbuf", OPT_RCVBUF, "BYTES", "SO_RCVBUF (default: the kernel's)"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-udprelay",
	.about = "A UDP socket application as the SUT: reads each datagram that reaches --bind\n"
		 "and sends it on unchanged to --to (recvmmsg / sendmmsg, 64 at a time).",
	.footer = "Prints {\"ready\": true, ...} once bound. Answers \"read\" on stdin with one JSON\n"
		  "line of counters (received, sent, send errors); \"quit\", end of input,\n"
		  "SIGTERM or SIGINT end it. Exit 2: a bad option; 1: cannot bind or send.",
	.options = options,
};

static void parse_addr(const char *opt, const char *val, struct sockaddr_in *a)
{
	char host[64];
	const char *colon = strrchr(val, ':');
	if (!colon || (size_t)(colon - val) >= sizeof(host))
		sn_usage_error("--%s: expected IPv4:PORT, got '%s'", opt, val);
	memcpy(host, val, (size_t)(colon - val));
	host[colon - val] = 0;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)sn_parse_u64(opt, colon + 1, 1, 65535));
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		sn_usage_error("--%s: '%s' is not an IPv4 address", opt, host);
}

static void on_option(int key, const char *val, void *arg)
{
	struct opts *o = arg;
	switch (key) {
	case OPT_BIND: parse_addr("bind", val, &o->bind); break;
	case OPT_TO: parse_addr("to", val, &o->to); break;
	case OPT_NETNS: o->netns = val; break;
	case OPT_CPU: o->cpu = (int)sn_parse_u64("cpu", val, 0, 4095); break;
	case OPT_RCVBUF: o->rcvbuf = (int)sn_parse_u64("rcvbuf", val, 4096, 1 << 30); break;
	}
}

static int fd;
static struct sockaddr_in to;
static volatile int stopping;
static __u64 received, sent, send_errors, batches;

static void *relay(void *arg)
{
	(void)arg;
	static char bufs[RELAY_BATCH][RELAY_MAX_BYTES];
	struct iovec iov[RELAY_BATCH];
	struct mmsghdr in[RELAY_BATCH], out[RELAY_BATCH];
	for (int i = 0; i < RELAY_BATCH; i++) {
		iov[i] = (struct iovec){ .iov_base = bufs[i], .iov_len = RELAY_MAX_BYTES };
		in[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
	}
	while (!__atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		int n = recvmmsg(fd, in, RELAY_BATCH, MSG_WAITFORONE, NULL);
		if (n <= 0) {
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				sn_die("recvmmsg: %s", strerror(errno));
			continue;
		}
		__atomic_fetch_add(&received, (__u64)n, __ATOMIC_RELAXED);
		__atomic_fetch_add(&batches, 1, __ATOMIC_RELAXED);
		struct iovec oiov[RELAY_BATCH];
		for (int i = 0; i < n; i++) {
			oiov[i] = (struct iovec){ .iov_base = bufs[i], .iov_len = in[i].msg_len };
			out[i] = (struct mmsghdr){ .msg_hdr = { .msg_name = &to, .msg_namelen = sizeof(to),
							       .msg_iov = &oiov[i], .msg_iovlen = 1 } };
		}
		for (int done = 0; done < n;) {
			int m = sendmmsg(fd, out + done, (unsigned)(n - done), 0);
			if (m <= 0) { /* a full queue or an unreachable sink: counted, the rest of the batch dropped */
				__atomic_fetch_add(&send_errors, (__u64)(n - done), __ATOMIC_RELAXED);
				break;
			}
			__atomic_fetch_add(&sent, (__u64)m, __ATOMIC_RELAXED);
			done += m;
		}
	}
	return NULL;
}

static void read_cb(void *arg)
{
	(void)arg;
	printf("{\"received_pkts\": %llu, \"sent_pkts\": %llu, \"send_errors\": %llu, \"batches\": %llu}\n",
	       (unsigned long long)__atomic_load_n(&received, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&sent, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&send_errors, __ATOMIC_RELAXED),
	       (unsigned long long)__atomic_load_n(&batches, __ATOMIC_RELAXED));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct opts o = { .cpu = -1 };
	sn_parse_args(&tool, argc, argv, on_option, &o);
	sn_die_with_parent();
	if (o.netns)
		sn_enter_netns(o.netns);
	if (o.cpu >= 0)
		sn_pin_cpu(o.cpu);
	to = o.to;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		sn_die("socket: %s", strerror(errno));
	if (o.rcvbuf && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &o.rcvbuf, sizeof(o.rcvbuf)))
		sn_die("SO_RCVBUFFORCE %d: %s", o.rcvbuf, strerror(errno));
	struct timeval tv = { .tv_usec = 100000 }; /* the relay thread checks for the end every 100 ms */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (bind(fd, (struct sockaddr *)&o.bind, sizeof(o.bind)))
		sn_die("bind %s:%u: %s", inet_ntoa(o.bind.sin_addr), ntohs(o.bind.sin_port), strerror(errno));
	int rcvbuf = 0;
	socklen_t len = sizeof(rcvbuf);
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
	printf("{\"ready\": true, \"rcvbuf_bytes\": %d, \"cpu\": %d}\n", rcvbuf, o.cpu);
	fflush(stdout);
	pthread_t th;
	sn_catch_stop_signals();
	int err = pthread_create(&th, NULL, relay, NULL);
	if (err)
		sn_die("start the relay thread: %s", strerror(err));
	sn_serve_reads(read_cb, NULL);
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	close(fd);
	return 0;
}
