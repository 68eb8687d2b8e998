"""The premise of the CPU path's batch invariance, checked on the machine that runs the tests.

Every matrix product runs in calls of one fixed shape (judge_engine/layers/row_tiles.py; 32-row query tiles
in judge_engine/layers/attention/torch_paged.py), so a row's result may depend only on the row itself: not on the
other rows of its call, not on its place in the call, not on how many tiles the batch has.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from judge_engine.layers.attention import torch_paged
from judge_engine.layers import row_tiles

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.mark.parametrize("in_features, out_features, bias, dtype", [
    (64, 192, False, torch.float32), (576, 960, True, torch.float32), (1536, 576, False, torch.float32),
    (576, 960, True, torch.bfloat16),
    (4096, 700, True, torch.float32)])   # the weight read in column chunks (256, 256, 188 output features)
def test_a_row_of_a_tiled_product_does_not_depend_on_the_other_rows(in_features, out_features, bias, dtype):
    generator = torch.Generator().manual_seed(in_features)
    weight = torch.randn(out_features, in_features, generator=generator).to(dtype)
    bias_vector = torch.randn(out_features, generator=generator).to(dtype) if bias else None
    target = torch.randn(1, in_features, generator=generator).to(dtype)
    alone = row_tiles.linear(target, weight, bias_vector)
    for count in (2, 7, row_tiles.ROW_TILE - 1, row_tiles.ROW_TILE, row_tiles.ROW_TILE + 1, 3 * row_tiles.ROW_TILE + 5,
                  40 * row_tiles.ROW_TILE - 3):
        for place in {0, count // 2, count - 1}:
            batch = torch.randn(count, in_features, generator=generator).to(dtype)
            batch[place] = target[0]
            together = row_tiles.linear(batch, weight, bias_vector)
            assert together.shape == (count, out_features)
            assert torch.equal(together[place], alone[0]), (count, place)


def test_tiled_product_is_the_product():
    generator = torch.Generator().manual_seed(0)
    x, weight, bias = (torch.randn(*shape, generator=generator) for shape in ((100, 48), (80, 48), (80,)))
    torch.testing.assert_close(row_tiles.linear(x, weight, bias), F.linear(x, weight, bias), atol=1e-5, rtol=1e-5)
    strided = torch.randn(48, 100, generator=generator).t()  # a non-contiguous input is copied, not misread
    torch.testing.assert_close(row_tiles.linear(strided, weight), F.linear(strided, weight), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("keys_count, masked", [(128, True), (640, False)])
def test_a_query_row_of_a_flash_attention_call_does_not_depend_on_the_other_rows(keys_count, masked):
    """Calls of 1 to CALL_TILES whole 32-row query tiles per slice, one or several slices sharing the keys: a
    query's output and log-sum-exp are the same bits wherever it sits and whatever the other queries are, with or
    without a mask, over any number of keys."""
    generator = torch.Generator().manual_seed(keys_count)
    tile, heads, head_dim = torch_paged.QUERY_TILE, 3, 64
    keys = torch.randn(1, heads, keys_count, head_dim, generator=generator)
    values = torch.randn(1, heads, keys_count, head_dim, generator=generator)
    target = torch.randn(heads, head_dim, generator=generator)
    mask_row = torch.zeros(keys_count).masked_fill_(torch.rand(keys_count, generator=generator) < 0.3, float("-inf"))
    results = []
    for batch, rows, place in ((1, tile, 0), (1, tile, tile - 1), (1, torch_paged.CALL_ROWS, 77),
                               (4, torch_paged.CALL_ROWS, 159), (3, 2 * tile, 40)):
        queries = torch.randn(batch, heads, rows, head_dim, generator=generator)
        queries[batch - 1, :, place] = target
        mask = None
        if masked:
            mask = torch.zeros(batch, 1, rows, keys_count).masked_fill_(
                torch.rand(batch, 1, rows, keys_count, generator=generator) < 0.5, float("-inf"))
            mask[batch - 1, 0, place] = mask_row
        out, lse = torch_paged._flash(queries, keys.expand(batch, -1, -1, -1), values.expand(batch, -1, -1, -1),
                                      0.125, mask)
        results.append((out[batch - 1, :, place], lse[batch - 1, :, place]))
    for out, lse in results[1:]:
        assert torch.equal(out, results[0][0]) and torch.equal(lse, results[0][1])
