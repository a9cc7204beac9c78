/* softnet-victim: loop batch between clock reads, and the report period. */
#ifndef SN_VICTIM_H
#define SN_VICTIM_H
#define VICTIM_BATCH 20000          /* about 20-40 us of work per clock read */
#define VICTIM_REPORT_NS 50000000ull /* 50 ms */
#endif
