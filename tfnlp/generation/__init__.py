"""Greedy search, beam search and sampling over a cached, one-token-per-step decoder.

All three take a `step_fn(token_ids, index, state, context) -> (logits,
state)` and run in one `tf.while_loop` with static shapes, so a model's
`generate` traces them once inside a `tf.function` and reuses the graph.
`TransformerSeq2Seq.generate` is the model-level entry point.
"""

from tfnlp.generation.beam_search import beam_search, length_penalty_factor, tile_beams
from tfnlp.generation.greedy_search import greedy_search
from tfnlp.generation.sampling import sample

__all__ = ["beam_search", "greedy_search", "length_penalty_factor", "sample", "tile_beams"]
