"""Which kind of device this process computes on."""

import tensorflow as tf


def accelerator_visible():
    """True when TensorFlow sees a GPU or TPU (any device that is not a CPU).

    >>> accelerator_visible() == any(
    ...     d.device_type != "CPU" for d in tf.config.list_physical_devices())
    True
    """
    return any(device.device_type != "CPU" for device in tf.config.list_physical_devices())
