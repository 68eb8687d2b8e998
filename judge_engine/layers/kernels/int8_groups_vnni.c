/* int8 products with scales per group of terms, for CPUs with AVX-512 VNNI (judge_engine/layers/int8_vnni.py
 * builds this file once; int8_linear.py calls it for each product of an int8 linear map).
 *
 * c[m, n] = ((0 + (P_0 * s[m, 0]) * ws[n, 0]) + (P_1 * s[m, 1]) * ws[n, 1]) + ...,
 * P_g = sum over the g-th group of terms of a[m, k] * w[n, k], the exact integer sum of the group (int8 a and w in
 * [-127, 127], a group of at most 1024 terms), turned into float exactly (|P_g| < 2^24), multiplied by the row's
 * scale for that group, then by the output channel's, and added, one rounding each, groups in order: the operations
 * torch's route (the same sums from int8_matmul, then mul_, mul_ and add_) does in the same order, so the two routes
 * give the same bits, and a row's result depends on that row alone (batch invariance).
 *
 * vpdpbusd multiplies unsigned by signed bytes, four products into each int32 lane: the kernel feeds it a + 128
 * (a ^ 0x80, in [1, 255]) and w, starting each group's sums from -128 * (the group's sum of w[n, k]).
 * Every lane sum stays below 2^31 (1024 * 255 * 127 < 2^25), and integer sums do not depend on their order, so the
 * blocking and the threads change the speed, never a bit.
 *
 * Blocking as float_gemm.c's: for each block of whole groups (KC terms at most), for each MC rows of a (packed, four
 * terms to an int32, for broadcasting), for each panel of NR weight rows (packed four terms to a lane, the column
 * corrections beside it), MR x NR tiles: 12 int32 accumulators for the current group and 12 float accumulators for
 * the row sums, in registers. Measured on a 2-core AMD EPYC (Zen 4), 512-row products of the 1.5B judge's shapes,
 * 2 threads: 4 x 48 tiles, 2,048-term blocks and 384-row blocks ran 560-750 GFLOP/s, where 6 x 32 tiles and
 * 512-term blocks ran 435-520 (torch._int_mm of the same operands with one scale per row: 590-780).
 */
#include <immintrin.h>
#include "int8_groups.h"

#define MR 4          /* rows of a per tile */
#define NV 3          /* 16-lane vectors of outputs per tile: 12 int32 and 12 float accumulators, 3 weight vectors,
                         a broadcast */
#define NR (16 * NV)  /* weight rows (outputs) per panel */
#define KC_TERMS 2048 /* terms per block, rounded down to whole groups (at least one): each output's float sum is
                         read and written once per block */
#define MC 384        /* rows of a per block: MC x KC bytes = 768 KiB */
#define MAX_UNITS ((KC_TERMS > MAX_GROUP ? KC_TERMS : MAX_GROUP) / 4)   /* 4-term units per block, at most */
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))


/* acc + the four products of unsigned x and signed w in each int32 lane. In assembly: GCC 12 copied every
 * accumulator twice per step around the intrinsic (_mm512_dpbusd_epi32), twice the instructions of the loop. */
static inline VNNI __m512i dot4(__m512i acc, __m512i x, __m512i w) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
    return acc;
}

/* rows [m0, m0 + mc) x terms [k0, k0 + kc) of a + 128, into packed[t * units * MR + u * MR + i] (row m0 + t * MR + i,
 * terms k0 + 4u .. 4u + 3); rows past mc in the last tile are zeros (results never stored) */
static void pack_rows(const part_t *p, int64_t m0, int64_t mc, int64_t k0, int64_t kc, int32_t *packed) {
    int64_t units = (kc + 3) / 4, whole = kc / 4;
    for (int64_t t = 0; t * MR < mc; t++) {
        int32_t *out = packed + t * units * MR;
        for (int64_t i = 0; i < MR; i++) {
            if (t * MR + i >= mc) {
                for (int64_t u = 0; u < units; u++) out[u * MR + i] = 0;
                continue;
            }
            const int8_t *row = p->a + (m0 + t * MR + i) * p->lda + k0;
            for (int64_t u = 0; u < whole; u++) {
                uint32_t value;
                memcpy(&value, row + 4 * u, 4);
                out[u * MR + i] = (int32_t)(value ^ 0x80808080u);
            }
            if (whole < units) out[whole * MR + i] = unit(row, 4 * whole, kc, 0x80808080u);
        }
    }
}

