// SPDX-License-Identifier: GPL-2.0
/* softnet-xsk: the AF_XDP latency lab's tool (docs/reference/xsk.md). One binary, three
 * roles on the path A -> B -> C -> B -> A:
 *   ping    (A) sends numbered test frames on a schedule, stamps T0 just
 *           before the TX ring submit and T3 when it reads the reply, and
 *           writes one 112 B record per packet (softnet/results/latency.py);
 *   forward (B) moves frames between --ifname (towards A) and --ifname2
 *           (towards C) through one shared UMEM, stamping its hops;
 *   reflect (C) swaps addresses and ports and sends the frame back.
 * Each role attaches xsk.bpf.c (a bpf_link: gone when the process goes, kill -9
 * included), which stamps the XDP hook into metadata and redirects test frames
 * to the AF_XDP socket. Rings come from libxdp's xsk.h; the program is ours. */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <linux/ip.h>
#include <linux/types.h>
#include <linux/udp.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/xsk.h>
#include "../common/sn_util.h"
#include "xsk.h"
#include "xsk.skel.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "records are written in host order, which must be little-endian"
#endif

#ifndef SO_PREFER_BUSY_POLL
#define SO_PREFER_BUSY_POLL 69
#endif
#ifndef SO_BUSY_POLL_BUDGET
#define SO_BUSY_POLL_BUDGET 70
#endif

#define MAX_BATCH 256
#define WAIT_SLICE_NS 100000000ull /* forward/reflect: how often a blocked wait checks for quit */
#define MAX_ERRORS 8

/* One record per packet sent: RECORD_DTYPE of softnet/results/latency.py. */
struct record {
	__u64 seq, t0_ns, t3_ns, hop_ns[XSK_NHOPS];
	__u32 flags, pad;
};
_Static_assert(sizeof(struct record) == 112, "RECORD_DTYPE is 112 B");
enum { FLAG_RECEIVED = 1, FLAG_DUPLICATE = 2, FLAG_REORDERED = 4, FLAG_IMPOSSIBLE = 8 };

enum role { PING, FORWARD, REFLECT, STAMP_COST };
enum rx_mode { RX_BUSY, RX_POLL, RX_RECVFROM, RX_EPOLL };
enum tx_kick { KICK_WAKEUP, KICK_ALWAYS };
static const char *const role_names[] = { "ping", "forward", "reflect", "stamp-cost" };
static const char *const rx_mode_names[] = { "busy", "poll", "recvfrom", "epoll" };
static const char *const tx_kick_names[] = { "wakeup", "always" };

struct opts {
	enum role role;
	bool role_set;
	const char *netns, *ifname, *ifname2, *records, *src_ip, *dst_ip;
	unsigned char src_mac[6], dst_mac[6], a_mac[6], c_mac[6];
	bool src_mac_set, dst_mac_set, a_mac_set, c_mac_set, count_set;
	unsigned size, batch, queue, frame_size, ring_size;
	__u64 count, interval_ns, seed, drain_ms;
	double rate_pps;
	bool poisson, zero_copy, need_wakeup, xdp_skb;
	enum rx_mode rx_mode;
	enum tx_kick tx_kick;
	long busy_poll_us, busy_poll_budget; /* -1: not set */
	bool prefer_busy_poll;
	bool no_stamp; /* --no-stamp: no hop stamps (XDP or user); ping keeps T0/T3 */
	int cpu;
};
static struct opts o;

/* ---- what the kernel refused, and runtime errors ---- */

static char unsupported[512];
static void refused(const char *knob, int err)
{
	size_t n = strlen(unsupported);
	snprintf(unsupported + n, sizeof(unsupported) - n, "%s{\"knob\": \"%s\", \"unsupported\": \"%s\"}",
		 n ? ", " : "", knob, strerror(err));
}

static char errors[MAX_ERRORS][96];
static unsigned nerrors_distinct;
static __u64 nerrors;
static void note_error(const char *what, int err)
{
	char line[96];
	snprintf(line, sizeof(line), "%s: %s", what, strerror(err));
	__atomic_store_n(&nerrors, nerrors + 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < nerrors_distinct; i++)
		if (!strcmp(errors[i], line))
			return;
	if (nerrors_distinct < MAX_ERRORS)
		memcpy(errors[nerrors_distinct++], line, sizeof(line));
}

/* The role cannot work: one line naming the cause, exit 1. */
static __attribute__((noreturn, format(printf, 1, 2))) void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "softnet-xsk: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* ---- UMEM and sockets ---- */

#define ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

struct umem {
	struct xsk_umem *umem;
	void *area;
	__u64 *free; /* frame addresses owned by user space */
	__u32 nfree, nframes;
	struct xsk_ring_prod fill0; /* the first socket's rings, given at creation */
	struct xsk_ring_cons comp0;
};

struct sock {
	const char *ifname;
	unsigned ifindex;
	unsigned char mac[6];
	struct xsk_socket *xsk;
	int fd;
	struct xsk_ring_cons rx, comp;
	struct xsk_ring_prod tx, fill;
	__u32 outstanding; /* TX descriptors not completed yet */
	__u64 rx_pkts, tx_pkts, drop_pkts, tx_ring_full, tx_kicks, rx_kicks, rx_waits;
};

static struct umem um;
static struct sock socks[2];
static int nsocks;
static bool zero_copy_used, need_wakeup_used, xdp_skb_used;
static struct xsk_bpf *skel;
static int link_fds[2] = { -1, -1 }; /* bpf_link fds: closing one detaches */
static int epfd = -1;
static __u64 meta_pkts, payload_stamp_pkts; /* where user space found the XDP stamp */

static inline __u64 now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

static inline __u64 frame_base(__u64 addr) { return addr & ~(__u64)(o.frame_size - 1); }
static inline __u64 pool_get(void) { return um.free[--um.nfree]; }
static inline void pool_put(__u64 addr) { um.free[um.nfree++] = frame_base(addr); }

static void refill(struct sock *s)
{
	__u32 n = xsk_prod_nb_free(&s->fill, um.nfree), idx;
	if (n > um.nfree)
		n = um.nfree;
	if (!n || xsk_ring_prod__reserve(&s->fill, n, &idx) != n)
		return;
	for (__u32 i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&s->fill, idx + i) = pool_get();
	xsk_ring_prod__submit(&s->fill, n);
}

