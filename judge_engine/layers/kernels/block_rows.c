/* Rebuild float32 rows of a weight kept in a GGUF block format (judge_engine/layers/block_weight.py's BlockRows),
 * for CPUs with AVX2; block_weight.py builds this file once (layers/c_kernels.py) and calls it for each chunk.
 *
 * out[r, k] = (float)code(r, k) * scale[r, k / group] (+ offset[r, k / group]), two roundings in that order, as
 * torch's copy_, mul_ and add_ do them (compiled with -ffp-contract=off: never one fused multiply-add), so the
 * result is the torch route's to the bit. code(r, k): an int8 code, or a 4-bit code packed two to a byte (in each
 * run of 2 * half values the first half in the low nibbles, the next half in the high nibbles) minus ``shift``.
 * group and half are powers of two of at least 16 (16 or 32 in every format read; block_weight.py checks), so the
 * 8 lanes of a store never straddle a group and 16 bytes never straddle a run.
 *
 * One thread: a chunk takes about 0.1-0.2 ms, and starting a thread cost about as much on the machines measured.
 */
#include <immintrin.h>
#include <stdint.h>

static inline void store8(float *out, __m128i codes8, int is_signed, __m256i shift, const float *scale,
                          const float *offset, int64_t g) {
    __m256i q = is_signed ? _mm256_cvtepi8_epi32(codes8) : _mm256_sub_epi32(_mm256_cvtepu8_epi32(codes8), shift);
    __m256 value = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(scale[g]));
    if (offset)
        value = _mm256_add_ps(value, _mm256_set1_ps(offset[g]));
    _mm256_storeu_ps(out, value);
}

void block_rows(const uint8_t *codes, int64_t code_stride, const float *scale, const float *offset,
                int64_t scale_stride, float *out, int64_t out_stride, int64_t rows, int64_t cols, int64_t group,
                int64_t half, int32_t shift) {
    const __m128i low_nibbles = _mm_set1_epi8(0x0F);
    const __m256i shift8 = _mm256_set1_epi32(shift);
    const int g_bits = __builtin_ctzll(group);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row_codes = codes + r * code_stride;
        const float *row_scale = scale + r * scale_stride;
        const float *row_offset = offset ? offset + r * scale_stride : 0;
        float *o = out + r * out_stride;
        if (half) {
            /* 16 bytes at a time: their low nibbles are 16 codes of a run's first half, their high the second's */
            for (int64_t run = 0; run < cols; run += 2 * half) {
                const uint8_t *bytes = row_codes + run / 2;
                for (int64_t j = 0; j < half; j += 16) {
                    __m128i b = _mm_loadu_si128((const __m128i *)(bytes + j));
                    __m128i lo = _mm_and_si128(b, low_nibbles), hi = _mm_and_si128(_mm_srli_epi16(b, 4), low_nibbles);
                    int64_t k = run + j, h = run + half + j;
                    store8(o + k, lo, 0, shift8, row_scale, row_offset, k >> g_bits);
                    store8(o + k + 8, _mm_srli_si128(lo, 8), 0, shift8, row_scale, row_offset, (k + 8) >> g_bits);
                    store8(o + h, hi, 0, shift8, row_scale, row_offset, h >> g_bits);
                    store8(o + h + 8, _mm_srli_si128(hi, 8), 0, shift8, row_scale, row_offset, (h + 8) >> g_bits);
                }
            }
        } else {
            for (int64_t k = 0; k < cols; k += 8)
                store8(o + k, _mm_loadl_epi64((const __m128i *)(row_codes + k)), 1, shift8, row_scale, row_offset,
                       k >> g_bits);
        }
    }
}
