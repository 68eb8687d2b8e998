/* What the grouped int8 kernels (int8_groups_vnni.c, int8_groups_avx2.c) share: a product's part (its operands
 * and the output columns it computes), the 4-term units their packing reads, and the entry point's check of the
 * group and split of the columns among threads. Their arithmetic is in each file.
 */
#ifndef INT8_GROUPS_H
#define INT8_GROUPS_H

#include <stdint.h>
#include <string.h>
#include "column_threads.h"

#define MAX_GROUP 1024   /* a group's integer sum below 2^24, so exact in float32: 1024 * 128 * 127 < 2^24 */

typedef struct {
    const int8_t *a; int64_t lda;
    const float *scales; int64_t lds;
    int64_t rows, depth, group;
    const int8_t *w; int64_t ldw;
    const float *weight_scales; int64_t ldws;
    float *c; int64_t ldc;
    int64_t first_col, end_col;
} part_t;

/* the 4-term unit of a row at term k (k a multiple of 4), terms past `end` zero, each byte xored with `flip` */
static inline uint32_t unit(const int8_t *row, int64_t k, int64_t end, uint32_t flip) {
    uint8_t bytes[4] = {0, 0, 0, 0};
    for (int b = 0; b < 4; b++)
        if (k + b < end) bytes[b] = (uint8_t)row[k + b];
    uint32_t value;
    memcpy(&value, bytes, 4);
    return value ^ flip;
}

/* The entry points' common body: c [rows, cols] = the grouped products of a [rows, depth] (int8) and w [cols,
 * depth] (int8), with scales [rows, ceil(depth / group)] and weight_scales [cols, ceil(depth / group)], `work`
 * computing each part; group a multiple of 4 up to MAX_GROUP (else c is left as it is and -1 returned); the columns
 * split among `threads` threads in whole panels of `panel` columns. */
static inline int run_grouped(const int8_t *a, int64_t lda, const float *scales, int64_t lds, int64_t rows,
                              int64_t depth, int64_t group, const int8_t *w, int64_t ldw, const float *weight_scales,
                              int64_t ldws, float *c, int64_t ldc, int64_t cols, int threads, int64_t panel,
                              void *(*work)(void *)) {
    if (group <= 0 || group % 4 != 0 || group > MAX_GROUP) return -1;
    part_t parts[MAX_THREADS];
    threads = thread_count(threads);
    int64_t per_thread = columns_per_thread(cols, threads, panel);
    int count = 0;
    for (int64_t first = 0; first < cols && count < threads; first += per_thread, count++)
        parts[count] = (part_t){a, lda, scales, lds, rows, depth, group, w, ldw, weight_scales, ldws, c, ldc, first,
                                first + per_thread < cols ? first + per_thread : cols};
    run_parts(parts, sizeof parts[0], count, work);
    return 0;
}

#endif