static void kick_tx(struct sock *s)
{
	if (o.tx_kick == KICK_WAKEUP && need_wakeup_used && !xsk_ring_prod__needs_wakeup(&s->tx))
		return;
	ADD(s->tx_kicks, 1);
	if (sendto(s->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 && errno != ENOBUFS && errno != EAGAIN &&
	    errno != EBUSY && errno != ENETDOWN)
		note_error("sendto (TX kick)", errno);
}

/* Completed TX frames back to the pool; descriptors the kernel has not taken
 * yet (copy mode sends at most a batch per kick) get another kick. */
static void complete_tx(struct sock *s)
{
	__u32 idx, n;
	if (!s->outstanding)
		return;
	n = xsk_ring_cons__peek(&s->comp, MAX_BATCH, &idx);
	for (__u32 i = 0; i < n; i++)
		pool_put(*xsk_ring_cons__comp_addr(&s->comp, idx + i));
	if (n)
		xsk_ring_cons__release(&s->comp, n);
	s->outstanding -= n;
	if (xsk_prod_nb_free(&s->tx, o.ring_size) < o.ring_size)
		kick_tx(s);
}

/* The RX side of --rx-mode: busy and recvfrom return at once (the caller
 * spins), poll and epoll block until a frame or the deadline. */
static void rx_wait(__u64 deadline)
{
	__u64 now;
	switch (o.rx_mode) {
	case RX_BUSY:
		for (int k = 0; k < nsocks; k++)
			if (o.busy_poll_us > 0 || (need_wakeup_used && xsk_ring_prod__needs_wakeup(&socks[k].fill))) {
				ADD(socks[k].rx_kicks, 1);
				recvfrom(socks[k].fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
			}
		return;
	case RX_RECVFROM:
		for (int k = 0; k < nsocks; k++) {
			ADD(socks[k].rx_kicks, 1);
			recvfrom(socks[k].fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
		}
		return;
	default:
		break;
	}
	now = now_ns();
	if (deadline <= now)
		return;
	struct timespec ts = { (time_t)((deadline - now) / 1000000000ull), (long)((deadline - now) % 1000000000ull) };
	for (int k = 0; k < nsocks; k++)
		ADD(socks[k].rx_waits, 1);
	if (o.rx_mode == RX_POLL) {
		struct pollfd pfd[2] = { { socks[0].fd, POLLIN, 0 }, { nsocks > 1 ? socks[1].fd : -1, POLLIN, 0 } };
		if (ppoll(pfd, nsocks, &ts, NULL) < 0 && errno != EINTR)
			note_error("poll", errno);
	} else {
		struct epoll_event ev[2];
		if (epoll_pwait2(epfd, ev, 2, &ts, NULL) < 0 && errno != EINTR)
			note_error("epoll_wait", errno);
	}
}

static inline void put_be64(unsigned char *p, __u64 v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static inline __u64 get_be64(const unsigned char *p)
{
	__u64 v;
	memcpy(&v, p, 8);
	return be64toh(v);
}

/* Hop stamps of frames too short for their payload slot (64 B frames carry
 * the sequence number only): kept here by sequence number, written out on the
 * "stamps PATH" command, so the runs merge them into the ping's records. */
struct side_stamp {
	__u64 seq;
	__u32 hop, pad;
	__u64 ns;
};
_Static_assert(sizeof(struct side_stamp) == 24, "SIDE_STAMP_DTYPE is 24 B");
#define MAX_SIDE_STAMPS (4u << 20) /* 96 MiB: a 10 s run at 100 kpps with every hop */
static struct side_stamp *side_stamps;
static __u32 nside, side_cap;
static __u64 side_dropped;
static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;

static void side_stamp(const unsigned char *pkt, int hop, __u64 ns)
{
	pthread_mutex_lock(&side_lock);
	if (nside == side_cap && side_cap < MAX_SIDE_STAMPS) {
		__u32 cap = side_cap ? side_cap * 2 : 4096;
		struct side_stamp *p = realloc(side_stamps, (size_t)cap * sizeof(*p));
		if (p) {
			side_stamps = p;
			side_cap = cap;
		}
	}
	if (nside < side_cap)
		side_stamps[nside++] = (struct side_stamp){ .seq = get_be64(pkt + XSK_HDR_LEN + XSK_OFF_SEQ),
							    .hop = (__u32)hop, .ns = ns };
	else
		side_dropped++;
	pthread_mutex_unlock(&side_lock);
}

/* The stamp goes into the frame's slot for this hop, or beside it when the
 * frame is too short (is_test() made sure the sequence number is there). */
static inline void put_hop(unsigned char *pkt, __u32 len, int hop, __u64 ns)
{
	if ((__u32)(XSK_HDR_LEN + XSK_OFF_HOP(hop) + 8) <= len)
		put_be64(pkt + XSK_HDR_LEN + XSK_OFF_HOP(hop), ns);
	else if (o.role == FORWARD || o.role == REFLECT)
		side_stamp(pkt, hop, ns);
}

static inline __u64 get_hop(const unsigned char *pkt, __u32 len, int hop)
{
	return (__u32)(XSK_HDR_LEN + XSK_OFF_HOP(hop) + 8) <= len ? get_be64(pkt + XSK_HDR_LEN + XSK_OFF_HOP(hop)) : 0;
}

static inline bool is_test(const unsigned char *pkt, __u32 len)
{
	__u32 magic;
	if (len < XSK_HDR_LEN + XSK_OFF_SEQ + 8)
		return false;
	memcpy(&magic, pkt + XSK_HDR_LEN, 4);
	return magic == htonl(XSK_MAGIC);
}

/* The XDP hook's stamp from the metadata in front of the frame (0: none; the
 * program then wrote the payload slot itself). Cleared: a reused frame must
 * not show an old stamp. */
static inline __u64 xdp_stamp(unsigned char *pkt)
{
	struct xsk_meta *m = (struct xsk_meta *)(pkt - sizeof(*m));
	if (m->magic != XSK_META_MAGIC) {
		ADD(payload_stamp_pkts, 1);
		return 0;
	}
	m->magic = 0;
	ADD(meta_pkts, 1);
	return m->xdp_rx_ns;
}

static void get_mac(const char *ifname, unsigned char *mac)
{
	struct ifreq ifr = {};
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (fd < 0 || ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		fail("MAC address of %s: %s", ifname, strerror(errno));
	memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
}

static void teardown_sockets(void)
{
	for (int k = 0; k < nsocks; k++)
		if (socks[k].xsk)
			xsk_socket__delete(socks[k].xsk);
	for (int k = 0; k < nsocks; k++)
		socks[k].xsk = NULL;
	if (um.umem)
		xsk_umem__delete(um.umem);
	um.umem = NULL;
}

/* UMEM and one socket per interface, bound with these flags; 0 or -errno of
 * the first refusal (everything is torn down then). */
static int try_sockets(bool zc, bool nw)
{
	struct xsk_umem_config ucfg = { .fill_size = o.ring_size, .comp_size = o.ring_size,
					.frame_size = o.frame_size, .frame_headroom = 0, .flags = 0 };
	__u64 size = (__u64)um.nframes * o.frame_size;
	int err = xsk_umem__create(&um.umem, um.area, size, &um.fill0, &um.comp0, &ucfg);
	if (err)
		fail("create UMEM (%u frames of %u B): %s", um.nframes, o.frame_size, strerror(-err));
	for (int k = 0; k < nsocks; k++) {
		struct sock *s = &socks[k];
		struct xsk_socket_config cfg = {
			.rx_size = o.ring_size, .tx_size = o.ring_size,
			.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
			.bind_flags = (zc ? XDP_ZEROCOPY : XDP_COPY) | (nw ? XDP_USE_NEED_WAKEUP : 0),
		};
		struct xsk_ring_prod *fill = k ? &s->fill : &um.fill0;
		struct xsk_ring_cons *comp = k ? &s->comp : &um.comp0;
		err = xsk_socket__create_shared(&s->xsk, s->ifname, o.queue, um.umem, &s->rx, &s->tx, fill, comp, &cfg);
		if (err) {
			s->xsk = NULL;
			teardown_sockets();
			return err;
		}
		if (!k) {
			s->fill = um.fill0;
			s->comp = um.comp0;
		}
		s->fd = xsk_socket__fd(s->xsk);
	}
	return 0;
}

static void setup_sockets(void)
{
	bool zc = o.zero_copy, nw = o.need_wakeup;
	int err;

	um.nframes = 4 * o.ring_size * nsocks;
	um.area = mmap(NULL, (size_t)um.nframes * o.frame_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (um.area == MAP_FAILED)
		fail("UMEM of %u frames: %s", um.nframes, strerror(errno));
	um.free = calloc(um.nframes, sizeof(*um.free));
	if (!um.free)
		fail("out of memory");
	while ((err = try_sockets(zc, nw))) {
		if (zc && (err == -EOPNOTSUPP || err == -EINVAL || err == -EPROTONOSUPPORT)) {
			refused("zero_copy", -err); /* veth has no zero-copy: fall back to copy mode */
			zc = false;
		} else if (nw && err == -EINVAL) {
			refused("need_wakeup", -err);
			nw = false;
		} else {
			fail("AF_XDP socket on %s queue %u (%s%s): %s", socks[0].ifname, o.queue,
			     zc ? "zero-copy" : "copy", nw ? ", need_wakeup" : "", strerror(-err));
		}
	}
	struct xdp_options xo = {};
	socklen_t len = sizeof(xo);
	zero_copy_used = !getsockopt(socks[0].fd, SOL_XDP, XDP_OPTIONS, &xo, &len) && (xo.flags & XDP_OPTIONS_ZEROCOPY);
	need_wakeup_used = nw;

	for (__u32 i = 0; i < um.nframes; i++)
		um.free[um.nfree++] = (__u64)i * o.frame_size;
	for (int k = 0; k < nsocks; k++) {
		struct sock *s = &socks[k];
		__u32 key = k;
		int fd = s->fd;
		if (bpf_map_update_elem(bpf_map__fd(skel->maps.xsks), &key, &fd, BPF_ANY))
			fail("put the socket of %s in the XSKMAP: %s", s->ifname, strerror(errno));
		__u32 n = o.ring_size, idx;
		if (xsk_ring_prod__reserve(&s->fill, n, &idx) != n)
			fail("fill ring of %s: cannot reserve %u", s->ifname, n);
		for (__u32 i = 0; i < n; i++)
			*xsk_ring_prod__fill_addr(&s->fill, idx + i) = pool_get();
		xsk_ring_prod__submit(&s->fill, n);
	}
}

/* SO_BUSY_POLL, SO_PREFER_BUSY_POLL, SO_BUSY_POLL_BUDGET on every socket; a
 * refusal is reported, and the hello shows what the socket holds after. */
static bool budget_applied;
static void setup_busy_poll(void)
{
	for (int k = 0; k < nsocks; k++) {
		int fd = socks[k].fd, v;
		if (o.busy_poll_us >= 0 && setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &(int){ (int)o.busy_poll_us }, sizeof(v)))
			refused("busy_poll_us", errno);
		if (o.prefer_busy_poll && setsockopt(fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &(int){ 1 }, sizeof(v)))
			refused("prefer_busy_poll", errno);
		if (o.busy_poll_budget >= 0) {
			budget_applied = !setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET,
						     &(int){ (int)o.busy_poll_budget }, sizeof(v));
			if (!budget_applied)
				refused("busy_poll_budget", errno);
		}
	}
}

static int sockopt_int(int fd, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, name, &v, &len))
		return -1;
	return v;
}

static void attach_xdp(void)
{
	unsigned ifidx[2] = { socks[0].ifindex, nsocks > 1 ? socks[1].ifindex : 0 };
	int prog = bpf_program__fd(skel->progs.sn_xsk);
	bool skb = o.xdp_skb;
	for (int k = 0; k < nsocks; k++) {
		LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = skb ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE);
		int fd = bpf_link_create(prog, ifidx[k], BPF_XDP, &lo);
		if (fd < 0 && !skb && (errno == EOPNOTSUPP || errno == EINVAL) && !k) {
			refused("xdp_mode_native", errno);
			skb = true;
			lo.flags = XDP_FLAGS_SKB_MODE;
			fd = bpf_link_create(prog, ifidx[k], BPF_XDP, &lo);
		}
		if (fd < 0)
			fail("attach XDP (%s mode) to %s: %s", skb ? "skb" : "native", socks[k].ifname, strerror(errno));
		link_fds[k] = fd;
	}
	xdp_skb_used = skb;
}

/* ---- JSON ---- */

static void print_xdp_counters(void)
{
	static const char *const names[XSKC_NCOUNTERS] = {
		[XSKC_TEST] = "test_pkts", [XSKC_OTHER] = "other_pkts", [XSKC_OTHER_QUEUE] = "other_queue_pkts",
		[XSKC_META] = "meta_pkts", [XSKC_META_FAIL] = "meta_refused_pkts", [XSKC_NO_SLOT] = "no_slot_pkts",
	};
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(skel->maps.counters);
	__u64 vals[ncpu > 0 ? ncpu : 1];
	printf("\"xdp\": {");
	for (__u32 k = 0; k < XSKC_NCOUNTERS; k++) {
		__u64 sum = 0;
		if (!bpf_map_lookup_elem(fd, &k, vals))
			for (int c = 0; c < ncpu; c++)
				sum += vals[c];
		printf("%s\"%s\": %llu", k ? ", " : "", names[k], (unsigned long long)sum);
	}
	printf("}");
}

/* BusyPollRxPackets of this namespace (/proc/net/netstat), -1 if absent. */
static long long busy_poll_rx_pkts(void)
{
	char head[4096], vals[4096];
	long long v = -1;
	FILE *f = fopen("/proc/net/netstat", "r");
	if (!f)
		return -1;
	while (fgets(head, sizeof(head), f) && fgets(vals, sizeof(vals), f)) {
		if (strncmp(head, "TcpExt:", 7))
			continue;
		char *hs, *vs, *h = strtok_r(head, " \n", &hs), *x = strtok_r(vals, " \n", &vs);
		while ((h = strtok_r(NULL, " \n", &hs)) && (x = strtok_r(NULL, " \n", &vs)))
			if (!strcmp(h, "BusyPollRxPackets"))
				v = atoll(x);
	}
	fclose(f);
	return v;
}

static void print_sockets(void)
{
	printf("\"sockets\": [");
	for (int k = 0; k < nsocks; k++) {
		struct sock *s = &socks[k];
		struct xdp_statistics st = {};
		socklen_t len = sizeof(st);
		getsockopt(s->fd, SOL_XDP, XDP_STATISTICS, &st, &len);
		printf("%s{\"ifname\": \"%s\", \"rx_pkts\": %llu, \"tx_pkts\": %llu, \"drop_pkts\": %llu, "
		       "\"tx_ring_full\": %llu, \"tx_kicks\": %llu, \"rx_kicks\": %llu, \"rx_waits\": %llu, "
		       "\"napi_id\": %d, \"kernel_rx_dropped_pkts\": %llu, \"kernel_rx_ring_full_pkts\": %llu, "
		       "\"kernel_fill_ring_empty\": %llu, \"kernel_tx_ring_empty\": %llu, "
		       "\"kernel_invalid_descs\": %llu}",
		       k ? ", " : "", s->ifname, (unsigned long long)LOAD(s->rx_pkts),
		       (unsigned long long)LOAD(s->tx_pkts), (unsigned long long)LOAD(s->drop_pkts),
		       (unsigned long long)LOAD(s->tx_ring_full), (unsigned long long)LOAD(s->tx_kicks),
		       (unsigned long long)LOAD(s->rx_kicks), (unsigned long long)LOAD(s->rx_waits),
		       sockopt_int(s->fd, SO_INCOMING_NAPI_ID), (unsigned long long)st.rx_dropped,
		       (unsigned long long)st.rx_ring_full, (unsigned long long)st.rx_fill_ring_empty_descs,
		       (unsigned long long)st.tx_ring_empty_descs,
		       (unsigned long long)(st.rx_invalid_descs + st.tx_invalid_descs));
	}
	printf("], \"xdp_stamp_meta_pkts\": %llu, \"xdp_stamp_payload_pkts\": %llu, \"busy_poll_rx_pkts\": %lld, ",
	       (unsigned long long)LOAD(meta_pkts), (unsigned long long)LOAD(payload_stamp_pkts), busy_poll_rx_pkts());
	print_xdp_counters();
	printf(", \"errors\": %llu, \"error_messages\": [", (unsigned long long)LOAD(nerrors));
	for (unsigned i = 0; i < nerrors_distinct; i++)
		printf("%s\"%s\"", i ? ", " : "", errors[i]);
	printf("]");
}

/* The hop slots that fit in the ping's frames. */
static int hop_slots(void)
{
	int room = ((int)o.size - XSK_FCS_LEN - XSK_HDR_LEN - XSK_OFF_HOP(0)) / 8;
	if (room < 0)
		return 0;
	return room > XSK_NHOPS ? XSK_NHOPS : room;
}

static void print_hello(void)
{
	struct bpf_prog_info info = {};
	__u32 ilen = sizeof(info);
	bpf_obj_get_info_by_fd(bpf_program__fd(skel->progs.sn_xsk), &info, &ilen);
	printf("{\"ready\": true, \"role\": \"%s\", \"ifname\": \"%s\"", role_names[o.role], o.ifname);
	if (o.ifname2)
		printf(", \"ifname2\": \"%s\"", o.ifname2);
	printf(", \"queue\": %u, \"bind_mode\": \"%s\", \"need_wakeup\": %s, \"xdp_mode\": \"%s\", "
	       "\"prog_id\": %u, \"stamp\": %s, \"xdp_stamp\": %s, \"rx_mode\": \"%s\", \"tx_kick\": \"%s\", "
	       "\"batch_pkts\": %u, \"ring_descs\": %u, \"frame_size_bytes\": %u, \"umem_frames\": %u, "
	       "\"cpu\": %d, ",
	       o.queue, zero_copy_used ? "zero-copy" : "copy", need_wakeup_used ? "true" : "false",
	       xdp_skb_used ? "skb" : "native", info.id, o.no_stamp ? "false" : "true",
	       o.no_stamp ? "null" : "\"metadata\"", rx_mode_names[o.rx_mode], tx_kick_names[o.tx_kick],
	       o.batch, o.ring_size, o.frame_size, um.nframes, o.cpu);
	if (o.role == PING) /* the frames' payload: what each packet carries */
		printf("\"size_bytes\": %u, \"hop_slots\": %d, \"t0_in_payload\": %s, \"count_pkts\": %llu, "
		       "\"interval_ns\": %llu, \"arrivals\": \"%s\", ",
		       o.size, hop_slots(), (int)o.size - XSK_FCS_LEN >= XSK_HDR_LEN + XSK_OFF_T0 + 8 ? "true" : "false",
		       (unsigned long long)o.count, (unsigned long long)o.interval_ns, o.poisson ? "poisson" : "periodic");
	int fd = socks[0].fd;
	/* read back from the socket, but for the budget, which getsockopt does not answer */
	printf("\"busy_poll\": {\"busy_poll_us\": %d, \"prefer_busy_poll\": %s, \"busy_poll_budget\": ",
	       sockopt_int(fd, SO_BUSY_POLL), sockopt_int(fd, SO_PREFER_BUSY_POLL) > 0 ? "true" : "false");
	if (budget_applied)
		printf("%ld}, ", o.busy_poll_budget);
	else
		printf("null}, ");
	printf("\"unsupported\": [%s]}\n", unsupported);
	fflush(stdout);
}

/* ---- ping ---- */

static unsigned char tmpl[1518];
static __u32 tmpl_len;
static struct record *recs;
static __u64 sent, received, dups, reordered, impossible, foreign, late_sends;
static __u64 max_lag_ns, rtt_min_ns, rtt_max_ns, highest_seq_plus1;
static volatile sig_atomic_t stop_requested;

static void build_template(void)
{
	struct ethhdr *eth = (void *)tmpl;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	__u32 magic = htonl(XSK_MAGIC), sum;

	tmpl_len = o.size - XSK_FCS_LEN;
	memcpy(eth->h_dest, o.dst_mac, 6);
	memcpy(eth->h_source, o.src_mac, 6);
	eth->h_proto = htons(ETH_P_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->tot_len = htons(tmpl_len - sizeof(*eth));
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	inet_pton(AF_INET, o.src_ip, &ip->saddr);
	inet_pton(AF_INET, o.dst_ip, &ip->daddr);
	sum = sn_csum_fold(sn_csum_add(0, ip, sizeof(*ip)));
	ip->check = htons(~sum & 0xffff);
	udp->source = htons(XSK_SPORT);
	udp->dest = htons(XSK_PORT);
	udp->len = htons(tmpl_len - sizeof(*eth) - sizeof(*ip));
	udp->check = 0; /* none (IPv4): the hops write stamps into the payload */
	memcpy(tmpl + XSK_HDR_LEN, &magic, 4);
}

static __u64 rng;
static __u64 next_gap_ns(void)
{
	if (!o.poisson)
		return o.interval_ns;
	__u64 z = (rng += 0x9e3779b97f4a7c15ull); /* splitmix64 */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	double u = (double)(z >> 11) * 0x1p-53;
	return (__u64)llround(-log1p(-u) * (double)o.interval_ns);
}

static bool send_burst(struct sock *s)
{
	__u32 n = o.count - sent < o.batch ? (__u32)(o.count - sent) : o.batch, idx;
	unsigned char *pkts[MAX_BATCH];

	complete_tx(s);
	if (um.nfree < n || xsk_ring_prod__reserve(&s->tx, n, &idx) != n) {
		ADD(s->tx_ring_full, 1);
		return false;
	}
	for (__u32 i = 0; i < n; i++) {
		__u64 addr = pool_get();
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&s->tx, idx + i);
		pkts[i] = xsk_umem__get_data(um.area, addr);
		memcpy(pkts[i], tmpl, tmpl_len);
		put_be64(pkts[i] + XSK_HDR_LEN + XSK_OFF_SEQ, sent + i);
		d->addr = addr;
		d->len = tmpl_len;
	}
	__u64 t0 = now_ns();
	if (XSK_HDR_LEN + XSK_OFF_T0 + 8 <= tmpl_len)
		for (__u32 i = 0; i < n; i++)
			put_be64(pkts[i] + XSK_HDR_LEN + XSK_OFF_T0, t0);
	xsk_ring_prod__submit(&s->tx, n);
	s->outstanding += n;
	kick_tx(s);
	for (__u32 i = 0; i < n; i++) {
		recs[sent + i].seq = sent + i;
		recs[sent + i].t0_ns = t0;
	}
	ADD(s->tx_pkts, n);
	sent += n;
	return true;
}

static void check_path(struct record *r)
{
	__u64 prev = r->t0_ns;
	bool bad = false;
	for (int h = 0; h < XSK_NHOPS; h++)
		if (r->hop_ns[h]) {
			bad |= r->hop_ns[h] < prev;
			prev = r->hop_ns[h];
		}
	if (bad || r->t3_ns < prev) {
		r->flags |= FLAG_IMPOSSIBLE;
		impossible++;
	}
}

static __u32 ping_rx(struct sock *s)
{
	__u32 idx, n = xsk_ring_cons__peek(&s->rx, MAX_BATCH, &idx);
	if (!n)
		return 0;
	__u64 t3 = now_ns();
	for (__u32 i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&s->rx, idx + i);
		unsigned char *pkt = xsk_umem__get_data(um.area, d->addr);
		__u64 seq, a_xdp;
		if (!is_test(pkt, d->len) || (seq = get_be64(pkt + XSK_HDR_LEN + XSK_OFF_SEQ)) >= sent) {
			foreign++;
			pool_put(d->addr);
			continue;
		}
		a_xdp = o.no_stamp ? 0 : xdp_stamp(pkt);
		struct record *r = &recs[seq];
		if (r->flags & FLAG_RECEIVED) {
			r->flags |= FLAG_DUPLICATE;
			dups++;
		} else {
			r->t3_ns = t3;
			for (int h = 0; h < XSK_NHOPS; h++)
				r->hop_ns[h] = get_hop(pkt, d->len, h);
			if (a_xdp)
				r->hop_ns[HOP_A_XDP_RX] = a_xdp;
			r->flags |= FLAG_RECEIVED;
			received++;
			if (seq + 1 < highest_seq_plus1) {
				r->flags |= FLAG_REORDERED;
				reordered++;
			} else {
				highest_seq_plus1 = seq + 1;
			}
			check_path(r);
			if (!(r->flags & FLAG_IMPOSSIBLE)) {
				__u64 rtt = t3 - r->t0_ns;
				rtt_min_ns = !rtt_min_ns || rtt < rtt_min_ns ? rtt : rtt_min_ns;
				rtt_max_ns = rtt > rtt_max_ns ? rtt : rtt_max_ns;
			}
		}
		pool_put(d->addr);
	}
	xsk_ring_cons__release(&s->rx, n);
	ADD(s->rx_pkts, n);
	return n;
}

