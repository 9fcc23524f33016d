"""UniLM with its masked-LM head: pretraining, seq2seq fine-tuning, generation."""

import functools

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from tfnlp import _checks
from tfnlp.data.unilm import (  # noqa: F401  (unilm_batch re-exported)
    LEFT_TO_RIGHT_INPUTS,
    PSEUDO_MASKED_INPUTS,
    UNILM_INPUTS,
    _is_left_to_right_batch,
    _is_pseudo_masked_batch,
    unilm_batch,
)
from tfnlp.data.unilm_seq2seq_preprocessor import UniLMSeq2SeqPreprocessor
from tfnlp.generation import _common as generation_common
from tfnlp.generation.compiled_search import (
    CompiledSearch,
    check_source,
    check_stream,
    decoding_options,
    streamed_texts,
)
from tfnlp.layers import masks as masks_lib
from tfnlp.layers.masked_lm_head import MaskedLMHead
from tfnlp.models._mixins import CallsBackboneLayers
from tfnlp.models.bert_backbone import ACTIVATIONS, bert_kernel_initializer
from tfnlp.models.task import Task
from tfnlp.models.transformer_seq2seq import (
    checked_tokenizer,
    decoded_texts,
    missing_token_ids,
    serialized,
    source_texts,
    tokenized_sources,
)
from tfnlp.models.unilm_backbone import SEGMENT_ROWS, UniLMBackbone
from tfnlp.training.losses import SmoothedSparseCategoricalCrossentropy
from tfnlp.training.optimizers import bert_adamw


