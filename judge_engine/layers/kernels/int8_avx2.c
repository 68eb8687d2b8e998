/* Exact int8 x int8 -> int32 matrix products with AVX2 integer instructions, for CPUs where oneDNN's int8 kernels
 * are slow or saturate (judge_engine/layers/int8_avx2.py builds this file once and loads it with ctypes).
 *
 * c[m, n] = sum_k a[m, k] * b[n, k], both operands K-contiguous (activations [M, K], a weight [N, K] as stored).
 * (int8 linear maps' grouped products on AVX2: int8_groups_avx2.c.)
 * Exact for every a in [-128, 127] and b in [-127, 127]: vpmaddubsw multiplies |a| (unsigned) by b with a's sign
 * moved onto it (vpsignb), and adds adjacent pairs into int16 with saturation; a pair is at most 2 * 128 * 127 =
 * 32512 < 32767 in magnitude, so it never saturates. vpmaddwd by ones widens the pairs into int32 lanes. Integer
 * sums do not depend on their order, so the blocking and the threads below change the speed, never a bit.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>
#include "column_threads.h"

#define MR 2      /* rows of a per tile */
#define NR 4      /* rows of b (output columns) per tile: 8 accumulators, 4 rows of b, a, |a|, ones, a product:
                     the 16 ymm registers (3 x 4 and 4 x 3 spill, 4 x 2 measured no faster) */
#define MC 64     /* rows of a per block: MC x KC bytes of a stay in the core's L2 cache */
#define KC 2048   /* terms per block: NR x KC bytes of b stay in L1 while every tile of the block reads them */

static inline int32_t lane_sum(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* 32 products of x and y, summed four by four into 8 int32 lanes (x_abs is |x|) */
static inline __m256i dot32(__m256i x_abs, __m256i x, __m256i y, __m256i ones) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x_abs, _mm256_sign_epi8(y, x)), ones);
}

/* a rows x NR tile (rows <= MR) over kc terms (a multiple of 32), added into c */
static inline __attribute__((always_inline)) void tile_rows(const int8_t *a, long lda, const int8_t *b, long ldb,
                                                            int32_t *c, long ldc, const int rows, long kc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_si256();
    for (long k = 0; k < kc; k += 32) {
        __m256i y[NR];
        for (int j = 0; j < NR; j++) y[j] = _mm256_loadu_si256((const __m256i *)(b + j * ldb + k));
        for (int i = 0; i < rows; i++) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(a + i * lda + k));
            __m256i x_abs = _mm256_abs_epi8(x);
            for (int j = 0; j < NR; j++) acc[i][j] = _mm256_add_epi32(acc[i][j], dot32(x_abs, x, y[j], ones));
        }
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < NR; j++) c[i * ldc + j] += lane_sum(acc[i][j]);
}

static void tile(const int8_t *a, long lda, const int8_t *b, long ldb, int32_t *c, long ldc, long rows, long kc) {
    if (rows == MR)   /* a constant row count for whole tiles, so each loop above unrolls into registers */
        tile_rows(a, lda, b, ldb, c, ldc, MR, kc);
    else              /* the last rows of a block */
        tile_rows(a, lda, b, ldb, c, ldc, (int)rows, kc);
}

/* one output column (a row of b) for `rows` rows of a over kc terms (a multiple of 32), added into c */
static void column(const int8_t *a, long lda, const int8_t *b, int32_t *c, long ldc, long rows, long kc) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (long m = 0; m < rows; m++) {
        __m256i acc = _mm256_setzero_si256();
        for (long k = 0; k < kc; k += 32) {
            __m256i x = _mm256_loadu_si256((const __m256i *)(a + m * lda + k));
            __m256i y = _mm256_loadu_si256((const __m256i *)(b + k));
            acc = _mm256_add_epi32(acc, dot32(_mm256_abs_epi8(x), x, y, ones));
        }
        c[m * ldc] += lane_sum(acc);
    }
}

typedef struct {
    const int8_t *a, *b;
    int32_t *c;
    long rows, first_col, end_col, depth, lda, ldb, ldc;
} part_t;

/* the columns [first_col, end_col) of c */
static void multiply_part(const part_t *p) {
    long whole = p->depth & ~31L;
    for (long m = 0; m < p->rows; m++) memset(p->c + m * p->ldc + p->first_col, 0, (p->end_col - p->first_col) * 4);
    for (long k0 = 0; k0 < whole; k0 += KC) {
        long kc = whole - k0 < KC ? whole - k0 : KC;
        for (long m0 = 0; m0 < p->rows; m0 += MC) {
            long mc = p->rows - m0 < MC ? p->rows - m0 : MC;
            long n = p->first_col;
            for (; n + NR <= p->end_col; n += NR)
                for (long m = m0; m < m0 + mc; m += MR)
                    tile(p->a + m * p->lda + k0, p->lda, p->b + n * p->ldb + k0, p->ldb, p->c + m * p->ldc + n,
                         p->ldc, m0 + mc - m < MR ? m0 + mc - m : MR, kc);
            for (; n < p->end_col; n++)
                column(p->a + m0 * p->lda + k0, p->lda, p->b + n * p->ldb + k0, p->c + m0 * p->ldc + n, p->ldc, mc,
                       kc);
        }
    }
    for (long m = 0; m < p->rows; m++)   /* the last depth % 32 terms */
        for (long n = p->first_col; n < p->end_col; n++) {
            int32_t sum = 0;
            for (long k = whole; k < p->depth; k++) sum += (int32_t)p->a[m * p->lda + k] * (int32_t)p->b[n * p->ldb + k];
            p->c[m * p->ldc + n] += sum;
        }
}

static void *multiply_part_thread(void *arg) {
    multiply_part((const part_t *)arg);
    return 0;
}

/* c [rows, cols] = a [rows, depth] x b [cols, depth]^T, the columns split among `threads` threads */
void int8_avx2_matmul(const int8_t *a, const int8_t *b, int32_t *c, long rows, long cols, long depth, long lda,
                      long ldb, long ldc, int threads) {
    part_t parts[MAX_THREADS];
    threads = thread_count(threads);
    long per_thread = columns_per_thread(cols, threads, NR);
    int count = 0;
    for (long first = 0; first < cols && count < threads; first += per_thread, count++)
        parts[count] = (part_t){a, b, c, rows, first, first + per_thread < cols ? first + per_thread : cols, depth,
                                lda, ldb, ldc};
    run_parts(parts, sizeof parts[0], count, multiply_part_thread);
}