static void on_ping_signal(int sig) { (void)sig; stop_requested = 1; }

static void write_records(void)
{
	if (!o.records)
		return;
	int fd = open(o.records, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		note_error("open --records", errno);
		return;
	}
	const char *p = (const char *)recs;
	size_t left = sent * sizeof(*recs);
	while (left) {
		ssize_t w = write(fd, p, left);
		if (w < 0) {
			note_error("write --records", errno);
			break;
		}
		p += w;
		left -= (size_t)w;
	}
	if (close(fd))
		note_error("close --records", errno);
}

static void run_ping(void)
{
	struct sock *s = &socks[0];
	__u64 t_start = now_ns(), next = t_start, drain_end = 0, gap;
	bool interrupted = false;
	struct sigaction sa = { .sa_handler = on_ping_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	rng = o.seed;
	next += next_gap_ns() / 2; /* the first burst: after half a gap, not at once */
	for (;;) {
		if (stop_requested) {
			interrupted = true;
			break;
		}
		__u64 now = now_ns();
		if (sent < o.count && now >= next && send_burst(s)) {
			max_lag_ns = now - next > max_lag_ns ? now - next : max_lag_ns;
			gap = next_gap_ns();
			if (next + gap <= now) { /* a stall longer than a gap: no burst of catch-up sends */
				late_sends++;
				next = now + gap;
			} else {
				next += gap;
			}
			if (sent == o.count)
				drain_end = now_ns() + o.drain_ms * 1000000ull;
		}
		__u32 got = ping_rx(s);
		complete_tx(s);
		refill(s);
		if (sent == o.count && (received == sent || now_ns() >= drain_end))
			break;
		if (!got)
			rx_wait(sent < o.count ? next : drain_end);
	}
	__u64 t_end = now_ns();
	write_records();
	printf("{\"role\": \"ping\", \"sent_pkts\": %llu, \"received_pkts\": %llu, \"lost_pkts\": %llu, "
	       "\"duplicate_pkts\": %llu, \"reordered_pkts\": %llu, \"impossible_pkts\": %llu, "
	       "\"foreign_pkts\": %llu, \"late_sends\": %llu, \"max_send_lag_ns\": %llu, "
	       "\"rtt_min_ns\": %llu, \"rtt_max_ns\": %llu, \"duration_s\": %.6f, \"interrupted\": %s, "
	       "\"bind_mode\": \"%s\", \"need_wakeup\": %s, \"xdp_mode\": \"%s\", \"rx_mode\": \"%s\", "
	       "\"records\": %s%s%s, \"record_bytes\": %zu, ",
	       (unsigned long long)sent, (unsigned long long)received, (unsigned long long)(sent - received),
	       (unsigned long long)dups, (unsigned long long)reordered, (unsigned long long)impossible,
	       (unsigned long long)foreign, (unsigned long long)late_sends, (unsigned long long)max_lag_ns,
	       (unsigned long long)rtt_min_ns, (unsigned long long)rtt_max_ns, (double)(t_end - t_start) / 1e9,
	       interrupted ? "true" : "false", zero_copy_used ? "zero-copy" : "copy",
	       need_wakeup_used ? "true" : "false", xdp_skb_used ? "skb" : "native", rx_mode_names[o.rx_mode],
	       o.records ? "\"" : "", o.records ? o.records : "null", o.records ? "\"" : "", sizeof(struct record));
	print_sockets();
	printf("}\n");
	fflush(stdout);
}

/* ---- stamp-cost: what the stamps cost on this host ---- */

static __u64 xdp_counter(struct xsk_bpf *sk, __u32 key)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 vals[ncpu > 0 ? ncpu : 1], sum = 0;
	if (!bpf_map_lookup_elem(bpf_map__fd(sk->maps.counters), &key, vals))
		for (int c = 0; c < ncpu; c++)
			sum += vals[c];
	return sum;
}

