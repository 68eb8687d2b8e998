/* The building blocks of the kernels whose every output is one chain of fused multiply-adds in a fixed order
 * (float_gemm.c, row_attention.c): a tile of up to MR x 16 outputs, each the chain over `terms` terms in order,
 * and the 8 x 8 transpose that lays weight rows out term by term for it.
 *
 * Output (i, j) of a tile is fma(a(i, k), w(k, j), ...) over k = 0, 1, ..., terms - 1 from zero: the same
 * operations in the same order whatever the other rows of the tile, its place, or the CPU (a fused multiply-add
 * rounds once, as IEEE 754 defines it), so a row's result depends on that row alone.
 */
#ifndef FMA_TILE_H
#define FMA_TILE_H

#include <immintrin.h>
#include <stdint.h>

#define MR 6        /* rows per tile: 6 x 2 accumulators, 2 weight vectors and a broadcast: 15 registers */
#define NR 16       /* outputs per tile row: two 8-lane vectors */

/* 8 x 8 floats: rows[i][0:8] (row i at rows + i * stride) into out[k * out_stride + i] */
static inline void transpose8(const float *rows, int64_t stride, float *out, int64_t out_stride) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(rows + i * stride);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4)
        for (int h = 0; h < 2; h++) {
            r[i + h] = _mm256_shuffle_ps(t[i + h], t[i + h + 2], 0x44);
            r[i + h + 2] = _mm256_shuffle_ps(t[i + h], t[i + h + 2], 0xEE);
        }
    /* r[0..3]: columns 0, 2, 1, 3 of rows 0-3 (in each 128-bit half: k and k + 4); r[4..7] the same for rows 4-7 */
    static const int order[4] = {0, 2, 1, 3};
    for (int q = 0; q < 4; q++) {
        int k = order[q];
        _mm256_storeu_ps(out + k * out_stride, _mm256_permute2f128_ps(r[q], r[q + 4], 0x20));
        _mm256_storeu_ps(out + (k + 4) * out_stride, _mm256_permute2f128_ps(r[q], r[q + 4], 0x31));
    }
}

/* c[i, 0:NR] = (first ? 0 : c[i]) + the chain over `terms` terms of a(i, k) = a[i * a_row + k * a_term] times
 * w(k, 0:NR) = w[k * w_term + 0:NR], for i < rows <= MR (a constant in each inlined copy, so the loops unroll
 * into registers) */
static inline __attribute__((always_inline)) void fma_tile(const float *a, int64_t a_row, int64_t a_term,
                                                           const float *w, int64_t w_term, int64_t terms, float *c,
                                                           int64_t ldc, int first, const int rows) {
    __m256 acc[MR][2];
    for (int i = 0; i < rows; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < terms; k++) {
        __m256 w0 = _mm256_loadu_ps(w + k * w_term), w1 = _mm256_loadu_ps(w + k * w_term + 8);
        for (int i = 0; i < rows; i++) {
            __m256 x = _mm256_broadcast_ss(a + i * a_row + k * a_term);
            acc[i][0] = _mm256_fmadd_ps(x, w0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(x, w1, acc[i][1]);
        }
    }
    for (int i = 0; i < rows; i++)
        for (int h = 0; h < 2; h++) {
            float *out = c + i * ldc + 8 * h;
            _mm256_storeu_ps(out, first ? acc[i][h] : _mm256_add_ps(_mm256_loadu_ps(out), acc[i][h]));
        }
}

/* fma_tile for `rows` rows (1 to MR), each row count its own inlined copy; always inlined itself, so that the
 * strides a caller passes as constants stay constants in the copies */
static inline __attribute__((always_inline)) void fma_tile_rows(const float *a, int64_t a_row, int64_t a_term,
                                                                const float *w, int64_t w_term, int64_t terms,
                                                                float *c, int64_t ldc, int first, int64_t rows) {
    switch (rows) {
        case 6: fma_tile(a, a_row, a_term, w, w_term, terms, c, ldc, first, 6); break;
        case 5: fma_tile(a, a_row, a_term, w, w_term, terms, c, ldc, first, 5); break;
        case 4: fma_tile(a, a_row, a_term, w, w_term, terms, c, ldc, first, 4); break;
        case 3: fma_tile(a, a_row, a_term, w, w_term, terms, c, ldc, first, 3); break;
        case 2: fma_tile(a, a_row, a_term, w, w_term, terms, c, ldc, first, 2); break;
        default: fma_tile(a, a_row, a_term, w, w_term, terms, c, ldc, first, 1); break;
    }
}

#endif
