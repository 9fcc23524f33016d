"""The encoder-decoder Transformer of "Attention Is All You Need"."""

import copy
import math

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from tfnlp import _checks
from tfnlp.data.pipelines import SEQ2SEQ_INPUTS, seq2seq_batch  # noqa: F401  (re-exported)
from tfnlp.data.seq2seq_preprocessor import Seq2SeqPreprocessor
from tfnlp.data.task_preprocessor import preprocessing_object, serialized
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer
from tfnlp.generation import _common as generation_common
from tfnlp.generation.compiled_search import (
    CompiledSearch,
    check_source,
    check_stream,
    decoding_options,
    streamed_texts,
)
from tfnlp.layers.dropout import Dropout
from tfnlp.layers.layer_normalization import LayerNormalization
from tfnlp.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from tfnlp.layers.token_logits import TokenLogits
from tfnlp.layers.transformer_block import TransformerBlock
from tfnlp.layers.transformer_decoder_block import TransformerDecoderBlock
from tfnlp.models._mixins import (
    FromConfig,
    FromPresetAlias,
)
from tfnlp.models.task import Task
from tfnlp.training.losses import SmoothedSparseCategoricalCrossentropy
from tfnlp.training.schedules import InverseSquareRootDecay

# "Attention Is All You Need", table 3 (base and big), and a size that trains here.
TRANSFORMER_ARCHITECTURES = {
    "transformer_small": {
        "num_encoder_layers": 3, "num_decoder_layers": 3, "hidden_dim": 256, "num_heads": 4,
        "intermediate_dim": 1024, "dropout": 0.1,
    },
    "transformer_base": {
        "num_encoder_layers": 6, "num_decoder_layers": 6, "hidden_dim": 512, "num_heads": 8,
        "intermediate_dim": 2048, "dropout": 0.1,
    },
    "transformer_big": {
        "num_encoder_layers": 6, "num_decoder_layers": 6, "hidden_dim": 1024, "num_heads": 16,
        "intermediate_dim": 4096, "dropout": 0.3,
    },
}

# The bound of target ids, in error messages.
_TARGET_SIZE = "`target_vocabulary_size`, or `source_vocabulary_size` when shared"

# --- Texts in, texts out (shared with `UniLM` and `tfnlp.export.export_seq2seq`) ---

DEFAULT_TEXT_LENGTH = 128  # tokens, when a model gets tokenizers but no lengths


def checked_tokenizer(name, tokenizer, vocabulary_size, size_name):
    """`tokenizer` (a `WordPieceTokenizer`, its config, or None) whose vocabulary is the model's."""
    tokenizer = preprocessing_object(name, tokenizer, WordPieceTokenizer)
    # Equal, not just smaller: every id the model generates must be a token.
    if tokenizer is not None and tokenizer.vocabulary_size() != vocabulary_size:
        raise ValueError(
            f"`{name}` has {tokenizer.vocabulary_size()} tokens but the model's vocabulary has "
            f"{vocabulary_size} ({size_name})."
        )
    return tokenizer


def tokenized_sources(tokenizer, texts, source_length, start_ids=()):
    """`(token_ids, padding_mask)` `(B, source_length)` of `start_ids S [SEP]`, `S` cut to fit.

    The encoding `generate` reads texts with, and the exported signature.
    """
    tokens = tokenizer(texts)[:, : source_length - 1 - len(start_ids)]

    def column(token_id):
        return tf.fill([tokens.nrows(), 1], tf.constant(token_id, tf.int32))

    pieces = [column(t) for t in start_ids] + [tokens, column(tokenizer.sep_id)]
    return tf_text.pad_model_inputs(
        tf.concat(pieces, axis=1), source_length, pad_value=tokenizer.pad_id
    )


def source_texts(model, texts, name):
    """`texts` (the argument `name`) as a `tf.string` `(B,)` tensor if they are texts (else None).

    For `generate`: read, and refused without tokenizers, by the model's task preprocessor.
    """
    preprocessor = model._task_preprocessor()
    texts = preprocessor.texts(texts, name)
    if texts is not None:
        preprocessor.check("generate")
    return texts


def decoded_texts(tokenizer, token_ids):
    """Python strings of generated ids (end token and padding dropped)."""
    return [t.decode("utf-8") for t in tokenizer.detokenize(token_ids).numpy()]