static int cmp_u32(const void *a, const void *b)
{
	return (int)(*(const __u32 *)a > *(const __u32 *)b) - (int)(*(const __u32 *)a < *(const __u32 *)b);
}

#define COST_ROUNDS 7
static void run_stamp_cost(void)
{
	__u64 n = o.count_set ? o.count : 10000000, t, x = 0;
	unsigned char slot[8];
	struct xsk_bpf *sk[2];
	__u32 dur[2][COST_ROUNDS], repeat = n > 100000000 ? 100000000 : (__u32)n;

	o.src_ip = "198.18.0.1";
	o.dst_ip = "198.19.0.1";
	build_template();
	t = now_ns();
	for (__u64 i = 0; i < n; i++)
		x += now_ns();
	double clock_ns = (double)(now_ns() - t) / (double)n;
	t = now_ns();
	for (__u64 i = 0; i < n; i++) { /* as the roles stamp: read the clock, write a big-endian slot */
		put_be64(slot, now_ns());
		__asm__ volatile("" : : "r"(slot) : "memory");
	}
	double user_ns = (double)(now_ns() - t) / (double)n;

	for (int v = 0; v < 2; v++) {
		sk[v] = xsk_bpf__open();
		if (!sk[v])
			fail("open BPF object: %s", strerror(errno));
		sk[v]->rodata->stamp = v ? 2 : 0;
		sk[v]->rodata->slot[0] = HOP_C_XDP_RX;
		if (xsk_bpf__load(sk[v]))
			fail("load BPF program: %s", strerror(errno));
	}
	for (int r = 0; r < COST_ROUNDS; r++)
		for (int v = 0; v < 2; v++) { /* interleaved: drifts hit both alike */
			LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = tmpl, .data_size_in = tmpl_len, .repeat = repeat);
			if (bpf_prog_test_run_opts(bpf_program__fd(sk[v]->progs.sn_xsk), &run))
				fail("BPF_PROG_RUN: %s", strerror(errno));
			dur[v][r] = run.duration;
		}
	for (int v = 0; v < 2; v++)
		qsort(dur[v], COST_ROUNDS, sizeof(dur[v][0]), cmp_u32);
	printf("{\"role\": \"stamp-cost\", \"loops\": %llu, \"clock_gettime_ns\": %.2f, \"user_stamp_ns\": %.2f, "
	       "\"xdp_repeat\": %u, \"xdp_rounds\": %d, \"size_bytes\": %u, \"xdp_run_no_stamp_ns\": %u, "
	       "\"xdp_run_stamp_ns\": %u, \"xdp_stamp_ns\": %d, \"xdp_meta_pkts\": %llu, "
	       "\"xdp_meta_refused_pkts\": %llu, \"check\": %llu}\n",
	       (unsigned long long)n, clock_ns, user_ns, repeat, COST_ROUNDS, o.size, dur[0][COST_ROUNDS / 2],
	       dur[1][COST_ROUNDS / 2], (int)dur[1][COST_ROUNDS / 2] - (int)dur[0][COST_ROUNDS / 2],
	       (unsigned long long)xdp_counter(sk[1], XSKC_META), (unsigned long long)xdp_counter(sk[1], XSKC_META_FAIL),
	       (unsigned long long)(x & 1));
	for (int v = 0; v < 2; v++)
		xsk_bpf__destroy(sk[v]);
}