@keras.saving.register_keras_serializable(package="tfnlp")
class UniLM(CallsBackboneLayers, Task):
    """A `UniLMBackbone` with a tied masked-LM head, and seq2seq generation.

    Training (pretraining and seq2seq fine-tuning alike): inputs are the
    backbone's (`token_ids`, `segment_ids`, `padding_mask`, `objective`) plus
    `masked_positions` `(B, P)`; the output is float32 logits `(B, P, V)` at
    those positions, from `MaskedLMHead` tied to the token embedding (its
    layer norm uses the backbone's `layer_norm_epsilon`).
    `compile()` without arguments uses AdamW (learning rate 1e-4, decay off
    LayerNorm and biases), sparse cross-entropy and accuracy weighted by the
    masked weights (see `unilm_batch`). The backbone's last block computes
    the masked positions only, all that the head reads
    (`TransformerBlock`'s `output_positions`).

    Left-to-right LM training (for `continue_prompt`): a batch of
    `tfnlp.data.left_to_right_lm_dataset` (`token_ids`, `padding_mask`,
    `mask_id`, no `objective`) gives logits `(B, T, V)` for every token,
    each predicted from the tokens before it by the pseudo-masked pass of
    `left_to_right_log_probs` (with dropout in training); `unilm_batch`
    makes its labels and weights.

    Pseudo-masked seq2seq fine-tuning (s2s-ft's, instead of the masked
    targets above): a batch of `tfnlp.data.unilm_pseudo_masked_dataset`
    (`token_ids`, `segment_ids`, `padding_mask`, `mask_id`, no
    `objective`) also gives logits `(B, T, V)`: each target token predicted
    from the source and the real targets before it, as `decoding_step`
    predicts it.

    Generation (`generate`), as UniLM decodes: the source `[CLS] S [SEP]` is
    encoded once into per-layer key/value caches (seq2seq objective); each
    step appends the previous token and a `[MASK]` after the target prefix,
    and the `[MASK]`'s output predicts the next token. Only the new tokens
    are computed: the cache holds the source and the accepted target tokens.
    Target positions continue each source's own length, exactly as in
    training (`[CLS] S [SEP] T [SEP]` packed without gaps).

    Bad inputs fail as in `BertBackbone`; `generate` and
    `left_to_right_log_probs` also check their token ids (sources,
    `end_id`, `mask_id`, `pad_id`) against the vocabulary.

    Texts: built with a `tokenizer` (one vocabulary for sources and
    targets), `generate(["source text", ...])` returns a list of target
    texts, and `fit`/`evaluate` take `x` source texts and `y` target texts
    (lists, NumPy arrays or `tf.string` tensors), or a `tf.data.Dataset` of
    `(source, target)` texts, packed and masked by
    `tfnlp.data.unilm_finetuning_dataset` (sequence length `source_length +
    max_length`, UniLM's masking rate 0.7; labels and weights as
    `unilm_batch`). The token-id inputs work unchanged;
    `tfnlp.export.export_seq2seq(model, export_dir)` uses the model's
    tokenizer and lengths.

    Args:
        backbone: a `UniLMBackbone`.
        tokenizer: optional `tfnlp.data.WordPieceTokenizer` with the
            backbone's `vocabulary_size` tokens.
        source_length: int, sources `[CLS] S [SEP]` are cut to this many
            tokens; default half the position table with a tokenizer.
        max_length: int, the most tokens generated on texts (end token
            included); default the rest of the position table with a
            tokenizer. `source_length + max_length` must fit the table.
        **kwargs: base model arguments (`name`, ...).

    Example:

    >>> backbone = UniLMBackbone.from_architecture("bert_tiny", vocabulary_size=100)
    >>> model = UniLM(backbone)
    >>> model({
    ...     "token_ids": tf.constant([[2, 45, 3, 4, 3]]),
    ...     "segment_ids": tf.constant([[0, 0, 0, 1, 1]]),
    ...     "padding_mask": tf.ones((1, 5), tf.int32),
    ...     "objective": tf.constant([3]),
    ...     "masked_positions": tf.constant([[3]]),
    ... }).shape
    TensorShape([1, 1, 100])
    >>> model.generate(tf.constant([[2, 45, 46, 3]]), end_id=3, mask_id=4,
    ...                max_length=6)["token_ids"].shape
    TensorShape([1, 6])

    References:
        Dong et al., "Unified Language Model Pre-training for Natural
        Language Understanding and Generation", 2019, sections 2 and 3.
    """

    backbone_cls = UniLMBackbone

    def __init__(self, backbone, tokenizer=None, source_length=None, max_length=None, **kwargs):
        backbone = self._backbone_object(backbone)
        tokenizer = checked_tokenizer(
            "tokenizer", tokenizer, backbone.vocabulary_size, "`vocabulary_size`"
        )
        source_length, max_length = _text_lengths(
            source_length, max_length, backbone.max_sequence_length, tokenizer is not None
        )
        self.backbone = backbone
        self.masked_lm_head = MaskedLMHead(
            backbone.vocabulary_size,
            token_embedding=backbone.token_embedding,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            activation=ACTIVATIONS[backbone.activation],
            kernel_initializer=bert_kernel_initializer(),
            # float32 under every policy: a bfloat16 head (as keras-hub's)
            # trains measurably worse (benchmarks/README.md, BERT quality).
            dtype="float32",
            name="masked_lm_head",
        )
        inputs = {
            name: keras.Input(shape=(None,) if name != "objective" else (), dtype="int32",
                              name=name)
            for name in UNILM_INPUTS
        }
        # The last block runs at the masked positions only: all the head reads.
        x = backbone.encode(inputs, output_positions=inputs["masked_positions"])  # (B, P, H)
        logits = self.masked_lm_head(x)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.tokenizer = tokenizer
        self.source_length = source_length
        self.max_length = max_length
        self._generate_functions = CompiledSearch(
            self.decoding_step, self.initial_decoding_state, self._check_positions
        )
        self._continue_functions = CompiledSearch(
            self.decoding_step,
            functools.partial(self.initial_decoding_state, objective=masks_lib.LEFT_TO_RIGHT),
            self._check_positions,
        )

    def _unread_backbone_layers(self):
        return [self.backbone.pooler]  # no UniLM loss reaches it

    def _head_layers(self):
        return [self.masked_lm_head]

    def _assert_input_compatibility(self, arg_0):
        # Keras (3.15: `Layer.__call__`) checks every call against the
        # Functional inputs; a left-to-right LM batch and a pseudo-masked
        # seq2seq batch have inputs of their own, checked in `call` and
        # `compute_output_spec`.
        if not _is_left_to_right_batch(arg_0):
            super()._assert_input_compatibility(arg_0)

    def call(self, inputs, training=None, mask=None, **kwargs):
        if _is_left_to_right_batch(inputs):
            inputs = self._checked_left_to_right_inputs(inputs)
            return self._left_to_right_logits(
                inputs["token_ids"], inputs["padding_mask"], inputs["mask_id"],
                segment_ids=inputs.get("segment_ids"), training=training,
            )
        return super().call(inputs, training=training, mask=mask, **kwargs)

    def compute_output_spec(self, inputs, training=None, mask=None):
        if _is_left_to_right_batch(inputs):  # symbolic calls, which skip `call`
            inputs = self._checked_left_to_right_inputs(inputs)
            shape = (*inputs["token_ids"].shape, self.backbone.vocabulary_size)
            return keras.KerasTensor(shape, "float32")
        return super().compute_output_spec(inputs, training=training, mask=mask)

    def _checked_left_to_right_inputs(self, inputs):
        with _checks.errors_without_input_dump():
            keys = set(inputs)
            if _is_pseudo_masked_batch(inputs):
                expected = PSEUDO_MASKED_INPUTS
                what = "A pseudo-masked seq2seq batch (`tfnlp.data.unilm_pseudo_masked_dataset`)"
            else:
                expected = LEFT_TO_RIGHT_INPUTS
                what = "A left-to-right LM batch (`tfnlp.data.left_to_right_lm_dataset`)"
            if keys != set(expected):
                raise ValueError(
                    f"{what} holds {', '.join(expected)}; missing: "
                    f"{sorted(set(expected) - keys) or 'none'}, "
                    f"unexpected: {sorted(keys - set(expected)) or 'none'}."
                )
            size = (self.backbone.vocabulary_size, "`vocabulary_size`")
            specs = {"token_ids": ("BT", *size), "padding_mask": ("BT", None, None),
                     "mask_id": ("B", *size)}
            if "segment_ids" in inputs:
                specs["segment_ids"] = ("BT", 2, "the two segments (0 source, 1 target)")
            return _checks.model_inputs(
                inputs, specs,
                limits={"T": (self.backbone.max_sequence_length, "max_sequence_length")},
            )

    def _checked_inputs(self, inputs):
        return self.backbone._checked_inputs(inputs, masked_positions="BP")

    def _compile_defaults(self):
        return {
            "optimizer": bert_adamw(1e-4),
            # The mean over the weighted (masked) positions of all replicas.
            "loss": SmoothedSparseCategoricalCrossentropy(label_smoothing=0.0),
            # Weighted: padded target positions (weight 0) must not count.
            "weighted_metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        }

    # --- Texts ---

    def _task_preprocessor(self):
        length = None if self.tokenizer is None else self.source_length + self.max_length
        return UniLMSeq2SeqPreprocessor(self.tokenizer, length, task_name=type(self).__name__)

    # --- Scoring ---

    def left_to_right_log_probs(self, token_ids, padding_mask=None, *, mask_id):
        """`log P(x_t | x_<t)` of every token under the left-to-right objective.

        UniLM predicts token `t` from a `[MASK]` at position `t` that sees
        the real tokens before it. All positions are scored in one pass with
        pseudo-masks (as UniLMv2 does): the input is `x_1..x_n` followed by
        `[MASK]_1..[MASK]_n`, where `x_i` sees `x_j` for `j <= i` (the
        left-to-right mask) and `[MASK]_t`, at position `t`, sees `x_j` for
        `j < t` and itself. Each `[MASK]_t` gets exactly the output it would
        have in its own left-to-right pass. Position 0 (`[CLS]`) is scored
        from its `[MASK]` alone.

        Args:
            token_ids: int tensor `(B, T)`.
            padding_mask: int or bool `(B, T)`; defaults to all real.
            mask_id: int, the `[MASK]` token.

        Returns:
            float32 `(B, T)`; 0 at padding.
        """
        token_ids = _checks.integer_tensor("token_ids", token_ids, "(B, T)")
        generation_common.check_arguments(1, 0, mask_id=mask_id)
        token_ids = tf.cast(self._checked_ids("token_ids", token_ids, mask_id=mask_id), tf.int32)
        if padding_mask is None:
            padding_mask = tf.ones_like(token_ids)
        real = tf.cast(padding_mask, tf.bool)
        length = tf.shape(token_ids)[1]
        table = self.backbone.max_sequence_length
        with tf.control_dependencies([tf.debugging.assert_less_equal(
            length, table,
            message=f"left_to_right_log_probs: the text is longer than the position table ({table})",
        )]):
            length = tf.identity(length)
        mask_ids = tf.fill(tf.shape(token_ids)[:1], tf.constant(mask_id, tf.int32))
        logits = self._left_to_right_logits(token_ids, real, mask_ids, training=False)
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        scores = tf.gather(log_probs, token_ids[..., None], batch_dims=2)[..., 0]
        return tf.where(real, scores, 0.0)

    def _left_to_right_logits(self, token_ids, padding_mask, mask_ids, segment_ids=None,
                              training=None):
        """float32 logits `(B, T, V)`: position `t` predicts `token_ids[:, t]` from `< t`.

        The pseudo-masked pass of `left_to_right_log_probs`, also what
        `fit` trains on a left-to-right LM batch (with dropout when
        training). `mask_ids` `(B,)` is each row's `[MASK]` token.

        With `segment_ids` (`[CLS] S [SEP]` 0, `T [SEP]` 1) the pass is
        seq2seq, as s2s-ft fine-tunes UniLMv2: the source is read
        bidirectionally and seen by every token; target token `i` sees the
        source and the targets up to itself; `[MASK]_t`, at position `t`
        with the target segment's row, sees the tokens before `t` and
        itself: what `decoding_step` computes for target `t`, for every
        target in one pass.
        """
        token_ids = tf.cast(token_ids, tf.int32)
        real = tf.cast(padding_mask, tf.bool)
        length = tf.shape(token_ids)[1]
        positions = tf.broadcast_to(tf.range(length), tf.shape(token_ids))
        masks = tf.broadcast_to(tf.cast(mask_ids, tf.int32)[:, None], tf.shape(token_ids))
        i = tf.range(length)
        causal = i[None, :] <= i[:, None]  # (T, T) real query i sees real key j <= i
        before = i[None, :] < i[:, None]  # [MASK]_t sees real keys j < t
        eye = tf.eye(length, dtype=tf.bool)  # ... and itself
        if segment_ids is None:
            row = SEGMENT_ROWS[masks_lib.LEFT_TO_RIGHT][0]
            top = tf.concat([causal, tf.zeros_like(causal)], 1)[None]
        else:
            target = tf.cast(segment_ids, tf.int32) > 0
            source_row, target_row = SEGMENT_ROWS[masks_lib.SEQ2SEQ]
            row = tf.concat([tf.where(target, target_row, source_row),
                             tf.fill(tf.shape(token_ids), target_row)], 1)
            # A source token sees the source; a target token also the targets up to itself.
            seen = ~target[:, None, :] | (target[:, :, None] & causal[None])  # (B, T, T)
            # Without targets, every token would be source and the loss 0.
            check = tf.debugging.assert_equal(
                tf.reduce_all(tf.reduce_any(target & real, axis=1)), True,
                message="A pseudo-masked seq2seq batch needs target tokens (segment_ids 1) in "
                "every row; a left-to-right LM batch has no segment_ids",
            )
            with tf.control_dependencies([check]):
                seen = tf.identity(seen)
            top = tf.concat([seen, tf.zeros_like(seen)], 2)
        x = self._embed_at(tf.concat([token_ids, masks], 1), tf.concat([positions, positions], 1),
                           row)
        x = self.backbone.embeddings_dropout(x, training=training)
        # `top` is (1, T, 2T) left to right, one per example (B, T, 2T) in seq2seq.
        bottom = tf.broadcast_to(tf.concat([before, eye], 1)[None], tf.shape(top))
        mask = tf.concat([top, bottom], 1) & tf.tile(real, [1, 2])[:, None, :]
        for block in self.backbone.transformer_layers:
            x = block(x, attention_mask=mask, training=training)
        return self.masked_lm_head(x, masked_positions=length + positions)

    def _checked_ids(self, name, token_ids, **special_ids):
        """`token_ids` and the named special ids, checked against the vocabulary."""
        size = self.backbone.vocabulary_size
        _checks.token_ids_in_range(size, "`vocabulary_size`", **special_ids)
        return _checks.ids_in_range(name, token_ids, size, "`vocabulary_size`")

    # --- Decoding ---

    def _embed_at(self, token_ids, positions, segment_row):
        """The backbone's embedding of tokens at explicit (per-example) positions.

        `segment_row` is one row (int) for all tokens, one per example
        `(B,)`, or one per token `(B, S)`.
        """
        backbone = self.backbone
        tokens = backbone.token_embedding(token_ids)
        if tf.is_tensor(segment_row) and segment_row.shape.rank == 2:  # one row per token
            rows = segment_row
        elif tf.is_tensor(segment_row):  # one row per example
            rows = tf.broadcast_to(segment_row[:, None], tf.shape(token_ids))
        else:
            rows = tf.fill(tf.shape(token_ids), segment_row)
        segments = backbone.segment_embedding(rows)
        table = tf.cast(backbone.position_embedding.position_embeddings, tokens.dtype)
        x = (tokens + segments) + tf.gather(table, positions)
        return backbone.embeddings_norm(x)

    def _run_blocks(self, x, attention_mask, caches, index):
        updated = []
        for block, cache in zip(self.backbone.transformer_layers, caches, strict=True):
            x, cache = block(x, attention_mask=attention_mask, cache=cache,
                             cache_update_index=index, training=False)
            updated.append(cache)
        return x, tuple(updated)

    def initial_decoding_state(self, source_token_ids, source_padding_mask, max_length,
                               use_cache=True, *, mask_id, objective=masks_lib.SEQ2SEQ):
        """`(state, context)` for `decoding_step`, from `[CLS] S [SEP]` sources.

        With `objective=masks.LEFT_TO_RIGHT` the source is a prompt `[CLS]
        P` read left to right and decoding continues it (`continue_prompt`):
        each prompt token sees the ones before it, and the context also
        holds the prompt's ids for the repetition penalty.

        With `use_cache` the source goes through the network once and the
        state holds one key/value cache `(B, 2, S + max_length + 1,
        num_heads, head_dim)` per layer: slots `0..S-1` the source, slot `S`
        unused (the input before the first target token), slots `S + 1 + m`
        target token `m`. Without, the state holds the target tokens and
        each step re-runs the packed sequence `[CLS] S [SEP] T [MASK]`
        (the reference the cache is tested against).

        Args:
            source_token_ids: int tensor `(B, S)`, real tokens first, then
                padding.
            source_padding_mask: int or bool `(B, S)`, or None (all real).
            max_length: int, the most target tokens.
            use_cache: bool.
            mask_id: int, the `[MASK]` token.
            objective: `masks.SEQ2SEQ` or `masks.LEFT_TO_RIGHT`.
        """
        if objective not in (masks_lib.SEQ2SEQ, masks_lib.LEFT_TO_RIGHT):
            raise ValueError(
                f"`objective` must be masks.SEQ2SEQ or masks.LEFT_TO_RIGHT, got {objective!r}."
            )
        source_token_ids, source_padding_mask = check_source(
            source_token_ids, source_padding_mask, "source_token_ids"
        )
        generation_common.check_arguments(max_length, 0, mask_id=mask_id)
        batch_size, source_length = tf.unstack(tf.shape(source_token_ids))
        lengths = tf.reduce_sum(source_padding_mask, axis=1)
        needed, message = self._positions_needed(lengths, source_length, max_length, use_cache)
        check = tf.debugging.assert_less_equal(
            needed, self.backbone.max_sequence_length, message=message
        )
        with tf.control_dependencies([check]):
            lengths = tf.identity(lengths)
        context = {"source_lengths": lengths, "source_padding_mask": source_padding_mask,
                   "source_token_ids": source_token_ids,
                   "mask_id": tf.fill([batch_size], tf.constant(mask_id, tf.int32)),
                   "objective": tf.fill([batch_size], tf.constant(objective, tf.int32))}
        if objective == masks_lib.LEFT_TO_RIGHT:
            context["penalized_ids"] = tf.where(source_padding_mask > 0, source_token_ids, -1)
        if not use_cache:
            return {"token_ids": tf.zeros([batch_size, max_length], tf.int32)}, context
        slots = source_length + max_length + 1
        # Cache slots holding a real source token, computed once for all steps.
        source_keys = tf.cast(
            tf.pad(source_padding_mask, [[0, 0], [0, max_length + 1]]), tf.bool
        )  # (B, slots)
        context["source_keys"] = source_keys
        # Padding past the table's end (hidden from every query) takes its
        # last position: only real tokens need theirs.
        positions = tf.minimum(tf.range(source_length), self.backbone.max_sequence_length - 1)
        x = self._embed_at(
            source_token_ids, tf.broadcast_to(positions, tf.shape(source_token_ids)),
            SEGMENT_ROWS[objective][0],
        )
        head_dim = self.backbone.hidden_dim // self.backbone.num_heads
        zeros = tf.zeros([batch_size, 2, slots, self.backbone.num_heads, head_dim], x.dtype)
        # Seq2seq: the source sees the whole (real) source (the mask on segment
        # 0); left to right: each prompt token the ones up to itself.
        mask = source_keys[:, None, :]
        if objective == masks_lib.LEFT_TO_RIGHT:
            query = tf.range(source_length)[:, None]
            mask &= (tf.range(slots)[None, :] <= query)[None]
        _, caches = self._run_blocks(x, mask, tuple(zeros for _ in self.backbone.transformer_layers),
                                     0)
        return {"caches": caches}, context

    def _positions_needed(self, lengths, width, max_length, use_cache):
        """`(positions, message)`: the position table a decoding needs, and its error.

        With the cache the last `[MASK]` sits at position `L + max_length - 1`
        (`L` the longest of the real source `lengths`, `[CLS] S [SEP]`), as
        in training's packing `[CLS] S [SEP] T`: padding after the source
        costs nothing, however wide. Without, the packed `width + max_length
        + 1` columns go through the backbone.
        """
        if use_cache:
            needed = tf.reduce_max(tf.concat([lengths, [0]], axis=0)) + max_length
            what = "the longest real source + max_length"
        else:
            needed = width + max_length + 1
            what = "source width + max_length + 1 (no cache)"
        table = self.backbone.max_sequence_length
        return needed, (f"UniLM.generate: {what} exceeds the position table "
                        f"(max_sequence_length={table})")

    def _check_positions(self, source_token_ids, source_padding_mask, max_length, use_cache):
        """`generate`'s position-table check, on the host (XLA compiles assertions out)."""
        lengths = tf.reduce_sum(source_padding_mask, axis=1)
        needed, message = self._positions_needed(
            lengths, tf.shape(source_token_ids)[1], max_length, use_cache
        )
        if int(needed) > self.backbone.max_sequence_length:
            raise ValueError(f"{message}: {int(needed)} positions.")

    def decoding_step(self, token_ids, index, state, context):
        """Logits `(B, V)` of target token `index`, given target token `index - 1`.

        The `step_fn` of `tfnlp.generation`; at `index` 0 `token_ids` is
        ignored (there is no previous target token). Seq2seq targets take
        the target segment's row, a prompt's continuation the left-to-right
        row (the objective is in `context`).
        """
        token_ids = tf.cast(token_ids, tf.int32)
        lengths = context["source_lengths"]
        mask_id = context["mask_id"]  # (B,): context is batch-major
        if "token_ids" in state:
            return self._recompute_step(token_ids, index, state, context)
        source_length = tf.shape(context["source_padding_mask"])[1]
        tokens = tf.stack([token_ids, mask_id], axis=1)  # (B, 2)
        positions = tf.maximum(lengths[:, None] + index - 1 + tf.range(2)[None, :], 0)
        target_row = tf.gather(tf.constant(SEGMENT_ROWS, tf.int32)[:, 1], context["objective"])
        x = self._embed_at(tokens, positions, target_row)
        slots = tf.shape(state["caches"][0])[2]
        slot = tf.range(slots)
        # Row r (0: previous token, 1: [MASK]) sees the real source and target
        # slots S + 1 .. S + index + r; slot S (the input before the first
        # target token) is never seen.
        target_end = source_length + index + tf.range(2)  # (2,)
        target_keys = (slot[None, :] > source_length) & (slot[None, :] <= target_end[:, None])
        mask = context["source_keys"][:, None, :] | target_keys[None, :, :]  # (B, 2, slots)
        x, caches = self._run_blocks(x, mask, state["caches"], source_length + index)
        logits = self.masked_lm_head(x, masked_positions=tf.ones([tf.shape(x)[0], 1], tf.int32))
        return logits[:, 0], {"caches": caches}

    def _recompute_step(self, token_ids, index, state, context):
        """No cache: run `[CLS] S [SEP] T_0..T_(index-1) [MASK]` packed, every step."""
        targets = generation_common.write_column(state["token_ids"], index - 1, token_ids)
        lengths = context["source_lengths"]
        source = context["source_token_ids"] * context["source_padding_mask"]
        max_length = tf.shape(targets)[1]
        width = tf.shape(source)[1] + max_length + 1
        m = tf.range(max_length + 1)[None, :]  # target index
        values = tf.where(
            m < index, tf.pad(targets, [[0, 0], [0, 1]]),
            tf.where(m == index, context["mask_id"][:, None], 0),
        )
        columns = lengths[:, None] + m  # (B, max_length + 1)
        rows = tf.broadcast_to(tf.range(tf.shape(source)[0])[:, None], tf.shape(columns))
        packed = tf.tensor_scatter_nd_update(
            tf.pad(source, [[0, 0], [0, max_length + 1]]),
            tf.reshape(tf.stack([rows, columns], -1), [-1, 2]), tf.reshape(values, [-1]),
        )
        position = tf.range(width)[None, :]
        end = lengths[:, None] + index  # the [MASK]
        outputs = self.backbone(
            {
                "token_ids": packed,
                "segment_ids": tf.cast((position >= lengths[:, None]) & (position <= end),
                                       tf.int32),
                "padding_mask": tf.cast(position <= end, tf.int32),
                "objective": context["objective"],
            },
            training=False,
        )
        logits = self.masked_lm_head(outputs["sequence_output"], masked_positions=end)
        return logits[:, 0], {"token_ids": targets}

    def generate(
        self,
        source_token_ids,
        source_padding_mask=None,
        *,
        end_id=None,
        mask_id=None,
        max_length=None,
        beam_size=1,
        length_penalty=0.0,
        no_repeat_ngram_size=0,
        pad_id=None,
        use_cache=True,
        jit_compile="auto",
        temperature=None,
        top_k=None,
        top_p=None,
        seed=None,
        repetition_penalty=1.0,
        max_new_tokens=None,
        stream=False,
    ):
        """Generates targets for `[CLS] S [SEP]` sources (UniLM's seq2seq decoding).

        Greedy for `beam_size=1`, beam search otherwise, sampling when
        `temperature`, `top_k`, `top_p` or `seed` is given; traced once per
        setting into a `tf.function` (any batch size and source length).

        On texts (a model with a `tokenizer`): `generate(["source", ...])`
        tokenizes the sources as `tfnlp.export.export_seq2seq` does (`[CLS]
        S [SEP]`, cut to `source_length`) and returns the list of generated
        texts (`str`); the special ids default to the tokenizer's and
        `max_length` to the model's.

        Args:
            source_token_ids: int tensor `(B, S)` (e.g. `BertPreprocessor`
                output), real tokens first; or a batch of source texts (a
                list, NumPy array or `tf.string` tensor `(B,)`).
            source_padding_mask: int or bool `(B, S)`; defaults to all real.
                Not for texts.
            end_id: int, the token ending a target (`[SEP]`); required on
                token ids unless the model has a tokenizer.
            mask_id: int, the `[MASK]` token; likewise.
            max_length: int, the most tokens generated (end token included);
                default the model's `max_length` on texts, else 64.
                The longest real source + `max_length` must fit the position
                table (`max_sequence_length`; without the cache: the source
                width + `max_length` + 1), else a ValueError (an
                `InvalidArgumentError` at run time when called inside a
                `tf.function`, unchecked inside an XLA-compiled one).
            beam_size: int.
            length_penalty: float, GNMT's alpha (beam search).
            no_repeat_ngram_size: int, 3 for UniLM's trigram blocking.
            pad_id: int, written after the end token (default: the
                tokenizer's, else 0).
            use_cache: bool; False recomputes the packed sequence every step
                (same result, slower: for tests and benchmarks).
            jit_compile: bool, or `"auto"` (the default): XLA when a GPU
                or TPU is visible, off on CPUs (why, and the figures:
                `TransformerSeq2Seq.generate`, benchmarks/README.md).
            temperature, top_k, top_p, seed, repetition_penalty,
                max_new_tokens, stream: sampling and streaming, as in
                `TransformerSeq2Seq.generate`.

        Returns:
            On texts, a list of the generated texts. Else a dict: `token_ids`
            int32 `(B, max_length)`, `lengths` int32 `(B,)`, `scores`
            float32 `(B,)`. With `stream=True` a generator of each step.
        """
        settings = {"beam_size": beam_size, "length_penalty": length_penalty,
                    "no_repeat_ngram_size": no_repeat_ngram_size, "use_cache": use_cache,
                    "jit_compile": jit_compile}
        return self._decode(
            self._generate_functions, "source_token_ids", source_token_ids, source_padding_mask,
            lambda tokenizer, texts: tokenized_sources(tokenizer, texts, self.source_length,
                                                       start_ids=(tokenizer.cls_id,)),
            end_id, mask_id, pad_id, max_length, settings, stream,
            (temperature, top_k, top_p, seed, repetition_penalty, max_new_tokens))

    def continue_prompt(
        self,
        prompt_token_ids,
        prompt_padding_mask=None,
        *,
        end_id=None,
        mask_id=None,
        max_length=None,
        no_repeat_ngram_size=0,
        pad_id=None,
        use_cache=True,
        jit_compile="auto",
        temperature=None,
        top_k=None,
        top_p=None,
        seed=None,
        repetition_penalty=1.0,
        max_new_tokens=None,
        stream=False,
    ):
        """Continues prompts left to right, as a GPT-style language model.

        UniLM's left-to-right objective is a language model: the `[MASK]` at
        position `t` predicts token `t` from the tokens before it. The
        prompt `[CLS] P` is read once into per-layer key/value caches (each
        token seeing the ones before it); each step appends the previous
        token and a `[MASK]` after it, as in training, until `end_id`
        (`[SEP]`, the end of a segment) or `max_length` tokens. Greedy by
        default; sampling with `temperature`, `top_k`, `top_p` or `seed`,
        where the repetition penalty also counts the prompt's tokens. The
        cached steps equal re-running the whole sequence
        (`use_cache=False`; `tests/models/test_sampling_models.py`). To
        train this LM with every token a target, fit on
        `tfnlp.data.left_to_right_lm_dataset` batches.

        On texts (a model with a `tokenizer`): `continue_prompt(["It was a
        dark", ...])` reads `[CLS]` and the prompt's last `source_length -
        1` tokens and returns the continuations (without the prompt) as
        `str`.

        Args:
            prompt_token_ids: int tensor `(B, P)`, `[CLS]` then the prompt,
                real tokens first; or a batch of prompt texts.
            prompt_padding_mask: int or bool `(B, P)`; defaults to all real.
            end_id, mask_id, pad_id, max_length, no_repeat_ngram_size,
                use_cache, jit_compile: as in `generate` (the longest
                prompt + `max_length` must fit the position table).
            temperature, top_k, top_p, seed, repetition_penalty,
                max_new_tokens, stream: sampling and streaming, as in
                `TransformerSeq2Seq.generate`.

        Returns:
            As `generate`: on texts a list of continuations, else a dict of
            `token_ids`, `lengths` and `scores`; with `stream=True` a
            generator of each step.

        Example:

        >>> backbone = UniLMBackbone.from_architecture("bert_tiny", vocabulary_size=100)
        >>> model = UniLM(backbone)
        >>> result = model.continue_prompt(tf.constant([[2, 45, 46]]), end_id=3, mask_id=4,
        ...                                max_length=5, top_k=10, seed=0)
        >>> result["token_ids"].shape
        TensorShape([1, 5])
        """
        settings = {"beam_size": 1, "length_penalty": 0.0,
                    "no_repeat_ngram_size": no_repeat_ngram_size, "use_cache": use_cache,
                    "jit_compile": jit_compile}
        return self._decode(
            self._continue_functions, "prompt_token_ids", prompt_token_ids, prompt_padding_mask,
            lambda tokenizer, texts: prompt_ids(tokenizer, texts, self.source_length),
            end_id, mask_id, pad_id, max_length, settings, stream,
            (temperature, top_k, top_p, seed, repetition_penalty, max_new_tokens))

    def _decode(self, functions, name, token_ids, padding_mask, tokenized, end_id, mask_id,
                pad_id, max_length, settings, stream, options):
        """What `generate` and `continue_prompt` share: texts or ids in, the search, texts out."""
        texts = source_texts(self, token_ids, name)
        tokenizer = self.tokenizer
        if tokenizer is not None:
            end_id = tokenizer.sep_id if end_id is None else end_id
            mask_id = tokenizer.mask_id if mask_id is None else mask_id
            pad_id = tokenizer.pad_id if pad_id is None else pad_id
        _, settings["options"] = decoding_options(settings["beam_size"], *options)
        check_stream(stream, settings["beam_size"])
        if texts is None:
            missing_token_ids(self, end_id=end_id, mask_id=mask_id)
            return self._generate_ids(functions, token_ids, padding_mask, end_id, mask_id,
                                      pad_id, 64 if max_length is None else max_length,
                                      settings, stream, name)
        mask_name = name.replace("token_ids", "padding_mask")
        if padding_mask is not None:
            raise ValueError(f"`{mask_name}` is for token ids, not texts.")
        ids, mask = tokenized(tokenizer, texts)
        max_length = self.max_length if max_length is None else max_length
        output = self._generate_ids(functions, ids, mask, end_id, mask_id, pad_id, max_length,
                                    settings, stream, name)
        if stream:
            return streamed_texts(tokenizer, output)
        return decoded_texts(tokenizer, output["token_ids"])

    def _generate_ids(self, functions, token_ids, padding_mask, end_id, mask_id, pad_id,
                      max_length, settings, stream, name):
        pad_id = 0 if pad_id is None else pad_id
        token_ids, padding_mask = check_source(token_ids, padding_mask, name)
        token_ids = self._checked_ids(name, token_ids, end_id=end_id, mask_id=mask_id,
                                      pad_id=pad_id)
        # There is no start token: the first step's input only fills an unseen slot.
        search = functions.stream if stream else functions.run
        return search(token_ids, padding_mask, start_id=mask_id, end_id=end_id,
                      max_length=max_length, pad_id=pad_id, mask_id=mask_id, **settings)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "tokenizer": serialized(self.tokenizer),
            "source_length": self.source_length,
            "max_length": self.max_length,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def prompt_ids(tokenizer, texts, length):
    """`(token_ids, padding_mask)` `(B, length)`: `[CLS]` and each prompt's last `length - 1` tokens.

    A prompt is continued from its end, so a long one loses its beginning.
    (The tokenizer reads a text's first `max_input_bytes` bytes only: a
    prompt longer than that, 100 kB by default, is continued from there.)
    """
    tokens = tokenizer(texts)
    starts = tf.maximum(tokens.row_lengths() - (length - 1), 0)
    tokens = tf.ragged.boolean_mask(tokens, tf.ragged.range(tokens.row_lengths()) >= starts[:, None])
    cls = tf.fill([tokens.nrows(), 1], tf.constant(tokenizer.cls_id, tf.int32))
    return tf_text.pad_model_inputs(tf.concat([cls, tokens], axis=1), length,
                                    pad_value=tokenizer.pad_id)


def _text_lengths(source_length, max_length, table, has_tokenizer):
    """`(source_length, max_length)` checked to share the position table `table`."""
    if has_tokenizer:
        if source_length is None:
            source_length = table // 2 if max_length is None else table - max_length
        if max_length is None:
            max_length = table - source_length
    source_length = _checks.positive_int("source_length", source_length, allow_none=True)
    max_length = _checks.positive_int("max_length", max_length, allow_none=True)
    if source_length is not None and source_length < 3:
        raise ValueError(
            f"`source_length` must leave room for one token besides [CLS] and [SEP], got "
            f"{source_length}."
        )
    if source_length is not None and max_length is not None and source_length + max_length > table:
        raise ValueError(
            f"`source_length` ({source_length}) + `max_length` ({max_length}) exceeds the "
            f"UniLM position table (`max_sequence_length`={table})."
        )
    return source_length, max_length
