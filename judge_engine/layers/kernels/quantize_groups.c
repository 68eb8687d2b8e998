/* int8 codes of float32 activations with one scale per group of consecutive values of a row, in one pass over the
 * row (judge_engine/layers/int8_activations.py builds this file once): the same values, bit for bit, as
 * int8_linear.py's quantization in torch operations, which made several passes and cost a tenth of the small
 * judge's time.
 *
 * For each group (the last one of a row may be shorter): amax = max |x|, inverse = (1 / max(amax, 1e-30)) * 127,
 * code = round-half-to-even(x * inverse), scale = amax / 127. Every one of these is one IEEE operation or exact
 * (a max, a negation), so the bits cannot depend on the order or the SIMD width. A value that is not finite makes
 * the call return -1 and leave the row to torch, whose codes for it are its own.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define QMAX 127.0f
#define TINY 1e-30f

/* max |x| of n values, or -1 where one is not finite */
static float group_amax(const float *x, int64_t n) {
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 infinity = _mm256_set1_ps(INFINITY);
    __m256 top = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    int64_t whole = n & ~7L;
    for (int64_t j = 0; j < whole; j += 8) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + j), magnitude);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, infinity, _CMP_NLT_UQ));   /* inf or NaN */
        top = _mm256_max_ps(top, a);
    }
    if (whole < n) {
        float tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        memcpy(tail, x + whole, (size_t)(n - whole) * sizeof(float));
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(tail), magnitude);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, infinity, _CMP_NLT_UQ));
        top = _mm256_max_ps(top, a);
    }
    if (_mm256_movemask_ps(bad)) return -1.0f;
    /* a max is exact, so the lanes may meet in any order */
    __m128 half = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
    half = _mm_max_ps(half, _mm_movehl_ps(half, half));
    half = _mm_max_ss(half, _mm_shuffle_ps(half, half, 1));
    return _mm_cvtss_f32(half);
}

/* 8 codes of x * inverse, rounded half to even (values within [-127.5, 127.5], so the packing never saturates) */
static int64_t eight_codes(__m256 x, __m256 inverse) {
    __m256 rounded = _mm256_round_ps(_mm256_mul_ps(x, inverse), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i words = _mm256_cvtps_epi32(rounded);
    __m128i halves = _mm_packs_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    return _mm_cvtsi128_si64(_mm_packs_epi16(halves, halves));
}

static void quantize_group(const float *x, int64_t n, float amax, int8_t *q) {
    /* (1 / amax) * 127, two roundings: torch computes a number divided by a tensor as the tensor's reciprocal
     * times the number, and these codes must be the ones it gave (an IEEE 127 / amax differs in a quarter of
     * cases, and moves about one code in 100,000 by one) */
    __m256 inverse = _mm256_set1_ps((1.0f / (amax > TINY ? amax : TINY)) * QMAX);
    int64_t whole = n & ~7L;
    for (int64_t j = 0; j < whole; j += 8) {
        int64_t codes = eight_codes(_mm256_loadu_ps(x + j), inverse);
        memcpy(q + j, &codes, 8);
    }
    if (whole < n) {
        float tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        memcpy(tail, x + whole, (size_t)(n - whole) * sizeof(float));
        int64_t codes = eight_codes(_mm256_loadu_ps(tail), inverse);
        memcpy(q + whole, &codes, (size_t)(n - whole));
    }
}

/* codes q [rows, depth] (row i at q + i * ldq) and scales [rows, ceil(depth / group)] (row i at scales + i * lds)
 * of x [rows, depth] (row i at x + i * ldx); 0, or -1 where a value is not finite (q and scales then partly
 * written) */
int quantize_groups(const float *x, int64_t ldx, int64_t rows, int64_t depth, int64_t group, int8_t *q,
                    int64_t ldq, float *scales, int64_t lds) {
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t start = 0, g = 0; start < depth; start += group, g++) {
            int64_t n = depth - start < group ? depth - start : group;
            const float *values = x + i * ldx + start;
            float amax = group_amax(values, n);
            if (amax < 0) return -1;
            quantize_group(values, n, amax, q + i * ldq + start);
            scales[i * lds + g] = amax / QMAX;
        }
    }
    return 0;
}