/* ---- forward and reflect ---- */

static volatile int stopping;

/* Frames from in's RX ring to out's TX ring: this hop's three stamps go into
 * the payload slots from hop_xdp on; dst_mac rewrites the Ethernet addresses
 * (source: out's own), swap turns the frame around (reflect). */
static __u32 relay(struct sock *in, struct sock *out, int hop_xdp, const unsigned char *dst_mac, bool swap)
{
	__u32 idx, n = xsk_ring_cons__peek(&in->rx, o.batch, &idx), m = 0, k;
	__u64 addrs[MAX_BATCH];
	__u32 lens[MAX_BATCH];
	if (!n)
		return 0;
	bool stamp = !o.no_stamp;
	__u64 t_rx = stamp ? now_ns() : 0;
	for (__u32 i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&in->rx, idx + i);
		unsigned char *pkt = xsk_umem__get_data(um.area, d->addr);
		if (!is_test(pkt, d->len)) {
			ADD(in->drop_pkts, 1);
			pool_put(d->addr);
			continue;
		}
		if (stamp) {
			__u64 x = xdp_stamp(pkt);
			if (x)
				put_hop(pkt, d->len, hop_xdp, x);
			put_hop(pkt, d->len, hop_xdp + 1, t_rx);
		}
		struct ethhdr *eth = (void *)pkt;
		if (swap) {
			struct iphdr *ip = (void *)(eth + 1);
			struct udphdr *udp = (void *)(ip + 1);
			unsigned char mac[6];
			__u32 a = ip->saddr;
			__u16 p = udp->source;
			memcpy(mac, eth->h_dest, 6);
			memcpy(eth->h_dest, eth->h_source, 6);
			memcpy(eth->h_source, mac, 6);
			ip->saddr = ip->daddr;
			ip->daddr = a;
			udp->source = udp->dest;
			udp->dest = p;
		} else if (dst_mac) {
			memcpy(eth->h_dest, dst_mac, 6);
			memcpy(eth->h_source, out->mac, 6);
		}
		addrs[m] = d->addr;
		lens[m++] = d->len;
	}
	xsk_ring_cons__release(&in->rx, n);
	ADD(in->rx_pkts, n);
	if (!m)
		return n;
	k = xsk_prod_nb_free(&out->tx, m); /* may be more than m */
	if (k < m) {
		complete_tx(out);
		k = xsk_prod_nb_free(&out->tx, m);
	}
	k = k < m ? k : m;
	if (k < m) {
		ADD(out->tx_ring_full, 1);
		ADD(out->drop_pkts, m - k);
		for (__u32 j = k; j < m; j++)
			pool_put(addrs[j]);
	}
	if (!k || xsk_ring_prod__reserve(&out->tx, k, &idx) != k)
		return n;
	__u64 t_tx = stamp ? now_ns() : 0;
	for (__u32 j = 0; j < k; j++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&out->tx, idx + j);
		if (stamp)
			put_hop(xsk_umem__get_data(um.area, addrs[j]), lens[j], hop_xdp + 2, t_tx);
		d->addr = addrs[j];
		d->len = lens[j];
	}
	xsk_ring_prod__submit(&out->tx, k);
	out->outstanding += k;
	ADD(out->tx_pkts, k);
	kick_tx(out);
	return n;
}

