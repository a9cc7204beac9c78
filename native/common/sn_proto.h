/* softnet test-packet format, shared by generator and sink (BPF and user space).
 * The UDP payload starts with this header, both fields big-endian so that a
 * capture is readable by hand. Frame sizes include the 4-byte FCS (RFC 2544),
 * which veth does not carry: we build size - 4 bytes on the wire. */
#ifndef SN_PROTO_H
#define SN_PROTO_H

#define SN_FCS_LEN 4
#define SN_UDP_DPORT 7 /* echo: RFC 2544 Appendix C.2.6.4 uses it for test frames */
#define SN_UDP_SPORT_BASE 1024
/* --dst-ports N: destination ports SN_UDP_DPORT .. SN_UDP_DPORT + N - 1 (below
 * VXLAN's 4789, so a VXLAN SUT's encapsulation is never taken for a test frame) */
#define SN_MAX_DST_PORTS 1024
#define SN_MAX_FLOWS 65536 /* flows x src-ips x dst-ips x dst-ports, with dst-ips/dst-ports */
#define SN_VXLAN_PORT 4789
#define SN_MIX_MAX_TABLE 1024 /* --mix table length: a power of two (BPF masks the index) */
#define SN_MIX_MAX_SIZES 16

struct sn_payload {
	__u64 seq; /* sequence number, from 0, big-endian */
	__u64 ts;  /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) at send, big-endian */
};

#endif
