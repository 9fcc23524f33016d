"""ELMo -> SavedModel that turns raw text into contextual word vectors."""

import keras
import tensorflow as tf

from tfnlp import _checks
from tfnlp.export._common import WARMUP_BATCH_SIZES, save
from tfnlp.export._old_call_forms import takes_old_call_form
from tfnlp.export._serving_module import TEXT, ServingModule, Signature
from tfnlp.layers.scalar_mix import ScalarMix
from tfnlp.models.elmo import ELMoBiLM, ELMoEmbedder, checked_max_tokens, sentence_character_ids

DEFAULT_MAX_TOKENS = 64
DEFAULT_MAX_INPUT_BYTES = 100_000


class ELMoServingModule(ServingModule):
    """Text in, ELMo vectors out: split -> `<S> words </S>` -> biLM (-> mix).

    Signature `serving_default(text)`: `text` `tf.string (B,)`, any batch
    size (also 0). Each text is cut to its first `max_input_bytes` bytes,
    split with `tfnlp.data.split_words`, cut to its first `max_tokens - 2`
    words and wrapped in `<S>` ... `</S>` (`tfnlp.data.sentence_tokens`),
    exactly as `tfnlp.data.elmo_dataset` builds training sentences, so a
    sentence gets the vectors it would get in training. Both cuts happen
    before splitting and before the model, so the cost of a request is
    bounded whatever the text's length (a 1 MB text costs what a
    `max_input_bytes` one does);
    empty, whitespace-only or broken UTF-8 text (broken bytes become U+FFFD,
    a word of its own) is valid. The model reads only the first
    `max_characters - 2` bytes of each word (`tfnlp.data.character_ids`).

    With `T` the most tokens of a text in the batch (markers included,
    at least 2, at most `max_tokens`) and `P` the biLM's `projection_dim`,
    it returns:

    - `elmo` float32 `(B, T, 2P)`: for an `ELMoEmbedder` its learned mix
      `γ · Σ_j softmax(w)_j · h_j`; for a bare `ELMoBiLM` the plain mean of
      its `L + 1` layers (equal weights, `γ = 1`). Zeros at padding.
    - `layers` float32 `(B, L + 1, T, 2P)`: the biLM's layers (layer 0 the
      character-CNN token vectors), zeros at padding.
    - `padding_mask` int32 `(B, T)`: 1 on real tokens, `<S>` and `</S>`
      included.
    - `words` `tf.string (B, T)`: the tokens the vectors belong to (`<S>`,
      the words, `</S>`), `""` at padding.

    The outputs are float32 also for a model under a mixed-precision
    policy. The graph holds only TensorFlow and tensorflow-text ops.

    Args:
        model: an `ELMoEmbedder` or an `ELMoBiLM`.
        max_tokens: int, the most tokens per text, `<S>` and `</S>`
            included (at least 3); None: the embedder's `max_tokens`, else 64.
        max_input_bytes: int, the longest text read, in bytes; None: the
            embedder's `max_input_bytes`, else 100,000.
    """

    SIGNATURES = (Signature("serving_default", "embed", {"text": TEXT}),)

    def __init__(self, model, max_tokens=None, max_input_bytes=None):
        super().__init__(name="elmo_serving")
        if isinstance(model, ELMoEmbedder):
            bilm = model.bilm
        elif isinstance(model, ELMoBiLM):
            bilm = model
        else:
            raise ValueError(
                f"`model` must be an ELMoEmbedder or an ELMoBiLM, got {type(model).__name__}."
            )
        # The embedder's own settings, unless given (a bare biLM has none).
        if max_tokens is None:
            max_tokens = getattr(model, "max_tokens", None) or DEFAULT_MAX_TOKENS
        if max_input_bytes is None:
            max_input_bytes = getattr(model, "max_input_bytes", None) or DEFAULT_MAX_INPUT_BYTES
        self.max_tokens = checked_max_tokens(max_tokens)
        # Serve a graph of the layers the vectors need, and nothing else: not
        # the word softmax (V x P, gigabytes at ELMo's size) and not an
        # optimizer that a trained biLM may carry.
        mix = model.scalar_mix if isinstance(model, ELMoEmbedder) else ScalarMix(name="mean")
        character_ids = keras.Input((None, bilm.max_characters), dtype="int32")
        outputs = bilm.representations(character_ids, use_dropout=False)
        padding_mask = outputs["padding_mask"]
        elmo = mix(outputs["layers"], padding_mask=padding_mask)
        elmo = keras.ops.cast(elmo, "float32") * keras.ops.cast(padding_mask, "float32")[:, :, None]
        self.model = keras.Model(
            character_ids,
            {
                "elmo": elmo,
                "layers": keras.ops.cast(outputs["layers"], "float32"),
                "padding_mask": padding_mask,
            },
            name="elmo_serving_graph",
        )
        self.max_characters = bilm.max_characters
        self.max_input_bytes = _checks.max_input_bytes(max_input_bytes)

    def _serve(self, text):
        padded, ids = sentence_character_ids(text, self.max_tokens, self.max_characters,
                                             self.max_input_bytes)
        outputs = self.model(ids, training=False)
        padding_mask = tf.cast(outputs["padding_mask"], tf.int32)
        layers, elmo = outputs["layers"], outputs["elmo"]
        return {"elmo": elmo, "layers": layers, "padding_mask": padding_mask, "words": padded}


@takes_old_call_form("model", "export_dir", "max_tokens", "version", "max_input_bytes",
                     "warmup_batch_sizes")
def export_elmo(model, export_dir, *, max_tokens=None, version=1, max_input_bytes=None,
                warmup_batch_sizes=WARMUP_BATCH_SIZES):
    """Writes a raw-text -> ELMo-vectors SavedModel to `export_dir/VERSION/`.

    It loads with only TensorFlow and tensorflow-text (`import
    tensorflow_text` registers its ops); tfnlp is not needed. See
    `ELMoServingModule` for the signature.

    Args:
        model: an `ELMoEmbedder` (its learned mix is served as `elmo`) or a
            bare `ELMoBiLM` (`elmo` is then the plain mean of its layers).
        export_dir: the model's directory, e.g. `saved_models/elmo`.
        max_tokens: int, texts are cut to this many tokens, `<S>` and
            `</S>` included (default: the embedder's `max_tokens`, else 64).
        version: int, the version subdirectory.
        warmup_batch_sizes: the batch sizes of the TF Serving warm-up
            requests written for every signature (`()`: none; keep them at
            most the server's `max_batch_size` when it batches requests).
        max_input_bytes: int, texts are cut to this many bytes before
            they are split into words (default: the embedder's
            `max_input_bytes`, else 100,000).

    Returns:
        The path of the written version.

    Example:

    >>> import tempfile
    >>> bilm = ELMoBiLM(word_vocabulary_size=20, num_layers=1, units=8, projection_dim=4,
    ...                 filters=((1, 4),), num_highway_layers=1, num_sampled=None)
    >>> path = export_elmo(ELMoEmbedder(bilm), tempfile.mkdtemp(), max_tokens=16)
    >>> embed = tf.saved_model.load(path).signatures["serving_default"]
    >>> outputs = embed(text=tf.constant(["Hello, world!", ""]))
    >>> outputs["elmo"].shape, outputs["layers"].shape
    (TensorShape([2, 6, 8]), TensorShape([2, 2, 6, 8]))
    >>> outputs["words"][0].numpy().tolist()
    [b'<S>', b'Hello', b',', b'world', b'!', b'</S>']
    """
    module = ELMoServingModule(model, max_tokens, max_input_bytes)
    return save(module, export_dir, version, warmup_batch_sizes)
