/* The values of a weight row kept in a GGUF block format (judge_engine/layers/block_weight.py's BlockRows), for the
 * kernels that read such a weight (block_rows.c, float_gemm.c).
 *
 * value[k] = (float)code(k) * scale[k / group] (+ offset[k / group]), two roundings in that order, as torch's
 * copy_, mul_ and add_ do them (the kernels are compiled with -ffp-contract=off: never one fused multiply-add), so
 * a value is the torch route's to the bit. code(k): an int8 code, or a 4-bit code packed two to a byte (in each run
 * of 2 * half values the first half in the low nibbles, the next half in the high nibbles) minus ``shift``. group
 * and half are powers of two of at least 16 (16 or 32 in every format read; block_weight.py checks), so the 8 lanes
 * of a store never straddle a group and 16 bytes never straddle a run.
 */
#ifndef BLOCK_CODES_H
#define BLOCK_CODES_H

#include <immintrin.h>
#include <stdint.h>

typedef struct {
    const uint8_t *codes;    /* the row's codes: int8, or 4-bit pairs */
    const float *scale;      /* the row's scales, one per group */
    const float *offset;     /* the row's offsets, or 0 */
    int64_t group, half;     /* half 0: one int8 code per byte */
    int32_t shift;
} code_row_t;

static inline void store8(float *out, __m128i codes8, int is_signed, __m256i shift, const float *scale,
                          const float *offset, int64_t g) {
    __m256i q = is_signed ? _mm256_cvtepi8_epi32(codes8) : _mm256_sub_epi32(_mm256_cvtepu8_epi32(codes8), shift);
    __m256 value = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(scale[g]));
    if (offset)
        value = _mm256_add_ps(value, _mm256_set1_ps(offset[g]));
    _mm256_storeu_ps(out, value);
}

/* values [first, first + count) of the row into out; first and count are multiples of 2 * half (and of 16) */
static inline void code_row_values(const code_row_t *row, int64_t first, int64_t count, float *out) {
    const __m128i low_nibbles = _mm_set1_epi8(0x0F);
    const __m256i shift8 = _mm256_set1_epi32(row->shift);
    const int g_bits = __builtin_ctzll(row->group);
    const int64_t half = row->half;
    if (half) {
        /* 16 bytes at a time: their low nibbles are 16 codes of a run's first half, their high the second's */
        for (int64_t run = first; run < first + count; run += 2 * half) {
            const uint8_t *bytes = row->codes + run / 2;
            for (int64_t j = 0; j < half; j += 16) {
                __m128i b = _mm_loadu_si128((const __m128i *)(bytes + j));
                __m128i lo = _mm_and_si128(b, low_nibbles), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low_nibbles);
                int64_t k = run + j, h = run + half + j;
                float *o = out - first;
                store8(o + k, lo, 0, shift8, row->scale, row->offset, k >> g_bits);
                store8(o + k + 8, _mm_srli_si128(lo, 8), 0, shift8, row->scale, row->offset, (k + 8) >> g_bits);
                store8(o + h, hi, 0, shift8, row->scale, row->offset, h >> g_bits);
                store8(o + h + 8, _mm_srli_si128(hi, 8), 0, shift8, row->scale, row->offset, (h + 8) >> g_bits);
            }
        }
    } else {
        for (int64_t k = first; k < first + count; k += 8)
            store8(out + (k - first), _mm_loadl_epi64((const __m128i *)(row->codes + k)), 1, shift8, row->scale,
                   row->offset, k >> g_bits);
    }
}

#endif
