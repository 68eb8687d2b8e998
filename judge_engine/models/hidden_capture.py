"""Hidden states kept from a forward pass: the rows of the flat batch and the layers one step asks for.

Layer indices are those of transformers' ``output_hidden_states``: 0 is the embeddings' output (after any scaling
the family applies), i the output of decoder layer i (1-based), and ``num_layers`` the last layer's output after
the final norm (transformers replaces its last hidden state with the normed one). The forward pass of every
family (``LlamaForCausalLM.forward``, which Gemma 2 and Phi-3 inherit) calls ``take`` after the embeddings and
after each decoder layer, and ``take_final`` on the normed rows; only the asked rows are copied, never a layer's
whole batch. Rows are read from the same tensors the ordinary pass computes, so they are as independent of the
batch as the logits are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


class HiddenCapture:
    """One step's capture request and what the forward pass collected for it.

    rows: int64 [R], ascending flat-batch rows (never padding); layers: ascending distinct indices in
    0..num_layers. After the forward pass, ``collected()`` is [R, len(layers), hidden] in the model's dtype."""

    def __init__(self, rows: torch.Tensor, layers: Sequence[int]) -> None:
        self.rows = rows
        self.layers = tuple(layers)
        self._slot = {layer: i for i, layer in enumerate(self.layers)}
        self._taken: list[torch.Tensor | None] = [None] * len(self.layers)
        self._final_in_computed: torch.Tensor | None = None  # capture rows inside the last layer's computed rows
        self._output_in_computed: torch.Tensor | None = None  # output rows inside them (None: the same rows)

    def last_layer_rows(self, output_rows: torch.Tensor | None, num_layers: int) -> torch.Tensor | None:
        """The rows the last decoder layer must compute (None: all of them): the output rows and, when the final
        layer is asked for, the capture rows too. Remembers where each lies among them."""
        if num_layers not in self._slot or output_rows is None:
            return output_rows
        computed = torch.unique(torch.cat([output_rows, self.rows]))  # sorted, as for_rows' runs want them
        self._final_in_computed = torch.searchsorted(computed, self.rows)
        self._output_in_computed = torch.searchsorted(computed, output_rows)
        return computed

    def take(self, layer: int, x: torch.Tensor) -> None:
        """x: the hidden states after `layer` (0 = the embeddings) for every row of the flat batch."""
        slot = self._slot.get(layer)
        if slot is not None:
            self._taken[slot] = x.index_select(0, self.rows)

    def output_rows_of(self, x: torch.Tensor) -> torch.Tensor:
        """The output rows among the last layer's computed rows `x` (when last_layer_rows widened them)."""
        return x if self._output_in_computed is None else x.index_select(0, self._output_in_computed)

    def take_final(self, x: torch.Tensor, every_row: bool, final_norm: Callable[[torch.Tensor], torch.Tensor],
                   num_layers: int) -> None:
        """x: the last decoder layer's output, for every row (every_row) or for its computed rows; the capture
        rows go through the final norm on their own (the output rows' norm is the ordinary pass's)."""
        slot = self._slot.get(num_layers)
        if slot is None:
            return
        index = self.rows if every_row or self._final_in_computed is None else self._final_in_computed
        self._taken[slot] = final_norm(x.index_select(0, index))

    def collected(self) -> torch.Tensor:
        missing = [layer for layer, taken in zip(self.layers, self._taken) if taken is None]
        if missing:
            raise RuntimeError(f"hidden states of layers {missing} were asked for but never taken")
        return torch.stack(self._taken, dim=1)
