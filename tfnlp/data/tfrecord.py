"""Prepared examples to sharded TFRecord files and back (multi-worker and TPU input)."""

import glob
import json
import os

import tensorflow as tf

from tfnlp.layers import _validation

_INT_DTYPES = (tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8, tf.bool)
_FLOAT_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)


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
    shards. Shards are written to temporary names and renamed when complete,
    and the element spec is stored beside them (`PREFIX.spec.json`), so a
    crash never leaves a half-written shard that looks finished.

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
    num_shards = _validation.positive_int("num_shards", num_shards)
    spec = dataset.element_spec
    if not isinstance(spec, dict) or not all(isinstance(s, tf.TensorSpec) for s in spec.values()):
        raise ValueError(f"`dataset` must yield dicts of tensors, got element_spec {spec}.")
    for name, s in spec.items():
        if not s.shape.is_fully_defined():
            raise ValueError(
                f"Feature {name!r} has shape {s.shape}; TFRecords need fixed shapes "
                "(write unbatched, padded examples)."
            )
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    paths = [_shard_name(prefix, i, num_shards) for i in range(num_shards)]
    writers = [tf.io.TFRecordWriter(f"{p}.tmp") for p in paths]
    try:
        for index, element in enumerate(dataset):
            example = tf.train.Example(
                features=tf.train.Features(feature={k: _feature(v) for k, v in element.items()})
            )
            writers[index % num_shards].write(example.SerializeToString())
    finally:
        for writer in writers:
            writer.close()
    with open(f"{_spec_path(prefix)}.tmp", "w") as f:
        json.dump({k: {"shape": s.shape.as_list(), "dtype": s.dtype.name} for k, s in spec.items()}, f)
    for path in paths:
        os.replace(f"{path}.tmp", path)
    os.replace(f"{_spec_path(prefix)}.tmp", _spec_path(prefix))
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
    num_workers = _validation.positive_int("num_workers", num_workers)
    if not 0 <= worker_index < num_workers:
        raise ValueError(f"`worker_index` must be in [0, {num_workers}), got {worker_index}.")
    spec_path = _spec_path(prefix)
    if not os.path.exists(spec_path):
        raise ValueError(f"No TFRecord data at {prefix!r}: {spec_path} is missing.")
    with open(spec_path) as f:
        spec = json.load(f)
    paths = sorted(glob.glob(f"{glob.escape(prefix)}-*-of-*.tfrecord"))
    if not paths:
        raise ValueError(f"No shards match {prefix}-*-of-*.tfrecord.")
    count = int(paths[0].rsplit("-of-", 1)[1].split(".")[0])
    if len(paths) != count:
        raise ValueError(f"Expected {count} shards at {prefix!r}, found {len(paths)}.")
    paths = paths[worker_index::num_workers]

    features = {}
    for name, s in spec.items():
        dtype = tf.as_dtype(s["dtype"])
        stored = tf.float32 if dtype in _FLOAT_DTYPES else tf.int64 if dtype in _INT_DTYPES else tf.string
        features[name] = tf.io.FixedLenFeature(s["shape"], stored)

    def parse(record):
        parsed = tf.io.parse_single_example(record, features)
        return {k: tf.cast(v, tf.as_dtype(spec[k]["dtype"])) for k, v in parsed.items()}

    files = tf.data.Dataset.from_tensor_slices(paths)
    # Round-robin over the shards restores the written order.
    records = files.interleave(
        tf.data.TFRecordDataset, cycle_length=len(paths), block_length=1
    )
    return records.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
