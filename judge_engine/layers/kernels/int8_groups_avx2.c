/* int8 products with scales per group of terms, for CPUs with AVX2 (judge_engine/layers/int8_avx2.py builds this
 * file once; int8_linear.py calls it for each product of an int8 linear map where the CPU has no AVX-512 VNNI).
 *
 * c[m, n] = ((0 + (P_0 * s[m, 0]) * ws[n, 0]) + (P_1 * s[m, 1]) * ws[n, 1]) + ...,
 * P_g the exact integer sum over the g-th group of terms of a[m, k] * w[n, k] (int8, a in [-128, 127], w in
 * [-127, 127], a group of at most 1024 terms: |P_g| < 2^24, exact in float32), multiplied by the row's scale for
 * the group, then by the output channel's, and added, one rounding each, groups in order: int8_groups_vnni.c's
 * arithmetic, so the same bits as it and as torch's slices.
 *
 * The layout of int8_groups_vnni.c: each 32-bit lane of an accumulator is one output column, fed four terms at a
 * time (the weight packed four terms to a lane, four bytes of a row broadcast), so a group's sums are in the lanes
 * at the group's end, with no horizontal additions. AVX2 has no vpdpbusd: vpmaddubsw multiplies |a| (unsigned) by
 * w with a's sign moved onto it (vpsignb) and adds adjacent pairs into int16, at most 2 * 128 * 127 = 32512 in
 * magnitude, so never saturated; vpmaddwd by ones adds the pairs into the int32 lanes.
 *
 * Blocking as int8_groups_vnni.c's: blocks of whole groups (KC_TERMS terms at most) and MC rows, packed; panels of
 * NR weight rows; MR x NR tiles, 8 int32 accumulators in registers, the tile's float sums in a local array.
 */
#include <immintrin.h>
#include "int8_groups.h"

#define MR 2          /* rows of a per tile */
#define NV 4          /* 8-lane vectors of outputs per tile: 8 accumulators, 4 weight vectors, a's two broadcasts,
                         ones and a product: the 16 ymm registers. 2 x 32 tiles ran 190-223 GFLOP/s on the 1.5B
                         judge's shapes (a 2-core Zen 4, 2 threads), 4 x 16 ones 161-176 */
#define NR (8 * NV)   /* weight rows (outputs) per panel */
#define KC_TERMS 2048 /* terms per block, rounded down to whole groups (at least one) */
#define MC 256        /* rows of a per block */
#define MAX_UNITS ((KC_TERMS > MAX_GROUP ? KC_TERMS : MAX_GROUP) / 4)   /* 4-term units per block, at most */
_Static_assert(MC % MR == 0, "a block's rows fill whole tiles: pack_rows writes ceil(mc / MR) * MR rows");


/* each byte's magnitude, as an unsigned byte (|-128| = 128): a negative byte b becomes ~b + 1, which never carries
 * into the next byte (~b is at most 127) */
static inline uint32_t magnitudes(uint32_t value) {
    uint32_t negative = (value & 0x80808080u) >> 7;
    return (value ^ (negative * 0xFFu)) + negative;
}

/* rows [m0, m0 + mc) x terms [k0, k0 + kc) of a into values[t * units * MR + u * MR + i] (row m0 + t * MR + i,
 * terms k0 + 4u .. 4u + 3) and their magnitudes at the same places; rows past mc in the last tile are zeros */
static void pack_rows(const part_t *p, int64_t m0, int64_t mc, int64_t k0, int64_t kc, uint32_t *values,
                      uint32_t *sizes) {
    int64_t units = (kc + 3) / 4, whole = kc / 4;
    for (int64_t t = 0; t * MR < mc; t++) {
        for (int64_t i = 0; i < MR; i++) {
            uint32_t *out = values + t * units * MR + i, *out_sizes = sizes + t * units * MR + i;
            if (t * MR + i >= mc) {
                for (int64_t u = 0; u < units; u++) out[u * MR] = out_sizes[u * MR] = 0;
                continue;
            }
            const int8_t *row = p->a + (m0 + t * MR + i) * p->lda + k0;
            for (int64_t u = 0; u < units; u++) {
                uint32_t value;
                if (u < whole) memcpy(&value, row + 4 * u, 4);
                else value = unit(row, 4 * u, kc, 0);
                out[u * MR] = value;
                out_sizes[u * MR] = magnitudes(value);
            }
        }
    }
}

/* weight rows [n, n + cols) x terms [k0, k0 + kc) into panel[u * NR + j], and channel_scales[g * NR + j] the row's
 * scale for the block's g-th group (rows past cols: zeros) */
static void pack_panel(const part_t *p, int64_t n, int64_t cols, int64_t k0, int64_t kc, uint32_t *panel,
                       float *channel_scales) {
    int64_t units = (kc + 3) / 4, groups = (kc + p->group - 1) / p->group;
    for (int64_t j = 0; j < NR; j++) {
        if (j >= cols) {
            for (int64_t u = 0; u < units; u++) panel[u * NR + j] = 0;
        } else {
            const int8_t *row = p->w + (n + j) * p->ldw + k0;
            for (int64_t u = 0; u < units; u++) {
                if (4 * u + 4 <= kc) memcpy(panel + u * NR + j, row + 4 * u, 4);
                else panel[u * NR + j] = unit(row, 4 * u, kc, 0);
            }
        }
        for (int64_t g = 0; g < groups; g++)
            channel_scales[g * NR + j] = j < cols ? p->weight_scales[(n + j) * p->ldws + k0 / p->group + g] : 0.0f;
    }
}

