"""What the encoder and decoder blocks share: config, feed-forward, residuals."""

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.layers import activations
from tfnlp.layers._keras_masks import without_keras_mask
from tfnlp.layers.dropout import Dropout
from tfnlp.layers.layer_normalization import LayerNormalization
from tfnlp.layers.multi_head_attention import MultiHeadAttention


class TransformerBlockBase(keras.layers.Layer):
    """Shared constructor, sublayer factories and config of the blocks."""

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-5,
        norm_first=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = _checks.positive_int("num_heads", num_heads)
        self.intermediate_dim = _checks.positive_int("intermediate_dim", intermediate_dim)
        self.dropout = _checks.rate("dropout", dropout)
        self.activation = _checks.activation("activation", activation)
        self.layer_norm_epsilon = _checks.positive_float(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        self.norm_first = bool(norm_first)
        self.kernel_initializer = _checks.initializer("kernel_initializer", kernel_initializer)
        self.bias_initializer = _checks.initializer("bias_initializer", bias_initializer)
        self.supports_masking = True

    def _hidden_dim(self, name, shape):
        hidden_dim = _checks.last_dim(name, shape)
        if hidden_dim % self.num_heads:
            raise ValueError(
                f"The hidden size of `{name}` ({hidden_dim}) must be divisible by "
                f"`num_heads` ({self.num_heads})."
            )
        self._hidden_size = hidden_dim  # checked again at every call
        return hidden_dim

    def _check_call(self, entries, **known):
        """Checks `(name, value, pattern)` call arguments (see `_checks.tensors`).

        Masks may be bool, int or float, positions int, the rest must be
        float. `D` is the hidden size the block was built for; caches are
        `(B, C, M, H, K)`.
        """
        kinds = {"mask": "mask", "positions": "int"}
        _checks.tensors(
            *((name, value, pattern, kinds.get(name.rsplit("_", 1)[-1], "float"))
              for name, value, pattern in entries),
            ranks_known=True,  # the projections and norms need them
            D=self._hidden_size, C=(2, "keys and values"), H=(self.num_heads, "`num_heads`"),
            K=(self._hidden_size // self.num_heads, "hidden size // `num_heads`"), **known,
        )

    def _common(self):
        return {
            "kernel_initializer": self.kernel_initializer,
            "bias_initializer": self.bias_initializer,
            "dtype": self.dtype_policy,
        }

    def _build_attention(self, name, hidden_dim, query_shape, value_shape):
        attention = MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=hidden_dim // self.num_heads,
            dropout=self.dropout,
            name=name,
            **self._common(),
        )
        attention.build(query_shape, value_shape)
        norm = self._build_norm(f"{name}_norm", query_shape)
        dropout = Dropout(self.dropout, dtype=self.dtype_policy)
        return attention, norm, dropout

    def _build_norm(self, name, shape):
        norm = LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build(shape)
        return norm

    def _build_feedforward(self, hidden_dim, shape):
        self._intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            activation=activations.fast(self.activation),
            name="intermediate_dense",
            **self._common(),
        )
        self._intermediate_dense.build(shape)
        self._output_dense = keras.layers.Dense(hidden_dim, name="output_dense", **self._common())
        self._output_dense.build(tuple(shape[:-1]) + (self.intermediate_dim,))
        self._feedforward_norm = self._build_norm("feedforward_norm", shape)
        self._feedforward_dropout = Dropout(self.dropout, dtype=self.dtype_policy)

    def _residual(self, x, sublayer, norm, dropout, training):
        """Post-LN `norm(x + f(x))` or pre-LN `x + f(norm(x))`.

        `sublayer` returns `(output, extra)`; `extra` is passed through.
        """
        y, extra = sublayer(norm(x) if self.norm_first else x)
        x = x + dropout(y, training=training)
        return (x if self.norm_first else norm(x)), extra

    def _self_attention_sublayer(
        self, x, mask, cache, cache_update_index, training, output_positions=None
    ):
        """Residual self-attention; returns `(x, updated cache or None)`.

        With `output_positions` `(B, P)` only those rows of `x` are queries
        (and residuals); keys and values still come from every row, and
        `mask` must already be the queries' `(B, P or 1, S)` rows.
        """
        x = without_keras_mask(x)
        keys = None
        if output_positions is not None:
            # Pre-LN: the keys see norm(x) of every row, the queries norm()
            # of theirs (the same per-row values as gathering norm(x)).
            keys = self._self_attention_norm(x) if self.norm_first else x
            x = tf.gather(x, output_positions, batch_dims=1)

        def attend(h):
            h = without_keras_mask(h)
            result = self._self_attention(
                h,
                h if keys is None else keys,
                attention_mask=mask,
                cache=cache,
                cache_update_index=cache_update_index,
                training=training,
            )
            return result if cache is not None else (result, None)

        return self._residual(
            x,
            attend,
            self._self_attention_norm,
            self._self_attention_dropout,
            training,
        )

    def _feedforward(self, x, training):
        def sublayer(h):
            return self._output_dense(self._intermediate_dense(h)), None

        x, _ = self._residual(
            x, sublayer, self._feedforward_norm, self._feedforward_dropout, training
        )
        return x

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "norm_first": self.norm_first,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
