"""LLM.beam_search: the same beams as transformers' beam search and as a brute-force search over full-sequence
transformers logits, with beams forked and freed through the block manager and every block back at the end."""

from __future__ import annotations

import pytest
import torch

from engine_fixtures import hf_logits, hf_model, random_prompt, tiny_llama, tiny_llm  # noqa: F401
from judge_engine.engine.beam_search import BeamSearchParams, BeamSearchParamsError

PROMPTS = [random_prompt(60 + i, 9 + 4 * i) for i in range(3)]


def brute_force(folder, prompt: list[int], width: int, max_tokens: int, end_tokens: set[int],
                length_penalty: float) -> list[tuple[list[int], float, bool]]:
    """The rule of judge_engine/engine/beam_search.py, written plainly: every beam's full sequence through transformers."""
    live, completed = [([], 0.0)], []
    for _ in range(max_tokens):
        candidates = []
        for tokens, cumulative in live:
            logprobs = torch.log_softmax(hf_logits(folder, prompt + tokens)[-1], dim=-1)
            values, ids = torch.topk(logprobs, 2 * width)
            candidates += [(tokens + [t], cumulative + v) for t, v in zip(ids.tolist(), values.tolist())]
        completed += [(t, c, True) for t, c in candidates if t[-1] in end_tokens]
        live = sorted([(t, c) for t, c in candidates if t[-1] not in end_tokens], key=lambda x: -x[1])[:width]
    completed += [(t, c, False) for t, c in live]

    def score(entry):
        tokens, cumulative, ended = entry
        return cumulative / max(len(tokens) - ended, 1) ** length_penalty

    return sorted(completed, key=lambda e: -score(e))[:width]


def assert_all_blocks_back(llm) -> None:
    manager = llm.engine.block_manager
    assert manager.num_used == 0 and manager.num_free_blocks == manager.num_blocks
    manager.check_invariants([])


def test_beams_match_transformers_beam_search(tiny_llama):
    width, max_tokens = 3, 6
    llm = tiny_llm(tiny_llama, enable_prefix_caching=False)
    outs = llm.beam_search(PROMPTS, width, max_tokens, ignore_eos=True)
    model = hf_model(str(tiny_llama))
    for prompt, out in zip(PROMPTS, outs):
        with torch.no_grad():
            # min_new_tokens masks EOS after the log-softmax: the other tokens keep their log-probabilities
            reference = model.generate(torch.tensor([prompt]),
                                       attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                       num_beams=width, num_return_sequences=width, do_sample=False,
                                       max_new_tokens=max_tokens, min_new_tokens=max_tokens, early_stopping=False,
                                       length_penalty=1.0, pad_token_id=0, output_scores=True,
                                       return_dict_in_generate=True)
        expected = [seq[len(prompt):].tolist() for seq in reference.sequences]
        assert [c.token_ids for c in out.outputs] == expected
        assert [c.cumulative_logprob / max_tokens for c in out.outputs] == pytest.approx(
            reference.sequences_scores.tolist(), abs=1e-4)
        assert all(c.finish_reason == "length" for c in out.outputs)
    assert llm.engine.block_manager.num_copied_blocks > 0   # forked beams wrote into shared partial blocks
    assert_all_blocks_back(llm)


@pytest.mark.parametrize("length_penalty", [1.0, 0.0])
def test_beams_that_end_match_a_brute_force_search(tiny_llama, length_penalty):
    width, max_tokens = 2, 5
    llm = tiny_llm(tiny_llama)
    prompt = PROMPTS[1]
    # a token the beams propose often, made the end token, so that hypotheses end at different lengths
    end_token = int(torch.topk(hf_logits(tiny_llama, prompt)[-1], 3).indices[1])
    llm.engine.eos_token_ids = frozenset({end_token})
    [out] = llm.beam_search([prompt], width, max_tokens, length_penalty=length_penalty)
    expected = brute_force(tiny_llama, prompt, width, max_tokens, {end_token}, length_penalty)
    assert [c.token_ids for c in out.outputs] == [tokens for tokens, _, _ in expected]
    assert [c.cumulative_logprob for c in out.outputs] == pytest.approx([c for _, c, _ in expected], abs=1e-4)
    assert [c.finish_reason for c in out.outputs] == ["stop" if ended else "length" for _, _, ended in expected]
    # without a length penalty the short ended hypothesis wins; with one, the full-length beams do
    assert (out.outputs[0].finish_reason == "stop") == (length_penalty == 0.0)
    assert out.text == llm.tokenizer.decode(out.outputs[0].token_ids, skip_special_tokens=True)
    assert_all_blocks_back(llm)


def test_beams_survive_preemption(tiny_llama):
    big = tiny_llm(tiny_llama).beam_search(PROMPTS, 4, 8, ignore_eos=True)
    small = tiny_llm(tiny_llama, blocks=14, max_num_seqs=16)
    outs = small.beam_search(PROMPTS, 4, 8, ignore_eos=True)
    assert small.stats()["preemptions"] > 0
    assert [[c.token_ids for c in o.outputs] for o in outs] == [[c.token_ids for c in o.outputs] for o in big]
    assert_all_blocks_back(small)


def test_an_aborted_beam_search_frees_every_beam(tiny_llama):
    llm = tiny_llm(tiny_llama, enable_prefix_caching=False)
    engine = llm.engine
    engine.add_beam_search_request("beams", PROMPTS[2], BeamSearchParams(4, 20, ignore_eos=True))
    for _ in range(4):
        engine.step()
    assert len(engine.scheduler.running) == 4 and engine.block_manager.num_used > 0
    engine.abort_request("beams")
    assert not engine.has_unfinished_requests()
    assert_all_blocks_back(llm)


@pytest.mark.parametrize("bad", [dict(beam_width=0, max_tokens=4), dict(beam_width=2, max_tokens=0),
                                 dict(beam_width=2, max_tokens=4, length_penalty=float("nan"))])
def test_invalid_beam_parameters_are_refused(bad):
    with pytest.raises(BeamSearchParamsError):
        BeamSearchParams(**bad)
