/* Attention whose every query row is computed by itself, in a fixed order, from IEEE operations alone, for CPUs
 * with AVX2 and FMA (judge_engine/layers/attention/row_attention.py builds this file once and calls it for the CPU
 * path's attention calls): a row's output and log-sum-exp depend on its query, its keys, values and mask row, and on
 * nothing else: not the other rows of the call, not the threads, not the CPU. torch's flash attention computes its
 * exps with code picked by the CPU's SIMD width, and a judge's probabilities moved by up to 0.017 between an
 * AVX2-only and an AVX-512 CPU (docs/benchmarks.md).
 *
 * For query row i over keys j < keys:
 *   s[j] = chain of fused multiply-adds q[i, d] k[j, d] over d in order, from zero (fma_tile.h), times scale;
 *          soft-capped: softcap * tanh(s / softcap), tanh(y) = sign(y) (1 - t) / (1 + t) with t = exp(-2 |y|);
 *          plus mask[i, j] when there is a mask;
 *   m = max_j s[j];  p[j] = exp(s[j] - m) (exp_log.h);  total = the sum of p[j] in 8 lanes (lane j mod 8, j in
 *   order), the lanes added ((0+4) + (2+6)) + ((1+5) + (3+7));
 *   out[i, :] = (chain of fused multiply-adds p[j] v[j, :] over j in order, from zero) / total;
 *   lse[i] = m + log(total).
 * Terms past a row's last nonzero p[j] are skipped: they add exact zeros (and the values of keys masked past a
 * sequence's context are never read). A row whose keys are all masked gets zeros and lse = -inf.
 */
#include <stdlib.h>
#include <string.h>
#include "column_threads.h"
#include "exp_log.h"
#include "fma_tile.h"

#define TILE_ROWS 48          /* query rows per work item: 8 tiles of MR */
#define MAX_HEAD_DIM 256

typedef struct {
    const float *q, *k, *v, *mask;
    const int64_t *qs, *ks, *vs, *ms;   /* strides of batch, head, row (q, mask) or key (k, v) */
    float *out, *lse;                   /* contiguous [batch, heads, rows, dim] and [batch, heads, rows] */
    float *scores;                      /* this part's scratch: TILE_ROWS x keys rounded up to NR */
    int64_t batch, heads, rows, keys, dim;
    float scale, softcap;
    int64_t first_item, end_item;
} call_t;

static inline int64_t tiles_per_slice(const call_t *c) { return (c->rows + TILE_ROWS - 1) / TILE_ROWS; }

static inline __m256 capped(__m256 s, float softcap) {
    __m256 cap = _mm256_set1_ps(softcap), y = _mm256_div_ps(s, cap);
    __m256 sign = _mm256_and_ps(y, _mm256_set1_ps(-0.0f)), magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), y);
    __m256 t = exp_nonpositive(_mm256_mul_ps(magnitude, _mm256_set1_ps(-2.0f)));
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 tanh = _mm256_or_ps(_mm256_div_ps(_mm256_sub_ps(one, t), _mm256_add_ps(one, t)), sign);
    return _mm256_mul_ps(tanh, cap);
}

/* row s[0:padded] (keys past `keys`: -inf) into p = exp(s - max); returns the terms up to the last nonzero p */
static int64_t softmax_row(float *s, const float *mask, int64_t keys, int64_t padded, float scale, float softcap,
                           float *max_out, float *total_out) {
    __m256 top = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < padded; j += 8) {
        __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(scale));
        if (softcap > 0) x = capped(x, softcap);
        if (mask) {
            if (j + 8 <= keys) {
                x = _mm256_add_ps(x, _mm256_loadu_ps(mask + j));
            } else {
                float tail[8];
                for (int l = 0; l < 8; l++) tail[l] = j + l < keys ? mask[j + l] : 0.0f;
                x = _mm256_add_ps(x, _mm256_loadu_ps(tail));
            }
        }
        if (j + 8 > keys) {
            float lanes[8];
            _mm256_storeu_ps(lanes, x);
            for (int l = 0; l < 8; l++) if (j + l >= keys) lanes[l] = -INFINITY;
            x = _mm256_loadu_ps(lanes);
        }
        _mm256_storeu_ps(s + j, x);
        top = _mm256_max_ps(top, x);
    }
    float m = lanes_max(top);
    *max_out = m;
    if (m == -INFINITY) {
        *total_out = 0.0f;
        return 0;
    }
    __m256 total = _mm256_setzero_ps(), shift = _mm256_set1_ps(m);
    int64_t last = 0;
    for (int64_t j = 0; j < padded; j += 8) {
        __m256 p = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), shift));
        _mm256_storeu_ps(s + j, p);
        total = _mm256_add_ps(total, p);
        int nonzero = _mm256_movemask_ps(_mm256_cmp_ps(p, _mm256_setzero_ps(), _CMP_NEQ_UQ));
        if (nonzero) last = j + 32 - __builtin_clz((unsigned)nonzero);
    }
    *total_out = lanes_sum(total);
    return last < keys ? last : keys;
}

