"""Prepared examples to sharded TFRecord files and back (multi-worker and TPU input)."""

import json
import os

import tensorflow as tf

from tfnlp import _checks
from tfnlp.data.tuning import static_tuning

# int64_list and float_list hold these exactly; other dtypes are refused.
_INT_DTYPES = (tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.bool)
_FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32)


def _shard_name(prefix, index, count):
    return f"{prefix}-{index:05d}-of-{count:05d}.tfrecord"


def _spec_path(prefix):
    return f"{prefix}.spec.json"


def _feature(value):
    flat = tf.reshape(value, [-1]).numpy()
    if value.dtype in _FLOAT_DTYPES:
        return tf.train.Feature(float_list=tf.train.FloatList(value=flat.astype("float32")))
    if value.dtype in _INT_DTYPES:
        return tf.train.Feature(int64_list=tf.train.Int64List(value=flat.astype("int64")))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(flat)))


def write_tfrecords(dataset, prefix, num_shards=4):
    """Writes a dataset of dicts of fixed-shape tensors to sharded TFRecords.

    Element `i` goes to shard `i % num_shards`, so `read_tfrecords` gives the
    elements back in their original order; workers can also take disjoint
    shards. The element spec and shard count are stored beside them
    (`PREFIX.spec.json`). Shards are written under temporary names; the old
    spec is removed before they are renamed into place and the new spec is
    written last, so a crash at any point leaves either the previous
    complete data or no readable data, never a mix.

    Args:
        dataset: `tf.data.Dataset` of dicts of tensors with fully defined
            shapes (int, float or string), e.g. unbatched pipeline output.
        prefix: path prefix; shards are `PREFIX-00000-of-00004.tfrecord`, ...
        num_shards: int.

    Returns:
        The list of shard paths.

    Example:

    >>> import tempfile
    >>> dataset = tf.data.Dataset.from_tensor_slices({"ids": [[1, 2], [3, 4], [5, 6]]})
    >>> prefix = os.path.join(tempfile.mkdtemp(), "train")
    >>> len(write_tfrecords(dataset, prefix, num_shards=2))
    2
    >>> [x["ids"].tolist() for x in read_tfrecords(prefix).as_numpy_iterator()]
    [[1, 2], [3, 4], [5, 6]]
    """
    num_shards = _checks.positive_int("num_shards", num_shards)
    spec = dataset.element_spec
    if not isinstance(spec, dict) or not all(isinstance(s, tf.TensorSpec) for s in spec.values()):
        raise ValueError(f"`dataset` must yield dicts of tensors, got element_spec {spec}.")
    for name, s in spec.items():
        if not s.shape.is_fully_defined():
            raise ValueError(
                f"Feature {name!r} has shape {s.shape}; TFRecords need fixed shapes "
                "(write unbatched, padded examples)."
            )
        if s.dtype not in _INT_DTYPES + _FLOAT_DTYPES + (tf.string,):
            raise ValueError(
                f"Feature {name!r} has dtype {s.dtype.name}, which TFRecord features cannot "
                "hold exactly; cast it to int64, float32 or string first."
            )
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    paths = [_shard_name(prefix, i, num_shards) for i in range(num_shards)]
    temporary = [f"{p}.tmp" for p in paths] + [f"{_spec_path(prefix)}.tmp"]
    try:
        writers = [tf.io.TFRecordWriter(t) for t in temporary[:-1]]
        try:
            for index, element in enumerate(dataset):
                example = tf.train.Example(
                    features=tf.train.Features(feature={k: _feature(v) for k, v in element.items()})
                )
                writers[index % num_shards].write(example.SerializeToString())
        finally:
            for writer in writers:
                writer.close()
        with open(temporary[-1], "w") as f:
            json.dump(
                {
                    "num_shards": num_shards,
                    "features": {
                        k: {"shape": s.shape.as_list(), "dtype": s.dtype.name} for k, s in spec.items()
                    },
                },
                f,
            )
    except BaseException:
        for path in temporary:
            if os.path.exists(path):
                os.remove(path)
        raise
    if os.path.exists(_spec_path(prefix)):
        os.remove(_spec_path(prefix))  # no reader may pair the old spec with new shards
    for path in paths:
        os.replace(f"{path}.tmp", path)
    os.replace(temporary[-1], _spec_path(prefix))
    return paths


def read_tfrecords(prefix, num_workers=1, worker_index=0):
    """Reads shards written by `write_tfrecords` back into a dataset.

    With one worker the elements come back in the order they were written.
    With several, worker `w` reads shards `w, w + num_workers, ...` (give it
    at least as many shards as workers).

    Args:
        prefix: the prefix given to `write_tfrecords`.
        num_workers: int, workers sharing the files.
        worker_index: int, this worker.

    Returns:
        `tf.data.Dataset` of dicts with the written dtypes and shapes.
    """
    num_workers = _checks.positive_int("num_workers", num_workers)
    worker_index = _checks.non_negative_int("worker_index", worker_index)
    if not worker_index < num_workers:
        raise ValueError(f"`worker_index` must be in [0, {num_workers}), got {worker_index}.")
    spec_path = _spec_path(prefix)
    if not os.path.exists(spec_path):
        raise ValueError(f"No TFRecord data at {prefix!r}: {spec_path} is missing.")
    with open(spec_path) as f:
        stored = json.load(f)
    spec, count = stored["features"], stored["num_shards"]
    paths = [_shard_name(prefix, i, count) for i in range(count)]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise ValueError(f"TFRecord data at {prefix!r} is incomplete: missing {missing[:3]}.")
    paths = paths[worker_index::num_workers]
    if not paths:
        raise ValueError(
            f"Worker {worker_index} of {num_workers} gets no shard: {prefix!r} has only "
            f"{count}; write at least as many shards as workers."
        )

    features = {}
    for name, s in spec.items():
        dtype = tf.as_dtype(s["dtype"])
        stored = tf.float32 if dtype in _FLOAT_DTYPES else tf.int64 if dtype in _INT_DTYPES else tf.string
        features[name] = tf.io.FixedLenFeature(s["shape"], stored)

    @tf.autograph.experimental.do_not_convert
    def parse(record):
        parsed = tf.io.parse_single_example(record, features)
        return {k: tf.cast(v, tf.as_dtype(spec[k]["dtype"])) for k, v in parsed.items()}

    files = tf.data.Dataset.from_tensor_slices(paths)
    # Round-robin over the shards restores the written order.
    records = files.interleave(
        tf.data.TFRecordDataset, cycle_length=len(paths), block_length=1
    )
    return static_tuning(records.map(parse, num_parallel_calls=tf.data.AUTOTUNE))
