/* exp and log written out in IEEE operations (additions, multiplications, fused multiply-adds, rounding to an
 * integer), for the kernels whose results must be the same bits on every CPU that runs them (row_attention.c,
 * log_softmax.c): a library's exp or log picks its code by CPU (torch's by SIMD width, glibc's by version), and
 * rounds differently on each.
 *
 * exp_nonpositive(x), x <= 0 (softmax weights exp(s - max), tanh's exp(-2|y|)): x = n ln2 + r with |r| <= ln2 / 2
 * (ln2 in two parts, Cody and Waite), exp(r) by Cephes' degree-6 polynomial, times 2^n built in the exponent bits;
 * 0 below -87.33 (where 2^n leaves the normal floats), NaN for NaN. Within 2 ulp of exp (measured in the tests).
 * log_of_sum(s), s >= 1 (a sum of exps whose largest is exp(0) = 1): in double, s = m 2^e with m in
 * [sqrt(1/2), sqrt(2)), log m = 2 atanh((m - 1) / (m + 1)) by its series, rounded to float once.
 */
#ifndef EXP_LOG_H
#define EXP_LOG_H

#include <immintrin.h>
#include <math.h>

static inline __m256 exp_nonpositive(__m256 x) {
    const __m256 lowest = _mm256_set1_ps(-87.33654f);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
    /* n in [-126, 0] wherever x >= lowest: 2^n is (n + 127) << 23 */
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_max_ps(n, _mm256_set1_ps(-126.0f))),
                                                      _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
    return _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lowest, _CMP_LT_OQ));
}

static inline float log_of_sum(float s) {
    int e;
    double m = frexp((double)s, &e);   /* s = m 2^e, m in [1/2, 1) */
    if (m < 0.70710678118654752) {
        m *= 2.0;
        e -= 1;
    }
    double t = (m - 1.0) / (m + 1.0), t2 = t * t, term = t, series = 0.0;
    for (int k = 1; k <= 19; k += 2) {   /* |t| <= 0.172: t^21 / 21 < 1e-17 of the sum */
        series += term / k;
        term *= t2;
    }
    return (float)(2.0 * series + e * 0.69314718055994531);
}

/* the 8 lanes of x added ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)): a sum kept in lanes (lane j mod 8) ends the
 * same way on every CPU */
static inline float lanes_sum(__m256 x) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));  /* (0+4) (1+5) (2+6) (3+7) */
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));                                         /* (0+4)+(2+6), (1+5)+(3+7) */
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

static inline float lanes_max(__m256 x) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

#endif
