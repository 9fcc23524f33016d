"""Encoder-decoder model -> SavedModel that turns raw text into generated text."""

import numbers

import tensorflow as tf

from tfnlp import _checks
from tfnlp.data.wordpiece_tokenizer import WordPieceTokenizer
from tfnlp.export._common import WARMUP_BATCH_SIZES, save
from tfnlp.export._old_call_forms import takes_old_call_form
from tfnlp.export._serving_module import TEXT, Option, ServingModule, Signature
from tfnlp.models.transformer_seq2seq import (
    DEFAULT_TEXT_LENGTH,
    TransformerSeq2Seq,
    tokenized_sources,
)
from tfnlp.models.unilm import UniLM, prompt_ids

# The inputs of `sample` and `continue`: the texts and their decoding options,
# warmed up with greedy decoding of one token.
SAMPLING_INPUTS = {
    "text": TEXT,
    "temperature": Option(tf.float32, 1.0),
    "top_k": Option(tf.int32, 1),
    "top_p": Option(tf.float32, 1.0),
    "seed": Option(tf.int64, 0),
    "max_new_tokens": Option(tf.int32, 1),
    "repetition_penalty": Option(tf.float32, 1.0),
}


class Seq2SeqServingModule(ServingModule):
    """Source text in, generated text out: tokenize -> decode -> detokenize.

    Signature `serving_default(text)`: `text` `tf.string (B,)`, any batch size
    (also 0). Returns `output_text` `tf.string (B,)`, `token_ids` int32 `(B,
    max_length)` (the generated ids, end token included, then padding),
    `lengths` int32 `(B,)` and `scores` float32 `(B,)`. Sources are cut to
    `source_length` tokens, `[SEP]` (and for UniLM `[CLS]`) included, before
    the model, so the cost of one request is bounded whatever its length; empty, whitespace-only
    or broken UTF-8 text is a valid (empty) source. Decoding always stops
    after `max_length` tokens.

    The search settings are fixed at export, the graph holds only TensorFlow
    and tensorflow-text ops (`tf.while_loop` with key/value caches).

    Signature `sample(text, temperature, top_k, top_p, seed,
    max_new_tokens, repetition_penalty)` samples instead, with options
    given per request and per text, each `(B,)` like `text` (so TF
    Serving's batching can merge requests): `temperature` float32 > 0,
    `top_k` int32 >= 0 (0: all), `top_p` float32 in (0, 1] (1: all),
    `seed` int64, `max_new_tokens` int32 in `[1, max_length]`,
    `repetition_penalty` float32 > 0 (1: off); the no-repeat n-gram size
    is the export's. A text's output depends on its own seed and options
    only, and equals `model.generate(texts, seed=[...], ...)` in memory;
    `top_k=1` is greedy search. TF Serving needs every input in a request.
    A value out of range fails the request with an `INVALID_ARGUMENT` that
    names the option. For a `UniLM`, signature `continue` (same inputs)
    continues each text as a prompt, left to right (`UniLM.continue_prompt`):
    `[CLS]` and the prompt's last `source_length - 1` tokens; its outputs
    are the continuation.

    For a `TransformerSeq2Seq` the encoder reads `S [SEP]` and decoding
    starts from `[CLS]`; for a `UniLM` the source is `[CLS] S [SEP]` and the
    two tokenizers must be the same (one vocabulary).

    Args:
        model: a `TransformerSeq2Seq` or a `UniLM`.
        source_tokenizer: `WordPieceTokenizer` of the source; default the
            model's (`source_tokenizer`, or a UniLM's `tokenizer`).
        target_tokenizer: `WordPieceTokenizer` of the target (the same object
            for a shared vocabulary); default the model's, else
            `source_tokenizer`.
        source_length: int, the longest source in tokens, end token included;
            default the model's `source_length`, else 128.
        max_length: int, the most tokens generated; default the model's
            (`target_length`, or a UniLM's `max_length`), else 128. For a
            UniLM, `source_length + max_length` must fit its position table.
        beam_size: int, 1 for greedy search.
        length_penalty: float, GNMT's alpha (beam search).
        no_repeat_ngram_size: int, 0 (off) or e.g. 3 for trigram blocking.
        jit_compile: bool, mark the decoding loop for XLA in the SavedModel.
            Off by default: the graph then runs as written everywhere.
            Turned on, the server compiles it once per batch size (seconds
            each), after which a decoding step on a GPU is many times
            faster (benchmarks/README.md, "On a GPU"). TF Serving disables XLA unless
            started with `--xla_cpu_compilation_enabled=true` (or
            `--xla_gpu_compilation_enabled=true`): without it such an export
            fails its warm-up and does not load (docs/serving.md).
    """

    SIGNATURES = (
        Signature("serving_default", "generate", {"text": TEXT}, method="_generate"),
        Signature("sample", "sample", SAMPLING_INPUTS, method="_sample"),
        Signature("continue", "continue_prompt", SAMPLING_INPUTS, method="_continue",
                  when="is_unilm"),
    )

    def __init__(self, model, source_tokenizer=None, target_tokenizer=None, source_length=None,
                 max_length=None, beam_size=1, length_penalty=0.0, no_repeat_ngram_size=0,
                 jit_compile=False):
        super().__init__(name="seq2seq_serving")
        jit_compile = _checks.boolean("jit_compile", jit_compile, note="at export")
        if not isinstance(model, (TransformerSeq2Seq, UniLM)):
            raise ValueError(
                f"`model` must be a TransformerSeq2Seq or a UniLM, got {type(model).__name__}."
            )
        source_tokenizer, target_tokenizer, source_length, max_length = _model_defaults(
            model, source_tokenizer, target_tokenizer, source_length, max_length
        )
        for name, tokenizer in (("source_tokenizer", source_tokenizer),
                                ("target_tokenizer", target_tokenizer)):
            if not isinstance(tokenizer, WordPieceTokenizer):
                raise ValueError(
                    f"`{name}` must be a WordPieceTokenizer, got {type(tokenizer).__name__}."
                )
        self.is_unilm = isinstance(model, UniLM)
        if self.is_unilm:
            sizes = (model.backbone.vocabulary_size,) * 2
            if source_tokenizer.get_vocabulary() != target_tokenizer.get_vocabulary():
                raise ValueError(
                    "A UniLM has one vocabulary: `source_tokenizer` and `target_tokenizer` "
                    "must have the same vocabulary."
                )
        else:
            sizes = (model.source_vocabulary_size, model.token_logits.vocabulary_size)
        for name, tokenizer, size in (("source_tokenizer", source_tokenizer, sizes[0]),
                                      ("target_tokenizer", target_tokenizer, sizes[1])):
            if tokenizer.vocabulary_size() != size:
                raise ValueError(
                    f"`{name}` has {tokenizer.vocabulary_size()} tokens but the model's "
                    f"vocabulary has {size}."
                )
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.source_length = _checks.positive_int("source_length", source_length)
        if self.source_length < (3 if self.is_unilm else 2):
            raise ValueError(
                f"`source_length` must leave room for one token besides [CLS]/[SEP], got "
                f"{source_length}."
            )
        if self.is_unilm and isinstance(max_length, numbers.Integral):
            table = model.backbone.max_sequence_length
            if self.source_length + max_length > table:  # the last [MASK]'s position + 1
                raise ValueError(
                    f"`source_length` ({source_length}) + `max_length` ({max_length}) "
                    f"exceeds the UniLM position table ({table})."
                )
        first = {"mask_id": target_tokenizer.mask_id} if self.is_unilm else {
            "start_id": target_tokenizer.cls_id}
        self.settings = {
            **first,
            "end_id": target_tokenizer.sep_id,
            "pad_id": target_tokenizer.pad_id,
            "max_length": max_length,
            "beam_size": beam_size,
            "length_penalty": length_penalty,
            "no_repeat_ngram_size": no_repeat_ngram_size,
            "jit_compile": jit_compile,
        }
        # Check the settings now (with clear errors), not when tracing at save.
        model.generate(tf.zeros([0, 1], tf.int32), **self.settings)

    def _generate(self, text):
        return self._outputs(self.model.generate(*self._sources(text), **self.settings))

    def _sample(self, text, **options):
        return self._outputs(self.model.generate(*self._sources(text), **self._sampling(options)))

    def _continue(self, text, **options):
        prompt, mask = prompt_ids(self.source_tokenizer, text, self.source_length)
        return self._outputs(self.model.continue_prompt(prompt, mask, **self._sampling(options)))

    def _sources(self, text):
        tokenizer = self.source_tokenizer
        return tokenized_sources(tokenizer, text, self.source_length,
                                 start_ids=(tokenizer.cls_id,) if self.is_unilm else ())

    def _sampling(self, options):
        """The export's settings but the beam search's, and the request's `options`."""
        settings = {name: value for name, value in self.settings.items()
                    if name not in ("beam_size", "length_penalty")}
        return {**settings, **options}

    def _outputs(self, output):
        token_ids = output["token_ids"]
        return {
            "output_text": self.target_tokenizer.detokenize(token_ids),
            "token_ids": token_ids,
            "lengths": output["lengths"],
            "scores": output["scores"],
        }

    def signatures(self, sampling=True):
        """`{name: tf.function}` of the signatures to save (see the class docstring);
        `sampling=False`: `serving_default` alone."""
        signatures = super().signatures()
        return signatures if sampling else {"serving_default": signatures["serving_default"]}


