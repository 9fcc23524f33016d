"""The base of tfnlp's task models: the Keras workarounds, `compile("auto")`, raw-text inputs."""

import contextlib
import typing

import keras
import numpy as np
import tensorflow as tf

from tfnlp.data.task_preprocessor import is_pair, is_texts
from tfnlp.models._mixins import checked
from tfnlp.training.optimizers import with_loss_scaling
from tfnlp.training.validation import quiet_epoch_end


class Task(keras.Model):
    """A Functional task model (a backbone and heads) that can also take raw text.

    What every tfnlp task model shares, in one place:

    - **`compile()` with defaults**: `"auto"` for `optimizer`, `loss`,
      `metrics` or `weighted_metrics` takes the task's own
      (`_compile_defaults()`); loss scaling is added under a `mixed_float16`
      policy.
    - **The backbone and preprocessor it takes**: `backbone_cls` and
      `preprocessor_cls` (class attributes, None where the task has none);
      `_backbone_object` reads a backbone given as an object or as its
      Keras config and refuses any other class by name.
    - **Inputs checked before Keras casts them**: `call` runs the task's
      `_checked_inputs(inputs)` first. Keras' Functional `call` casts every
      input to the dtype of its `keras.Input` (float token ids silently
      become ints) and fails deep in TensorFlow on wrong shapes; the check
      names the argument instead, and the error reaches the user as raised,
      without Keras' dump of every argument's value.
    - **`compile()` restored from `.keras` files**: Keras re-compiles a
      loaded model only through `compile_from_config` and skips a model
      whose `compile()` is overridden (with a warning), which left the
      models without optimizer, loss or metrics after
      `keras.saving.load_model`. The saved configuration holds the objects
      `compile()` resolved, so compiling with them again is exact; building
      the optimizer lets Keras load its variables (step counter, moments).
    - **The optimizer built before tracing**: without a `tf.distribute`
      strategy, Keras 3.15 defers building the optimizer to the first trace
      of the training step, so every slot variable is created inside the
      `tf.function` (each with its own lifted-initializer `tf.cond`) and the
      function is traced twice; on a 2-core CPU that made the first `fit` of
      a tiny `TransformerSeq2Seq` several times slower
      (`benchmarks/first_fit_benchmark.py`, figures in
      benchmarks/README.md). `make_train_function` builds it first, in the
      model's strategy scope.
    - **Training and evaluation steps that wait for their batch**: Keras
      3.15 (TensorFlow backend, `steps_per_execution=1`) finds the end of a
      dataset of unknown length (after `filter`, `flat_map`, `unbatch`,
      ...) by running the step once more and catching the end-of-sequence
      error; every update that does not read the batch runs in that step
      anyway (TensorFlow orders stateful ops only by the data they use):
      the optimizer's `iterations` (so learning-rate schedules and Adam's
      bias correction) and the counts of loss trackers and of metrics whose
      weights are static. Each pass over such a dataset added one optimizer
      step and reported losses and metrics multiplied by n / (n + 1) for n
      batches. Every op of `train_step` and `test_step` waits for the
      batch's tensors (one `NoOp`); a step that receives its batch runs
      exactly as before. An XLA step (`jit_compile`) runs as one op that
      waits for all its inputs, and an eager step runs in order, so neither
      needs this.
    - **Raw text in**, one path for every task (`_text_inputs`): `fit`,
      `evaluate` and `predict` take texts (a list, array or string tensor,
      a tuple `(texts_a, texts_b)` of pairs, or a `tf.data.Dataset` whose
      features are strings) as well as the token-id dicts of the model's
      inputs, which still work unchanged. A task that reads text returns
      its `tfnlp.data.TaskPreprocessor` from `_task_preprocessor()`, built
      from the task's own constructor arguments; `_text_inputs` recognises
      the texts, checks their counts, pairs and `y`, and leaves what is
      particular to the task to that preprocessor: its refusals
      (`check`), its labels (`checked_labels`), where a dataset element
      holds the texts (`dataset_element`), its pipeline (`batches`) and,
      in the graph, `preprocessor(x, y, sample_weight)` -> `(inputs, y,
      sample_weight)`. Texts in memory whose task preprocesses them the
      same way every epoch (`in_memory`: the classifiers) are preprocessed
      once, eagerly, into the model's input arrays (`TextArrays`), which
      Keras then batches and shuffles as it does token ids: not once per
      epoch, and without a `tf.data` pipeline whose tokenizer graph
      TensorFlow would instantiate again for every new iterator (each
      `predict` call, each epoch). Other texts, and a `tf.data.Dataset`,
      go through the preprocessor's `tf.data` pipeline. A new task that
      reads text is a new `TaskPreprocessor` subclass, not an edit here.
    - **Quiet `fit`**: a `tf.data.Dataset` needs no `shuffle` (it shuffles
      itself), so Keras' "`shuffle=True` was passed, but will be ignored"
      warning is not raised for the default; and a dataset of unknown
      length (length buckets, `filter`) ends its epochs without Keras'
      "Your input ran out of data" warning when `steps_per_epoch` is not
      given (that is how Keras finds the end of such a dataset; with
      `steps_per_epoch` the warning is kept, as running out is then real).
    """

    backbone_cls = None  # the Backbone subclass the task is built on, if any
    preprocessor_cls = None  # the preprocessor class it carries, if any

    @classmethod
    def _backbone_object(cls, backbone):
        """`backbone` (a `backbone_cls`, or its Keras config from a `.keras` file), checked."""
        if isinstance(backbone, dict):
            backbone = keras.saving.deserialize_keras_object(backbone)
        if not isinstance(backbone, cls.backbone_cls):
            raise ValueError(
                f"`backbone` must be a {cls.backbone_cls.__name__}, got {type(backbone).__name__}."
            )
        return backbone

    # --- Keras workarounds (see the class docstring) ---

    def _checked_inputs(self, inputs):
        raise NotImplementedError

    def call(self, inputs, training=None, mask=None, **kwargs):
        return super().call(checked(self, inputs), training=training, mask=mask, **kwargs)

    def compile_from_config(self, config):
        # Every argument as saved: an explicit `None` (no metrics, say) stays
        # `None` rather than becoming the model's "auto" default.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def make_train_function(self, force=False):
        if self.built and self.optimizer is not None and not self.optimizer.built:
            with self.distribute_strategy.scope():
                self.optimizer.build(self.trainable_variables)
        return super().make_train_function(force=force)

    def train_step(self, data):
        with self._after_arrival(data):
            return super().train_step(data)

    def test_step(self, data):
        with self._after_arrival(data):
            return super().test_step(data)

    def _after_arrival(self, data):
        if self.jit_compile or tf.executing_eagerly():
            return contextlib.nullcontext()
        tensors = [t for t in tf.nest.flatten(data, expand_composites=True) if t is not None]
        return tf.control_dependencies([tf.group(*tensors, name="batch_arrived")])

    def _compile_defaults(self):
        """What `"auto"` means for each `compile()` argument.

        A dict with any of `"optimizer"`, `"loss"`, `"metrics"` and
        `"weighted_metrics"`; an argument it leaves out is `None` (tasks
        whose targets carry padding weights give weighted metrics only; a
        model that computes its own loss gives no loss).
        """
        raise NotImplementedError

    def compile(self, optimizer="auto", loss="auto", *, metrics="auto", weighted_metrics="auto",
                **kwargs):
        defaults = self._compile_defaults()
        unknown = set(defaults) - {"optimizer", "loss", "metrics", "weighted_metrics"}
        if unknown:
            raise TypeError(f"{type(self).__name__}._compile_defaults() gave unknown keys {sorted(unknown)}.")
        arguments = {"optimizer": optimizer, "loss": loss, "metrics": metrics,
                     "weighted_metrics": weighted_metrics}
        for name, value in arguments.items():
            if isinstance(value, str) and value == "auto":
                arguments[name] = defaults.get(name)
        arguments["optimizer"] = with_loss_scaling(arguments["optimizer"], self)  # mixed_float16
        super().compile(**arguments, **kwargs)

    # --- Raw text ---

    def _task_preprocessor(self):
        """The `tfnlp.data.TaskPreprocessor` this task reads raw text with, or None (token ids only).

        Tasks that read text build it from their own constructor arguments
        (their configs stay as they are), anew at each call.
        """
        return None

    def _text_inputs(self, x, y, batch_size, shuffle, mode):
        """Model inputs for raw-text `x`, or None if `x` is not text.

        A `tf.data.Dataset` of model-input batches, or `TextArrays` (the
        inputs in memory, for Keras to batch and shuffle). `mode` is
        `"fit"`, `"evaluate"` (`x`, or the dataset, comes with labels) or
        `"predict"`.
        """
        preprocessor = self._task_preprocessor()
        if preprocessor is None:
            return None
        if isinstance(x, tf.data.Dataset):
            return _dataset_inputs(preprocessor, x, batch_size, shuffle, mode)
        texts = preprocessor.texts(x)
        if texts is None:
            return None
        pairs = isinstance(texts, tuple)
        preprocessor.check(mode, pairs)
        count = int(texts[0].shape[0] if pairs else texts.shape[0])
        if pairs and int(texts[1].shape[0]) != count:
            raise ValueError(
                f"`x` must hold two batches of the same number of texts, got {count} and "
                f"{int(texts[1].shape[0])}."
            )
        if y is not None:
            y = preprocessor.checked_labels(y, count)
        elif mode != "predict" and preprocessor.label_name:
            raise ValueError(
                f"`y` ({preprocessor.label_name}) is required to {mode} on {preprocessor.text_name}."
            )
        if preprocessor.in_memory(count):
            return TextArrays(*_preprocessed_once(preprocessor, texts, count, y))
        examples = tf.data.Dataset.from_tensor_slices((texts,) if y is None else (texts, y))
        return preprocessor.batches(examples, batch_size=batch_size, shuffle=shuffle, mode=mode,
                                    count=count, batched=False)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, **kwargs):
        if validation_split and validation_data is None and y is not None and is_texts(x):
            train, validation_data = _split_last(x, y, validation_split, kwargs.get("sample_weight"))
            x, y = train[:2]
            if len(train) == 3:
                kwargs["sample_weight"] = train[2]
            validation_split = 0.0
        inputs = self._text_inputs(x, y, batch_size, shuffle, mode="fit")
        if isinstance(inputs, TextArrays):
            x, y = inputs
        elif inputs is not None:
            if validation_split:  # texts without labels (documents): nothing to cut by
                raise ValueError(
                    "`validation_split` cannot cut these texts; pass held-out texts as "
                    "`validation_data`."
                )
            x, y, batch_size = inputs, None, None
        if validation_data is not None:
            validation_data = self._validation_dataset(validation_data, kwargs)
        if _is_dataset(x):
            shuffle = False  # a dataset shuffles itself; Keras would warn
        with self._quiet(kwargs.get("steps_per_epoch")):
            return super().fit(
                x, y, batch_size=batch_size, epochs=epochs, verbose=verbose, callbacks=callbacks,
                validation_split=validation_split, validation_data=validation_data,
                shuffle=shuffle, **kwargs,
            )

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", **kwargs):
        inputs = self._text_inputs(x, y, batch_size, shuffle=False, mode="evaluate")
        if isinstance(inputs, TextArrays):
            x, y = inputs
        elif inputs is not None:
            x, y, batch_size = inputs, None, None
        with self._quiet(kwargs.get("steps")):
            return super().evaluate(x, y, batch_size=batch_size, verbose=verbose, **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        inputs = self._text_inputs(x, None, batch_size, shuffle=False, mode="predict")
        if isinstance(inputs, TextArrays):
            x = inputs.x
        elif inputs is not None:
            x, batch_size = inputs, None
        with self._quiet(kwargs.get("steps")):
            return super().predict(x, batch_size=batch_size, verbose=verbose, **kwargs)

    def _validation_dataset(self, validation_data, kwargs):
        weights = None
        batch = validation_data[0] if isinstance(validation_data, list) and validation_data else None
        if isinstance(validation_data, tuple) and len(validation_data) == 3:
            x, y, weights = validation_data  # (x, y, sample_weight)
        elif (isinstance(validation_data, tuple) and len(validation_data) == 2) or (
            isinstance(validation_data, list) and len(validation_data) == 2
            and not isinstance(batch, (str, bytes)) and (is_texts(batch) or _is_dataset(batch))
        ):
            x, y = validation_data  # (x, y), or Keras' [x, y]
        else:  # a dataset, or texts that need no labels (documents to pretrain on)
            x, y = validation_data, None
        inputs = self._text_inputs(x, y, kwargs.get("validation_batch_size"), shuffle=False,
                                   mode="evaluate")
        if inputs is None:
            return validation_data  # model inputs: Keras reads them
        if isinstance(inputs, TextArrays):  # Keras batches them by `validation_batch_size`
            return tuple(inputs) if weights is None else (*inputs, weights)
        if weights is not None:
            raise ValueError(
                f"{type(self).__name__} takes no sample weights with validation texts: pass "
                "`validation_data` as `(x, y)`."
            )
        kwargs.pop("validation_batch_size", None)
        return inputs

    _quiet = staticmethod(quiet_epoch_end)


class TextArrays(typing.NamedTuple):
    """Texts in memory, preprocessed: the model's inputs `x` (a dict of NumPy
    arrays, one row per text) and the labels `y` (NumPy; or None) as the task
    preprocessor's `call` gave them from what `checked_labels` gave (a
    classifier's class ids; a tagger's tags aligned to its word positions)."""

    x: dict
    y: object


def _is_dataset(x):
    return isinstance(x, tf.data.Dataset)


def _dataset_inputs(preprocessor, dataset, batch_size, shuffle, mode):
    """`Task._text_inputs` for a dataset: its batches through `preprocessor`, or None (no texts)."""
    spec = dataset.element_spec
    element = preprocessor.dataset_element(spec, mode)
    if element is None:
        return None
    preprocessor.check(mode, isinstance(element.features, tuple))
    # The elements as `batches` reads them: `features` (or `(features,)`) or `(features, labels)`.
    if element.features is spec:
        if isinstance(spec, tuple):  # a text pair
            dataset = dataset.map(tf.autograph.experimental.do_not_convert(lambda *pair: (pair,)))
    elif element.labels is None:  # (texts, anything): the texts
        dataset = dataset.map(tf.autograph.experimental.do_not_convert(lambda *parts: (parts[0],)))
    return preprocessor.batches(dataset, batch_size=batch_size, shuffle=shuffle, mode=mode,
                                count=None, batched=element.batched)


def _preprocessed_once(preprocessor, texts, count, y=None):
    """`(inputs, y)` for `count` texts (or pairs) and their labels `y` (or None), as NumPy
    arrays the preprocessor made, computed eagerly `preprocessor.chunk_size` texts at a
    time (to bound the tokenizer's intermediate tensors)."""
    chunk, chunks = preprocessor.chunk_size, []
    for start in range(0, max(count, 1), chunk):
        part = (tuple(t[start:start + chunk] for t in texts) if isinstance(texts, tuple)
                else texts[start:start + chunk])
        inputs, labels, _ = preprocessor(part, None if y is None else y[start:start + chunk])
        chunks.append(tf.nest.map_structure(np.asarray, (inputs, labels)))
    inputs = tf.nest.map_structure(lambda *parts: np.concatenate(parts), *[c[0] for c in chunks])
    return inputs, None if y is None else np.concatenate([c[1] for c in chunks])


def _host(values):
    return values.numpy() if tf.is_tensor(values) else values


def _split_last(x, y, fraction, weights=None):
    """`(train, validation)`, each `(x, y)` or, with sample `weights`, `(x, y, weights)`:
    the last `fraction` held out, as Keras' `validation_split`."""
    def cut(values, start, stop):
        if is_pair(values):
            return tuple(cut(v, start, stop) for v in values)
        return values[start:stop]

    if not 0 < fraction < 1:
        raise ValueError(f"`validation_split` must be in (0, 1), got {fraction}.")
    x = tuple(_host(part) for part in x) if is_pair(x) else _host(x)
    y = _host(y)
    weights = None if weights is None else np.asarray(_host(weights))
    count = len(x[0]) if is_pair(x) else len(x)
    split = int(count * (1 - fraction))
    if not 0 < split < count:
        raise ValueError(
            f"`validation_split` {fraction} of {count} examples leaves no training or no "
            "validation example."
        )
    if weights is not None and len(weights) != count:
        raise ValueError(f"`sample_weight` must hold one weight per example ({count}), got {len(weights)}.")
    parts = (x, y) if weights is None else (x, y, weights)
    return tuple(cut(p, 0, split) for p in parts), tuple(cut(p, split, None) for p in parts)