static void *worker(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		__u32 got;
		if (o.role == FORWARD)
			got = relay(&socks[0], &socks[1], HOP_B_XDP_RX_FWD, o.c_mac_set ? o.c_mac : NULL, false) +
			      relay(&socks[1], &socks[0], HOP_B_XDP_RX_RET, o.a_mac_set ? o.a_mac : NULL, false);
		else
			got = relay(&socks[0], &socks[0], HOP_C_XDP_RX, NULL, true);
		for (int k = 0; k < nsocks; k++) {
			complete_tx(&socks[k]);
			refill(&socks[k]);
		}
		if (!got)
			rx_wait(now_ns() + WAIT_SLICE_NS);
	}
	return NULL;
}

/* "stamps PATH": the side stamps so far to PATH (SIDE_STAMP_DTYPE), then none kept. */
static void stamps_cb(char *line, void *arg)
{
	(void)arg;
	if (strncmp(line, "stamps ", 7))
		return;
	char *path = line + 7;
	path[strcspn(path, "\n")] = 0;
	pthread_mutex_lock(&side_lock);
	FILE *f = fopen(path, "wb");
	size_t wrote = f ? fwrite(side_stamps, sizeof(*side_stamps), nside, f) : 0;
	int err = f ? (fclose(f) ? errno : 0) : errno;
	__u32 n = nside;
	__u64 dropped = side_dropped;
	nside = 0;
	side_dropped = 0;
	pthread_mutex_unlock(&side_lock);
	if (!err && wrote != n)
		err = EIO;
	printf("{\"stamps\": %u, \"stamps_dropped\": %llu, \"error\": %s%s%s}\n", n, (unsigned long long)dropped,
	       err ? "\"" : "", err ? strerror(err) : "null", err ? "\"" : "");
	fflush(stdout);
}

static void read_cb(void *arg)
{
	(void)arg;
	__u64 rx = 0, tx = 0, drops = 0;
	for (int k = 0; k < nsocks; k++) {
		rx += LOAD(socks[k].rx_pkts);
		tx += LOAD(socks[k].tx_pkts);
		drops += LOAD(socks[k].drop_pkts);
	}
	printf("{\"role\": \"%s\", \"rx_pkts\": %llu, \"tx_pkts\": %llu, \"drop_pkts\": %llu, ", role_names[o.role],
	       (unsigned long long)rx, (unsigned long long)tx, (unsigned long long)drops);
	print_sockets();
	printf("}\n");
	fflush(stdout);
}

/* ---- options ---- */

enum {
	OPT_IFNAME2 = 256, OPT_SRC_MAC, OPT_DST_MAC, OPT_SRC_IP, OPT_DST_IP, OPT_A_MAC, OPT_C_MAC,
	OPT_INTERVAL, OPT_RATE, OPT_ARRIVALS, OPT_SEED, OPT_RECORDS, OPT_DRAIN, OPT_ZC, OPT_COPY,
	OPT_NW, OPT_NO_NW, OPT_RX_MODE, OPT_TX_KICK, OPT_BP_US, OPT_PREFER_BP, OPT_BP_BUDGET,
	OPT_FRAME_SIZE, OPT_RING, OPT_XDP_MODE, OPT_CPU, OPT_NO_STAMP,
};

