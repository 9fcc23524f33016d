"""`tfnlp pretrain NAME`: BERT, UniLM or ELMo on a corpus, each a row of one table, `SPECS`.

A row (`Pretraining`) says what `tfnlp pretrain NAME` adds to the training
settings, what it checks before TensorFlow is imported, how it builds the
vocabulary, data and compiled model, and how `tfnlp export` serves the
result; `run` does the rest (setup, training, the run directory) alike for
all. A new pretraining objective is a new row.
"""

import dataclasses
import os
from collections.abc import Callable

import numpy as np

from tfnlp.cli import _runs
from tfnlp.cli._loading import data, export_lib, keras, models, tf, training
from tfnlp.cli._settings import (
    CORPUS_HELP,
    TEXT_COLUMN,
    TRAINING,
    ConfigError,
    add_options,
    check_common,
    check_training,
    check_wordpiece_file,
    check_words_file,
    read_settings,
)

# Old setting names -> new ones: accepted, with a deprecation message, for one release.
RENAMED = {"preset": "architecture"}
VALIDATION_BATCHES = 50  # at most, of held-out pretraining data (cached: the same masks each time)


@dataclasses.dataclass(frozen=True)
class Pretraining:
    """One row of `SPECS`: a model pretrained by `tfnlp pretrain NAME`.

    Attributes:
        options: its settings on top of `TRAINING` (a setting of the same
            name replaces the training one): name -> (type, default, help,
            choices).
        check: `check(settings)` before any data is read; raises `ConfigError`.
        build: `build(settings, documents, strategy, paths)` -> `Built`: the
            vocabulary, the training data and the compiled model.
        export: `export(model, run, config, settings)` -> the SavedModel's
            path, for `tfnlp export --run RUN` (`config`: RUN's config.json).
        vocabulary_file: the vocabulary's file name in the run directory.
    """

    options: dict
    check: Callable
    build: Callable
    export: Callable
    vocabulary_file: str


@dataclasses.dataclass(frozen=True)
class Built:
    """What a `Pretraining.build` returns for `run` to train and save."""

    model: object
    dataset: object
    vocabulary: list
    embeddings: object  # the token embedding (or softmax) for TensorBoard's projector
    callbacks: list
    backbone: object = None  # saved alone as backbone.keras, for fine-tuning in Python


def add_parser(commands, argv=()):
    """The `pretrain` sub-command, with a sub-command per row of `SPECS`."""
    pretrain = commands.add_parser("pretrain", help=f"pretrain a model ({', '.join(SPECS)}) on a corpus")
    names = pretrain.add_subparsers(dest="model_name", required=True)
    for name, spec in SPECS.items():
        add_options(names.add_parser(name, help=f"pretrain {name}"), {**TRAINING, **spec.options},
                    RENAMED)


def schema(args):
    """The settings of `tfnlp pretrain NAME`."""
    return {**TRAINING, **SPECS[args.model_name].options}


def configure(args):
    """The checked settings of `args`; a `ConfigError` names what is wrong."""
    settings = read_settings(args, schema(args), RENAMED)
    check_common(settings)
    SPECS[args.model_name].check(settings)
    check_training(settings)
    return settings


def run(args, settings):
    """Pretrains: the vocabulary, model, logs and config.json in `--output`; resumes a run there."""
    name = args.model_name
    spec = SPECS[name]
    strategy, paths = _runs.setup(settings)
    documents = _runs.read_corpus(settings["corpus"], settings["text_column"])
    built = spec.build(settings, documents, strategy, paths)
    output = settings["output"]
    if training.is_chief(strategy):
        _runs.write_lines(os.path.join(output, spec.vocabulary_file), built.vocabulary)
    history = _runs.fit(built.model, built.dataset, settings, paths, built.callbacks)
    if training.is_chief(strategy):
        built.model.save(paths["model"])
        if built.backbone is not None:  # the encoder alone, for fine-tuning in Python
            built.backbone.save(os.path.join(output, "backbone.keras"))
        training.write_embedding_projector(
            os.path.join(paths["logs"], "projector"), built.embeddings, built.vocabulary
        )
    _runs.save_config(paths, name, settings, strategy, {"vocabulary": spec.vocabulary_file})
    _runs.report(history, paths)
    return 0


# BERT and UniLM: a WordPiece vocabulary, masked-LM batches, a BertBackbone or UniLMBackbone.

