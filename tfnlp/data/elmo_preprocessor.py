"""Texts to the character ids an ELMo embedder reads."""

import keras

from tfnlp.data.elmo import sentence_character_ids
from tfnlp.data.task_preprocessor import TaskPreprocessor, TextElement, is_string_spec, text_rank


@keras.saving.register_keras_serializable(package="tfnlp")
class ELMoPreprocessor(TaskPreprocessor):
    """Texts to ELMo's character ids, as training and serving read them, for `predict`.

    Each text is read by `tfnlp.data.sentence_character_ids` (cut to
    `max_input_bytes` bytes, split into words, cut to `max_tokens` tokens
    with `<S>` and `</S>`) and padded to `max_tokens` tokens. Only
    `predict` takes texts (an embedder has no labels of its own). A dataset
    element's first part is read as the texts, any other part ignored.
    `ELMoEmbedder` builds one from its `max_tokens`, `max_input_bytes` and
    its biLM's `max_characters`.

    Args:
        max_tokens: int, tokens per text, `<S>` and `</S>` included; None
            for an embedder that takes character ids only (texts are then
            refused by `check`).
        max_characters: int, the biLM's `max_characters`.
        max_input_bytes: int, each text is cut to this many bytes first.
        task_name: str, the model named in error messages.

    Call arguments:
        x: `tf.string` `(B,)` texts.
        y: optional, passed through.
        sample_weight: optional, passed through.

    Returns:
        `(character_ids, y, sample_weight)`, `character_ids` int32
        `(B, max_tokens, max_characters)`.

    Example:

    >>> preprocessor = ELMoPreprocessor(max_tokens=4, max_characters=6)
    >>> ids, _, _ = preprocessor(tf.constant(["Hi!", "Hello there world"]))
    >>> ids.shape
    TensorShape([2, 4, 6])
    """

    default_task_name = "ELMoEmbedder"

    def __init__(self, max_tokens, max_characters=50, max_input_bytes=100_000, task_name=None):
        super().__init__(task_name=task_name)
        self.max_tokens = max_tokens
        self.max_characters = max_characters
        self.max_input_bytes = max_input_bytes

    def call(self, x, y=None, sample_weight=None):
        self.check("predict")
        ids = sentence_character_ids(x, self.max_tokens, self.max_characters, self.max_input_bytes,
                                     length=self.max_tokens)[1]
        return ids, y, sample_weight

    # --- The text path's hooks ---

    def check(self, mode, pairs=False):
        if mode != "predict":
            raise ValueError(
                f"{self.task_name} takes texts in `predict` only; to {mode} on texts, stack a task "
                "model on it and give that model character ids (tfnlp.models.elmo.sentence_character_ids)."
            )
        if self.max_tokens is None:
            raise self._without(
                "`max_tokens`", "`max_tokens=...` (tokens per text, <S> and </S> included)",
                "character ids (tfnlp.data.character_ids)", takes="character ids",
            )

    def dataset_element(self, spec, mode):
        features = spec[0] if isinstance(spec, tuple) and spec else spec  # (texts, anything)
        if not is_string_spec(features):
            return None  # character ids (or something Keras will name)
        return TextElement(features, None, text_rank((features,), features) == 1)

    def get_config(self):
        config = super().get_config()
        config.update({
            "max_tokens": self.max_tokens,
            "max_characters": self.max_characters,
            "max_input_bytes": self.max_input_bytes,
        })
        return config
