/* Benchmark helpers: timing with medians, the machine's copy bandwidth (the
 * floor of a memory-bound operator), and one report line per measurement. */
#ifndef DML_BENCH_H
#define DML_BENCH_H

#include <stddef.h>
#include <stdint.h>

double bench_now_seconds(void);

/* Runs fn(context) warmup times, then `repeats` timed times; returns the
 * median seconds. */
double bench_median_seconds(void (*fn)(void* context), void* context, int warmup, int repeats);

/* Copy bandwidth of this machine in bytes/s (bytes read + bytes written),
 * median of parallel memcpy over buffers far larger than the caches. */
double bench_copy_bandwidth(int threads);

/* Prints: name, median time, GB/s for `bytes`, fraction of the floor
 * (bytes / copy bandwidth), and the ratio to the peer's time (if > 0). */
void bench_report(const char* name, double seconds, double bytes, double copy_bandwidth, double peer_seconds);

#endif
