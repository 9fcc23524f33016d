"""The serving-module base: each family describes its signatures once, the base builds the rest.

A family lists its signatures in `SIGNATURES` and writes the methods that
serve them; `ServingModule` generates from that one description the
`tf.function`s and their input signatures, the checks of the text inputs
(each a batch of texts `(B,)`; a pair's two sides the same batch size),
which signatures the module serves, and each signature's TF Serving
warm-up request (every input kind knows its warm-up value).
"""

import dataclasses
import inspect

import tensorflow as tf

# Texts of the warm-up requests: short and long, accents, CJK, emoji, a
# [MASK] for fill-mask, an empty text; cycled to the batch size.
WARMUP_TEXTS = (
    "The quick brown fox jumps over the lazy [MASK].",
    "An émigré's café in Zürich served 中文 menus, emoji \U0001F600 and a great deal of coffee "
    "to everyone who walked in from the cold, which was most of the town by noon.",
    "",
    "Great taste, would buy again!",
)


def batch_of_texts(name, text):
    """`text`, checked when the signature runs to be a batch of texts, shape `(B,)`.

    The signatures declare `(None,)`, but TensorFlow's graph-mode loader (the
    one TF Serving runs) feeds whatever shape a request carries: a scalar, or
    `(B, 1)` from a REST client sending `[["a"], ["b"]]`, would otherwise
    fail inside the tokenizer with a message about its internals. The rank is
    read when the graph runs (`Rank` of the fed tensor, which a graph with
    fed inputs cannot fold away).
    """
    shape = tf.strings.reduce_join(tf.strings.as_string(tf.shape(text)), separator=", ")
    check = tf.debugging.Assert(
        tf.equal(tf.raw_ops.Rank(input=text), 1),
        [tf.strings.join([
            f"`{name}` must be a batch of texts: a string tensor of shape [batch_size] (for "
            f'example ["first text", "second text"]), got shape [', shape, "]",
        ])],
    )
    with tf.control_dependencies([check]):
        return tf.identity(text)


def same_number_of_texts(texts):
    """`texts` (`{name: (B,) strings}`), checked at run time to hold as many texts each."""
    names = [f"`{name}`" for name in texts]
    first, *others = texts.values()
    checks = [tf.debugging.assert_equal(
        tf.size(first), tf.size(other),
        message=f"{', '.join(names[:-1])} and {names[-1]} must hold the same number of texts",
    ) for other in others]
    with tf.control_dependencies(checks):
        return [tf.identity(text) for text in texts.values()]


class Text:
    """A text input: `tf.string (B,)`, one text per row, checked to be that shape when run."""

    dtype = tf.string
    shape = (None,)

    def checked(self, name, value):
        return batch_of_texts(name, value)

    def warmup(self, batch_size):
        return [WARMUP_TEXTS[i % len(WARMUP_TEXTS)].encode() for i in range(batch_size)]


# Sentences of the warm-up requests of a words input: a name, accents, CJK, an emoji.
WARMUP_SENTENCES = (
    ("Ada", "Lovelace", "wrote", "in", "London", "."),
    ("Un", "café", "à", "Zürich", "中文", "\U0001F600"),
    ("Great", "taste", "!"),
)


class Words:
    """Pre-split words: `tf.string (B, W)`, one sentence per row, each row's words first and
    `""` after them (a request's rows may hold different numbers of words); checked to be a
    batch of rows when run."""

    dtype = tf.string
    shape = (None, None)

    def checked(self, name, value):
        shape = tf.strings.reduce_join(tf.strings.as_string(tf.shape(value)), separator=", ")
        check = tf.debugging.Assert(
            tf.equal(tf.raw_ops.Rank(input=value), 2),
            [tf.strings.join([
                f"`{name}` must be a batch of sentences: a string tensor of shape [batch_size, "
                f'max_words], "" after each sentence\'s words (for example [["Ada", "wrote"], '
                '["Hi", ""]]), got shape [', shape, "]",
            ])],
        )
        with tf.control_dependencies([check]):
            return tf.identity(value)

    def warmup(self, batch_size):
        rows = [WARMUP_SENTENCES[i % len(WARMUP_SENTENCES)] for i in range(batch_size)]
        width = max(len(row) for row in rows)
        return [[w.encode() for w in row] + [b""] * (width - len(row)) for row in rows]


