"""BERT backbone and pretrainer -> SavedModels that take raw strings."""

import tensorflow as tf
import tensorflow_text as tf_text

from tfnlp import _checks
from tfnlp.data._tensors import cut_at_character
from tfnlp.export._common import (
    WARMUP_BATCH_SIZES,
    check_preprocessor,
    preprocessor_for,
    save,
    takes_pairs,
)
from tfnlp.export._old_call_forms import takes_old_call_form
from tfnlp.export._serving_module import TEXT, ServingModule, Signature, text_and_pair_signatures


class BackboneServingModule(ServingModule):
    """Text in, BERT features out.

    Signatures: `serving_default(text)` and `encode_pairs(text_a, text_b)`
    (exported only for a backbone with 2 or more segments; `text_a` and
    `text_b` must hold the same number of texts), both returning
    `pooled_output` `(B, H)`, `sequence_output` `(B, L, H)` (float32) and
    `padding_mask` int32 `(B, L)` (1 on real tokens; the outputs at padding
    are meaningless).

    Args:
        backbone: a `BertBackbone`.
        preprocessor: its `BertPreprocessor` (its tokenizer may not have
            more tokens than the backbone's vocabulary).
    """

    SIGNATURES = text_and_pair_signatures("encode", "encode_pairs")

    def __init__(self, backbone, preprocessor):
        super().__init__(name="backbone_serving")
        check_preprocessor(preprocessor, backbone)
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.takes_pairs = takes_pairs(backbone)

    def _serve(self, *texts):
        inputs = self.preprocessor(texts)
        outputs = self.backbone(inputs, training=False)
        return {
            "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
            "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
            "padding_mask": inputs["padding_mask"],
        }


MASK = "[MASK]"


def without_split_mask(texts, cut):
    """`cut` (prefixes of `texts`) less a `[MASK]` the cut split at its end.

    A text cut inside a trailing `[MASK]` (ending in `[`, `[M`, ..., `[MASK`)
    would otherwise be tokenized as `[`, `mask`: that partial literal is
    dropped. Texts that were not cut are returned as they are, whatever
    they end with. Looks at the last 5 bytes only.

    >>> without_split_mask(tf.constant(["a [MASK] b [MA", "c [MA"]),
    ...                    tf.constant(["a [MASK] b [MA", "c [MA"])).numpy().tolist()
    [b'a [MASK] b [MA', b'c [MA']
    >>> without_split_mask(tf.constant(["a [MASK] b [MASK]"]),
    ...                    tf.constant(["a [MASK] b [MA"])).numpy().tolist()
    [b'a [MASK] b ']
    """
    length = tf.strings.length(cut)
    partial = tf.zeros_like(length)  # bytes of a split [MASK] at the end
    for size in range(1, len(MASK)):
        start = tf.maximum(length - size, 0)
        ends = tf.equal(tf.strings.substr(cut, start, tf.fill(tf.shape(start), size)), MASK[:size])
        partial = tf.where(ends, size, partial)  # a text shorter than `size` never ends so
    was_cut = length < tf.strings.length(texts)
    keep = tf.where(was_cut, length - partial, length)
    return tf.strings.substr(cut, tf.zeros_like(keep), keep)


