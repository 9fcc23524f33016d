"""The registry of model families: each family is one `Family` entry that the tests iterate.

An entry holds a tiny model, a few deterministic batches, the exports that
serve its model classes and the facts the tests would otherwise branch on
(its id input, how it pads, what loss is left on padding, its `compile()`
defaults, its CLI command). The model harness (`tests/harness.py`,
`run_model_test`), the numerics, bad-input and training tests (distribution,
resumption, mixed precision, TPU readiness, `.keras` restore) iterate
`FAMILIES`; `tests/export/test_tf_serving.py` builds and serves every
family's `exports`; `tests/models/test_model_harness.py` fails until a new
public model class is in a family's `model_classes` and an export's
`serves`. A new family is one `register(Family(...))`:
`tests/test_family_registry.py` registers a test-only one
(`tests/toy_family.py`) and runs every per-family check on it.

Dropout is off (replicas draw different dropout masks, so only dropout-free
training is comparable across strategies); padding and the number of
weighted targets differ between the two halves of every batch, so a loss
that normalised per replica instead of globally would show.
"""

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfnlp import data, export, models

BATCH, LENGTH, VOCABULARY = 8, 12, 50
# The per-text decoding options of the seq2seq exports' `sample` and `continue` signatures.
SAMPLING = ("temperature", "top_k", "top_p", "seed", "max_new_tokens", "repetition_penalty")
# The inputs that a batch of padding only has all 0 (`padded_inputs`).
SEQUENCE_INPUTS = ("token_ids", "segment_ids", "padding_mask", "encoder_token_ids",
                   "encoder_padding_mask", "decoder_token_ids", "decoder_padding_mask")


def padded_inputs(x, y, weights, rows):
    """`Family.padded` of dict inputs: the `SEQUENCE_INPUTS` of `x` and `weights` 0 in `rows`."""
    for name in SEQUENCE_INPUTS:
        if name in x:
            x[name][rows] = 0
    if weights is not None:
        weights[rows] = 0
    return x, y, weights


def zero_weights(x, y, weights):
    """A `Family.no_targets` case: every target weight 0."""
    return x, y, np.zeros_like(weights)


class ExportKit:
    """What the exports of `tests/export/test_tf_serving.py` are built from: `vocabulary`, its
    `tokenizer`, a `preprocessor` of 16 tokens and a `dtype` policy (a name, or None)."""

    def __init__(self, vocabulary, dtype=None):
        self.vocabulary, self.dtype = vocabulary, dtype
        self.tokenizer = data.WordPieceTokenizer(vocabulary)
        self.preprocessor = data.BertPreprocessor(self.tokenizer, 16)


@dataclasses.dataclass(frozen=True)
class Export:
    """One SavedModel export of a family, as `tests/export/test_tf_serving.py` builds and serves it.

    Attributes:
        name: its folder and key, e.g. `"fill_mask"`.
        build: `build(kit, directory)` -> the written path: a tiny model exported
            from an `ExportKit`.
        signatures: `{signature name: [its input names]}`, all that it serves.
        serves: the public model classes it serves.
    """

    name: str
    build: Callable
    signatures: dict
    serves: tuple


@dataclasses.dataclass(frozen=True)
class Family:
    """One model family as the tests see it.

    Attributes:
        name: its name in the tests' ids, e.g. `"bert_classifier"`.
        build: `build(dropout, dtype)` -> its tiny model, not compiled.
        batch: `batch(rng)` -> `(x, y)` or `(x, y, sample_weight)` of NumPy
            arrays (`BATCH` rows), drawn from the `np.random.Generator` `rng`.
        model_classes: the public model classes the tiny model is or holds.
        exports: the `Export`s that serve its model classes.
        id_input: its first id input: the one whose dtype, rank and range
            the harness and the bad-input tests break. `x` is a dict of
            inputs, or this input alone.
        padded: `padded(x, y, weights, rows)` -> the batch with `rows` all
            padding and no target left there (arrays changed in place).
        loss_on_padding: the loss of a batch of padding only: 0.0 where no
            target is left (its gradients are then exactly 0 too), None
            where no exact value is known.
        no_targets: `{kind: f(x, y, weights)}`: ways to give real sequences
            no target at all (the loss and its gradients must be exactly 0).
        weighted_metrics: whether `compile()`'s metrics are weighted (its
            targets carry padding weights).
        own_loss: whether the model computes its own loss and metrics:
            `compile()` then gives neither and refuses `weighted_metrics`.
        cli: `(command, name)` of the `tfnlp` command that trains it, e.g.
            `("pretrain", "bert")`, or None.
        package: the package its classes are registered under with Keras.
    """

    name: str
    build: Callable
    batch: Callable
    model_classes: tuple
    exports: tuple = ()
    id_input: str = "token_ids"
    padded: Callable = padded_inputs
    loss_on_padding: float | None = None
    no_targets: dict = dataclasses.field(default_factory=dict)
    weighted_metrics: bool = False
    own_loss: bool = False
    cli: tuple | None = None
    package: str = "tfnlp"


