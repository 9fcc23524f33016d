"""The task preprocessor: how a task model reads raw text, as one protocol.

`tfnlp.models.Task` reads texts the same way for every task model (texts in
memory or a `tf.data.Dataset`, the validation split, pairs, the in-memory
arrays); what differs from task to task lives in the task's
`TaskPreprocessor`: the in-graph `call(x, y, sample_weight)` and the few
hooks below. A new task that reads text is a new subclass in a file of its
own, not an edit of `Task`.
"""

import typing

import keras
import numpy as np
import tensorflow as tf

from tfnlp import _checks

DEFAULT_BATCH_SIZE = 32  # texts per batch when none is given (Keras' own default for arrays)


class TextElement(typing.NamedTuple):
    """Where a `tf.data.Dataset` element holds a task's texts (`TaskPreprocessor.dataset_element`).

    `features` is the spec of the texts (a `tf.TensorSpec`, or a tuple of
    two for text pairs): either the whole element or its first part;
    `labels` the spec of the element's second part, or None (not read);
    `batched` whether the elements are batches rather than single examples.
    """

    features: object
    labels: object
    batched: bool


@keras.saving.register_keras_serializable(package="tfnlp")
class TaskPreprocessor:
    """Raw text to a task model's `(inputs, y, sample_weight)`: the base of every task's preprocessor.

    A task model (`tfnlp.models.Task`) that reads text builds one of these
    from its own constructor arguments (`Task._task_preprocessor()`).
    `Task.fit`, `evaluate` and `predict` then share one text path: they
    recognise texts (a list, NumPy array or `tf.string` tensor, a tuple of
    two batches for pairs, or a `tf.data.Dataset` whose features are
    strings), check their counts and `y`, and either preprocess texts in
    memory once into arrays (`in_memory`) or build a `tf.data` pipeline
    (`batches`). What is particular to a task is here:

    - `call(x, y=None, sample_weight=None)`: in-graph, one batch to
      `(inputs, y, sample_weight)` (a `None` stays `None`), as keras-hub's
      `TextClassifierPreprocessor`; a task whose preprocessing is
      dataset-level (packing documents, a new masking seed per batch) maps
      the batches of that step instead.
    - `check(mode, pairs)`: the task's refusals (no tokenizer, no texts in
      `predict`, no text pairs), raised with the task's own messages.
    - `texts(x, name)`: `x` in memory as `tf.string` tensors, or None if it
      holds no texts (then the model reads it as token ids).
    - `checked_labels(y, count)`: `y` for texts in memory, checked (and
      converted) on the host.
    - `dataset_element(spec, mode)`: which part of a dataset element holds
      the texts and the labels (a `TextElement`), or None.
    - `in_memory(count)`: whether `count` texts in memory become arrays once
      (default: no, a pipeline).
    - `batches(examples, ...)`: the `tf.data` pipeline; by default batch,
      then map `call`.

    The class attributes `text_name`, `label_name` and `element_name` name
    `x`, `y` and a labelled dataset element in messages (`label_name=None`:
    the task takes no `y` with texts), and `reads_pairs` says whether a
    tuple of two batches is a text pair.

    A task preprocessor is a plain object, not a Keras layer: the task
    builds it from its own arguments and never tracks it (the model's
    layers, weights and `.keras` files stay as they were); it serializes
    with `keras.saving.serialize_keras_object` all the same
    (`get_config`, `from_config`). Its `tf.data` map functions run
    unconverted by AutoGraph, as `tfnlp.data`'s pipelines do.

    Args:
        task_name: str, the task model named in error messages (default: the
            subclass's `default_task_name`).

    Call arguments:
        x: a batch of the task's features (texts, `(B,)` `tf.string`).
        y: optional batch of labels.
        sample_weight: optional batch of weights.

    Returns:
        `(inputs, y, sample_weight)`: the model's inputs and the labels and
        weights Keras trains on (`None` where there are none).

    Example:

    A task that reads texts as their byte counts, with labels in memory
    checked on the host:

    >>> class ByteCounts(TaskPreprocessor):
    ...     label_name = "the labels"
    ...     def call(self, x, y=None, sample_weight=None):
    ...         return tf.strings.length(x)[:, None], y, sample_weight
    >>> preprocessor = ByteCounts()
    >>> inputs, y, _ = preprocessor(tf.constant(["ab", "abcd"]), tf.constant([0, 1]))
    >>> inputs.numpy().tolist(), y.numpy().tolist()
    ([[2], [4]], [0, 1])
    >>> preprocessor.texts(["ab", "abcd"]).shape
    TensorShape([2])
    >>> element = preprocessor.dataset_element(
    ...     (tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.int32)), "fit")
    >>> element.batched
    False
    """

    default_task_name = "model"
    text_name = "texts"  # what `x` holds, in messages
    label_name = None  # what `y` holds, in messages; None: the task takes no `y` with texts
    reads_pairs = False  # whether a tuple of two batches of texts is a batch of text pairs
    element_name = "(texts, labels)"  # a labelled dataset element, in messages
    # Texts preprocessed at once in memory, and the most ids held there
    # (see `in_memory`); tasks may set them on an instance.
    chunk_size = 1024
    max_in_memory_ids = 1 << 25

    def __init__(self, task_name=None):
        self.task_name = self.default_task_name if task_name is None else str(task_name)

    def __call__(self, x, y=None, sample_weight=None):
        return self.call(x, y, sample_weight)

    def call(self, x, y=None, sample_weight=None):
        """One batch to `(inputs, y, sample_weight)`, in the graph (see the class docstring)."""
        raise NotImplementedError(f"{type(self).__name__} must implement `call`.")

    # --- Hooks: what is particular to a task (see the class docstring) ---

    def check(self, mode, pairs=False):
        """Raise the task's error if it cannot `mode` (`"fit"`, `"evaluate"`, `"predict"`) on texts."""

    def texts(self, x, name="x"):
        """`x` as a `tf.string` `(B,)` tensor (or a pair of them), or None if `x` holds no texts.

        A lone text or another rank is refused, naming the argument `name`.
        """
        if not is_texts(x):
            return None
        if self.reads_pairs and is_pair(x):
            return tuple(string_tensor(part, f"{name}[{i}]") for i, part in enumerate(x))
        return string_tensor(x, name)

    def checked_labels(self, y, count):
        """`y` given with `count` texts in memory, checked on the host.

        By default a NumPy array of one label per text; tasks whose labels
        are names, texts or sequences check (and convert) them here.
        """
        values = y.numpy() if tf.is_tensor(y) else np.asarray(y)
        if values.ndim != 1 or values.shape[0] != count:
            raise ValueError(f"`y` must hold one label per text ({count}), got shape {values.shape}.")
        return values

    def dataset_element(self, spec, mode):
        """Where a dataset element (`spec`) holds texts, as a `TextElement`; None if it holds none.

        By default an element is texts, a pair `(texts_a, texts_b)` (with
        `reads_pairs`), or `(texts, labels)`; in `predict` a two-part element
        is read as labelled only if its second part is not strings (or the
        task reads no pairs), and the labels are not used. Texts are
        single examples (scalars) or batches (`(batch_size,)`).
        """
        labelled = isinstance(spec, tuple) and len(spec) == 2 and (
            mode != "predict" or not self.reads_pairs
            or (isinstance(spec[1], tf.TensorSpec) and spec[1].dtype != tf.string)
        )
        features = spec[0] if labelled else spec
        parts = features if isinstance(features, tuple) else (features,)
        if not all(is_string_spec(part) for part in parts):
            return None  # model inputs (or something Keras will name)
        if len(parts) > (2 if self.reads_pairs else 1) or (
            mode != "predict" and not labelled and self.label_name
        ):
            raise ValueError(self._element_error(spec))
        return TextElement(features, spec[1] if labelled else None, text_rank(parts, features) == 1)

    def in_memory(self, count):
        """Whether `count` texts in memory are preprocessed once into arrays (default: no)."""
        return False

    def batches(self, examples, *, batch_size, shuffle, mode, count, batched):
        """The pipeline from `examples` to the model's `(inputs, y, sample_weight)` batches.

        Args:
            examples: `tf.data.Dataset` whose elements are the texts
                (`features`, or `(features,)`) or `(features, labels)`.
            batch_size: int or None (`DEFAULT_BATCH_SIZE`).
            shuffle: bool, `fit`'s `shuffle`.
            mode: `"fit"`, `"evaluate"` or `"predict"`.
            count: int, the number of examples (texts in memory), or None
                (a dataset).
            batched: bool, whether `examples` holds batches already.

        Returns:
            A `tf.data.Dataset` of batches. By default: shuffled in `fit`
            when `count` is known, batched, mapped through `call`.
        """
        if count and shuffle and mode == "fit":
            examples = examples.shuffle(count, reshuffle_each_iteration=True)
        if not batched:
            examples = examples.batch(batch_size or DEFAULT_BATCH_SIZE)
        mapped = tf.autograph.experimental.do_not_convert(
            lambda features, labels=None: packed(*self(features, labels))
        )
        return examples.map(mapped, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def _without(self, what, build, instead, takes="token ids"):
        """The error of a task built without `what` (its tokenizer), given texts."""
        return ValueError(
            f"This {self.task_name} has no {what}, so it takes {takes}, not texts: build it with "
            f"{build}, or pass {instead}."
        )

    def _split_batch(self, split, batch, y, sample_weight, pipeline):
        """`split(batch)`: `call` of a task whose batches come from the dataset-level `pipeline`."""
        if y is not None or sample_weight is not None:
            raise ValueError(
                f"{type(self).__name__} splits a batch of `{pipeline}`: its labels and weights "
                "are in the batch."
            )
        return split(batch)

    def _element_error(self, spec):
        return (f"A dataset of texts for {self.task_name} must hold `{self.element_name}` pairs, "
                f"got {spec}.")

    def get_config(self):
        return {"task_name": self.task_name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def packed(inputs, y=None, sample_weight=None):
    """`(inputs, y, sample_weight)` as Keras reads a batch: without the trailing `None`s."""
    if sample_weight is not None:
        return inputs, y, sample_weight
    return inputs if y is None else (inputs, y)


# --- Texts: what counts as texts, and as a batch of them ---


def is_string_spec(spec):
    """Whether a dataset element's part `spec` is a `tf.string` tensor."""
    return isinstance(spec, tf.TensorSpec) and spec.dtype == tf.string


def text_rank(parts, spec):
    """0 for a dataset of single texts (scalars), 1 for one of batches; any other rank is refused."""
    ranks = {part.shape.rank for part in parts}
    if ranks not in ({0}, {1}):
        raise ValueError(
            "A dataset of texts must hold single texts (scalars) or batches of texts (shape "
            f"[batch_size]), got {spec}."
        )
    return ranks.pop()


def is_pair(x):
    """Whether `x` is a text pair `(texts_a, texts_b)`: a tuple of two batches (a list is a batch)."""
    return isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], (str, bytes))


