/* softnet-udprelay: a UDP socket application as the system under test. */
#ifndef SN_UDPRELAY_H
#define SN_UDPRELAY_H
#define RELAY_BATCH 64      /* datagrams per recvmmsg / sendmmsg */
#define RELAY_MAX_BYTES 2048 /* the largest datagram kept (an MTU frame's payload fits) */
#endif