/* weight rows [n, n + cols) x terms [k0, k0 + kc) into panel[u * NR + j], corrections[g * NR + j] = -128 * the
 * sum of row n + j over the block's g-th group and channel_scales[g * NR + j] its scale for that group (rows past
 * cols: zeros) */
static VNNI void pack_panel(const part_t *p, int64_t n, int64_t cols, int64_t k0, int64_t kc, int32_t *panel,
                            int32_t *corrections, float *channel_scales) {
    int64_t units = (kc + 3) / 4, whole = kc / 4, group_units = p->group / 4;
    for (int64_t j = 0; j < NR; j++) {
        if (j >= cols) {
            for (int64_t u = 0; u < units; u++) panel[u * NR + j] = 0;
            continue;
        }
        const int8_t *row = p->w + (n + j) * p->ldw + k0;
        for (int64_t u = 0; u < whole; u++) memcpy(panel + u * NR + j, row + 4 * u, 4);
        if (whole < units) panel[whole * NR + j] = unit(row, 4 * whole, kc, 0);
    }
    /* a group's sums of w: vpdpbusd of ones (unsigned) and the packed terms */
    const __m512i ones = _mm512_set1_epi8(1), times_128 = _mm512_set1_epi32(-128);
    for (int64_t g = 0, u0 = 0; u0 < units; g++, u0 += group_units) {
        int64_t u1 = u0 + group_units < units ? u0 + group_units : units;
        for (int64_t j = 0; j < NR; j++)
            channel_scales[g * NR + j] = j < cols ? p->weight_scales[(n + j) * p->ldws + k0 / p->group + g] : 0.0f;
        for (int h = 0; h < NV; h++) {
            __m512i sum = _mm512_setzero_si512();
            for (int64_t u = u0; u < u1; u++) sum = dot4(sum, ones, _mm512_load_si512(panel + u * NR + 16 * h));
            _mm512_store_si512(corrections + g * NR + 16 * h, _mm512_mullo_epi32(sum, times_128));
        }
    }
}

/* c[0:rows, 0:NR] (masked to the panel's columns) = (first ? 0 : c) + the block's groups in order, each group's
 * integer sums times the row's scale, then the channel's; rows <= MR, a constant in each inlined copy */
static inline __attribute__((always_inline)) VNNI void tile(const part_t *p, const int32_t *a, const int32_t *panel,
                                                            const int32_t *corrections, const float *channel_scales,
                                                            int64_t kc, int64_t m, int64_t first_group, float *c,
                                                            const __mmask16 *mask, int first, const int rows) {
    __m512 sum[MR][NV];
    __m512i acc[MR][NV];
    for (int i = 0; i < rows; i++)
        for (int h = 0; h < NV; h++)
            sum[i][h] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[h], c + i * p->ldc + 16 * h);
    int64_t units = (kc + 3) / 4, group_units = p->group / 4;
    for (int64_t g = 0, u0 = 0; u0 < units; g++, u0 += group_units) {
        int64_t u1 = u0 + group_units < units ? u0 + group_units : units;
        for (int i = 0; i < rows; i++)   /* from the column corrections: the sums of a, not of a + 128, at the end */
            for (int h = 0; h < NV; h++) acc[i][h] = _mm512_load_si512(corrections + g * NR + 16 * h);
        for (int64_t u = u0; u < u1; u++) {
            __m512i w[NV];
            for (int h = 0; h < NV; h++) w[h] = _mm512_load_si512(panel + u * NR + 16 * h);
            for (int i = 0; i < rows; i++) {
                __m512i x = _mm512_set1_epi32(a[u * MR + i]);
                for (int h = 0; h < NV; h++) acc[i][h] = dot4(acc[i][h], x, w[h]);
            }
        }
        for (int i = 0; i < rows; i++) {
            __m512 scale = _mm512_set1_ps(p->scales[(m + i) * p->lds + first_group + g]);
            for (int h = 0; h < NV; h++) {
                __m512 scaled = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[i][h]), scale);
                scaled = _mm512_mul_ps(scaled, _mm512_load_ps(channel_scales + g * NR + 16 * h));
                sum[i][h] = _mm512_add_ps(sum[i][h], scaled);
            }
        }
    }
    for (int i = 0; i < rows; i++)
        for (int h = 0; h < NV; h++) _mm512_mask_storeu_ps(c + i * p->ldc + 16 * h, mask[h], sum[i][h]);
}

