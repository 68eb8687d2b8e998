"""Sampling: greedy, temperature, top-k, top-p, per-request seeds, logprobs and parameter validation."""

from __future__ import annotations

import pytest
import torch

from judge_engine.engine.sampler import SamplingParams, SamplingParamsError, make_generator, sample, top_logprobs

CPU = torch.device("cpu")


def logits_rows(n: int, vocab: int = 50, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, vocab, generator=torch.Generator().manual_seed(seed)) * 3


def draw(params: SamplingParams, rows: torch.Tensor) -> list[int]:
    return sample(rows, [params] * len(rows), [make_generator(params, CPU) for _ in range(len(rows))])


def test_greedy_is_argmax():
    rows = logits_rows(4)
    assert draw(SamplingParams(temperature=0.0), rows) == rows.argmax(-1).tolist()


def test_top_k_one_and_tiny_top_p_are_greedy():
    rows = logits_rows(4)
    expected = rows.argmax(-1).tolist()
    assert draw(SamplingParams(temperature=1.0, top_k=1, seed=3), rows) == expected
    assert draw(SamplingParams(temperature=1.0, top_p=1e-6, seed=3), rows) == expected


def test_top_k_only_draws_from_the_k_best():
    row = logits_rows(1)[0]
    allowed = set(torch.topk(row, 3).indices.tolist())
    params = SamplingParams(temperature=5.0, top_k=3, seed=1)
    generator = make_generator(params, CPU)
    seen = {sample(row[None], [params], [generator])[0] for _ in range(200)}
    assert seen <= allowed and len(seen) > 1


def test_top_p_keeps_the_smallest_set_reaching_p():
    row = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    params = SamplingParams(temperature=1.0, top_p=0.7, seed=0)
    generator = make_generator(params, CPU)
    seen = {sample(row[None], [params], [generator])[0] for _ in range(300)}
    assert seen == {0, 1}  # 0.5 < 0.7 needs the second token; 0.8 >= 0.7 stops there


def test_temperature_sampling_follows_the_distribution():
    row = torch.log(torch.tensor([0.7, 0.2, 0.1]))
    params = SamplingParams(temperature=1.0, seed=5)
    generator = make_generator(params, CPU)
    counts = torch.zeros(3)
    for _ in range(2000):
        counts[sample(row[None], [params], [generator])[0]] += 1
    assert torch.allclose(counts / 2000, torch.tensor([0.7, 0.2, 0.1]), atol=0.04)


def test_same_seed_same_tokens_whatever_the_batch():
    rows = logits_rows(6)
    seeded = SamplingParams(temperature=1.0, seed=42)
    alone = [sample(rows[i:i + 1], [seeded], [make_generator(seeded, CPU)])[0] for i in range(6)]
    others = [SamplingParams(temperature=0.8, seed=s) for s in range(6)]
    mixed_params = [seeded if i % 2 == 0 else others[i] for i in range(6)]
    mixed = sample(rows, mixed_params, [make_generator(p, CPU) for p in mixed_params])
    assert [mixed[i] for i in (0, 2, 4)] == [alone[i] for i in (0, 2, 4)]


def test_unseeded_requests_differ():
    rows = logits_rows(1, vocab=1000).repeat(20, 1) * 0  # uniform over 1000 tokens
    params = SamplingParams(temperature=1.0)
    assert len(set(draw(params, rows))) > 1


def test_top_logprobs_includes_the_chosen_token():
    row = torch.log_softmax(torch.tensor([3.0, 2.0, 1.0, 0.0]), -1)
    result = top_logprobs(row, chosen=3, n=2)
    assert set(result) == {3, 0, 1}
    assert result[3] == pytest.approx(float(row[3]))
    assert top_logprobs(row, chosen=0, n=0) == {0: pytest.approx(float(row[0]))}


@pytest.mark.parametrize("kwargs, field", [
    ({"temperature": -1}, "temperature"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -2}, "top_k"),
    ({"max_tokens": -1}, "max_tokens"),
    ({"max_tokens": 1.5}, "max_tokens"),
    ({"logprobs": -1}, "logprobs"),
    ({"prompt_logprobs": True}, "prompt_logprobs"),
    ({"seed": "7"}, "seed"),
    ({"stop": ["ok", ""]}, "stop"),
    ({"stop_token_ids": ["a"]}, "stop_token_ids"),
])
def test_invalid_parameters_name_the_field(kwargs, field):
    with pytest.raises(SamplingParamsError, match=field):
        SamplingParams(**kwargs)


def test_stop_accepts_one_string_or_a_list():
    assert SamplingParams(stop="\n").stop_strings == ("\n",)
    assert SamplingParams(stop=["a", "b"]).stop_strings == ("a", "b")
    assert SamplingParams().stop_strings == ()
