/* Exact int8 x int8 -> int32 matrix products with AVX2 integer instructions, for CPUs where oneDNN's int8 kernels
 * are slow or saturate (judge_engine/layers/int8_avx2.py builds this file once and loads it with ctypes).
 *
 * c[m, n] = sum_k a[m, k] * b[n, k], both operands K-contiguous (activations [M, K], a weight [N, K] as stored);
 * and the grouped products of int8 linear maps (int8_avx2_grouped, below): each group's sums turned into float,
 * times the row's scale for the group, added group after group.
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

/* -- grouped products ------------------------------------------------------------------------------------------
 * c[m, n] = ((0 + P_0 * s[m, 0]) + P_1 * s[m, 1]) + ..., P_g the exact sum over the g-th group of terms (group a
 * multiple of 32, at most 1024: |P_g| < 2^24, exact in float32), one rounding per multiply and per add, groups in
 * order: the operations of judge_engine/layers/int8_linear.py's slices, so the same bits. The tiles above, with the
 * 8 lane sums of a 2 x 4 tile gathered into one vector at the end of each group (hadd) and the float sums kept in a
 * register across a block. */

typedef struct {
    const int8_t *a, *b;
    const float *scales;
    float *c;
    long rows, first_col, end_col, depth, group, lda, ldb, ldc, lds;
} grouped_part_t;

/* [r0c0 r0c1 r0c2 r0c3 r1c0 r1c1 r1c2 r1c3]: each accumulator's 8 lanes summed */
static inline __m256i tile_sums(__m256i acc[MR][NR]) {
    __m256i r0 = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0][0], acc[0][1]), _mm256_hadd_epi32(acc[0][2], acc[0][3]));
    __m256i r1 = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[1][0], acc[1][1]), _mm256_hadd_epi32(acc[1][2], acc[1][3]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(r0, r1, 0x20), _mm256_permute2x128_si256(r0, r1, 0x31));
}

/* a rows x NR tile (rows <= MR) of the grouped products over terms [k0, k0 + kc) (whole groups), added to the
 * tile's float sums in c, or written there when first */
static inline __attribute__((always_inline)) void grouped_tile_rows(const grouped_part_t *p, long m, long n, long k0,
                                                                    long kc, int first, const int rows) {
    const __m256i ones = _mm256_set1_epi16(1);
    float *c = p->c + m * p->ldc + n;
    __m256 sum = _mm256_setzero_ps();
    if (!first)
        sum = _mm256_set_m128(rows > 1 ? _mm_loadu_ps(c + p->ldc) : _mm_setzero_ps(), _mm_loadu_ps(c));
    for (long g0 = k0; g0 < k0 + kc; g0 += p->group) {
        long end = g0 + p->group < k0 + kc ? g0 + p->group : k0 + kc;
        long whole = g0 + ((end - g0) & ~31L);
        __m256i acc[MR][NR];
        for (int i = 0; i < MR; i++)
            for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_si256();
        for (long k = g0; k < whole; k += 32) {
            __m256i y[NR];
            for (int j = 0; j < NR; j++) y[j] = _mm256_loadu_si256((const __m256i *)(p->b + (n + j) * p->ldb + k));
            for (int i = 0; i < rows; i++) {
                __m256i x = _mm256_loadu_si256((const __m256i *)(p->a + (m + i) * p->lda + k));
                __m256i x_abs = _mm256_abs_epi8(x);
                for (int j = 0; j < NR; j++) acc[i][j] = _mm256_add_epi32(acc[i][j], dot32(x_abs, x, y[j], ones));
            }
        }
        __m256i sums = tile_sums(acc);
        if (whole < end) {   /* the group's last terms, fewer than 32 */
            int32_t tail[MR * NR] = {0};
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < NR; j++)
                    for (long k = whole; k < end; k++)
                        tail[i * NR + j] += (int32_t)p->a[(m + i) * p->lda + k] * (int32_t)p->b[(n + j) * p->ldb + k];
            sums = _mm256_add_epi32(sums, _mm256_loadu_si256((const __m256i *)tail));
        }
        long g = g0 / p->group;
        __m128 s0 = _mm_set1_ps(p->scales[m * p->lds + g]);
        __m128 s1 = rows > 1 ? _mm_set1_ps(p->scales[(m + 1) * p->lds + g]) : _mm_setzero_ps();
        sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), _mm256_set_m128(s1, s0)));
    }
    _mm_storeu_ps(c, _mm256_castps256_ps128(sum));
    if (rows > 1) _mm_storeu_ps(c + p->ldc, _mm256_extractf128_ps(sum, 1));
}

