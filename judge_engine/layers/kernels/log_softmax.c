/* Log-softmax of float32 rows whose every value is the same bits on every CPU with AVX2 and FMA, for the
 * log-probabilities the engine reports and scores choices by (judge_engine/layers/log_softmax.py builds this file
 * once): torch's log_softmax computes its exps with code picked by the CPU's SIMD width.
 *
 * out[j] = (x[j] - m) - log(total), m = max_j x[j], total = the sum of exp(x[j] - m) kept in 8 lanes (lane j mod 8,
 * j in order) and then added lane by lane (exp_log.h's exp, log and lane sum).
 */
#include "exp_log.h"

static void row_log_softmax(const float *x, int64_t cols, float *out) {
    __m256 top = _mm256_set1_ps(-INFINITY), total = _mm256_setzero_ps();
    int64_t whole = cols & ~7L;
    float tail[8];
    for (int l = 0; l < 8; l++) tail[l] = whole + l < cols ? x[whole + l] : -INFINITY;
    for (int64_t j = 0; j < whole; j += 8) top = _mm256_max_ps(top, _mm256_loadu_ps(x + j));
    top = _mm256_max_ps(top, _mm256_loadu_ps(tail));
    float m = lanes_max(top);
    __m256 shift = _mm256_set1_ps(m);
    for (int64_t j = 0; j < whole; j += 8)
        total = _mm256_add_ps(total, exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + j), shift)));
    total = _mm256_add_ps(total, exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(tail), shift)));
    float log_total = log_of_sum(lanes_sum(total));
    __m256 minus = _mm256_set1_ps(log_total);
    for (int64_t j = 0; j < whole; j += 8)
        _mm256_storeu_ps(out + j, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), shift), minus));
    for (int64_t j = whole; j < cols; j++) out[j] = (x[j] - m) - log_total;
}

/* out [rows, cols] (contiguous) = log_softmax of x's rows (row i at x + i * ldx) */
void log_softmax(const float *x, int64_t ldx, int64_t rows, int64_t cols, float *out) {
    for (int64_t i = 0; i < rows; i++) row_log_softmax(x + i * ldx, cols, out + i * cols);
}