def _check_bert(settings):
    if settings["sequence_length"] < 5:
        raise ConfigError(
            "`sequence_length` must be at least 5 ([CLS] A [SEP] B [SEP]), "
            f"got {settings['sequence_length']}."
        )
    if settings["vocabulary"]:
        check_wordpiece_file(settings["vocabulary"])


def _check_unilm(settings):
    _check_bert(settings)
    if settings["sequence_length"] < 6:
        raise ConfigError(
            "`sequence_length` must be at least 6 for UniLM (half of it, at least 3 tokens, "
            f"for the source text), got {settings['sequence_length']}."
        )
    if settings["batch_size"] % 6:
        raise ConfigError(
            "`batch_size` must be a multiple of 6 for UniLM (the four objectives in every batch), "
            f"got {settings['batch_size']}."
        )


def _documents_dataset(documents):
    """Documents (lists of sentences) as a dataset of 1-D `tf.string` tensors."""
    dense_row = data._tensors.dense_row
    return tf.data.Dataset.from_tensor_slices(tf.ragged.constant(documents, tf.string)).map(dense_row)


def _held_out(documents, fraction, seed):
    """`(training documents, held-out documents)`: `fraction` of them, at least 1, chosen at random."""
    if not fraction or len(documents) < 2:
        return documents, []
    order = np.random.default_rng(seed).permutation(len(documents))
    count = min(len(documents) - 1, max(1, round(fraction * len(documents))))
    held = set(order[:count].tolist())
    return ([d for i, d in enumerate(documents) if i not in held],
            [d for i, d in enumerate(documents) if i in held])


def _wordpiece(settings, documents, held_out, strategy):
    """`(vocabulary, tokenizer)`: the `--vocabulary` file, or one learned from the documents."""
    if settings["vocabulary"]:
        vocabulary = _runs.read_lines(settings["vocabulary"])
    else:
        sentences = [s for d in documents for s in d]
        vocabulary = data.learn_wordpiece_vocabulary(sentences, settings["vocabulary_size"], progress=False)
    tokenizer = data.WordPieceTokenizer(vocabulary)
    if held_out and training.is_chief(strategy):
        rate = data.unknown_rate(tokenizer, [s for d in held_out for s in d])
        print(f"Vocabulary: {len(vocabulary):,} tokens; [UNK] on held-out text: "
              f"{rate['unknown_tokens']:.2%} of tokens, in {rate['texts_with_unknown']:.1%} of sentences")
    return vocabulary, tokenizer


def _training_batches(name, pipeline, batch, documents, tokenizer, options, settings, pairs, hint=""):
    """The repeated training batches; the command fails if the corpus gives not even one."""
    once = _documents_dataset(documents)
    # The pairs come from consecutive sentence chunks of one document: a
    # corpus of one-sentence documents (fine_food_reviews: one review
    # each) gives none, and the repeated pipeline would wait forever.
    if not list(pipeline(once, tokenizer, **options).take(1)):
        _runs.fail(
            f"`corpus` {settings['corpus']!r} gives no {name} training batch of "
            f"{settings['batch_size']}: pretraining pairs consecutive sentences of a document, "
            "so it needs documents of several sentences (a blank line separates documents in "
            f"a text file), enough for at least one batch{hint}." if pairs else
            f"`corpus` {settings['corpus']!r} gives no {name} training batch of "
            f"{settings['batch_size']}: it holds too little text for one batch."
        )
    return pipeline(once.repeat(), tokenizer, **options).map(batch)


def _batch_options(settings):
    return dict(sequence_length=settings["sequence_length"],
                max_predictions_per_seq=settings["max_predictions"],
                batch_size=settings["batch_size"], seed=settings["seed"], shuffle_buffer=1000)