/* one case per row count up to 8; those above MR are never reached */
#define TILE_CASE(n) \
    case n: if (n <= MR) tile(p, a, panel, corrections, channel_scales, kc, m, first_group, c, mask, first, n); break;
static VNNI void tile_rows(const part_t *p, const int32_t *a, const int32_t *panel, const int32_t *corrections,
                           const float *channel_scales, int64_t kc, int64_t m, int64_t first_group, float *c,
                           const __mmask16 *mask, int first, int64_t rows) {
    switch (rows) {   /* a constant row count in each copy, so that the loops above unroll into registers */
        TILE_CASE(8) TILE_CASE(7) TILE_CASE(6) TILE_CASE(5) TILE_CASE(4) TILE_CASE(3) TILE_CASE(2) TILE_CASE(1)
    }
}

static __mmask16 lanes(int64_t count) {
    return count >= 16 ? (__mmask16)0xFFFF : count <= 0 ? (__mmask16)0 : (__mmask16)((1u << count) - 1);
}

/* the columns [first_col, end_col) of c */
static VNNI void multiply_part(const part_t *p) {
    static __thread int32_t packed[MC * MAX_UNITS] __attribute__((aligned(64)));
    int32_t panel[MAX_UNITS * NR] __attribute__((aligned(64)));
    int32_t corrections[MAX_UNITS * NR] __attribute__((aligned(64)));   /* a group per unit at most */
    float channel_scales[MAX_UNITS * NR] __attribute__((aligned(64)));
    int64_t block = KC_TERMS / p->group * p->group;
    if (block == 0) block = p->group;
    for (int64_t k0 = 0; k0 < p->depth; k0 += block) {
        int64_t kc = p->depth - k0 < block ? p->depth - k0 : block;
        for (int64_t m0 = 0; m0 < p->rows; m0 += MC) {
            int64_t mc = p->rows - m0 < MC ? p->rows - m0 : MC;
            pack_rows(p, m0, mc, k0, kc, packed);
            for (int64_t n = p->first_col; n < p->end_col; n += NR) {
                int64_t cols = p->end_col - n < NR ? p->end_col - n : NR;
                pack_panel(p, n, cols, k0, kc, panel, corrections, channel_scales);
                __mmask16 mask[NV];
                for (int h = 0; h < NV; h++) mask[h] = lanes(cols - 16 * h);
                for (int64_t m = m0; m < m0 + mc; m += MR) {
                    int64_t rows = m0 + mc - m < MR ? m0 + mc - m : MR;
                    tile_rows(p, packed + (m - m0) * ((kc + 3) / 4), panel, corrections, channel_scales, kc, m,
                              k0 / p->group, p->c + m * p->ldc + n, mask, k0 == 0, rows);
                }
            }
        }
    }
}

static void *multiply_part_thread(void *arg) {
    multiply_part((const part_t *)arg);
    return 0;
}

/* c = the grouped products of a and w (int8_groups.h's run_grouped, in whole panels of NR columns). */
int int8_groups_vnni(const int8_t *a, int64_t lda, const float *scales, int64_t lds, int64_t rows, int64_t depth,
                     int64_t group, const int8_t *w, int64_t ldw, const float *weight_scales, int64_t ldws, float *c,
                     int64_t ldc, int64_t cols, int threads) {
    return run_grouped(a, lda, scales, lds, rows, depth, group, w, ldw, weight_scales, ldws, c, ldc, cols, threads,
                       NR, multiply_part_thread);
}
