"""The output side of a step, without a model: stop decisions after each token, stop-string cuts over the
incrementally decoded text, and the increments each RequestOutput reports."""

from __future__ import annotations

import torch

from judge_engine.engine.output_processor import OutputProcessor
from judge_engine.engine.sampler import SamplingParams
from judge_engine.engine.scheduler import ScheduledSequence
from judge_engine.engine.sequence import Sequence, SequenceStatus

EOS = 3


class CharTokenizer:
    """Token id n is the character chr(n): every id decodes on its own, so texts are easy to predict."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if not (skip_special_tokens and i == EOS))


def processor(max_seq_len: int = 64) -> OutputProcessor:
    return OutputProcessor(CharTokenizer(), frozenset({EOS}), max_seq_len)


def request(proc: OutputProcessor, stream: bool = True, **params):
    seq = Sequence("r", [ord(c) for c in "prompt"], SamplingParams(temperature=0.0, **params))
    return proc.track(seq, "prompt", stream)


def append(proc: OutputProcessor, tracked, text: str) -> list[str | None]:
    reasons = []
    for char in text:
        tracked.seq.token_ids.append(ord(char))
        reasons.append(proc.stop_reason(tracked, ord(char)))
    return reasons


def test_eos_and_stop_token_ids_stop():
    proc = processor()
    tracked = request(proc, max_tokens=10, stop_token_ids=[ord("!")])
    assert append(proc, tracked, "ab!") == [None, None, "stop"]
    tracked = request(proc, max_tokens=10)
    tracked.seq.token_ids.append(EOS)
    assert proc.stop_reason(tracked, EOS) == "stop"
    ignoring = request(proc, max_tokens=10, ignore_eos=True)
    ignoring.seq.token_ids.append(EOS)
    assert proc.stop_reason(ignoring, EOS) is None


def test_length_stops_at_max_tokens_and_at_the_longest_sequence():
    proc = processor()
    assert append(proc, request(proc, max_tokens=3), "abc") == [None, None, "length"]
    short = processor(max_seq_len=len("prompt") + 2)
    assert append(short, request(short, max_tokens=10), "ab") == [None, "length"]


def test_a_stop_string_cuts_the_text_and_streams_never_show_its_start():
    proc = processor()
    tracked = request(proc, max_tokens=20, stop="END")
    assert append(proc, tracked, "hi E") == [None] * 4
    partial = proc.output(tracked)
    assert partial.text == "hi" and partial.new_text == "hi"  # " E" may begin "END": held back until it cannot
    assert append(proc, tracked, "ND") == [None, "stop"]
    tracked.seq.status = SequenceStatus.FINISHED
    final = proc.output(tracked)
    assert final.text == "hi " and final.new_text == " " and final.token_ids == [ord(c) for c in "hi END"]


def test_include_stop_str_in_output_keeps_it():
    proc = processor()
    tracked = request(proc, max_tokens=20, stop=["xy"], include_stop_str_in_output=True)
    assert append(proc, tracked, "abxy")[-1] == "stop"
    tracked.seq.status = SequenceStatus.FINISHED
    assert proc.output(tracked).text == "abxy"


def test_logits_rows_give_prompt_and_candidate_logprobs():
    proc = processor()
    seq = Sequence("r", [0, 1, 2], SamplingParams(max_tokens=0), logprobs_from=1, next_token_candidates=(0, 2))
    tracked = proc.track(seq, None, stream=False)
    rows = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]]))
    proc.record_rows(ScheduledSequence(seq, 0, 3, block_table=[0]), [0, 1, 2], rows)
    output = proc.output(tracked)
    assert output.prompt_logprobs[0] is None
    assert abs(output.prompt_logprobs[1][1] - torch.log(torch.tensor(0.25)).item()) < 1e-6
    assert abs(output.prompt_logprobs[2][2] - torch.log(torch.tensor(0.7)).item()) < 1e-6
    assert abs(output.next_token_logprobs[0] - torch.log(torch.tensor(0.6)).item()) < 1e-6
    assert set(output.next_token_logprobs) == {0, 2}


def test_sampled_logprobs_only_for_requests_that_ask():
    proc = processor()
    asking = Sequence("a", [0], SamplingParams(max_tokens=1, logprobs=1))
    silent = Sequence("b", [0], SamplingParams(max_tokens=1))
    logits = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    rows = proc.sampled_logprob_rows(logits, [asking, silent], [1, 0])
    assert set(rows) == {0}
    proc.record_sampled_logprobs(asking, rows[0], 1)
    assert abs(asking.output_logprobs[0][1] - torch.log_softmax(logits[0], -1)[1].item()) < 1e-6