REGISTRY = {}  # name -> Family, in the order registered


def register(family):
    """Adds `family` to the registry; its name must be new."""
    if family.name in REGISTRY:
        raise ValueError(f"a family {family.name!r} is registered already")
    REGISTRY[family.name] = family
    return family


def get(name):
    """The registered family `name`."""
    return REGISTRY[name]


def names():
    return tuple(REGISTRY)


def model_classes():
    """`{family: the public model classes its tiny model is or holds}`."""
    return {name: family.model_classes for name, family in REGISTRY.items()}


def exports():
    """Every registered family's exports, in order."""
    return [e for family in REGISTRY.values() for e in family.exports]


def exported_as():
    """`{public model class: the export that serves it}`."""
    return {cls: e.name for e in exports() for cls in e.serves}


def signatures():
    """`{export: {signature: [input names]}}` of every registered family's exports."""
    return {e.name: e.signatures for e in exports()}


def id_input(family, x):
    """`(name, ids, replaced)`: `family`'s id input in its batch `x`, its value, and a
    function that gives `x` with that input replaced."""
    name = get(family).id_input
    if not isinstance(x, dict):
        return name, x, lambda value: value
    return name, x[name], lambda value: {**x, name: value}


def first_batch(family, seed=0):
    """`(x, y, sample_weight)` of the first batch of `batches(family, seed=seed)` (weight None if none)."""
    x, y, *weights = get(family).batch(np.random.default_rng(seed))
    return x, y, weights[0] if weights else None


def batches(family, count=3, seed=0):
    """`count` fixed batches, as a repeating dataset with the same order everywhere."""
    rng = np.random.default_rng(seed)
    items = [get(family).batch(rng) for _ in range(count)]
    stacked = tf.nest.map_structure(lambda *xs: np.stack(xs), *items)
    return tf.data.Dataset.from_tensor_slices(stacked).repeat()


def model(family, dropout=0.0, dtype=None, **compile_kwargs):
    """A compiled tiny model of `family` (create it inside a strategy's scope)."""
    built = get(family).build(dropout, dtype)
    built.compile(**compile_kwargs)
    return built


# --- Batches ---


