#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

double bench_now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static int compare_doubles(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

double bench_median_seconds(void (*fn)(void* context), void* context, int warmup, int repeats) {
    for (int i = 0; i < warmup; i++)
        fn(context);
    double* times = malloc((size_t)repeats * sizeof *times);
    for (int i = 0; i < repeats; i++) {
        double start = bench_now_seconds();
        fn(context);
        times[i] = bench_now_seconds() - start;
    }
    qsort(times, (size_t)repeats, sizeof *times, compare_doubles);
    double median = times[repeats / 2];
    free(times);
    return median;
}

typedef struct copy_job {
    char* dst;
    const char* src;
    size_t bytes;
    int threads;
} copy_job;

static void parallel_copy(void* context) {
    copy_job* job = context;
    size_t chunk = (job->bytes + (size_t)job->threads - 1) / (size_t)job->threads;
#pragma omp parallel for num_threads(job->threads) schedule(static)
    for (int t = 0; t < job->threads; t++) {
        size_t begin = (size_t)t * chunk;
        if (begin < job->bytes)
            memcpy(job->dst + begin, job->src + begin, begin + chunk > job->bytes ? job->bytes - begin : chunk);
    }
}

double bench_copy_bandwidth(int threads) {
    size_t bytes = (size_t)256 << 20;
    char* src = malloc(bytes);
    char* dst = malloc(bytes);
    memset(src, 1, bytes);
    memset(dst, 2, bytes);
    copy_job job = {dst, src, bytes, threads};
    double seconds = bench_median_seconds(parallel_copy, &job, 2, 9);
    free(src);
    free(dst);
    return 2.0 * (double)bytes / seconds;
}

void bench_report(const char* name, double seconds, double bytes, double copy_bandwidth, double peer_seconds) {
    double floor_seconds = bytes / copy_bandwidth;
    printf("%-52s %9.3f ms %8.2f GB/s  floor %5.1f%%", name, seconds * 1e3, bytes / seconds * 1e-9,
           100.0 * floor_seconds / seconds);
    if (peer_seconds > 0) printf("  x%.2f vs peer", peer_seconds / seconds);
    printf("\n");
}