static const struct sn_option options[] = {
	SN_REQUIRED("role", 'r', "ROLE", "ping (A), forward (B), reflect (C), stamp-cost"),
	SN_OPTION("netns", 'n', "NS", "run in network namespace NS (/run/netns/NS)"),
	SN_OPTION("ifname", 'i', "DEV", "AF_XDP socket on DEV (forward: towards A)"),
	SN_OPTION("ifname2", OPT_IFNAME2, "DEV", "forward: the interface towards C"),
	SN_OPTION("queue", 'q', "N", "the queue the sockets bind to (default 0)"),
	SN_OPTION("src-mac", OPT_SRC_MAC, "MAC", "ping: Ethernet source (required)"),
	SN_OPTION("dst-mac", OPT_DST_MAC, "MAC", "ping: Ethernet destination, B (required)"),
	SN_OPTION("src-ip", OPT_SRC_IP, "IP", "ping: IPv4 source (required)"),
	SN_OPTION("dst-ip", OPT_DST_IP, "IP", "ping: IPv4 destination, C (required)"),
	SN_OPTION("a-mac", OPT_A_MAC, "MAC", "forward: send replies to A's MAC"),
	SN_OPTION("c-mac", OPT_C_MAC, "MAC", "forward: send A's frames to C's MAC"),
	SN_OPTION("size", 's', "BYTES", "ping: frame size with FCS, 64-1518 (default 64)"),
	SN_OPTION("count", 'c', "N", "ping: packets to send (default 1000)"),
	SN_OPTION("interval-ns", OPT_INTERVAL, "NS", "ping: mean gap between bursts (default 1e6)"),
	SN_OPTION("rate-pps", OPT_RATE, "PPS", "ping: packets per second (instead of a gap)"),
	SN_OPTION("arrivals", OPT_ARRIVALS, "KIND", "ping: periodic (default) or poisson"),
	SN_OPTION("seed", OPT_SEED, "N", "ping: seed of the poisson gaps (default 1)"),
	SN_OPTION("records", OPT_RECORDS, "FILE", "ping: write the 112 B per-packet records"),
	SN_OPTION("drain-ms", OPT_DRAIN, "MS", "ping: wait for late replies (default 200)"),
	SN_OPTION("batch", 'b', "N", "ping: burst size (1); others: ring batch (64)"),
	SN_OPTION("zero-copy", OPT_ZC, NULL, "bind zero-copy (copy if the driver refuses)"),
	SN_OPTION("copy", OPT_COPY, NULL, "bind in copy mode (default)"),
	SN_OPTION("need-wakeup", OPT_NW, NULL, "bind with XDP_USE_NEED_WAKEUP (default)"),
	SN_OPTION("no-need-wakeup", OPT_NO_NW, NULL, "bind without it"),
	SN_OPTION("rx-mode", OPT_RX_MODE, "MODE", "busy, poll (default), recvfrom or epoll"),
	SN_OPTION("tx-kick", OPT_TX_KICK, "WHEN", "sendto after a TX: wakeup (default), always"),
	SN_OPTION("busy-poll-us", OPT_BP_US, "US", "SO_BUSY_POLL on the sockets"),
	SN_OPTION("prefer-busy-poll", OPT_PREFER_BP, NULL, "SO_PREFER_BUSY_POLL on the sockets"),
	SN_OPTION("busy-poll-budget", OPT_BP_BUDGET, "N", "SO_BUSY_POLL_BUDGET, 1-65535"),
	SN_OPTION("frame-size", OPT_FRAME_SIZE, "BYTES", "UMEM chunk: 2048 (default) or 4096"),
	SN_OPTION("ring-size", OPT_RING, "N", "rx/tx/fill/completion ring, 64-16384 (2048)"),
	SN_OPTION("xdp-mode", OPT_XDP_MODE, "MODE", "native (default; skb if refused) or skb"),
	SN_OPTION("cpu", OPT_CPU, "N", "pin the data path to CPU N"),
	SN_OPTION("no-stamp", OPT_NO_STAMP, NULL, "no hop stamps, XDP or user (ping: T0, T3 only)"),
	{ 0 } };

static const struct sn_tool tool = {
	.name = "softnet-xsk",
	.about = "AF_XDP round-trip latency: ping (A) -> forward (B) -> reflect (C) -> B -> A,\n"
		 "stamped at each XDP hook (metadata) and in each application\n"
		 "(docs/reference/xsk.md).",
	.footer = "All roles print {\"ready\": true, ...} once bound, with the knobs the kernel\n"
		  "took, and \"unsupported\": [{\"knob\": ..., \"unsupported\": ...}] for the refused.\n"
		  "ping then sends --count packets, waits --drain-ms for late replies, writes\n"
		  "--records and prints one JSON summary line; SIGINT/SIGTERM end it early.\n"
		  "forward and reflect answer \"read\" on stdin with one JSON line of counters,\n"
		  "and \"stamps PATH\" by writing the hop stamps of frames too short for them\n"
		  "(seq, hop, ns; 24 B each) to PATH, then {\"stamps\": N, ...};\n"
		  "\"quit\", end of input, SIGTERM or SIGINT detach and exit 0. Exit 2: a bad\n"
		  "option; exit 1: the role cannot work (no interface, attach or bind refused).",
	.options = options,
	.bpf = true,
};

/* The roles each option belongs to (bit per role), for a clear error. */
#define RM_P (1u << PING)
#define RM_F (1u << FORWARD)
#define RM_R (1u << REFLECT)
static unsigned role_mask(int key)
{
	switch (key) {
	case OPT_IFNAME2: case OPT_A_MAC: case OPT_C_MAC: return RM_F;
	case OPT_SRC_MAC: case OPT_DST_MAC: case OPT_SRC_IP: case OPT_DST_IP: case 's': case 'c':
	case OPT_INTERVAL: case OPT_RATE: case OPT_ARRIVALS: case OPT_SEED: case OPT_RECORDS: case OPT_DRAIN:
		return RM_P;
	default: return RM_P | RM_F | RM_R;
	}
}

static int pick(const char *opt, const char *val, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(val, names[i]))
			return i;
	sn_usage_error("--%s: expected %s%s%s%s%s%s%s, got '%s'", opt, names[0], n > 2 ? ", " : " or ", names[1],
		       n > 2 ? (n > 3 ? ", " : " or ") : "", n > 2 ? names[2] : "", n > 3 ? " or " : "",
		       n > 3 ? names[3] : "", val);
}

static unsigned used_for_roles = RM_P | RM_F | RM_R;
static const char *narrowing_option;

static void on_option(int key, const char *val, void *arg)
{
	(void)arg;
	static const char *const arrivals[] = { "periodic", "poisson" };
	static const char *const xdp_modes[] = { "native", "skb" };
	unsigned mask = role_mask(key);
	if (mask != (RM_P | RM_F | RM_R) && (used_for_roles & mask) != used_for_roles) {
		used_for_roles &= mask;
		for (const struct sn_option *op = options; op->name; op++)
			if (op->key == key)
				narrowing_option = op->name;
	}
	switch (key) {
	case 'r': o.role = pick("role", val, role_names, 4); o.role_set = true; break;
	case 'n': o.netns = val; break;
	case 'i': o.ifname = val; break;
	case OPT_IFNAME2: o.ifname2 = val; break;
	case 'q': o.queue = sn_parse_u64("queue", val, 0, 1023); break;
	case OPT_SRC_MAC: sn_parse_mac("src-mac", val, o.src_mac); o.src_mac_set = true; break;
	case OPT_DST_MAC: sn_parse_mac("dst-mac", val, o.dst_mac); o.dst_mac_set = true; break;
	case OPT_A_MAC: sn_parse_mac("a-mac", val, o.a_mac); o.a_mac_set = true; break;
	case OPT_C_MAC: sn_parse_mac("c-mac", val, o.c_mac); o.c_mac_set = true; break;
	case OPT_SRC_IP: o.src_ip = val; break;
	case OPT_DST_IP: o.dst_ip = val; break;
	case 's': o.size = sn_parse_u64("size", val, XSK_MIN_FRAME_BYTES, 1518); break;
	case 'c': o.count = sn_parse_u64("count", val, 1, 1000000000); o.count_set = true; break;
	case OPT_INTERVAL: o.interval_ns = sn_parse_u64("interval-ns", val, 1000, 3600000000000ull); break;
	case OPT_RATE: o.rate_pps = sn_parse_double("rate-pps", val, 0.001, 1e8); break;
	case OPT_ARRIVALS: o.poisson = pick("arrivals", val, arrivals, 2); break;
	case OPT_SEED: o.seed = sn_parse_u64("seed", val, 0, UINT64_MAX); break;
	case OPT_RECORDS: o.records = val; break;
	case OPT_DRAIN: o.drain_ms = sn_parse_u64("drain-ms", val, 0, 600000); break;
	case 'b': o.batch = sn_parse_u64("batch", val, 1, MAX_BATCH); break;
	case OPT_ZC: o.zero_copy = true; break;
	case OPT_COPY: o.zero_copy = false; break;
	case OPT_NW: o.need_wakeup = true; break;
	case OPT_NO_NW: o.need_wakeup = false; break;
	case OPT_RX_MODE: o.rx_mode = pick("rx-mode", val, rx_mode_names, 4); break;
	case OPT_TX_KICK: o.tx_kick = pick("tx-kick", val, tx_kick_names, 2); break;
	case OPT_BP_US: o.busy_poll_us = sn_parse_u64("busy-poll-us", val, 0, 1000000); break;
	case OPT_PREFER_BP: o.prefer_busy_poll = true; break;
	case OPT_BP_BUDGET: o.busy_poll_budget = sn_parse_u64("busy-poll-budget", val, 1, 65535); break;
	case OPT_FRAME_SIZE:
		o.frame_size = sn_parse_u64("frame-size", val, 2048, 4096);
		if (o.frame_size != 2048 && o.frame_size != 4096)
			sn_usage_error("--frame-size: expected 2048 or 4096, got '%s'", val);
		break;
	case OPT_RING:
		o.ring_size = sn_parse_u64("ring-size", val, 64, 16384);
		if (o.ring_size & (o.ring_size - 1))
			sn_usage_error("--ring-size: expected a power of two in [64, 16384], got '%s'", val);
		break;
	case OPT_XDP_MODE: o.xdp_skb = pick("xdp-mode", val, xdp_modes, 2); break;
	case OPT_CPU: o.cpu = sn_parse_u64("cpu", val, 0, 1023); break;
	case OPT_NO_STAMP: o.no_stamp = true; break;
	}
}