@dataclasses.dataclass(frozen=True)
class Option:
    """A numeric option given per text: `dtype (B,)`, like the texts (so that TF Serving's
    batching can merge requests); the model checks its values where it reads them.

    Args:
        dtype: its `tf.DType`.
        warmup_value: the value of every row in the warm-up requests.
    """

    dtype: tf.DType
    warmup_value: object
    shape = (None,)

    def checked(self, name, value):
        return value

    def warmup(self, batch_size):
        return [self.warmup_value] * batch_size


TEXT = Text()
WORDS = Words()


@dataclasses.dataclass(frozen=True)
class Signature:
    """One serving signature, described once.

    Args:
        name: its name in the SavedModel, e.g. `"serving_default"`.
        function: the module attribute that holds its `tf.function`, e.g. `"classify"`.
        inputs: `{input name: TEXT, WORDS or an Option}`, in order; each input's first
            axis is the batch `B`.
        method: the module method that serves it, called with the checked
            texts (positionally, in order: one, or a pair) and the options
            (by name).
        when: the name of a module attribute that says whether the module
            serves this signature; None: always.
    """

    name: str
    function: str
    inputs: dict
    method: str = "_serve"
    when: str | None = None

    def specs(self):
        return [tf.TensorSpec(kind.shape, kind.dtype, name=name) for name, kind in self.inputs.items()]

    def warmup_request(self, batch_size):
        """`{input name: TensorProto}` of one warm-up request of `batch_size` rows."""
        return {name: tf.make_tensor_proto(kind.warmup(batch_size), dtype=kind.dtype)
                for name, kind in self.inputs.items()}


def text_and_pair_signatures(function, pair_name):
    """`serving_default(text)` in attribute `function` and `PAIR_NAME(text_a, text_b)` in
    attribute `PAIR_NAME` (served where the module's `takes_pairs` is true), both served by
    `_serve(*texts)`: one text tensor, or the pair's two."""
    return (
        Signature("serving_default", function, {"text": TEXT}),
        Signature(pair_name, pair_name, {"text_a": TEXT, "text_b": TEXT}, when="takes_pairs"),
    )


def _serving_function(signature):
    """The `tf.function` of `signature`: `(self, INPUT, ...)`, its input names as parameters."""

    def serve(*args, **kwargs):
        self, *inputs = serve.__signature__.bind(*args, **kwargs).arguments.values()
        texts, options = {}, {}
        for (name, kind), value in zip(signature.inputs.items(), inputs, strict=True):
            (options if isinstance(kind, Option) else texts)[name] = kind.checked(name, value)
        checked = same_number_of_texts(texts) if len(texts) > 1 else texts.values()
        return getattr(self, signature.method)(*checked, **options)

    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for name in ("self", *signature.inputs)]
    serve.__signature__ = inspect.Signature(parameters)
    serve.__name__ = serve.__qualname__ = signature.function
    serve.__doc__ = f"The `{signature.name}` signature: {', '.join(signature.inputs)} -> outputs."
    return tf.function(serve, input_signature=signature.specs())


class ServingModule(tf.Module):
    """A `tf.Module` whose signatures are described by its class's `SIGNATURES`.

    Each `Signature` becomes a `tf.function` attribute of the class (named
    by its `function`) that checks the text inputs and calls the family's
    method. A family writes its constructor and those methods only.
    """

    SIGNATURES = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for signature in cls.__dict__.get("SIGNATURES", ()):
            setattr(cls, signature.function, _serving_function(signature))

    def signatures(self):
        """`{name: tf.function}` of the signatures this module serves."""
        return {s.name: getattr(self, s.function) for s in self.SIGNATURES
                if s.when is None or getattr(self, s.when)}

    def warmup_request(self, name, batch_size):
        """`{input name: TensorProto}` of one warm-up request of signature `name`."""
        (signature,) = [s for s in self.SIGNATURES if s.name == name]
        return signature.warmup_request(batch_size)