def _mask(rng, batch=BATCH, length=LENGTH, minimum=3):
    lengths = rng.integers(minimum, length + 1, batch)
    lengths[: batch // 2] = length  # the first replica's half is longer
    return (np.arange(length)[None, :] < lengths[:, None]).astype("int32")


def _encoder_inputs(rng):
    mask = _mask(rng)
    return {
        "token_ids": rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * mask,
        "segment_ids": (np.arange(LENGTH)[None, :] >= LENGTH // 2).astype("int32") * mask,
        "padding_mask": mask,
    }


def _classification_batch(rng):
    return _encoder_inputs(rng), rng.integers(0, 3, BATCH).astype("int32")


def _masked_batch(rng):
    """Encoder inputs with 4 masked positions, their ids and their weights."""
    x = _encoder_inputs(rng)
    x["masked_positions"] = rng.integers(0, LENGTH, (BATCH, 4)).astype("int32")
    ids = rng.integers(1, VOCABULARY, (BATCH, 4)).astype("int32")
    weights = (rng.random((BATCH, 4)) < np.where(np.arange(BATCH) < BATCH // 2, 0.9, 0.4)[:, None])
    return x, ids, weights.astype("float32")


def _pretraining_batch(rng):
    x, ids, weights = _masked_batch(rng)
    nsp = rng.integers(0, 2, BATCH).astype("int32")
    return x, {"mlm": ids, "nsp": nsp}, {"mlm": weights, "nsp": np.ones(BATCH, "float32")}


def _unilm_batch(rng):
    x, ids, weights = _masked_batch(rng)
    x["objective"] = (np.arange(BATCH) % 4).astype("int32")
    return x, ids, weights


def _seq2seq_batch(rng):
    source, target = _mask(rng), _mask(rng, minimum=2)
    x = {
        "encoder_token_ids": rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * source,
        "encoder_padding_mask": source,
        "decoder_token_ids": rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * target,
        "decoder_padding_mask": target,
    }
    return x, rng.integers(1, VOCABULARY, (BATCH, LENGTH)).astype("int32") * target, target.astype("float32")


def _elmo_batch(rng):
    words = np.array(["<S>", "the", "cat", "sat", "on", "a", "mat", "Emma", ",", "."])
    mask = _mask(rng)
    tokens = np.where(mask == 1, words[rng.integers(0, len(words), (BATCH, LENGTH))], "")
    weights = mask.copy()
    weights[np.arange(BATCH), mask.sum(1) - 1] = 0  # the last token has no next word
    targets = {
        "next_word_ids": rng.integers(0, VOCABULARY, (BATCH, LENGTH)).astype("int32") * weights,
        "next_word_weights": weights,
        "previous_word_ids": rng.integers(0, VOCABULARY, (BATCH, LENGTH)).astype("int32") * mask,
        "previous_word_weights": mask,
    }
    return data.character_ids(tf.constant(tokens), 12).numpy(), targets


def _tagging_batch(rng):
    """Encoder inputs, the first-piece positions of 1 to `LENGTH - 2` words and their tags (-1:
    no word)."""
    x = _encoder_inputs(rng)
    words = LENGTH - 2
    x["word_positions"] = np.zeros((BATCH, words), "int32")
    y = np.full((BATCH, words), -1, "int32")
    for row, length in enumerate(x["padding_mask"].sum(1)):
        pieces = np.arange(1, length - 1)  # between [CLS] and [SEP]
        count = int(rng.integers(1, len(pieces) + 1))
        starts = np.sort(rng.choice(pieces[1:], count - 1, replace=False)) if count > 1 else []
        x["word_positions"][row, :count] = np.concatenate([[1], starts])
        y[row, :count] = rng.integers(0, 3, count)
    return x, y


# --- Padding and no targets (tests/test_numerics.py) ---


def _pretraining_padded(x, y, weights, rows):
    padded_inputs(x, y, None, rows)
    weights["mlm"][rows] = 0  # a next-sentence target is left on padding
    return x, y, weights


def _tagging_padded(x, y, weights, rows):
    padded_inputs(x, y, weights, rows)
    x["word_positions"][rows] = 0
    y[rows] = -1
    return x, y, weights


def _no_words_tagged(x, y, weights):
    return x, np.full_like(y, -1), weights


def _word_tagging_batch(rng):
    """Word ids and character ids of `<S>`, 1 to `LENGTH - 2` words and `</S>`, and the words'
    tags (-1: no word)."""
    words = np.array(["the", "cat", "sat", "on", "a", "mat", "Emma", ",", "."])
    mask = _mask(rng)
    tokens = np.where(mask == 1, words[rng.integers(0, len(words), (BATCH, LENGTH))], "").astype(object)
    word_ids = rng.integers(4, VOCABULARY, (BATCH, LENGTH)).astype("int32") * mask
    y = np.full((BATCH, LENGTH - 2), -1, "int32")
    for row, length in enumerate(mask.sum(1)):
        tokens[row, 0], tokens[row, length - 1] = "<S>", "</S>"
        word_ids[row, 0], word_ids[row, length - 1] = 2, 3
        y[row, :length - 2] = rng.integers(0, 3, length - 2)
    characters = data.character_ids(tf.constant(tokens.astype(str)), 12).numpy()
    return {"word_ids": word_ids, "character_ids": characters}, y


def _word_tagging_padded(x, y, weights, rows):
    x["word_ids"][rows] = 0
    x["character_ids"][rows] = 0
    y[rows] = -1
    return x, y, weights


def _elmo_padded(x, y, weights, rows):
    x[rows] = 0
    for value in y.values():
        value[rows] = 0
    return x, y, None


def _every_sentence_empty(x, y, weights):
    return _elmo_padded(x, y, weights, slice(None))


def _no_pretraining_weights(x, y, weights):
    return x, y, {"mlm": np.zeros_like(weights["mlm"]), "nsp": np.zeros_like(weights["nsp"])}


def _no_masked_position_to_pretrain(x, y, weights):
    x, y, weights = _no_pretraining_weights(x, y, weights)
    x["masked_positions"] = x["masked_positions"][:, :0]
    y = {"mlm": y["mlm"][:, :0], "nsp": y["nsp"]}
    return x, y, {"mlm": weights["mlm"][:, :0], "nsp": weights["nsp"]}


def _no_masked_position(x, y, weights):
    x["masked_positions"] = x["masked_positions"][:, :0]
    return x, y[:, :0], np.zeros_like(weights)[:, :0]


def _empty_decoder_sequence(x, y, weights):
    for name in ("decoder_token_ids", "decoder_padding_mask"):
        x[name] = x[name][:, :0]
    return x, y[:, :0], weights[:, :0]


def _all_zero_target_mask(x, y, weights):
    x["decoder_padding_mask"] = np.zeros_like(x["decoder_padding_mask"])
    return x, y, np.zeros_like(weights)


# --- Tiny models ---


def _bert_backbone(dropout, dtype):
    return models.BertBackbone(VOCABULARY, num_layers=1, num_heads=2, hidden_dim=16, dropout=dropout,
                               max_sequence_length=LENGTH, dtype=dtype)


def _transformer_classifier(dropout, dtype):
    return models.TransformerClassifier(VOCABULARY, 3, num_layers=1, num_heads=2, hidden_dim=16,
                                        dropout=dropout, dtype=dtype)


def _transformer_tagger(dropout, dtype):
    return models.TransformerTokenClassifier(VOCABULARY, 3, num_layers=1, num_heads=2, hidden_dim=16,
                                             dropout=dropout, dtype=dtype)


def _elmo_tagger(dropout, dtype):
    return models.BiLSTMTokenClassifier(VOCABULARY, 3, elmo=_elmo(0.0, dtype), word_dim=16, character_dim=8,
                                        filters=((1, 4), (2, 4)), units=16, num_layers=1, dropout=dropout,
                                        elmo_dropout=dropout, dtype=dtype)


def _seq2seq(dropout, dtype):
    return models.TransformerSeq2Seq(VOCABULARY, num_encoder_layers=1, num_decoder_layers=1,
                                     hidden_dim=16, num_heads=2, dropout=dropout, dtype=dtype)


def _unilm(dropout, dtype):
    return models.UniLM(models.UniLMBackbone(VOCABULARY, num_layers=1, num_heads=2, hidden_dim=16,
                                             dropout=dropout, max_sequence_length=LENGTH, dtype=dtype))


def _elmo(dropout, dtype):
    return models.ELMoBiLM(VOCABULARY, num_layers=2, units=16, projection_dim=8, filters=((1, 4), (2, 4)),
                           num_highway_layers=1, max_characters=12, num_sampled=10, dropout=dropout,
                           dtype=dtype)


# --- Exports (built from an ExportKit: its vocabulary, 16 tokens) ---


def _export_bert(kit):
    return models.BertBackbone(len(kit.vocabulary), 1, 2, 16, max_sequence_length=16,
                               dtype=kit.dtype)


def _export_backbone(kit, directory):
    return export.export_backbone(_export_bert(kit), directory, preprocessor=kit.preprocessor)


def _export_fill_mask(kit, directory):
    return export.export_fill_mask(models.BertPretrainer(_export_bert(kit)), directory,
                                   preprocessor=kit.preprocessor, top_k=3, max_masks=2)


def _export_bert_classifier(kit, directory):
    return export.export_classifier(models.BertClassifier(_export_bert(kit), 3), directory,
                                    preprocessor=kit.preprocessor, labels=["a", "b", "c"])


def _export_bert_tagger(kit, directory):
    tagger = models.BertTokenClassifier(_export_bert(kit), tag_names=["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    return export.export_tagger(tagger, directory, preprocessor=kit.preprocessor)


def _export_transformer_classifier(kit, directory):
    model = models.TransformerClassifier(len(kit.vocabulary), 2, num_layers=1, num_heads=2,
                                         hidden_dim=16, dtype=kit.dtype)
    return export.export_classifier(model, directory, preprocessor=kit.preprocessor,
                                    labels=["no", "yes"])


def _export_transformer_tagger(kit, directory):
    tagger = models.TransformerTokenClassifier(len(kit.vocabulary), tag_names=["O", "B-PER", "I-PER"],
                                               num_layers=1, num_heads=2, hidden_dim=16, crf=True,
                                               dtype=kit.dtype)
    return export.export_tagger(tagger, directory, preprocessor=kit.preprocessor)


def _export_elmo_tagger(kit, directory):
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    words = data.WordTaggerPreprocessor(data.build_tagger_vocabulary([kit.vocabulary]), tags, max_words=14,
                                        max_characters=12)
    bilm = models.ELMoBiLM(word_vocabulary_size=20, num_layers=1, units=8, projection_dim=4,
                           filters=((1, 4), (2, 4)), num_highway_layers=1, max_characters=12,
                           num_sampled=None, dtype=kit.dtype)
    tagger = models.BiLSTMTokenClassifier(elmo=bilm, preprocessor=words, word_dim=8, character_dim=8,
                                          filters=((1, 4), (2, 4)), units=8, num_layers=1, crf=True,
                                          dtype=kit.dtype)
    return export.export_tagger(tagger, directory)


def _export_translator(kit, directory):
    model = models.TransformerSeq2Seq(len(kit.vocabulary), num_encoder_layers=1, num_decoder_layers=1,
                                      hidden_dim=16, num_heads=2, dtype=kit.dtype)
    return _export_seq2seq(kit, model, directory)


def _export_unilm(kit, directory):
    backbone = models.UniLMBackbone(len(kit.vocabulary), 1, 2, 16, max_sequence_length=16,
                                    dtype=kit.dtype)
    return _export_seq2seq(kit, models.UniLM(backbone), directory)


def _export_seq2seq(kit, model, directory):
    return export.export_seq2seq(model, directory, source_tokenizer=kit.tokenizer,
                                 target_tokenizer=kit.tokenizer, source_length=8, max_length=5,
                                 beam_size=2)


def _export_elmo(kit, directory):
    bilm = models.ELMoBiLM(word_vocabulary_size=20, num_layers=1, units=8, projection_dim=4,
                           filters=((1, 4), (2, 4)), num_highway_layers=1, num_sampled=None,
                           dtype=kit.dtype)
    return export.export_elmo(models.ELMoEmbedder(bilm), directory, max_tokens=8)


TEXT_AND_PAIRS = {"serving_default": ["text"], "classify_pairs": ["text_a", "text_b"]}
GENERATION = {"serving_default": ["text"], "sample": ["text", *SAMPLING]}

register(Family(
    "bert_pretrainer",
    lambda dropout, dtype: models.BertPretrainer(_bert_backbone(dropout, dtype)),
    _pretraining_batch,
    ("BertPretrainer", "BertBackbone"),
    exports=(
        Export("backbone", _export_backbone,
               {"serving_default": ["text"], "encode_pairs": ["text_a", "text_b"]}, ("BertBackbone",)),
        Export("fill_mask", _export_fill_mask, {"serving_default": ["text"]}, ("BertPretrainer",)),
    ),
    padded=_pretraining_padded,
    no_targets={"weights": _no_pretraining_weights, "empty": _no_masked_position_to_pretrain},
    weighted_metrics=True,
    cli=("pretrain", "bert"),
))
register(Family(
    "bert_classifier",
    lambda dropout, dtype: models.BertClassifier(_bert_backbone(dropout, dtype), num_classes=3,
                                                 dropout=dropout),
    _classification_batch,
    ("BertClassifier", "BertBackbone"),
    exports=(Export("bert_classifier", _export_bert_classifier, TEXT_AND_PAIRS, ("BertClassifier",)),),
    cli=("finetune", "classification"),
))
register(Family(
    "bert_tagger",
    lambda dropout, dtype: models.BertTokenClassifier(_bert_backbone(dropout, dtype), num_tags=3,
                                                      dropout=dropout),
    _tagging_batch,
    ("BertTokenClassifier", "BertBackbone"),
    exports=(Export("bert_tagger", _export_bert_tagger,
                    {"serving_default": ["text"], "tag_words": ["words"]}, ("BertTokenClassifier",)),),
    padded=_tagging_padded,
    loss_on_padding=0.0,
    no_targets={"words": _no_words_tagged},
    cli=("finetune", "tagging"),
))
register(Family(
    "transformer_classifier",
    _transformer_classifier,
    _classification_batch,
    ("TransformerClassifier",),
    exports=(Export("transformer_classifier", _export_transformer_classifier, TEXT_AND_PAIRS,
                    ("TransformerClassifier",)),),
    loss_on_padding=np.log(3.0),  # mean pooling of nothing: zeros -> uniform logits
    cli=("finetune", "classification"),
))
register(Family(
    "transformer_tagger",
    _transformer_tagger,
    _tagging_batch,
    ("TransformerTokenClassifier",),
    exports=(Export("transformer_tagger", _export_transformer_tagger,
                    {"serving_default": ["text"], "tag_words": ["words"]},
                    ("TransformerTokenClassifier",)),),
    padded=_tagging_padded,
    loss_on_padding=0.0,
    no_targets={"words": _no_words_tagged},
    cli=("finetune", "tagging"),
))
register(Family(
    "elmo_tagger",
    _elmo_tagger,
    _word_tagging_batch,
    ("BiLSTMTokenClassifier",),
    exports=(Export("elmo_tagger", _export_elmo_tagger,
                    {"serving_default": ["text"], "tag_words": ["words"]},
                    ("BiLSTMTokenClassifier",)),),
    id_input="word_ids",
    padded=_word_tagging_padded,
    loss_on_padding=0.0,
    no_targets={"words": _no_words_tagged},
    cli=("finetune", "tagging"),
))
register(Family(
    "seq2seq",
    _seq2seq,
    _seq2seq_batch,
    ("TransformerSeq2Seq",),
    exports=(Export("translator", _export_translator, GENERATION, ("TransformerSeq2Seq",)),),
    id_input="encoder_token_ids",
    loss_on_padding=0.0,
    no_targets={"weights": _all_zero_target_mask, "empty": _empty_decoder_sequence},
    weighted_metrics=True,
))
register(Family(
    "unilm",
    _unilm,
    _unilm_batch,
    ("UniLM", "UniLMBackbone"),
    exports=(Export("unilm", _export_unilm, {**GENERATION, "continue": ["text", *SAMPLING]},
                    ("UniLM", "UniLMBackbone")),),
    loss_on_padding=0.0,
    no_targets={"weights": zero_weights, "empty": _no_masked_position},
    weighted_metrics=True,
    cli=("pretrain", "unilm"),
))
register(Family(
    "elmo",
    _elmo,
    _elmo_batch,
    ("ELMoBiLM",),
    exports=(Export("elmo", _export_elmo, {"serving_default": ["text"]}, ("ELMoBiLM", "ELMoEmbedder")),),
    id_input="character_ids",
    padded=_elmo_padded,
    loss_on_padding=0.0,
    no_targets={"weights": _every_sentence_empty},
    own_loss=True,
    cli=("pretrain", "elmo"),
))

FAMILIES = names()
# Public model classes that no family trains, and where they are tested.
NOT_TRAINED = {
    "ELMoEmbedder": "the frozen biLM's mix, trained inside a task model: the elmo_tagger family's "
                    "BiLSTMTokenClassifier holds one; tests/models/test_elmo.py",
}
