"""A BiLSTM tagger over word and character-CNN vectors, with ELMo (TagLM) or without (its control)."""

import keras

from tfnlp import _checks
from tfnlp.data.task_preprocessor import preprocessing_object, serialized
from tfnlp.data.word_tagger_preprocessor import WordTaggerPreprocessor
from tfnlp.layers.char_cnn_embedding import CharCNNEmbedding
from tfnlp.layers.dropout import Dropout
from tfnlp.models._mixins import FromConfig
from tfnlp.models.elmo import ELMoBiLM, ELMoEmbedder, _without_compile_config
from tfnlp.models.token_classifier import TokenClassifier, tagger_arguments, tagger_size

CHARACTER_FILTERS = ((1, 16), (2, 16), (3, 32), (4, 32), (5, 32))


@keras.saving.register_keras_serializable(package="tfnlp")
class BiLSTMTokenClassifier(FromConfig, TokenClassifier):
    """A tag for every word from a BiLSTM over learned word + character vectors, and ELMo if given.

    The tagger of TagLM (Peters et al., 2017) and of ELMo's NER experiments
    (Peters et al., 2018, section 4): each token's context-free vector is
    its learned word embedding concatenated with a character-CNN vector
    (`CharCNNEmbedding` over ELMo's character ids); with `elmo` (a
    pretrained `ELMoBiLM`), the frozen biLM's layers mixed by a learned
    `ScalarMix` (`ELMoEmbedder`) are concatenated too. Dropout, then
    `num_layers` bidirectional LSTMs that skip padding, dropout, and
    `Dense(num_tags)` in float32 at each word. Without `elmo` the same
    network is the from-scratch control of the ELMo tagger.

    Inputs (`tfnlp.data.WordTaggerPreprocessor` gives them): `word_ids`
    int32 `(B, T)` and `character_ids` int32 `(B, T, max_characters)` of
    `<S> w_1 .. w_n </S>` padded with id 0 / all-0 characters (ELMo's
    biLM reads the sentence markers as it was trained). Returns the words'
    logits `(B, T - 2, num_tags)`, word `w` at `w`.

    Loss, CRF (`crf=True`), metrics, `predict_tags` and words or raw text
    in are `TokenClassifier`'s, as for `BertTokenClassifier`. `compile()`
    without arguments uses Adam at 1e-3 with gradients clipped to global
    norm 5 (TagLM's settings).

    Args:
        vocabulary_size: int, word ids; may be left out with a
            `preprocessor` (its vocabulary's size).
        num_tags: int; may be left out when `tag_names` is given.
        tag_names: optional list of tag names, one per tag (id order).
        elmo: optional `ELMoBiLM` (or its config), pretrained: frozen, its
            layers mixed with the task (`ELMoEmbedder`).
        word_dim: int, the word embedding's width.
        character_dim: int, the character CNN's output width (0: none).
        filters: `(width, count)` pairs of the character CNN.
        units: int, LSTM cells per direction.
        num_layers: int, stacked bidirectional LSTMs.
        dropout: float in [0, 1), on the token vectors and on the last
            LSTM's outputs.
        elmo_dropout: float in [0, 1), on the ELMo mix (the paper's 0.5).
        preprocessor: optional `tfnlp.data.WordTaggerPreprocessor` (its
            vocabulary at most `vocabulary_size`; its `max_characters` the
            biLM's; its tag names the tagger's), so that the model takes
            words and text.
        crf: bool, a linear-chain CRF over the word logits.
        **kwargs: base model arguments (`name`, ...).

    Example:

    >>> from tfnlp import data
    >>> vocabulary = data.build_tagger_vocabulary([["Ada", "wrote"], ["in", "Paris"]])
    >>> preprocessor = data.WordTaggerPreprocessor(vocabulary, ["O", "B-PER", "B-LOC"])
    >>> tagger = BiLSTMTokenClassifier(preprocessor=preprocessor, word_dim=8, character_dim=8, units=8)
    >>> tagger.compile()
    >>> history = tagger.fit([["Ada", "wrote"], ["in", "Paris"]], [["B-PER", "O"], ["O", "B-LOC"]],
    ...                      verbose=0)
    >>> tagger.predict_tags(["Ada wrote in Paris."])[0][-1] in ("O", "B-PER", "B-LOC")
    True

    With ELMo (`bilm` an `ELMoBiLM`, pretrained: `examples/pretrain_elmo.py`):
    `BiLSTMTokenClassifier(elmo=bilm, preprocessor=..., tag_names=...)`.

    References:
        Peters et al., "Semi-supervised sequence tagging with bidirectional
        language models", 2017 (TagLM); "Deep contextualized word
        representations", 2018 (ELMo).
    """

    def __init__(self, vocabulary_size=None, num_tags=None, tag_names=None, elmo=None, word_dim=100,
                 character_dim=50, filters=CHARACTER_FILTERS, units=128, num_layers=2, dropout=0.5,
                 elmo_dropout=0.5, preprocessor=None, crf=False, **kwargs):
        preprocessor = preprocessing_object("preprocessor", preprocessor, WordTaggerPreprocessor)
        if vocabulary_size is None and preprocessor is not None:
            vocabulary_size = len(preprocessor.vocabulary)
        if vocabulary_size is None:
            raise ValueError("`vocabulary_size` is required (or give a `preprocessor`).")
        vocabulary_size = _checks.positive_int("vocabulary_size", vocabulary_size)
        if preprocessor is not None and len(preprocessor.vocabulary) > vocabulary_size:
            raise ValueError(f"`preprocessor`'s vocabulary has {len(preprocessor.vocabulary)} words but "
                             f"the model's has only {vocabulary_size} (`vocabulary_size`).")
        if preprocessor is not None:
            if tag_names is not None:
                tag_names = tagger_size(num_tags, tag_names)[1]
            if tag_names is None:
                tag_names = list(preprocessor.tag_names)
            elif list(tag_names) != preprocessor.tag_names:
                raise ValueError(f"`tag_names` {list(tag_names)} differ from the preprocessor's "
                                 f"{preprocessor.tag_names}.")
        num_tags, tag_names, crf = tagger_arguments(num_tags, tag_names, crf, preprocessor)
        if isinstance(elmo, dict):
            elmo = keras.saving.deserialize_keras_object(elmo)
        if elmo is not None and not isinstance(elmo, ELMoBiLM):
            raise ValueError(f"`elmo` must be an ELMoBiLM (or None), got {type(elmo).__name__}.")
        max_characters = elmo.max_characters if elmo is not None else (
            preprocessor.max_characters if preprocessor is not None else 50)
        if preprocessor is not None and preprocessor.max_characters != max_characters:
            raise ValueError(f"`preprocessor`'s max_characters ({preprocessor.max_characters}) must be "
                             f"the ELMo biLM's ({max_characters}).")
        word_dim = _checks.positive_int("word_dim", word_dim)
        character_dim = _checks.non_negative_int("character_dim", character_dim)
        units = _checks.positive_int("units", units)
        num_layers = _checks.positive_int("num_layers", num_layers)
        dropout = _checks.rate("dropout", dropout)
        elmo_dropout = _checks.rate("elmo_dropout", elmo_dropout)
        dtype = kwargs.pop("dtype", None)

        # === Layers ===
        # Unit norm in expectation, as the character CNN's vectors are about (Keras' default,
        # uniform in +-0.05, would leave the words a whisper next to the characters).
        self.word_embedding = keras.layers.Embedding(
            vocabulary_size, word_dim,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=word_dim**-0.5),
            dtype=dtype, name="word_embedding")
        self.character_cnn = None
        if character_dim:
            self.character_cnn = CharCNNEmbedding(character_dim, filters=filters, num_highway_layers=1,
                                                  dtype=dtype,
                                                  name="character_cnn")
        self.elmo = None
        if elmo is not None:
            self.elmo = ELMoEmbedder(elmo, dropout=elmo_dropout, name="elmo")
        self.input_dropout = Dropout(dropout, dtype=dtype, name="input_dropout")
        # `use_cudnn=False`: traced on a GPU, Keras' LSTM would become the GPU-only CudnnRNNV3
        # op, and an export made there would not load in a CPU server (TF Serving's C++ loader).
        self.lstm_layers = [
            keras.layers.Bidirectional(
                keras.layers.LSTM(units, return_sequences=True, use_cudnn=False, dtype=dtype),
                dtype=dtype, name=f"bilstm_{i}")
            for i in range(num_layers)
        ]
        self.output_dropout = Dropout(dropout, dtype="float32", name="output_dropout")
        self.output_dense = keras.layers.Dense(num_tags, dtype="float32", name="logits")
        self._head_init(num_tags, tag_names, crf)

        # === Functional model ===
        inputs = {
            "word_ids": keras.Input(shape=(None,), dtype="int32", name="word_ids"),
            "character_ids": keras.Input(shape=(None, max_characters), dtype="int32",
                                         name="character_ids"),
        }
        tokens = inputs["word_ids"] > 0  # (B, T): <S>, the words, </S>
        parts = [self.word_embedding(inputs["word_ids"])]
        if self.character_cnn is not None:
            parts.append(self.character_cnn(inputs["character_ids"]))
        if self.elmo is not None:
            parts.append(keras.ops.cast(self.elmo(inputs["character_ids"])["elmo"], parts[0].dtype))
        x = self.input_dropout(keras.ops.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0])
        for layer in self.lstm_layers:
            x = layer(x, mask=tokens)
        logits = self.output_dense(self.output_dropout(keras.ops.cast(x, "float32")))[:, 1:-1]  # the words, not <S> and </S>
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self._tag_config(num_tags, tag_names, preprocessor)
        self.vocabulary_size = vocabulary_size
        self.max_characters = max_characters
        self.word_dim = word_dim
        self.character_dim = character_dim
        self.filters = filters
        self.units = units
        self.num_layers = num_layers
        self.dropout = dropout
        self.elmo_dropout = elmo_dropout

    def _checked_inputs(self, inputs):
        specs = {"word_ids": ("BT", self.vocabulary_size, "`vocabulary_size`"),
                 "character_ids": ("BTC", None, None)}
        with _checks.errors_without_input_dump():
            return _checks.model_inputs(inputs, specs, C=(self.max_characters, "`max_characters`"))

    def _default_optimizer(self):
        return keras.optimizers.Adam(1e-3, global_clipnorm=5.0)

    def _task_preprocessor(self):
        if self.preprocessor is None:
            return None
        config = dict(self.preprocessor.get_config(), tag_names=self.tag_names, task_name=type(self).__name__)
        return WordTaggerPreprocessor.from_config(config)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.word_embedding.dtype_policy),
            "vocabulary_size": self.vocabulary_size,
            "num_tags": self.num_tags,
            "tag_names": self.tag_names,
            "elmo": None if self.elmo is None else _without_compile_config(
                keras.saving.serialize_keras_object(self.elmo.bilm)),
            "word_dim": self.word_dim,
            "character_dim": self.character_dim,
            "filters": [list(f) for f in self.filters],
            "units": self.units,
            "num_layers": self.num_layers,
            "dropout": self.dropout,
            "elmo_dropout": self.elmo_dropout,
            "preprocessor": serialized(self.preprocessor),
            "crf": self.crf is not None,
        }
