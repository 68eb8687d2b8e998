/* The rotary position embedding of float32 queries or keys in one pass (judge_engine/layers/rope.py builds this file
 * once): torch's operations took five passes through memory, about 7% of the default judge's int8 step.
 *
 * For a head's values x = (x1, x2), its two halves: out1 = x1 * cos1 - x2 * sin1, out2 = x2 * cos2 + x1 * sin2, each
 * product and each sum one rounding (no fused multiply-add: the file is built with -ffp-contract=off), as torch
 * computes them, so the bits are torch's on every CPU. Plain C loops, which the compiler vectorizes.
 */
#include <stdint.h>

/* out [tokens, heads, dim] (contiguous) from x (token t, head h at x + t * ldt + h * ldh) and cos, sin [tokens, dim]
 * (token t at cos + t * ldc, sin + t * lds) */
void rotary(const float *x, int64_t ldt, int64_t ldh, int64_t tokens, int64_t heads, int64_t dim, const float *cos,
            int64_t ldc, const float *sin, int64_t lds, float *out) {
    int64_t half = dim / 2;
    for (int64_t t = 0; t < tokens; t++) {
        const float *c = cos + t * ldc, *s = sin + t * lds;
        for (int64_t h = 0; h < heads; h++) {
            const float *first = x + t * ldt + h * ldh, *second = first + half;
            float *o = out + (t * heads + h) * dim;
            for (int64_t j = 0; j < half; j++) {
                float a = first[j] * c[j], b = second[j] * s[j];
                o[j] = a - b;
            }
            for (int64_t j = 0; j < half; j++) {
                float a = second[j] * c[half + j], b = first[j] * s[half + j];
                o[half + j] = a + b;
            }
        }
    }
}
