/* Rebuild float32 rows of a weight kept in a GGUF block format (judge_engine/layers/block_weight.py's BlockRows),
 * for CPUs with AVX2; block_weight.py builds this file once (layers/c_kernels.py) and calls it for each chunk where
 * a product goes through torch (float_gemm.c reads the blocks itself). The values: block_codes.h.
 *
 * One thread: a chunk takes about 0.1-0.2 ms, and starting a thread cost about as much on the machines measured.
 */
#include "block_codes.h"

void block_rows(const uint8_t *codes, int64_t code_stride, const float *scale, const float *offset,
                int64_t scale_stride, float *out, int64_t out_stride, int64_t rows, int64_t cols, int64_t group,
                int64_t half, int32_t shift) {
    for (int64_t r = 0; r < rows; r++) {
        code_row_t row = {codes + r * code_stride, scale + r * scale_stride, offset ? offset + r * scale_stride : 0,
                          group, half, shift};
        code_row_values(&row, 0, cols, out + r * out_stride);
    }
}