@takes_old_call_form("model", "source_tokenizer", "target_tokenizer", "export_dir",
                     "source_length", "max_length", "beam_size", "length_penalty",
                     "no_repeat_ngram_size", "version", "jit_compile", "warmup_batch_sizes",
                     "sampling")
def export_seq2seq(model, export_dir, *, source_tokenizer=None, target_tokenizer=None,
                   source_length=None, max_length=None, beam_size=4, length_penalty=0.6,
                   no_repeat_ngram_size=0, version=1, jit_compile=False,
                   warmup_batch_sizes=WARMUP_BATCH_SIZES, sampling=True):
    """Writes a raw-text -> generated-text SavedModel to `export_dir/VERSION/`.

    It loads with only TensorFlow and tensorflow-text (`import
    tensorflow_text` registers its ops); tfnlp is not needed. See
    `Seq2SeqServingModule` for the signatures.

    A model built with its tokenizers needs nothing else:
    `export_seq2seq(model, export_dir, beam_size=...)`; for any other,
    give them: `export_seq2seq(model, export_dir, source_tokenizer=...,
    target_tokenizer=...)`.

    Args:
        model: a `TransformerSeq2Seq` or a `UniLM`.
        export_dir: the model's directory, e.g. `saved_models/translate_en_es`.
        source_tokenizer: `WordPieceTokenizer` of the source; default the
            model's.
        target_tokenizer: `WordPieceTokenizer` of the target; default the
            model's, else `source_tokenizer`.
        source_length: int, sources are cut to this many tokens. With
            neither length given, both are the model's (`source_length`;
            `target_length`, a UniLM's `max_length`), else 128; with one
            given, the other defaults to 128.
        max_length: int, the most tokens generated (see `source_length`).
        beam_size: int, 1 for greedy search.
        length_penalty: float.
        no_repeat_ngram_size: int.
        version: int, the version subdirectory.
        jit_compile: bool, mark the decoding loop for XLA (see
            `Seq2SeqServingModule`; off by default).
        warmup_batch_sizes: the batch sizes of the TF Serving warm-up
            requests written for every signature (`()`: none; keep them at
            most the server's `max_batch_size` when it batches requests).
        sampling: bool, also save the `sample` signature (and a UniLM's
            `continue`), which take decoding options per request.

    Returns:
        The path of the written version.

    Example:

    >>> from tfnlp import data, models
    >>> import tempfile
    >>> tokenizer = data.WordPieceTokenizer(list(data.SPECIAL_TOKENS) + ["hola", "hello"])
    >>> model = models.TransformerSeq2Seq(7, num_encoder_layers=1, num_decoder_layers=1,
    ...                                   hidden_dim=16, num_heads=2)
    >>> path = export_seq2seq(model, tempfile.mkdtemp(), source_tokenizer=tokenizer,
    ...                       target_tokenizer=tokenizer, source_length=8, max_length=5,
    ...                       beam_size=2)
    >>> served = tf.saved_model.load(path).signatures["serving_default"]
    >>> served(text=tf.constant(["hello", ""]))["token_ids"].shape
    TensorShape([2, 5])
    """
    module = Seq2SeqServingModule(model, source_tokenizer, target_tokenizer, source_length,
                                  max_length, beam_size, length_penalty, no_repeat_ngram_size,
                                  jit_compile)
    _checks.boolean("sampling", sampling)
    return save(module, export_dir, version, warmup_batch_sizes, module.signatures(sampling))


