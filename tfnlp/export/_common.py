"""What every exporter shares: argument checks and the TF Serving layout."""

import os
import uuid

import tensorflow as tf

# Private, but the only way to trace as tf.saved_model.save does (captured_variables).
from tensorflow.python.saved_model import save_context

from tfnlp import _checks
from tfnlp.data.bert_preprocessor import BertPreprocessor


def model_setting(model, name):
    """`model.NAME`, else its backbone's, as an int; None where neither says."""
    for owner in (model, getattr(model, "backbone", None)):
        value = getattr(owner, name, None)
        if _checks.is_int(value):
            return int(value)
    return None


def check_preprocessor(preprocessor, model):
    """Refuses a preprocessor that is not a `BertPreprocessor` or does not fit `model`.

    Its tokenizer may not have more tokens than the model's vocabulary
    (where the model, or its backbone, has a `vocabulary_size`): the
    export would serve some texts and fail on others with out-of-range
    ids. Fewer is allowed: some released checkpoints pad their embedding
    table beyond their `vocab.txt` (`models.bert_checkpoints`).
    """
    if not isinstance(preprocessor, BertPreprocessor):
        raise ValueError(f"`preprocessor` must be a BertPreprocessor, got {type(preprocessor).__name__}.")
    size = model_setting(model, "vocabulary_size")
    tokens = preprocessor.tokenizer.vocabulary_size()
    if size is not None and tokens > size:
        raise ValueError(
            f"`preprocessor`'s tokenizer has {tokens} tokens but the model's vocabulary has "
            f"only {size}: export with the vocabulary the model was trained with."
        )


def preprocessor_for(model, preprocessor):
    """`preprocessor`, else the model's own `preprocessor`; a ValueError where neither is given."""
    if preprocessor is None:
        preprocessor = getattr(model, "preprocessor", None)
    if preprocessor is None:
        raise ValueError(
            f"`preprocessor` is required: this {type(model).__name__} carries none (build it with "
            "`preprocessor=` where it takes one, or pass the BertPreprocessor it was trained with)."
        )
    return preprocessor


def takes_pairs(model):
    """Whether `model` can encode text pairs: a segment table of 2 or more rows (or unknown)."""
    segments = model_setting(model, "num_segments")
    return segments is None or segments >= 2


WARMUP_BATCH_SIZES = (1, 32)
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")


def warmup_batch_sizes_checked(sizes):
    """`sizes` as a tuple of positive ints (an empty one: no warm-up file)."""
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise ValueError(f"`warmup_batch_sizes` must be a tuple of batch sizes, got {sizes!r}.")
    return tuple(_checks.positive_int("warmup_batch_sizes", size) for size in sizes)


def save(module, export_dir, version, warmup_batch_sizes=WARMUP_BATCH_SIZES, signatures=None):
    """Saves the signatures of `module` to `export_dir/VERSION/` with TF Serving's warm-up file.

    What is saved is a root object that holds the signatures and the
    `tf.Variable`s they read (the ones inside the Keras variables), not the
    Keras objects. Tracking the Keras objects, as `tf.saved_model.save(module)`
    would, gives a SavedModel that loads with `tf.saved_model.load` but not in
    TensorFlow's graph-mode loader, which TF Serving and `saved_model_cli run`
    use: a Keras 3 variable saves a copy of itself that the restore op never
    initialises ("Could not find variable ...", tensorflow/serving#2250);
    tracking the `tf.Variable`s as well, as Keras' own `model.export()`
    does, fixes that but writes every weight twice.

    On a local file system the version appears whole or not at all: it is
    written in a hidden folder of `export_dir` (TF Serving takes only
    numeric folder names as versions) and renamed into place. An existing
    version of that number is moved aside, then deleted.

    Args:
        module: the `ServingModule` whose signatures are saved.
        export_dir: the model's directory.
        version: int, the version folder's name.
        warmup_batch_sizes: batch sizes of the warm-up requests written for
            every signature; `()` writes no warm-up file.
        signatures: `{name: tf.function}` of the signatures saved; default
            all that `module` serves (`module.signatures()`).

    Returns:
        The path of the written version.
    """
    version = _checks.positive_int("version", version)
    warmup_batch_sizes = warmup_batch_sizes_checked(warmup_batch_sizes)
    signatures = module.signatures() if signatures is None else signatures
    path = os.path.join(export_dir, str(version))
    root = tf.Module(name=module.name)
    # One SaveOptions for the variables' trace and the save: their variable
    # policy is part of tf.function's cache key, so saving reuses the trace.
    options = tf.saved_model.SaveOptions()
    root.variables_read = captured_variables(signatures.values(), options)
    # Lookup tables the signatures read (a word-level tagger's vocabulary): saved with their
    # initializers, which every loader runs (TF Serving's too).
    root.resources = list(getattr(module, "resources", ()))
    # TF Serving polls `export_dir`: it must never see a version without its
    # variables or its warm-up file.
    tag = uuid.uuid4().hex[:8]
    staging = os.path.join(export_dir, f".{version}.partial-{tag}")
    replaced = os.path.join(export_dir, f".{version}.replaced-{tag}")
    try:
        tf.saved_model.save(root, staging, signatures=signatures, options=options)
        if warmup_batch_sizes:
            write_warmup_requests(staging, module, signatures, warmup_batch_sizes,
                                  model_name=os.path.basename(os.path.normpath(export_dir)))
        if tf.io.gfile.exists(path):
            tf.io.gfile.rename(path, replaced)
        try:
            tf.io.gfile.rename(staging, path)
        except BaseException:
            if tf.io.gfile.exists(replaced):
                tf.io.gfile.rename(replaced, path)  # the old version back
            raise
    finally:
        for leftover in (staging, replaced):
            if tf.io.gfile.exists(leftover):
                tf.io.gfile.rmtree(leftover)
    return path


def captured_variables(functions, options):
    """The `tf.Variable`s that the traced `functions` read, each once.

    Traced as `tf.saved_model.save(..., options=options)` traces them, in a
    save context, so that saving reuses these traces: traced outside one,
    every signature was traced a second time by the save (measured by
    `benchmarks/export_benchmark.py`).

    Args:
        functions: the signatures' `tf.function`s.
        options: the `tf.saved_model.SaveOptions` the save will use.
    """
    seen, variables = set(), []
    with save_context.save_context(options):
        concrete = [function.get_concrete_function() for function in functions]
    for function in concrete:
        for variable in function.variables:
            if id(variable) not in seen:
                seen.add(id(variable))
                variables.append(variable)
    return variables


def write_warmup_requests(path, module, names, batch_sizes, model_name):
    """Writes `path/assets.extra/tf_serving_warmup_requests`.

    TF Serving replays these `PredictionLog` records when it loads the
    model, before it takes traffic, so that the first real request does not
    pay for graph optimisation and kernel set-up: for every signature of
    `names`, one request of each of `batch_sizes` rows, each input holding
    its kind's warm-up value (`ServingModule.warmup_request`: texts cycled
    from `WARMUP_TEXTS`, both sides of a pair the same; an option its
    warm-up value).
    """
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    tf.io.gfile.makedirs(os.path.join(path, "assets.extra"))
    with tf.io.TFRecordWriter(os.path.join(path, WARMUP_FILE)) as writer:
        for name in names:
            for size in batch_sizes:
                request = predict_pb2.PredictRequest(
                    model_spec=model_pb2.ModelSpec(name=model_name, signature_name=name)
                )
                for input_name, tensor in module.warmup_request(name, size).items():
                    request.inputs[input_name].CopyFrom(tensor)
                log = prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=request)
                )
                writer.write(log.SerializeToString())
