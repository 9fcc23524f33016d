"""Picking a `tf.distribute` strategy from the environment."""

import json
import os

import tensorflow as tf

from tfnlp import _checks

KINDS = ("auto", "default", "mirrored", "multi_worker", "tpu")


def cluster_size(tf_config=None):
    """Number of tasks (chief + workers) that `TF_CONFIG` describes (1 without one).

    Args:
        tf_config: the JSON string (default: the `TF_CONFIG` environment variable).

    Example:

    >>> cluster_size('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}}')
    2
    """
    text = os.environ.get("TF_CONFIG", "") if tf_config is None else tf_config
    if not text.strip():
        return 1
    try:
        config = json.loads(text)
        cluster = config.get("cluster", {})
        return sum(len(cluster.get(role, [])) for role in ("chief", "worker")) or 1
    except (ValueError, AttributeError, TypeError) as error:
        raise ValueError(f"`TF_CONFIG` is not a valid cluster description: {error}; got {text!r}.") from None


def strategy(kind="auto", tpu=None, devices=None):
    """The `tf.distribute.Strategy` to train with.

    `"auto"` picks, in order: `TPUStrategy` when a TPU is named (`tpu`, or
    the `TPU_NAME` environment variable), `MultiWorkerMirroredStrategy` when
    `TF_CONFIG` describes a cluster of more than one task,
    `MirroredStrategy` when more than one GPU is visible, and the default
    (no-op) strategy otherwise. Any other `kind` forces that strategy.

    Create models and optimizers inside `strategy.scope()`; train them with
    `model.fit` (default and Mirrored strategies) or with
    `tfnlp.training.fit`, which works under all of them, multi-worker
    included, and resumes exactly after a crash.

    Args:
        kind: one of `"auto"`, `"default"`, `"mirrored"`, `"multi_worker"`,
            `"tpu"`.
        tpu: TPU name or address for `TPUClusterResolver` (`"local"` on a
            TPU VM).
        devices: device list for `"mirrored"` (e.g. two logical CPUs,
            `["/cpu:0", "/cpu:1"]`); default: all GPUs.

    Returns:
        A `tf.distribute.Strategy`.

    Example:

    >>> strategy("default").num_replicas_in_sync
    1
    """
    _checks.one_of("kind", kind, KINDS)
    if devices is not None and kind not in ("auto", "mirrored"):
        raise ValueError(f"`devices` only applies to kind='mirrored', got kind={kind!r}.")
    if kind == "auto":
        if tpu or os.environ.get("TPU_NAME"):
            kind = "tpu"
        elif cluster_size() > 1:
            kind = "multi_worker"
        elif devices is not None or len(tf.config.list_logical_devices("GPU")) > 1:
            kind = "mirrored"
        else:
            kind = "default"
    if kind == "default":
        return tf.distribute.get_strategy()
    if kind == "mirrored":
        return tf.distribute.MirroredStrategy(devices)
    if kind == "multi_worker":
        cluster_size()  # a malformed TF_CONFIG fails here, with its name
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu or os.environ.get("TPU_NAME"))
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def global_sum(value):
    """Sum of `value` over all replicas when called inside `strategy.run`.

    Losses normalised by a count of tokens use it, so that each replica
    divides its share by the *global* count: summed over replicas (as
    gradients are) the result equals the single-device loss exactly, however
    unevenly the tokens fall between replicas.
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)