def _model_defaults(model, source_tokenizer, target_tokenizer, source_length, max_length):
    """The tokenizers and lengths not given, from the model (a UniLM has one tokenizer)."""
    if isinstance(model, UniLM):
        own = (model.tokenizer, model.tokenizer, model.source_length, model.max_length)
    else:
        own = (model.source_tokenizer, model.target_tokenizer, model.source_length,
               model.target_length)
    source_tokenizer = own[0] if source_tokenizer is None else source_tokenizer
    if target_tokenizer is None:
        target_tokenizer = own[1] if own[1] is not None else source_tokenizer
    if source_tokenizer is None:
        raise ValueError(
            f"This {type(model).__name__} has no tokenizers: pass `source_tokenizer` and "
            "`target_tokenizer`, or build the model with its tokenizers."
        )
    if source_length is None and max_length is None:  # both the model's (or the default)
        return (source_tokenizer, target_tokenizer, own[2] or DEFAULT_TEXT_LENGTH,
                own[3] or DEFAULT_TEXT_LENGTH)
    # One given: the other as before the models carried lengths.
    source_length = DEFAULT_TEXT_LENGTH if source_length is None else source_length
    max_length = DEFAULT_TEXT_LENGTH if max_length is None else max_length
    return source_tokenizer, target_tokenizer, source_length, max_length
