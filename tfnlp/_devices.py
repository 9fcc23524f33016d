"""Which kind of device this process computes on."""

import tensorflow as tf


def accelerator_visible():
    """True when TensorFlow sees a GPU or TPU (any device that is not a CPU).

    >>> accelerator_visible() == any(
    ...     d.device_type != "CPU" for d in tf.config.list_physical_devices())
    True
    """
    return any(device.device_type != "CPU" for device in tf.config.list_physical_devices())


def random_algorithm():
    """The `alg` of tfnlp's in-model random draws (dropout): `"philox"`, or on a TPU TensorFlow's choice.

    TensorFlow's default, `"auto_select"`, is Philox in its CPU and GPU
    kernels and gives the same bits under XLA on a CPU, but there XLA
    generates them far slower than with Philox named, which slowed
    XLA-compiled BERT training steps (`benchmarks/dropout_benchmark.py`;
    figures in benchmarks/README.md). Naming
    Philox keeps every bit the same, with or without XLA. On a TPU
    `"auto_select"` picks the TPU's own generator, so it is kept there.

    >>> random_algorithm()
    'philox'
    """
    if any(device.device_type == "TPU" for device in tf.config.list_logical_devices()):
        return "auto_select"
    return "philox"


def in_xla_context():
    """True while tracing a function that XLA will compile (`jit_compile=True`).

    Reads TensorFlow's own flag for the graph being built and its outer
    graphs (a private API; where it is missing, the answer is True, the
    safe side for callers that pick ops XLA lacks only when it is False).

    >>> in_xla_context()
    False
    >>> bool(tf.function(lambda: tf.constant(in_xla_context()), jit_compile=True)())
    True
    >>> bool(tf.function(lambda: tf.constant(in_xla_context()))())
    False
    """
    if tf.executing_eagerly():
        return False
    try:
        from tensorflow.python.framework import ops
        from tensorflow.python.ops import control_flow_util
    except ImportError:  # pragma: no cover (TensorFlow moved it)
        return True
    in_xla = getattr(control_flow_util, "GraphOrParentsInXlaContext", None)
    if in_xla is None:  # pragma: no cover (TensorFlow renamed it)
        return True
    return bool(in_xla(ops.get_default_graph()))