class FillMaskServingModule(ServingModule):
    """Text with `[MASK]` in, the `top_k` most likely tokens for each mask out.

    The literal `[MASK]` (upper case) marks the blanks; BERT's tokenizer
    would split it into `[`, `mask`, `]`, so the text is split on it first,
    after cutting it to the tokenizer's `max_input_bytes` (the cost of a
    request is bounded; masks past the cut, or past the sequence length,
    are not answered, and a `[MASK]` split by the cut is dropped).
    Signature `serving_default(text)` returns, for the first `max_masks`
    masks of each text (padded when fewer): `tokens` `tf.string (B, M, K)`,
    `token_ids` int32 `(B, M, K)`, `probabilities` float32 `(B, M, K)`,
    `mask_positions` int32 `(B, M)` (positions in the packed input) and
    `mask_count` int32 `(B,)` (how many of the `M` rows are real).

    Args:
        pretrainer: a `BertPretrainer`.
        preprocessor: its `BertPreprocessor` (its tokenizer may not have
            more tokens than the model's vocabulary; the answers are its
            tokens, with the probabilities of a softmax over them).
        top_k: int, candidates per mask (at most the vocabulary size).
        max_masks: int, masks answered per text.
    """

    SIGNATURES = (Signature("serving_default", "fill_mask", {"text": TEXT}),)

    def __init__(self, pretrainer, preprocessor, top_k=5, max_masks=8):
        super().__init__(name="fill_mask_serving")
        check_preprocessor(preprocessor, pretrainer)
        self.pretrainer = pretrainer
        self.preprocessor = preprocessor
        self.top_k = _checks.positive_int("top_k", top_k)
        size = preprocessor.tokenizer.vocabulary_size()
        if self.top_k > size:
            raise ValueError(f"`top_k` must be at most the vocabulary size ({size}), got {top_k}.")
        self.max_masks = _checks.positive_int("max_masks", max_masks)
        self.vocabulary = tf.constant(preprocessor.tokenizer.get_vocabulary())

    def _serve(self, text):
        tokenizer = self.preprocessor.tokenizer
        # Cut before splitting: a 1 MB text of [MASK]s costs what 100 kB does.
        text = without_split_mask(text, cut_at_character(text, tokenizer.max_input_bytes))
        pieces = tf.strings.split(text, MASK)  # (B, P)
        tokens = tokenizer(pieces)  # (B, P, T)
        # Exactly one [MASK] after every piece, also after empty pieces.
        mask_column = tokens.with_values(
            tf.RaggedTensor.from_tensor(tf.fill([tokens.values.nrows(), 1], tokenizer.mask_id))
        )
        # piece [MASK] piece [MASK] ... piece: drop the mask after the last piece.
        token_ids = tf.concat([tokens, mask_column], axis=2).merge_dims(1, 2)[:, :-1]
        inputs = self.preprocessor.packer(token_ids)
        is_mask = tf.equal(inputs["token_ids"], tokenizer.mask_id)
        positions = tf.ragged.boolean_mask(
            tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask)), is_mask
        )
        positions, valid = tf_text.pad_model_inputs(positions, self.max_masks)
        logits = self.pretrainer(
            {**inputs, "masked_positions": tf.cast(positions, tf.int32)}, training=False
        )["mlm"]
        # Only the tokenizer's tokens are candidates (an embedding table padded
        # beyond the vocabulary has rows that are no token).
        logits = tf.cast(logits, tf.float32)[..., : self.vocabulary.shape[0]]
        probabilities, ids = tf.math.top_k(tf.nn.softmax(logits), self.top_k)
        valid = tf.cast(valid, tf.bool)
        return {
            "tokens": tf.where(valid[:, :, None], tf.gather(self.vocabulary, ids), ""),
            "token_ids": tf.where(valid[:, :, None], ids, 0),
            "probabilities": tf.where(valid[:, :, None], probabilities, 0.0),
            "mask_positions": tf.where(valid, tf.cast(positions, tf.int32), 0),
            "mask_count": tf.reduce_sum(tf.cast(valid, tf.int32), axis=1),
        }


@takes_old_call_form("backbone", "preprocessor", "export_dir", "version", "warmup_batch_sizes")
def export_backbone(model, export_dir, *, preprocessor=None, version=1,
                    warmup_batch_sizes=WARMUP_BATCH_SIZES):
    """Writes `export_dir/VERSION/` with the `encode` signatures (see `BackboneServingModule`).

    Args:
        model: a `BertBackbone`.
        export_dir: the model's directory, e.g. `saved_models/bert`.
        preprocessor: its `BertPreprocessor`; default the model's own
            `preprocessor`, where it has one.
        version: int, the version subdirectory.
        warmup_batch_sizes: the batch sizes of the TF Serving warm-up
            requests written for every signature (`()`: none; keep them at
            most the server's `max_batch_size` when it batches requests).

    Returns:
        The path of the written version.

    Example:

    >>> import tempfile
    >>> from tfnlp import data, models
    >>> vocab = list(data.SPECIAL_TOKENS) + ["hello", "world"]
    >>> preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocab), 8)
    >>> backbone = models.BertBackbone.from_architecture("bert_tiny", vocabulary_size=7)
    >>> path = export_backbone(backbone, tempfile.mkdtemp(), preprocessor=preprocessor)
    >>> encode = tf.saved_model.load(path).signatures["serving_default"]
    >>> encode(text=tf.constant(["hello world"]))["pooled_output"].shape
    TensorShape([1, 128])
    """
    module = BackboneServingModule(model, preprocessor_for(model, preprocessor))
    return save(module, export_dir, version, warmup_batch_sizes)


@takes_old_call_form("pretrainer", "preprocessor", "export_dir", "top_k", "max_masks", "version",
                     "warmup_batch_sizes")
def export_fill_mask(model, export_dir, *, preprocessor=None, top_k=5, max_masks=8, version=1,
                     warmup_batch_sizes=WARMUP_BATCH_SIZES):
    """Writes `export_dir/VERSION/` with the `fill_mask` signature (see `FillMaskServingModule`).

    Args:
        model: a `BertPretrainer`.
        export_dir: the model's directory.
        preprocessor: its `BertPreprocessor`; default the model's own
            `preprocessor`, where it has one.
        top_k: int, candidates per mask.
        max_masks: int, masks answered per text.
        version: int, the version subdirectory.
        warmup_batch_sizes: the batch sizes of the TF Serving warm-up
            requests written for every signature (`()`: none; keep them at
            most the server's `max_batch_size` when it batches requests).

    Returns:
        The path of the written version.
    """
    module = FillMaskServingModule(model, preprocessor_for(model, preprocessor), top_k=top_k,
                                   max_masks=max_masks)
    return save(module, export_dir, version, warmup_batch_sizes)