static void check_options(bool batch_set)
{
	struct in_addr a;
	if (o.role == STAMP_COST)
		return;
	if (!o.ifname)
		sn_usage_error("--ifname DEV is required");
	if (!(used_for_roles & (1u << o.role)))
		sn_usage_error("--%s does not apply to --role %s", narrowing_option, role_names[o.role]);
	if (o.role == FORWARD && !o.ifname2)
		sn_usage_error("--role forward needs --ifname2 DEV (the interface towards C)");
	if (o.ifname2 && !strcmp(o.ifname, o.ifname2))
		sn_usage_error("--ifname2: must differ from --ifname, got '%s' twice", o.ifname2);
	if (!batch_set)
		o.batch = o.role == PING ? 1 : 64;
	if (o.role != PING)
		return;
	if (!o.src_mac_set || !o.dst_mac_set)
		sn_usage_error("--role ping needs --src-mac and --dst-mac");
	if (!o.src_ip || !o.dst_ip)
		sn_usage_error("--role ping needs --src-ip and --dst-ip");
	if (inet_pton(AF_INET, o.src_ip, &a) != 1)
		sn_usage_error("--src-ip: expected an IPv4 address, got '%s'", o.src_ip);
	if (inet_pton(AF_INET, o.dst_ip, &a) != 1)
		sn_usage_error("--dst-ip: expected an IPv4 address, got '%s'", o.dst_ip);
	if (o.rate_pps > 0 && o.interval_ns)
		sn_usage_error("--rate-pps and --interval-ns: give one of them");
	if (o.rate_pps > 0)
		o.interval_ns = (__u64)llround(o.batch * 1e9 / o.rate_pps);
	if (!o.interval_ns)
		o.interval_ns = 1000000;
	if (o.batch > o.ring_size)
		sn_usage_error("--batch: at most the ring size (%u), got %u", o.ring_size, o.batch);
}

static bool batch_given;
static void on_option_outer(int key, const char *val, void *arg)
{
	if (key == 'b')
		batch_given = true;
	on_option(key, val, arg);
}

int main(int argc, char **argv)
{
	o = (struct opts){ .size = 64, .count = 1000, .seed = 1, .drain_ms = 200, .need_wakeup = true,
			   .rx_mode = RX_POLL, .tx_kick = KICK_WAKEUP, .busy_poll_us = -1, .busy_poll_budget = -1,
			   .frame_size = 2048, .ring_size = 2048, .queue = 0, .cpu = -1 };
	sn_parse_args(&tool, argc, argv, on_option_outer, NULL);
	check_options(batch_given);

	sn_die_with_parent();
	if (o.role == STAMP_COST) {
		run_stamp_cost();
		return 0;
	}
	if (o.netns)
		sn_enter_netns(o.netns);
	if (o.cpu >= 0)
		sn_pin_cpu(o.cpu);
	prctl(PR_SET_TIMERSLACK, 1UL); /* poll timeouts to the ns, not 50 us late */

	nsocks = o.role == FORWARD ? 2 : 1;
	socks[0].ifname = o.ifname;
	socks[1].ifname = o.ifname2;
	for (int k = 0; k < nsocks; k++) {
		socks[k].ifindex = if_nametoindex(socks[k].ifname);
		if (!socks[k].ifindex)
			fail("--%s: no interface '%s' in this namespace", k ? "ifname2" : "ifname", socks[k].ifname);
		get_mac(socks[k].ifname, socks[k].mac);
	}
	if (o.role == PING) {
		recs = mmap(NULL, o.count * sizeof(*recs), PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (recs == MAP_FAILED)
			fail("records for %llu packets: %s", (unsigned long long)o.count, strerror(errno));
		build_template();
	}

	skel = xsk_bpf__open();
	if (!skel)
		fail("open BPF object: %s", strerror(errno));
	skel->rodata->queue = o.queue;
	skel->rodata->ifindex2 = nsocks > 1 ? socks[1].ifindex : 0;
	skel->rodata->slot[0] = o.role == PING ? HOP_A_XDP_RX : o.role == FORWARD ? HOP_B_XDP_RX_FWD : HOP_C_XDP_RX;
	skel->rodata->slot[1] = HOP_B_XDP_RX_RET;
	skel->rodata->stamp = o.no_stamp ? 0 : 1; /* 0: no clock read, no metadata; still redirects */
	if (xsk_bpf__load(skel))
		fail("load BPF program: %s", strerror(errno));
	attach_xdp();
	setup_sockets();
	setup_busy_poll();
	if (o.rx_mode == RX_EPOLL) {
		epfd = epoll_create1(EPOLL_CLOEXEC);
		for (int k = 0; k < nsocks && epfd >= 0; k++) {
			struct epoll_event ev = { .events = EPOLLIN, .data.u32 = k };
			if (epoll_ctl(epfd, EPOLL_CTL_ADD, socks[k].fd, &ev))
				fail("epoll on the AF_XDP socket: %s", strerror(errno));
		}
		if (epfd < 0)
			fail("epoll_create1: %s", strerror(errno));
	}
	print_hello();

	if (o.role == PING) {
		run_ping();
	} else {
		/* Stop signals go to the main thread, whose blocking stdin read they end. */
		sigset_t stop, old;
		pthread_t th;
		sigemptyset(&stop);
		sigaddset(&stop, SIGTERM);
		sigaddset(&stop, SIGINT);
		sn_catch_stop_signals();
		pthread_sigmask(SIG_BLOCK, &stop, &old);
		int err = pthread_create(&th, NULL, worker, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (err)
			fail("start the data path thread: %s", strerror(err));
		sn_serve_commands(read_cb, stamps_cb, NULL);
		__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
		pthread_join(th, NULL);
	}
	for (int k = 0; k < nsocks; k++)
		if (link_fds[k] >= 0)
			close(link_fds[k]);
	teardown_sockets();
	xsk_bpf__destroy(skel);
	return 0;
}