def _compile(model, settings):
    schedule = training.LinearWarmupLinearDecay(
        settings["learning_rate"], max(1, settings["steps"] // 10), settings["steps"]
    )
    model.compile(optimizer=training.bert_adamw(schedule), jit_compile=settings["jit_compile"])


def _backbone(backbone_class, settings, vocabulary):
    return backbone_class.from_architecture(
        settings["architecture"], vocabulary_size=len(vocabulary),
        max_sequence_length=settings["sequence_length"],
    )


def _build_bert(settings, documents, strategy, paths):
    # Held out first, so that neither the vocabulary nor the model sees it.
    documents, held_out = _held_out(documents, settings["validation_fraction"], settings["seed"])
    vocabulary, tokenizer = _wordpiece(settings, documents, held_out, strategy)
    next_sentence = settings["objectives"] == "mlm,nsp"
    options = dict(_batch_options(settings), next_sentence=next_sentence)
    hint = (" (or pretrain with --objectives mlm, which packs consecutive texts and needs "
            "no sentence pairs)")
    dataset = _training_batches("bert", data.bert_pretraining_dataset, models.pretraining_batch,
                                documents, tokenizer, options, settings, next_sentence, hint)
    with strategy.scope():
        backbone = _backbone(models.BertBackbone, settings, vocabulary)
        # The model keeps its tokenizer (and lengths), so that the saved
        # model.keras takes text: `fit(documents)`.
        model = models.BertPretrainer(backbone, next_sentence=next_sentence, tokenizer=tokenizer,
                                      sequence_length=settings["sequence_length"],
                                      max_predictions_per_seq=settings["max_predictions"])
        _compile(model, settings)
    callbacks = [_runs.attention_images(backbone, tokenizer, settings, paths, documents[0][0])]
    if held_out:
        callbacks += _validation(held_out, len(documents), tokenizer, options, settings, paths)
    return Built(model, dataset, vocabulary, backbone.token_embedding, callbacks, backbone)


def _validation(held_out, trained, tokenizer, options, settings, paths):
    """Masked-LM (and NSP) figures on the held-out documents, if they give a batch."""
    # Batches of at most 8, so that a small held-out share still gives some.
    held = dict(options, shuffle_buffer=0, batch_size=min(8, settings["batch_size"]))
    validation = data.bert_pretraining_dataset(_documents_dataset(held_out), tokenizer, **held)
    validation = validation.map(models.pretraining_batch).take(VALIDATION_BATCHES).cache()
    if not list(validation.take(1)):
        print(f"no validation: the {len(held_out)} held-out documents give no batch of "
              f"{held['batch_size']} (raise --validation-fraction)", flush=True)
        return []
    print(f"held out {len(held_out)} of {len(held_out) + trained} documents for "
          "validation", flush=True)
    return [training.ValidationEvaluation(
        validation, settings["validate_every"] or settings["checkpoint_every"],
        monitor="loss", mode="min", log_dir=paths["logs"],
    )]


def _build_unilm(settings, documents, strategy, paths):
    vocabulary, tokenizer = _wordpiece(settings, documents, [], strategy)
    dataset = _training_batches("unilm", data.unilm_pretraining_dataset, models.unilm_batch,
                                documents, tokenizer, _batch_options(settings), settings, pairs=True)
    with strategy.scope():
        backbone = _backbone(models.UniLMBackbone, settings, vocabulary)
        # The model keeps its tokenizer and lengths (`generate(texts)`);
        # source and generated text share the position table.
        length = settings["sequence_length"]
        model = models.UniLM(backbone, tokenizer=tokenizer, source_length=length // 2,
                             max_length=length - length // 2)
        _compile(model, settings)
    callbacks = [_runs.attention_images(backbone, tokenizer, settings, paths, documents[0][0])]
    return Built(model, dataset, vocabulary, backbone.token_embedding, callbacks, backbone)


def _run_tokenizer(run, config):
    return _runs.tokenizer(_runs.read_lines(os.path.join(run, config["vocabulary"])), config)


def _export_bert(model, run, config, settings):
    preprocessor = data.BertPreprocessor(_run_tokenizer(run, config), config["settings"]["sequence_length"])
    return export_lib.export_backbone(model.backbone, settings["output"], preprocessor=preprocessor,
                                      version=settings["version"])


def _export_unilm(model, run, config, settings):
    if getattr(model, "tokenizer", None) is not None:  # its own tokenizer, lengths
        return export_lib.export_seq2seq(model, settings["output"], version=settings["version"])
    # Saved by an older tfnlp: source and generated text share the positions.
    tokenizer = _run_tokenizer(run, config)
    length = config["settings"]["sequence_length"]
    return export_lib.export_seq2seq(model, settings["output"], source_tokenizer=tokenizer,
                                     target_tokenizer=tokenizer, source_length=length // 2, max_length=length - length // 2,
                                     version=settings["version"])


# ELMo: a words vocabulary for the softmax, characters in, a bidirectional LM.

def _check_elmo(settings):
    if settings["vocabulary"]:
        check_words_file(settings["vocabulary"])


def _build_elmo(settings, documents, strategy, paths):
    sentences = [s for d in documents for s in d]
    if settings["vocabulary"]:
        vocabulary = _runs.read_lines(settings["vocabulary"])
    else:
        vocabulary = data.build_word_vocabulary(sentences, settings["vocabulary_size"], min_count=1)
    dataset = data.elmo_dataset(
        tf.data.Dataset.from_tensor_slices(sentences).repeat(), vocabulary,
        sequence_length=settings["sequence_length"], max_characters=settings["max_characters"],
        batch_size=settings["batch_size"], shuffle_buffer=min(len(sentences), 10_000),
        seed=settings["seed"],
    ).map(models.elmo_batch)
    num_sampled = models.ELMO_ARCHITECTURES[settings["architecture"]]["num_sampled"]
    if num_sampled >= len(vocabulary):  # a small corpus: the full softmax is cheap anyway
        print(f"{len(vocabulary)} output words: full softmax instead of {num_sampled} samples")
        num_sampled = None
    with strategy.scope():
        model = models.ELMoBiLM.from_architecture(
            settings["architecture"], len(vocabulary), max_characters=settings["max_characters"],
            seed=settings["seed"], num_sampled=num_sampled,
        )
        model.compile(
            optimizer=keras.optimizers.Adam(settings["learning_rate"], global_clipnorm=10.0),
            jit_compile=settings["jit_compile"],
        )
    # No attention images: ELMo has no attention.
    return Built(model, dataset, vocabulary, model.word_softmax.kernel, [])


def _export_elmo(model, run, config, settings):
    return export_lib.export_elmo(model, settings["output"], max_tokens=config["settings"]["sequence_length"],
                                  version=settings["version"])


BERT_OPTIONS = {
    "corpus": (str, "en_novels", CORPUS_HELP, None),
    "text_column": TEXT_COLUMN,
    "objectives": (str, "mlm,nsp", "mlm,nsp: masked LM and next-sentence prediction (BERT); "
                   "mlm: masked LM only on full-length segments of consecutive text (RoBERTa), "
                   "for corpora of independent short texts", ("mlm,nsp", "mlm")),
    "vocabulary": (str, "", "WordPiece vocabulary file (empty: learn one from the corpus)", None),
    "vocabulary_size": (int, 8000, "size of a learned vocabulary", None),
    "architecture": (str, "bert_tiny", "model size",
                     ("bert_tiny", "bert_mini", "bert_small", "bert_medium", "bert_base")),
    "sequence_length": (int, 128, "tokens per example", None),
    "max_predictions": (int, 20, "masked positions per example", None),
    "learning_rate": (float, 5e-4, "peak learning rate (linear warm-up and decay)", None),
    "validation_fraction": (float, 0.05, "share of the corpus' documents held out: masked-LM "
                            "(and NSP) figures on them every --validate-every steps "
                            "(0: none)", None),
    "validate_every": (int, 0, "steps between held-out figures (0: at every checkpoint)", None),
}
UNILM_OPTIONS = {
    **{name: value for name, value in BERT_OPTIONS.items()
       if name not in ("objectives", "validation_fraction", "validate_every")},
    "batch_size": (int, 36, "global batch size (a multiple of 6)", None),
}
ELMO_OPTIONS = {
    "corpus": (str, "en_novels", CORPUS_HELP, None),
    "text_column": TEXT_COLUMN,
    "vocabulary": (str, "", "words vocabulary file for the softmax (`tfnlp vocab --kind words`; "
                   "empty: build one from the corpus)", None),
    "vocabulary_size": (int, 20000, "output words of a built vocabulary (the softmax); inputs are "
                        "characters", None),
    "architecture": (str, "elmo_small", "model size", ("elmo_small", "elmo_original")),
    "sequence_length": (int, 40, "tokens per sentence, <S> and </S> included", None),
    "max_characters": (int, 50, "characters per word", None),
}
SPECS = {
    "bert": Pretraining(BERT_OPTIONS, _check_bert, _build_bert, _export_bert, "vocab.txt"),
    "elmo": Pretraining(ELMO_OPTIONS, _check_elmo, _build_elmo, _export_elmo, "words.txt"),
    "unilm": Pretraining(UNILM_OPTIONS, _check_unilm, _build_unilm, _export_unilm, "vocab.txt"),
}
