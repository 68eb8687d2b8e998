/* Float32 matrix products c = a w^T (+ bias) whose every output is one fixed sequence of fused multiply-adds and
 * additions, for CPUs with AVX2 and FMA (judge_engine/layers/float_gemm.py builds this file once and calls it for each product).
 *
 * c[m, n] = ((P_0 + P_1) + P_2) + ... (+ bias[n]), P_j the chain of fused multiply-adds fma(a[m, k], w[n, k], ...)
 * over the j-th KC terms in order, from zero: the same operations in the same order for every output, whatever
 * the number of rows, a row's place among them, the blocking of rows or the threads, so a row's result depends on
 * that row alone (the batch invariance the engine needs) and is the same bits on every CPU that runs this code
 * (a fused multiply-add rounds once, as IEEE 754 defines it). Chains of KC terms, not of all K: one chain over the
 * 8,960 terms of a 1.5B model's down map erred about 6 times as much as a BLAS (measured against float64).
 * The weight is float32 rows or rows in a GGUF block format (block_codes.h), turned into float32 values a panel
 * of NR rows x KC terms at a time, on this thread's stack, laid out term by term (8 x 8 transposes): the one copy
 * of the weight a product makes per block of rows, where a BLAS called on row tiles packed each weight chunk
 * again for every 32-row tile.
 *
 * Blocking (GotoBLAS's): for each KC terms, for each MC rows of a (copied MR rows at a time, term by term, into a
 * per-thread buffer of MC x KC floats that stays in the core's L2 cache), for each NR-row panel of the weight (KC x
 * NR floats in L1), MR x NR tiles of c, their 12 accumulators in registers, which start from zero for each KC
 * terms and are added into c at the end. Measured against 4 x 24 and 3 x 32 tiles, KC = 512 and an unrolled term
 * loop (docs/benchmarks.md): none faster.
 */
#include <string.h>
#include "block_codes.h"
#include "column_threads.h"
#include "fma_tile.h"

#define KC 256      /* terms per panel: a multiple of every block format's run (32 or 64 values) */
#define MC 192      /* rows of a per block: MC x KC x 4 bytes = 192 KiB */

typedef struct {
    const float *a; int64_t lda, rows, depth;
    const float *w; int64_t w_stride;           /* float32 weight rows, or 0 */
    code_row_t codes; int64_t code_stride, scale_stride;
    const float *bias; float *c; int64_t ldc;
    int64_t first_col, end_col;
} part_t;

/* weight rows [n, n + cols) x terms [k0, k0 + kc) into panel[k * NR + j] (rows past cols: zeros) */
static void pack_panel(const part_t *p, int64_t n, int64_t cols, int64_t k0, int64_t kc, float *panel) {
    float rows[NR * KC] __attribute__((aligned(32)));
    const float *source = rows;
    int64_t stride = KC;
    if (p->w && cols == NR) {
        source = p->w + n * p->w_stride + k0;
        stride = p->w_stride;
    } else {
        for (int64_t j = 0; j < NR; j++) {
            float *row = rows + j * KC;
            if (j >= cols) {
                memset(row, 0, kc * sizeof(float));
            } else if (p->w) {
                memcpy(row, p->w + (n + j) * p->w_stride + k0, kc * sizeof(float));
            } else {
                code_row_t r = p->codes;
                r.codes += (n + j) * p->code_stride;
                r.scale += (n + j) * p->scale_stride;
                if (r.offset) r.offset += (n + j) * p->scale_stride;
                code_row_values(&r, k0, kc, row);
            }
        }
    }
    int64_t whole = kc & ~7L;
    for (int64_t k = 0; k < whole; k += 8)
        for (int64_t j = 0; j < NR; j += 8) transpose8(source + j * stride + k, stride, panel + k * NR + j, NR);
    for (int64_t k = whole; k < kc; k++)
        for (int64_t j = 0; j < NR; j++) panel[k * NR + j] = source[j * stride + k];
}

/* a tile of packed rows (a[k * MR + i]) times a panel (panel[k * NR + j]) */
static void tile_rows(const float *a, const float *panel, int64_t kc, float *c, int64_t ldc, int first,
                      int64_t rows) {
    fma_tile_rows(a, 1, MR, panel, NR, kc, c, ldc, first, rows);
}