/* one output column n for rows [m0, m0 + rows) over terms [k0, k0 + kc), as grouped_tile_rows */
static void grouped_column(const grouped_part_t *p, long m0, long rows, long n, long k0, long kc, int first) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (long m = m0; m < m0 + rows; m++) {
        float sum = first ? 0.0f : p->c[m * p->ldc + n];
        for (long g0 = k0; g0 < k0 + kc; g0 += p->group) {
            long end = g0 + p->group < k0 + kc ? g0 + p->group : k0 + kc;
            long whole = g0 + ((end - g0) & ~31L);
            __m256i acc = _mm256_setzero_si256();
            for (long k = g0; k < whole; k += 32) {
                __m256i x = _mm256_loadu_si256((const __m256i *)(p->a + m * p->lda + k));
                __m256i y = _mm256_loadu_si256((const __m256i *)(p->b + n * p->ldb + k));
                acc = _mm256_add_epi32(acc, dot32(_mm256_abs_epi8(x), x, y, ones));
            }
            int32_t total = lane_sum(acc);
            for (long k = whole; k < end; k++) total += (int32_t)p->a[m * p->lda + k] * (int32_t)p->b[n * p->ldb + k];
            sum = sum + (float)total * p->scales[m * p->lds + g0 / p->group];
        }
        p->c[m * p->ldc + n] = sum;
    }
}

static void grouped_part(const grouped_part_t *p) {
    long block = KC / p->group * p->group;
    if (block == 0) block = p->group;
    for (long k0 = 0; k0 < p->depth; k0 += block) {
        long kc = p->depth - k0 < block ? p->depth - k0 : block;
        for (long m0 = 0; m0 < p->rows; m0 += MC) {
            long mc = p->rows - m0 < MC ? p->rows - m0 : MC;
            long n = p->first_col;
            for (; n + NR <= p->end_col; n += NR)
                for (long m = m0; m < m0 + mc; m += MR) {
                    if (m0 + mc - m >= MR) grouped_tile_rows(p, m, n, k0, kc, k0 == 0, MR);
                    else grouped_tile_rows(p, m, n, k0, kc, k0 == 0, 1);
                }
            for (; n < p->end_col; n++) grouped_column(p, m0, mc, n, k0, kc, k0 == 0);
        }
    }
}

static void *grouped_part_thread(void *arg) {
    grouped_part((const grouped_part_t *)arg);
    return 0;
}

/* c [rows, cols] (float32) = the grouped products of a [rows, depth] and b [cols, depth] with scales [rows,
 * ceil(depth / group)]; group a multiple of 32 up to 1024 (else -1, c untouched); the columns split among threads.
 * The arguments of int8_groups_vnni.c's entry point, in its order: int8_linear.py calls either alike. */
int int8_avx2_grouped(const int8_t *a, long lda, const float *scales, long lds, long rows, long depth, long group,
                      const int8_t *b, long ldb, float *c, long ldc, long cols, int threads) {
    if (group <= 0 || group % 32 != 0 || group > 1024) return -1;
    grouped_part_t parts[MAX_THREADS];
    threads = thread_count(threads);
    long per_thread = columns_per_thread(cols, threads, NR);
    int count = 0;
    for (long first = 0; first < cols && count < threads; first += per_thread, count++)
        parts[count] = (grouped_part_t){a, b, scales, c, rows, first, first + per_thread < cols ? first + per_thread : cols,
                                        depth, group, lda, ldb, ldc, lds};
    run_parts(parts, sizeof parts[0], count, grouped_part_thread);
    return 0;
}