static void attend_item(const call_t *c, int64_t item, float *s, int64_t padded, float *panel, float *acc) {
    int64_t tiles = tiles_per_slice(c), slice = item / tiles, r0 = (item % tiles) * TILE_ROWS;
    int64_t b = slice / c->heads, h = slice % c->heads;
    int64_t rows = c->rows - r0 < TILE_ROWS ? c->rows - r0 : TILE_ROWS, dim = c->dim;
    const float *q = c->q + b * c->qs[0] + h * c->qs[1] + r0 * c->qs[2];
    const float *k = c->k + b * c->ks[0] + h * c->ks[1];
    const float *v = c->v + b * c->vs[0] + h * c->vs[1];
    /* scores: 16 keys at a time laid out dimension by dimension, times every row */
    for (int64_t j0 = 0; j0 < padded; j0 += NR) {
        int64_t count = c->keys - j0 < NR ? c->keys - j0 : NR;
        float block[NR * MAX_HEAD_DIM];
        for (int64_t j = 0; j < NR; j++) {
            if (j < count) memcpy(block + j * dim, k + (j0 + j) * c->ks[2], dim * sizeof(float));
            else memset(block + j * dim, 0, dim * sizeof(float));
        }
        for (int64_t d = 0; d < dim; d += 8)
            for (int64_t j = 0; j < NR; j += 8) transpose8(block + j * dim + d, dim, panel + d * NR + j, NR);
        for (int64_t i = 0; i < rows; i += MR)
            fma_tile_rows(q + i * c->qs[2], c->qs[2], 1, panel, NR, dim, s + i * padded + j0, padded, 1,
                          rows - i < MR ? rows - i : MR);
    }
    float top[TILE_ROWS], total[TILE_ROWS];
    int64_t terms[TILE_ROWS];
    for (int64_t i = 0; i < rows; i++) {
        const float *mask = c->mask ? c->mask + b * c->ms[0] + h * c->ms[1] + (r0 + i) * c->ms[2] : 0;
        terms[i] = softmax_row(s + i * padded, mask, c->keys, padded, c->scale, c->softcap, &top[i], &total[i]);
    }
    float *out = c->out + ((b * c->heads + h) * c->rows + r0) * dim;
    float *lse = c->lse + (b * c->heads + h) * c->rows + r0;
    for (int64_t i = 0; i < rows; i += MR) {
        int64_t n = rows - i < MR ? rows - i : MR, longest = 0;
        for (int64_t t = 0; t < n; t++) longest = terms[i + t] > longest ? terms[i + t] : longest;
        for (int64_t d = 0; d < dim; d += NR)
            fma_tile_rows(s + i * padded, padded, 1, v + d, c->vs[2], longest, acc + d, dim, 1, n);
        for (int64_t t = 0; t < n; t++) {
            float *row = out + (i + t) * dim;
            if (total[i + t] == 0.0f) {
                memset(row, 0, dim * sizeof(float));
                lse[i + t] = -INFINITY;
                continue;
            }
            for (int64_t d = 0; d < dim; d++) row[d] = acc[t * dim + d] / total[i + t];
            lse[i + t] = top[i + t] + log_of_sum(total[i + t]);
        }
    }
}

static inline int64_t padded_keys(int64_t keys) { return (keys + NR - 1) / NR * NR; }

static void *attend_items(void *arg) {
    const call_t *c = (const call_t *)arg;
    float panel[MAX_HEAD_DIM * NR] __attribute__((aligned(32)));
    float acc[MR * MAX_HEAD_DIM];
    for (int64_t item = c->first_item; item < c->end_item; item++)
        attend_item(c, item, c->scores, padded_keys(c->keys), panel, acc);
    return 0;
}

/* out [batch, heads, rows, dim] and lse [batch, heads, rows], contiguous, from q [batch, heads, rows, dim],
 * k and v [batch, heads, keys, dim] and an additive mask [batch, heads, rows, keys] (or none), each given by its
 * strides (batch, head, row or key; the last dimension contiguous; 0 broadcasts); softcap 0: none. dim a multiple of
 * 16 up to 256. The rows of the slices split among `threads` threads. Returns 0; -1 for a shape it does not take
 * or where its scratch could not be allocated (then nothing is written). */
int row_attention(const float *q, const int64_t *qs, const float *k, const int64_t *ks, const float *v,
                  const int64_t *vs, const float *mask, const int64_t *ms, int64_t batch, int64_t heads, int64_t rows,
                  int64_t keys, int64_t dim, float scale, float softcap, float *out, float *lse, int threads) {
    if (dim % NR || dim > MAX_HEAD_DIM || keys < 1) return -1;
    call_t parts[MAX_THREADS];
    threads = thread_count(threads);
    call_t call = {q, k, v, mask, qs, ks, vs, ms, out, lse, 0, batch, heads, rows, keys, dim, scale, softcap, 0, 0};
    int64_t items = batch * heads * tiles_per_slice(&call), per_thread = (items + threads - 1) / threads;
    if (items == 0) return 0;
    int64_t scratch = TILE_ROWS * padded_keys(keys);
    int count = (int)((items + per_thread - 1) / per_thread);
    float *scores = malloc(sizeof(float) * scratch * count);
    if (!scores) return -1;
    for (int t = 0; t < count; t++) {
        parts[t] = call;
        parts[t].scores = scores + t * scratch;
        parts[t].first_item = t * per_thread;
        parts[t].end_item = (t + 1) * per_thread < items ? (t + 1) * per_thread : items;
    }
    run_parts(parts, sizeof parts[0], count, attend_items);
    free(scores);
    return 0;
}