/* rows [m0, m0 + mc) x terms [k0, k0 + kc) of a into packed[t * kc * MR + k * MR + i] for row m0 + t * MR + i */
static void pack_rows(const part_t *p, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float *packed) {
    for (int64_t t = 0; t * MR < mc; t++) {
        int64_t rows = mc - t * MR < MR ? mc - t * MR : MR;
        float *out = packed + t * kc * MR;
        for (int64_t i = 0; i < rows; i++) {
            const float *row = p->a + (m0 + t * MR + i) * p->lda + k0;
            for (int64_t k = 0; k < kc; k++) out[k * MR + i] = row[k];
        }
    }
}

/* the columns [first_col, end_col) of c */
static void multiply_part(const part_t *p) {
    static __thread float packed[MC * KC] __attribute__((aligned(32)));
    float panel[KC * NR] __attribute__((aligned(32)));
    float edge[MR * NR];   /* a tile of the last panel, where fewer than NR columns remain */
    for (int64_t k0 = 0; k0 < p->depth; k0 += KC) {
        int64_t kc = p->depth - k0 < KC ? p->depth - k0 : KC;
        for (int64_t m0 = 0; m0 < p->rows; m0 += MC) {
            int64_t mc = p->rows - m0 < MC ? p->rows - m0 : MC;
            pack_rows(p, m0, mc, k0, kc, packed);
            for (int64_t n = p->first_col; n < p->end_col; n += NR) {
                int64_t cols = p->end_col - n < NR ? p->end_col - n : NR;
                pack_panel(p, n, cols, k0, kc, panel);
                for (int64_t m = m0; m < m0 + mc; m += MR) {
                    int64_t rows = m0 + mc - m < MR ? m0 + mc - m : MR;
                    const float *a = packed + (m - m0) * kc;
                    float *c = p->c + m * p->ldc + n;
                    if (cols == NR) {
                        tile_rows(a, panel, kc, c, p->ldc, k0 == 0, rows);
                        continue;
                    }
                    for (int64_t i = 0; i < rows; i++)   /* the same lanes' chains, through a full-width tile */
                        for (int64_t j = 0; j < NR; j++) edge[i * NR + j] = j < cols ? c[i * p->ldc + j] : 0.0f;
                    tile_rows(a, panel, kc, edge, NR, k0 == 0, rows);
                    for (int64_t i = 0; i < rows; i++) memcpy(c + i * p->ldc, edge + i * NR, cols * sizeof(float));
                }
            }
        }
    }
    if (p->bias)
        for (int64_t m = 0; m < p->rows; m++)
            for (int64_t n = p->first_col; n < p->end_col; n++) p->c[m * p->ldc + n] += p->bias[n];
}

static void *multiply_part_thread(void *arg) {
    multiply_part((const part_t *)arg);
    return 0;
}

/* c [rows, cols] = a [rows, depth] w^T (+ bias [cols]), w a float32 [cols, depth] (w_float, w_stride) or rows of
 * codes; the columns split among `threads` threads in whole panels */
void float_gemm(const float *a, int64_t lda, int64_t rows, int64_t depth, const float *w_float, int64_t w_stride,
                const uint8_t *codes, int64_t code_stride, const float *scale, const float *offset,
                int64_t scale_stride, int64_t group, int64_t half, int32_t shift, const float *bias, float *c,
                int64_t ldc, int64_t cols, int threads) {
    part_t parts[MAX_THREADS];
    threads = thread_count(threads);
    int64_t per_thread = columns_per_thread(cols, threads, NR);
    int count = 0;
    for (int64_t first = 0; first < cols && count < threads; first += per_thread, count++)
        parts[count] = (part_t){a, lda, rows, depth, w_float, w_stride,
                                {codes, scale, offset, group, half, shift}, code_stride, scale_stride,
                                bias, c, ldc, first, first + per_thread < cols ? first + per_thread : cols};
    run_parts(parts, sizeof parts[0], count, multiply_part_thread);
}