/* c[0:rows, 0:cols] = (first ? 0 : c) + the block's groups in order, each group's integer sums times the row's
 * scale, then the channel's; rows <= MR, a constant in each inlined copy */
static inline __attribute__((always_inline)) void tile(const part_t *p, const uint32_t *values,
                                                       const uint32_t *sizes, const uint32_t *panel,
                                                       const float *channel_scales, int64_t kc, int64_t m,
                                                       int64_t first_group, float *c, int64_t cols, int first,
                                                       const int rows) {
    float sums[MR][NR] __attribute__((aligned(32)));
    for (int i = 0; i < rows; i++)
        for (int64_t j = 0; j < NR; j++) sums[i][j] = first || j >= cols ? 0.0f : c[i * p->ldc + j];
    const __m256i ones = _mm256_set1_epi16(1);
    int64_t units = (kc + 3) / 4, group_units = p->group / 4;
    for (int64_t g = 0, u0 = 0; u0 < units; g++, u0 += group_units) {
        int64_t u1 = u0 + group_units < units ? u0 + group_units : units;
        __m256i acc[MR][NV];
        for (int i = 0; i < rows; i++)
            for (int h = 0; h < NV; h++) acc[i][h] = _mm256_setzero_si256();
        for (int64_t u = u0; u < u1; u++) {
            __m256i w[NV];
            for (int h = 0; h < NV; h++) w[h] = _mm256_load_si256((const __m256i *)(panel + u * NR + 8 * h));
            for (int i = 0; i < rows; i++) {
                __m256i x = _mm256_set1_epi32((int32_t)values[u * MR + i]);
                __m256i x_size = _mm256_set1_epi32((int32_t)sizes[u * MR + i]);
                for (int h = 0; h < NV; h++) {
                    __m256i pairs = _mm256_maddubs_epi16(x_size, _mm256_sign_epi8(w[h], x));
                    acc[i][h] = _mm256_add_epi32(acc[i][h], _mm256_madd_epi16(pairs, ones));
                }
            }
        }
        for (int i = 0; i < rows; i++) {
            __m256 scale = _mm256_set1_ps(p->scales[(m + i) * p->lds + first_group + g]);
            for (int h = 0; h < NV; h++) {
                __m256 scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][h]), scale);
                scaled = _mm256_mul_ps(scaled, _mm256_load_ps(channel_scales + g * NR + 8 * h));
                _mm256_store_ps(sums[i] + 8 * h, _mm256_add_ps(_mm256_load_ps(sums[i] + 8 * h), scaled));
            }
        }
    }
    for (int i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols && j < NR; j++) c[i * p->ldc + j] = sums[i][j];
}

/* one case per row count; a constant row count in each copy, so that the loops above unroll into registers */
#define TILE_CASE(n) \
    case n: if (n <= MR) tile(p, values, sizes, panel, channel_scales, kc, m, first_group, c, cols, first, n); break;
static void tile_rows(const part_t *p, const uint32_t *values, const uint32_t *sizes, const uint32_t *panel,
                      const float *channel_scales, int64_t kc, int64_t m, int64_t first_group, float *c, int64_t cols,
                      int first, int64_t rows) {
    switch (rows) {
        TILE_CASE(4) TILE_CASE(3) TILE_CASE(2) TILE_CASE(1)
    }
}

/* the columns [first_col, end_col) of c */
static void multiply_part(const part_t *p) {
    static __thread uint32_t values[MC * MAX_UNITS] __attribute__((aligned(32)));
    static __thread uint32_t sizes[MC * MAX_UNITS] __attribute__((aligned(32)));
    uint32_t panel[MAX_UNITS * NR] __attribute__((aligned(32)));
    float channel_scales[MAX_UNITS * NR] __attribute__((aligned(32)));   /* a group per unit at most */
    int64_t block = KC_TERMS / p->group * p->group;
    if (block == 0) block = p->group;
    for (int64_t k0 = 0; k0 < p->depth; k0 += block) {
        int64_t kc = p->depth - k0 < block ? p->depth - k0 : block;
        for (int64_t m0 = 0; m0 < p->rows; m0 += MC) {
            int64_t mc = p->rows - m0 < MC ? p->rows - m0 : MC;
            pack_rows(p, m0, mc, k0, kc, values, sizes);
            for (int64_t n = p->first_col; n < p->end_col; n += NR) {
                int64_t cols = p->end_col - n < NR ? p->end_col - n : NR;
                pack_panel(p, n, cols, k0, kc, panel, channel_scales);
                for (int64_t m = m0; m < m0 + mc; m += MR) {
                    int64_t rows = m0 + mc - m < MR ? m0 + mc - m : MR, offset = (m - m0) * ((kc + 3) / 4);
                    tile_rows(p, values + offset, sizes + offset, panel, channel_scales, kc, m, k0 / p->group,
                              p->c + m * p->ldc + n, cols, k0 == 0, rows);
                }
            }
        }
    }
}

static void *multiply_part_thread(void *arg) {
    multiply_part((const part_t *)arg);
    return 0;
}

/* c = the grouped products of a and w (int8_groups.h's run_grouped, in whole panels of NR columns). The arguments of
 * int8_groups_vnni.c's entry point, in its order: int8_linear.py calls either alike. */
int int8_groups_avx2(const int8_t *a, int64_t lda, const float *scales, int64_t lds, int64_t rows, int64_t depth,
                     int64_t group, const int8_t *w, int64_t ldw, const float *weight_scales, int64_t ldws, float *c,
                     int64_t ldc, int64_t cols, int threads) {
    return run_grouped(a, lda, scales, lds, rows, depth, group, w, ldw, weight_scales, ldws, c, ldc, cols, threads,
                       NR, multiply_part_thread);
}
