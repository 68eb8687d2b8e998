/* A product's output columns split among threads, for the kernels that run on several (float_gemm.c,
 * int8_avx2.c). Part 0 runs on the calling thread and each other part on a thread of its own; a part whose thread
 * cannot start runs on the calling thread afterwards, so a failed pthread_create costs speed, never a result.
 */
#ifndef COLUMN_THREADS_H
#define COLUMN_THREADS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_THREADS 256

static inline int thread_count(int threads) {
    return threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
}

/* columns per thread: an even share of cols, rounded up to whole panels of `panel` columns */
static inline int64_t columns_per_thread(int64_t cols, int threads, int64_t panel) {
    return ((cols + threads - 1) / threads + panel - 1) / panel * panel;
}

/* work(part) for each of the `count` parts of `size` bytes at `parts` */
static inline void run_parts(void *parts, size_t size, int count, void *(*work)(void *)) {
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 1; t < count; t++)
        started[t] = pthread_create(&ids[t], 0, work, (char *)parts + t * size) == 0;
    work(parts);
    for (int t = 1; t < count; t++) {
        if (started[t]) pthread_join(ids[t], 0);
        else work((char *)parts + t * size);
    }
}

#endif