def missing_token_ids(model, **token_ids):
    """Raise the `TypeError` of a token-id `generate` called without its special ids."""
    missing = [name for name, value in token_ids.items() if value is None]
    if missing:
        raise TypeError(
            f"{type(model).__name__}.generate on token ids needs "
            f"{', '.join(f'`{name}`' for name in missing)} (or a model built with tokenizers)."
        )


@keras.saving.register_keras_serializable(package="tfnlp")
class TransformerSeq2Seq(FromConfig, FromPresetAlias, Task):
    """Encoder-decoder Transformer for translation and other seq2seq tasks.

    Encoder: token embedding scaled by `sqrt(hidden_dim)` + sinusoidal
    positions, dropout, `num_encoder_layers` `TransformerBlock`s (source
    padding mask honoured). Decoder: the same embedding scheme,
    `num_decoder_layers` `TransformerDecoderBlock`s (causal self-attention,
    cross-attention over the encoder output with the source padding mask,
    FFN), then vocabulary logits (float32). Post-LN as in the paper, or pre-LN
    with `norm_first=True` (then each stack ends with a LayerNorm).

    Vocabularies: with `target_vocabulary_size=None` source and target share
    one vocabulary and one embedding matrix (the paper's setup for
    English-German); otherwise each side has its own. With
    `tie_output_embedding=True` the output projection reuses the target
    embedding matrix.

    Inputs (a dict, int32): `encoder_token_ids`, `encoder_padding_mask`
    `(B, S)` and `decoder_token_ids`, `decoder_padding_mask` `(B, T)` (masks
    are 1 for real tokens), as `tfnlp.data.encoder_decoder_dataset` makes
    them; a float id, mismatched shapes or an id outside its vocabulary
    fail as in `BertBackbone`. Output: logits `(B, T,
    target_vocabulary_size)`. Training is
    teacher-forced in one parallel pass: position t sees decoder tokens
    `0..t` only. `compile()` without arguments uses Adam (β2 = 0.98, ε = 1e-9)
    with `InverseSquareRootDecay` (peak `(hidden_dim * 4000) ** -0.5`, 4000
    warm-up steps) and the cross-entropy with label smoothing 0.1, as in the
    paper, and token accuracy weighted like the loss; see `seq2seq_batch` for
    the labels and weights.

    Generation: `generate` encodes the source once and decodes one token per
    step with key/value caches (greedy or beam search from
    `tfnlp.generation`).

    Texts (keras-hub's "the task owns its preprocessing"): built with a
    `source_tokenizer` (and a `target_tokenizer`, the same one by default),
    `generate(["source text", ...])` returns a list of target texts, and
    `fit`/`evaluate` take `x` source texts and `y` target texts (lists,
    NumPy arrays or `tf.string` tensors), or a `tf.data.Dataset` of
    `(source, target)` texts (single pairs or batches of them), tokenized by
    `tfnlp.data.encoder_decoder_dataset` with `source_length` and
    `target_length` (labels and weights as `seq2seq_batch`). The token-id
    inputs work unchanged; `tfnlp.export.export_seq2seq(model, export_dir)`
    uses the model's tokenizers and lengths.

    Args:
        source_vocabulary_size: int.
        target_vocabulary_size: int, or None for a vocabulary shared with
            the source.
        num_encoder_layers: int.
        num_decoder_layers: int.
        hidden_dim: int, `d_model`.
        num_heads: int, must divide `hidden_dim`.
        intermediate_dim: int, FFN size; defaults to `4 * hidden_dim`.
        dropout: float in [0, 1), on embeddings, attention and sublayers.
        tie_output_embedding: bool, output projection = target embedding.
        norm_first: bool, pre-LN blocks.
        source_tokenizer: optional `tfnlp.data.WordPieceTokenizer` of the
            sources, with `source_vocabulary_size` tokens.
        target_tokenizer: optional `WordPieceTokenizer` of the targets, with
            the target vocabulary's size; defaults to `source_tokenizer`.
        source_length: int, sources are cut to this many tokens (`[SEP]`
            included); default 128 with tokenizers.
        target_length: int, the longest target in training and the most
            tokens `generate` writes on texts (end token included); default
            128 with tokenizers.
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Example:

    >>> model = TransformerSeq2Seq(100, num_encoder_layers=1, num_decoder_layers=1,
    ...                            hidden_dim=32, num_heads=4)
    >>> logits = model({
    ...     "encoder_token_ids": tf.constant([[5, 6, 7, 3]]),
    ...     "encoder_padding_mask": tf.ones((1, 4), tf.int32),
    ...     "decoder_token_ids": tf.constant([[2, 8, 9]]),
    ...     "decoder_padding_mask": tf.ones((1, 3), tf.int32),
    ... })
    >>> logits.shape
    TensorShape([1, 3, 100])
    >>> output = model.generate(tf.constant([[5, 6, 7, 3]]), start_id=2, end_id=3,
    ...                         max_length=10, beam_size=2)
    >>> output["token_ids"].shape
    TensorShape([1, 10])

    With a tokenizer, on texts:

    >>> from tfnlp import data
    >>> tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["hola", "hello"])
    >>> model = TransformerSeq2Seq(7, num_encoder_layers=1, num_decoder_layers=1, hidden_dim=16,
    ...                            num_heads=2, source_tokenizer=tokenizer, source_length=8,
    ...                            target_length=4)
    >>> len(model.generate(["hello", "hola hello"]))
    2

    References:
        Vaswani et al., "Attention Is All You Need", 2017.
    """

    def __init__(
        self,
        source_vocabulary_size,
        target_vocabulary_size=None,
        num_encoder_layers=6,
        num_decoder_layers=6,
        hidden_dim=512,
        num_heads=8,
        intermediate_dim=None,
        dropout=0.1,
        tie_output_embedding=True,
        norm_first=False,
        source_tokenizer=None,
        target_tokenizer=None,
        source_length=None,
        target_length=None,
        **kwargs,
    ):
        source_vocabulary_size = _checks.positive_int(
            "source_vocabulary_size", source_vocabulary_size
        )
        target_vocabulary_size = _checks.positive_int(
            "target_vocabulary_size", target_vocabulary_size, allow_none=True
        )
        num_encoder_layers = _checks.positive_int("num_encoder_layers", num_encoder_layers)
        num_decoder_layers = _checks.positive_int("num_decoder_layers", num_decoder_layers)
        hidden_dim = _checks.positive_int("hidden_dim", hidden_dim)
        num_heads = _checks.positive_int("num_heads", num_heads)
        intermediate_dim = _checks.positive_int(
            "intermediate_dim", 4 * hidden_dim if intermediate_dim is None else intermediate_dim
        )
        dropout = _checks.rate("dropout", dropout)
        source_tokenizer = checked_tokenizer(
            "source_tokenizer", source_tokenizer, source_vocabulary_size,
            "`source_vocabulary_size`",
        )
        target_tokenizer = checked_tokenizer(
            "target_tokenizer", source_tokenizer if target_tokenizer is None else target_tokenizer,
            source_vocabulary_size if target_vocabulary_size is None else target_vocabulary_size,
            _TARGET_SIZE,
        )
        if target_tokenizer is not None and source_tokenizer is None:
            raise ValueError("`target_tokenizer` needs a `source_tokenizer` too.")
        default_length = None if source_tokenizer is None else DEFAULT_TEXT_LENGTH
        source_length = _checks.positive_int(
            "source_length", default_length if source_length is None else source_length,
            allow_none=True,
        )
        if source_length is not None and source_length < 2:
            raise ValueError(
                f"`source_length` must leave room for one token besides [SEP], got {source_length}."
            )
        target_length = _checks.positive_int(
            "target_length", default_length if target_length is None else target_length,
            allow_none=True,
        )
        if hidden_dim % num_heads:
            raise ValueError(
                f"`hidden_dim` ({hidden_dim}) must be divisible by `num_heads` ({num_heads})."
            )
        dtype = kwargs.pop("dtype", None)
        embeddings_initializer = keras.initializers.RandomNormal(stddev=hidden_dim**-0.5)

        # === Layers ===
        self.source_embedding = keras.layers.Embedding(
            source_vocabulary_size, hidden_dim, embeddings_initializer=embeddings_initializer,
            dtype=dtype, name="source_embedding",
        )
        if target_vocabulary_size is None:
            self.target_embedding = self.source_embedding
        else:
            self.target_embedding = keras.layers.Embedding(
                target_vocabulary_size, hidden_dim, embeddings_initializer=embeddings_initializer,
                dtype=dtype, name="target_embedding",
            )
        # The embedding is scaled by sqrt(d_model) so that it is not drowned
        # by the position encoding (its entries have stddev d_model ** -0.5).
        self.embedding_scale = keras.layers.Rescaling(
            math.sqrt(hidden_dim), dtype=dtype, name="embedding_scale"
        )
        self.position_encoding = SinusoidalPositionEncoding(dtype=dtype, name="position_encoding")
        self.source_add = keras.layers.Add(dtype=dtype, name="source_add")
        self.target_add = keras.layers.Add(dtype=dtype, name="target_add")
        self.source_dropout = Dropout(dropout, dtype=dtype, name="source_dropout")
        self.target_dropout = Dropout(dropout, dtype=dtype, name="target_dropout")
        block_args = {
            "num_heads": num_heads, "intermediate_dim": intermediate_dim, "dropout": dropout,
            "norm_first": norm_first, "dtype": dtype,
        }
        self.encoder_layers = [
            TransformerBlock(name=f"encoder_layer_{i}", **block_args)
            for i in range(num_encoder_layers)
        ]
        self.decoder_layers = [
            TransformerDecoderBlock(name=f"decoder_layer_{i}", **block_args)
            for i in range(num_decoder_layers)
        ]
        if norm_first:
            self.encoder_norm = LayerNormalization(
                epsilon=1e-5, dtype=dtype, name="encoder_norm"
            )
            self.decoder_norm = LayerNormalization(
                epsilon=1e-5, dtype=dtype, name="decoder_norm"
            )
        self.token_logits = TokenLogits(
            self.target_embedding.input_dim,
            token_embedding=self.target_embedding if tie_output_embedding else None,
            dtype=dtype,
            name="token_logits",
        )

        # === Functional model ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in SEQ2SEQ_INPUTS
        }
        encoder_output = self._encode(
            inputs["encoder_token_ids"], inputs["encoder_padding_mask"], norm_first
        )
        logits = self._decode(
            inputs["decoder_token_ids"], inputs["decoder_padding_mask"], encoder_output,
            inputs["encoder_padding_mask"], norm_first,
        )
        super().__init__(inputs=inputs, outputs=logits, dtype=dtype, **kwargs)

        # === Config ===
        self.source_vocabulary_size = source_vocabulary_size
        self.target_vocabulary_size = target_vocabulary_size
        self.num_encoder_layers = num_encoder_layers
        self.num_decoder_layers = num_decoder_layers
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.tie_output_embedding = bool(tie_output_embedding)
        self.norm_first = bool(norm_first)
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.source_length = source_length
        self.target_length = target_length
        self._generate_functions = CompiledSearch(
            self.decoding_step, self.initial_decoding_state
        )

    def _checked_inputs(self, inputs):
        target_size = self.target_embedding.input_dim
        specs = {
            "encoder_token_ids": ("BS", self.source_vocabulary_size, "`source_vocabulary_size`"),
            "encoder_padding_mask": ("BS", None, None),
            "decoder_token_ids": ("BT", target_size, _TARGET_SIZE),
            "decoder_padding_mask": ("BT", None, None),
        }
        # An empty decoder sequence is allowed: no target, zero loss and zero
        # gradients (tests/test_numerics.py).
        return _checks.has_positions(_checks.model_inputs(inputs, specs), {
            "encoder_token_ids": "every source needs at least one token (its end token).",
        })

    def _checked_source(self, encoder_token_ids, encoder_padding_mask, **token_ids):
        """`check_source`, the source ids' range and the generation token ids' range."""
        encoder_token_ids, encoder_padding_mask = check_source(
            encoder_token_ids, encoder_padding_mask, "encoder_token_ids"
        )
        encoder_token_ids = _checks.ids_in_range(
            "encoder_token_ids", encoder_token_ids, self.source_vocabulary_size,
            "`source_vocabulary_size`",
        )
        _checks.token_ids_in_range(self.target_embedding.input_dim, _TARGET_SIZE, **token_ids)
        return encoder_token_ids, encoder_padding_mask

    # --- The two stacks (shared by the Functional graph and decoding) ---

    def _embed(self, embedding, token_ids, add, dropout, start_index=0, training=None):
        x = self.embedding_scale(embedding(token_ids))
        x = add([x, self.position_encoding(x, start_index=start_index)])
        return dropout(x, training=training)

    def _encode(self, token_ids, padding_mask, norm_first, training=None):
        x = self._embed(
            self.source_embedding, token_ids, self.source_add, self.source_dropout,
            training=training,
        )
        for block in self.encoder_layers:
            x = block(x, padding_mask=padding_mask, training=training)
        return self.encoder_norm(x) if norm_first else x

    def _decode(self, token_ids, padding_mask, encoder_output, encoder_padding_mask, norm_first,
                training=None):
        x = self._embed(
            self.target_embedding, token_ids, self.target_add, self.target_dropout,
            training=training,
        )
        for block in self.decoder_layers:
            x = block(
                x, encoder_output, decoder_padding_mask=padding_mask,
                encoder_padding_mask=encoder_padding_mask, training=training,
            )
        if norm_first:
            x = self.decoder_norm(x)
        return self.token_logits(x)

    # --- Step-by-step decoding ---

    def encode(self, encoder_token_ids, encoder_padding_mask=None):
        """The encoder output `(B, S, hidden_dim)` (inference mode).

        Args:
            encoder_token_ids: int tensor `(B, S)`.
            encoder_padding_mask: int or bool `(B, S)`; defaults to all ones.
        """
        encoder_token_ids, encoder_padding_mask = self._checked_source(
            encoder_token_ids, encoder_padding_mask
        )
        return self._encode(encoder_token_ids, encoder_padding_mask, self.norm_first, False)

    def initial_decoding_state(self, encoder_token_ids, encoder_padding_mask, max_length,
                               use_cache=True):
        """`(state, context)` for `decoding_step`, from the source.

        The source is encoded once. With `use_cache` the state holds one
        self-attention cache `(B, 2, max_length, num_heads, head_dim)` per
        decoder layer (zeros) and the context one cross-attention cache per
        layer (the encoder output projected once). Without it, the state
        holds the decoded tokens `(B, max_length)` and every step re-runs the
        whole decoder over them (the reference the cache is tested against).

        Args:
            encoder_token_ids: int tensor `(B, S)`.
            encoder_padding_mask: int or bool `(B, S)`, or None.
            max_length: int, the most decoder positions.
            use_cache: bool.
        """
        encoder_token_ids, encoder_padding_mask = check_source(
            encoder_token_ids, encoder_padding_mask, "encoder_token_ids"
        )
        encoder_output = self._encode(encoder_token_ids, encoder_padding_mask, self.norm_first, False)
        batch_size = tf.shape(encoder_token_ids)[0]
        if not use_cache:
            state = {"token_ids": tf.zeros([batch_size, max_length], tf.int32)}
            context = {"encoder_output": encoder_output, "encoder_padding_mask": encoder_padding_mask}
            return state, context
        head_dim = self.hidden_dim // self.num_heads
        zeros = tf.zeros(
            [batch_size, 2, max_length, self.num_heads, head_dim], encoder_output.dtype
        )
        state = {"self_attention_caches": tuple(zeros for _ in self.decoder_layers)}
        context = {
            "cross_attention_caches": tuple(
                block.compute_cross_attention_cache(encoder_output) for block in self.decoder_layers
            ),
            "encoder_padding_mask": encoder_padding_mask,
        }
        return state, context

    def decoding_step(self, token_ids, index, state, context):
        """Logits `(B, V)` of the token after `token_ids` `(B,)` at position `index`.

        The `step_fn` of `tfnlp.generation.greedy_search` / `beam_search`;
        `state` and `context` come from `initial_decoding_state`.
        """
        token_ids = tf.cast(token_ids, tf.int32)
        if "token_ids" in state:  # no cache: recompute the whole prefix
            decoded = generation_common.write_column(state["token_ids"], index, token_ids)
            logits = self._decode(
                decoded, None, context["encoder_output"], context["encoder_padding_mask"],
                self.norm_first, False,
            )
            return tf.gather(logits, index, axis=1), {"token_ids": decoded}
        x = self._embed(
            self.target_embedding, token_ids[:, None], self.target_add, self.target_dropout,
            start_index=index, training=False,
        )
        caches = []
        for block, cache, cross_cache in zip(
            self.decoder_layers, state["self_attention_caches"],
            context["cross_attention_caches"], strict=True,
        ):
            x, cache = block(
                x,
                encoder_padding_mask=context["encoder_padding_mask"],
                self_attention_cache=cache,
                self_attention_cache_update_index=index,
                cross_attention_cache=cross_cache,
                training=False,
            )
            caches.append(cache)
        if self.norm_first:
            x = self.decoder_norm(x)
        return self.token_logits(x)[:, 0], {"self_attention_caches": tuple(caches)}

    def generate(
        self,
        encoder_token_ids,
        encoder_padding_mask=None,
        *,
        start_id=None,
        end_id=None,
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
        """Decodes target tokens for a batch of sources.

        Greedy search for `beam_size=1`, beam search otherwise, sampling
        when `temperature`, `top_k`, `top_p` or `seed` is given
        (`tfnlp.generation.sample`: a seed gives the same text on every
        backend). The search is traced once per setting into a
        `tf.function` (any batch size and source length; new sampling
        values do not trace again) and reused by later calls.

        On texts (a model with tokenizers): `generate(["source", ...])`
        tokenizes the sources as `tfnlp.export.export_seq2seq` does (`S
        [SEP]`, cut to `source_length`), decodes, and returns the list of
        target texts (`str`); the special ids default to the target
        tokenizer's and `max_length` to `target_length`.

        Args:
            encoder_token_ids: int tensor `(B, S)`, or a batch of source texts
                (a list, NumPy array or `tf.string` tensor `(B,)`).
            encoder_padding_mask: int or bool `(B, S)`; defaults to all ones.
                Not for texts.
            start_id: int, the first decoder token (`[CLS]` in
                `encoder_decoder_dataset`); required on token ids unless the
                model has tokenizers.
            end_id: int, the token that ends a target (`[SEP]`); likewise.
            max_length: int, the most tokens generated (end token included);
                default `target_length` on texts, else 64.
            beam_size: int.
            length_penalty: float, GNMT's alpha (beam search only).
            no_repeat_ngram_size: int, 3 blocks repeated trigrams; 0 is off.
            pad_id: int, written after the end token (default: the
                tokenizer's, else 0).
            use_cache: bool; False recomputes the whole prefix every step
                (same result, slower: for tests and benchmarks).
            jit_compile: bool, or `"auto"` (the default): compile the
                search with XLA when a GPU or TPU is visible. On a GPU XLA
                makes a decoding step many times faster; on a CPU it gains
                less, loses under bfloat16 and compiles once per batch size
                and source length, so `"auto"` leaves it off on CPUs
                (measured: benchmarks/README.md, generation and "On a GPU").
            temperature: sampling: a number > 0 (default 1 when sampling),
                or one per sequence.
            top_k: sampling: keep the k most probable tokens (0: all).
            top_p: sampling: keep the smallest set of most probable tokens
                whose probability reaches `top_p` (1: all).
            seed: sampling: an int in `[0, 2**63)` (each row gets its own seed made from it)
                or one per sequence; the same seed gives the same text.
                Default: a random seed when another sampling option is
                given.
            repetition_penalty: number > 0 (1: off), CTRL's penalty on
                tokens already generated; greedy search and sampling.
            max_new_tokens: optional int (or one per sequence) in `[1,
                max_length]`: a sequence ends after this many tokens;
                greedy search and sampling.
            stream: True returns a generator that yields each step as it is
                decoded (greedy search and sampling): on token ids the
                next token of every sequence, int32 NumPy `(B,)` (`pad_id`
                once a sequence has ended); on texts a list of the new
                text of every sequence (joined, the pieces are the
                generated texts). Python only: TF Serving has no streaming.

        Returns:
            On texts, a list of the generated texts. Else a dict: `token_ids`
            int32 `(B, max_length)` (the best hypothesis, end token
            included, then padding), `lengths` int32 `(B,)`, `scores`
            float32 `(B,)` (log-probability, length-normalised for beam
            search). With `stream=True`, a generator instead (see above).

        Raises:
            ValueError: for a source id outside `[0, source_vocabulary_size)`
                or a `start_id`, `end_id` or `pad_id` outside the target
                vocabulary (in a graph, source ids fail at run time with an
                `InvalidArgumentError`); texts given to a model without
                tokenizers, or a single text rather than a batch.
        """
        texts = source_texts(self, encoder_token_ids, "encoder_token_ids")
        tokenizer = self.target_tokenizer
        if tokenizer is not None:
            start_id = tokenizer.cls_id if start_id is None else start_id
            end_id = tokenizer.sep_id if end_id is None else end_id
            pad_id = tokenizer.pad_id if pad_id is None else pad_id
        settings = {
            "max_length": max_length, "beam_size": beam_size, "length_penalty": length_penalty,
            "no_repeat_ngram_size": no_repeat_ngram_size, "pad_id": pad_id,
            "use_cache": use_cache, "jit_compile": jit_compile,
        }
        _, options = decoding_options(beam_size, temperature, top_k, top_p, seed,
                                      repetition_penalty, max_new_tokens)
        check_stream(stream, beam_size)
        if texts is not None:
            if encoder_padding_mask is not None:
                raise ValueError("`encoder_padding_mask` is for token ids, not texts.")
            settings["max_length"] = self.target_length if max_length is None else max_length
            source, mask = tokenized_sources(self.source_tokenizer, texts, self.source_length)
            output = self._generate_ids(source, mask, start_id, end_id, settings, options, stream)
            if stream:
                return streamed_texts(tokenizer, output)
            return decoded_texts(tokenizer, output["token_ids"])
        missing_token_ids(self, start_id=start_id, end_id=end_id)
        settings["max_length"] = 64 if max_length is None else max_length
        settings["pad_id"] = 0 if pad_id is None else pad_id
        return self._generate_ids(encoder_token_ids, encoder_padding_mask, start_id, end_id,
                                  settings, options, stream)

    def _generate_ids(self, encoder_token_ids, encoder_padding_mask, start_id, end_id, settings,
                      options, stream):
        encoder_token_ids, encoder_padding_mask = self._checked_source(
            encoder_token_ids, encoder_padding_mask, start_id=start_id, end_id=end_id,
            pad_id=settings["pad_id"],
        )
        search = self._generate_functions.stream if stream else self._generate_functions.run
        return search(encoder_token_ids, encoder_padding_mask, start_id=start_id, end_id=end_id,
                      options=options, **settings)

    # --- Texts ---

    def _task_preprocessor(self):
        return Seq2SeqPreprocessor(self.source_tokenizer, self.target_tokenizer, self.source_length,
                                   self.target_length, task_name=type(self).__name__)

    # --- Training defaults and config ---

    def _compile_defaults(self):
        return {
            "optimizer": keras.optimizers.Adam(
                InverseSquareRootDecay((self.hidden_dim * 4000) ** -0.5, 4000),
                beta_1=0.9, beta_2=0.98, epsilon=1e-9,
            ),
            "loss": SmoothedSparseCategoricalCrossentropy(label_smoothing=0.1),
            # Weighted: padded target positions (weight 0) must not count.
            "weighted_metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        }

    @classmethod
    def from_architecture(cls, architecture, source_vocabulary_size, target_vocabulary_size=None, **overrides):
        """A model of a size from `TRANSFORMER_ARCHITECTURES` (random weights).

        Args:
            architecture: `"transformer_small"`, `"transformer_base"` or
                `"transformer_big"`.
            source_vocabulary_size: int.
            target_vocabulary_size: int or None (shared vocabulary).
            **overrides: any other constructor argument.
        """
        _checks.one_of("architecture", architecture, sorted(TRANSFORMER_ARCHITECTURES))
        config = copy.deepcopy(TRANSFORMER_ARCHITECTURES[architecture])
        config.update(overrides)
        return cls(source_vocabulary_size, target_vocabulary_size, **config)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.source_embedding.dtype_policy),
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
            "num_encoder_layers": self.num_encoder_layers,
            "num_decoder_layers": self.num_decoder_layers,
            "hidden_dim": self.hidden_dim,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "tie_output_embedding": self.tie_output_embedding,
            "norm_first": self.norm_first,
            "source_tokenizer": serialized(self.source_tokenizer),
            # None: the source's (one tokenizer for a shared vocabulary).
            "target_tokenizer": (
                None if self.target_tokenizer is self.source_tokenizer
                else serialized(self.target_tokenizer)
            ),
            "source_length": self.source_length,
            "target_length": self.target_length,
        }


# The name before 2026-11-29 (keras-hub's "preset" means released weights).
__getattr__ = _checks.renamed_attributes(__name__, {"TRANSFORMER_PRESETS": ("TRANSFORMER_ARCHITECTURES", TRANSFORMER_ARCHITECTURES)})