def is_texts(x):
    """Whether `x` holds raw texts: a list, NumPy array or `tf.string` tensor of them, or a pair.

    A list or tuple (or object array, e.g. a pandas column) must hold only
    `str` or `bytes`; a lone `str` counts, to be refused by
    `string_tensor` with a clear message.
    """
    if is_pair(x):
        return all(is_texts(part) for part in x)
    if tf.is_tensor(x):
        return x.dtype == tf.string
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (list, tuple)):  # a tuple of two batches is a pair (above)
        return bool(x) and all(isinstance(t, (str, bytes)) for t in x)
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind == "O":  # e.g. a pandas column (or its .to_numpy())
        values = np.asarray(x, dtype=object).ravel()
        return values.size > 0 and all(isinstance(t, (str, bytes)) for t in values)
    return kind in ("U", "S")


def string_tensor(x, name):
    """`x` (texts) as a 1-D `tf.string` tensor; a lone text or another rank is refused, naming `name`."""
    if isinstance(x, (str, bytes)):
        raise ValueError(f"`{name}` must be a batch of texts (a list), got the single text {x!r}.")
    if not tf.is_tensor(x):
        shape = np.shape(np.asarray(x, dtype=object))  # bytes that are not UTF-8 as they are
        if len(shape) != 1:
            raise ValueError(f"`{name}` must be a 1-D batch of texts, got shape {shape}.")
        x = tf.constant([t if isinstance(t, bytes) else str(t).encode("utf-8") for t in x], tf.string)
    if x.shape.rank != 1:
        raise ValueError(f"`{name}` must be a 1-D batch of texts, got shape {x.shape}.")
    return x


def preprocessing_object(name, value, cls):
    """`value` (a `cls` such as `WordPieceTokenizer`, its Keras config, or None) as a `cls` or None.

    How task models and task preprocessors take their tokenizer or
    preprocessor: as an object, or as the serialized config their
    `from_config` gets back from a `.keras` file.
    """
    if value is None:
        return None
    if isinstance(value, dict):
        value = keras.saving.deserialize_keras_object(value)
    if not isinstance(value, cls):
        raise ValueError(f"`{name}` must be a tfnlp.data.{cls.__name__}, got {type(value).__name__}.")
    return value


def serialized(value):
    """`value` as Keras serializes it for a config; None stays None."""
    return None if value is None else keras.saving.serialize_keras_object(value)


def checked_batch_size(batch_size):
    """`batch_size` (None: `DEFAULT_BATCH_SIZE`) as a positive int."""
    return _checks.positive_int("batch_size", batch_size or DEFAULT_BATCH_SIZE)
