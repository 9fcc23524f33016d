"""ELMo weights as bilm-tf and AllenNLP publish them: `weights.hdf5` + `options.json`.

bilm-tf (`bilm/model.py`, `BidirectionalLanguageModelGraph`) and tfnlp's
`ELMoBiLM` compute the same function; only the weights' layout differs:

- Characters: the ids are the same (UTF-8 bytes + 1, markers 257-261, 0 for
  padding: bilm-tf's `Batcher` adds 1 to `UnicodeCharsVocabulary`'s ids).
  `char_embed` has no padding row (261 rows): bilm-tf prepends a zero row,
  and so does this module.
- Convolutions: `CNN/W_cnn_i` `(1, width, dim, count)` is a `Conv1D` kernel
  `(width, dim, count)`; features are `activation(max_t(conv + b))` in both.
- Highway: bilm-tf's `high()` computes `g ⊙ relu(x W_transform + b_transform)
  + (1 - g) ⊙ x` with `g = sigmoid(x W_carry + b_carry)`: its "carry" gate
  is the gate `t` of tfnlp's `Highway`, which multiplies the transform, so
  the kernel is `[W_transform | W_carry]` and the bias `[b_transform |
  b_carry]`, unchanged (AllenNLP negates them because its gate multiplies
  `x`).
- `CNN_proj`: the projection `Dense`. bilm-tf has none when the filters add
  up to `projection_dim`; the `Dense` is then the identity.
- LSTMs (`RNN_0` forward, `RNN_1` backward, `Cell{i}` the layers): TF1's
  `LSTMCell` computes `[x_t, r_{t-1}] W_0 + B`, gates in the order i, j
  (the candidate), f, o, and adds `forget_bias=1.0` to f when it runs.
  `ProjectedLSTM` takes `W_0`'s first rows as `kernel`, the rest as
  `recurrent_kernel`, gates reordered to i, f, j, o, and 1 added to the
  forget bias. `W_P_0` is the projection (absent, so the identity, when
  `projection_dim == dim`; TF1 then ignores `proj_clip`). Cell and
  projection clips are applied where TF1 applies them. The skip
  connections (`ResidualWrapper` from the second layer on) are
  `ELMoBiLM`'s `residual`.
- The softmax is not in `weights.hdf5` (bilm-tf's `dump_weights` leaves it
  out): the model's `word_softmax` is left as it is.

Two differences remain. bilm-tf's `BidirectionalLanguageModel` is
stateful (each batch starts from the LSTM states the previous one ended
with), while `ELMoBiLM` starts every batch from zeros, as bilm-tf's first
batch does: from bilm-tf's second batch on, real tokens' vectors differ.
And bilm-tf's layer 0 at padding positions is the CNN of all-zero ids,
tfnlp's is zeros. bilm-tf's
`lm_embeddings` also drop `<S>` and `</S>`, which `ELMoBiLM` keeps.

tests/models/test_bilm_tf_weights.py reproduces the outputs bilm-tf's own
test recorded (its fixture, in tests/models/files/bilm_tf/), every batch
of them: a batch that bilm-tf started from carried states is fed with the
sentences before it as one sequence, which puts the LSTMs in those states.
"""

import inspect
import json
import os

import h5py
import numpy as np

from tfnlp.models.elmo import ELMoBiLM, ELMoEmbedder

CHARACTERS = 262  # bilm-tf's n_characters at inference: 261 ids + the padding id 0
_CELL = "RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/"
# ELMoBiLM arguments that fix the weights and what they compute, and the
# options.json entry each comes from.
_ARCHITECTURE = {
    "num_layers": "lstm.n_layers",
    "units": "lstm.dim",
    "projection_dim": "lstm.projection_dim",
    "cell_clip": "lstm.cell_clip",
    "projection_clip": "lstm.proj_clip",
    "residual": "lstm.use_skip_connections",
    "filters": "char_cnn.filters",
    "num_highway_layers": "char_cnn.n_highway",
    "character_dim": "char_cnn.embedding.dim",
    "max_characters": "char_cnn.max_characters_per_token",
    "character_vocabulary_size": "char_cnn.n_characters",
}
# Training settings, when the options are bilm-tf's training options.
_TRAINING = {"word_vocabulary_size": "n_tokens_vocab", "dropout": "dropout",
             "num_sampled": "n_negative_samples_batch"}
_MISSING = object()


def _option(options, dotted, default=_MISSING):
    value = options
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            return default
        value = value[key]
    return value


def _read_options(options):
    """`(options dict, how to name it)` from a dict or an `options.json` path."""
    if isinstance(options, dict):
        return options, "options"
    if not isinstance(options, (str, os.PathLike)):
        raise ValueError(f"`options` must be a dict or the path of options.json, got {options!r}.")
    try:
        with open(options, encoding="utf-8") as f:
            parsed = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"Cannot read the bilm-tf options {os.fspath(options)}: {error}"
        ) from error
    if not isinstance(parsed, dict):
        raise ValueError(f"The bilm-tf options {os.fspath(options)} must be a JSON object.")
    return parsed, f"options {os.fspath(options)}"


def _is_int(value, minimum=1):
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _clip(value):
    return None if value is None else float(value)


def options_from_bilm_tf(options):
    """bilm-tf's `options.json` -> `ELMoBiLM` constructor arguments.

    The architecture always (`num_layers`, `units`, `projection_dim`,
    `cell_clip`, `projection_clip`, `residual`, `filters`,
    `num_highway_layers`, `character_dim`, `max_characters`,
    `character_vocabulary_size`); also `word_vocabulary_size`, `dropout` and
    `num_sampled` when the options have `n_tokens_vocab`, `dropout` and
    `n_negative_samples_batch` (bilm-tf's training options do, the
    published ones do not: pass `word_vocabulary_size` yourself).
    `char_cnn.n_characters` may be 262 (inference) or 261 (bilm-tf's
    training options): the weights are the same.

    Args:
        options: dict (the parsed JSON) or the path of `options.json`.

    Returns:
        dict of `ELMoBiLM` arguments.

    Raises:
        ValueError: when the file is unreadable, or listing every missing
            or invalid entry and everything tfnlp cannot compute exactly
            (a `char_cnn.activation` other than `"relu"`: `CharCNNEmbedding`
            uses one activation for its convolutions and highways, and
            bilm-tf's highways are always ReLU).

    Example:

    >>> options = {"lstm": {"dim": 32, "projection_dim": 8, "use_skip_connections": True,
    ...                     "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
    ...            "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 8]],
    ...                         "n_highway": 1, "embedding": {"dim": 4}, "n_characters": 262,
    ...                         "max_characters_per_token": 10}}
    >>> config = options_from_bilm_tf(options)
    >>> config["units"], config["filters"], config["residual"]
    (32, ((1, 4), (2, 8)), True)
    >>> bilm_tf_options(config) == options
    True
    """
    options, source = _read_options(options)
    problems = []

    def required(dotted, check=_is_int, what="a positive integer"):
        value = _option(options, dotted)
        if value is _MISSING:
            problems.append(f"{dotted} is missing")
        elif not check(value):
            problems.append(f"{dotted}={value!r} is not {what}")
        return value

    def optional(dotted, default, check, what):
        value = _option(options, dotted, default)
        if value != default and not check(value):
            problems.append(f"{dotted}={value!r} is not {what}")
        return value

    positive = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0)
    units = required("lstm.dim")
    projection_dim = required("lstm.projection_dim")
    num_layers = optional("lstm.n_layers", 1, _is_int, "a positive integer")
    cell_clip = optional("lstm.cell_clip", None, positive, "a positive number")
    projection_clip = optional("lstm.proj_clip", None, positive, "a positive number")
    residual = required("lstm.use_skip_connections", lambda v: isinstance(v, bool), "true or false")
    filters = required(
        "char_cnn.filters",
        lambda v: isinstance(v, list) and v and all(
            isinstance(f, list) and len(f) == 2 and _is_int(f[0]) and _is_int(f[1]) for f in v),
        "a non-empty list of [width, count] pairs",
    )
    num_highway_layers = optional("char_cnn.n_highway", None, lambda v: _is_int(v, 0),
                                  "a non-negative integer")
    character_dim = required("char_cnn.embedding.dim")
    max_characters = required("char_cnn.max_characters_per_token")
    required("char_cnn.n_characters", lambda v: v in (261, 262),
             "262 (bilm-tf's characters; 261 in its training options)")
    required("char_cnn.activation", lambda v: v == "relu",
             "'relu' (tfnlp's CharCNNEmbedding applies one activation to its convolutions "
             "and highways, and bilm-tf's highways are always ReLU)")
    if not problems:
        widths = sum(count for _, count in filters)
        if projection_dim > units:
            problems.append(f"lstm.projection_dim ({projection_dim}) exceeds lstm.dim ({units})")
        if widths < projection_dim:  # bilm-tf asserts it too
            problems.append(f"char_cnn.filters ({widths} features) are fewer than "
                            f"lstm.projection_dim ({projection_dim})")
        if max_characters < max(width for width, _ in filters):
            problems.append(f"char_cnn.max_characters_per_token ({max_characters}) is below the "
                            "widest filter")
    if problems:
        raise ValueError(f"The bilm-tf {source} cannot be read into an ELMoBiLM: "
                         + "; ".join(problems) + ".")
    config = {
        "num_layers": num_layers,
        "units": units,
        "projection_dim": projection_dim,
        "cell_clip": _clip(cell_clip),
        # Without a projection (projection_dim == dim) TF1's LSTMCell ignores proj_clip.
        "projection_clip": _clip(projection_clip) if projection_dim < units else None,
        "residual": residual,
        "filters": tuple((width, count) for width, count in filters),
        "num_highway_layers": num_highway_layers or 0,
        "character_dim": character_dim,
        "max_characters": max_characters,
        "character_vocabulary_size": CHARACTERS,
    }
    for argument, key in _TRAINING.items():
        if key in options:
            config[argument] = options[key]
    return config


def _number(value):
    """3.0 -> 3, as bilm-tf writes its clips."""
    return int(value) if float(value).is_integer() else float(value)


def bilm_tf_options(bilm):
    """The bilm-tf `options.json` (a dict) of an ELMo architecture.

    The inverse of `options_from_bilm_tf` on the architecture: for
    `ELMO_ARCHITECTURES["elmo_original"]` it gives the options AllenNLP publishes
    with `elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5`. Training settings
    (dropout, vocabulary, samples) are left out, as in the published files.

    Args:
        bilm: an `ELMoBiLM`, an `ELMoEmbedder` (its biLM), or a dict of
            `ELMoBiLM` arguments (missing ones take the constructor's
            defaults; an `ELMO_ARCHITECTURES` entry works).

    Returns:
        dict with `"lstm"` and `"char_cnn"`, ready for `json.dump`.

    Raises:
        ValueError: when bilm-tf cannot express the architecture (listing
            why), or `bilm` is none of the above.

    Example:

    >>> options = bilm_tf_options(tfnlp.models.ELMO_ARCHITECTURES["elmo_original"])
    >>> options["lstm"]["dim"], options["char_cnn"]["n_highway"], options["lstm"]["cell_clip"]
    (4096, 2, 3)
    """
    if isinstance(bilm, ELMoEmbedder):
        bilm = bilm.bilm
    if isinstance(bilm, ELMoBiLM):
        config = {name: getattr(bilm, name) for name in _ARCHITECTURE}
    elif isinstance(bilm, dict):
        defaults = inspect.signature(ELMoBiLM.__init__).parameters
        config = {name: bilm.get(name, defaults[name].default) for name in _ARCHITECTURE}
    else:
        raise ValueError(
            f"`bilm` must be an ELMoBiLM, an ELMoEmbedder or a dict of ELMoBiLM arguments, got "
            f"{type(bilm).__name__}."
        )
    if config["character_vocabulary_size"] != CHARACTERS:
        raise ValueError(
            f"bilm-tf reads {CHARACTERS} character ids (tfnlp.data.character_ids), but "
            f"`character_vocabulary_size` is {config['character_vocabulary_size']}."
        )
    lstm = {"use_skip_connections": bool(config["residual"]),
            "projection_dim": config["projection_dim"]}
    if config["cell_clip"] is not None:
        lstm["cell_clip"] = _number(config["cell_clip"])
    if config["projection_clip"] is not None:
        lstm["proj_clip"] = _number(config["projection_clip"])
    lstm.update({"dim": config["units"], "n_layers": config["num_layers"]})
    options = {
        "lstm": lstm,
        "char_cnn": {
            "activation": "relu",
            "filters": [[int(width), int(count)] for width, count in config["filters"]],
            "n_highway": config["num_highway_layers"],
            "embedding": {"dim": config["character_dim"]},
            "n_characters": CHARACTERS,
            "max_characters_per_token": config["max_characters"],
        },
    }
    options_from_bilm_tf(options)  # what bilm-tf cannot express raises here
    return options


def _bilm_of(model):
    if isinstance(model, ELMoEmbedder):
        return model.bilm
    if isinstance(model, ELMoBiLM):
        return model
    raise ValueError(f"`model` must be an ELMoBiLM or an ELMoEmbedder, got {type(model).__name__}.")


def _check_architecture(bilm, options, config, source):
    """Every `_ARCHITECTURE` argument of `bilm` that differs from the options, named both ways.

    The clips and `residual` change no weight shape: only this check catches them.
    """
    def same(name, a, b):
        if name in ("cell_clip", "projection_clip"):
            return a is b is None or (None not in (a, b) and float(a) == float(b))
        if name == "filters":
            return tuple(map(tuple, a)) == tuple(map(tuple, b))
        return a == b

    def note(name):  # options_from_bilm_tf drops a proj_clip TF1 ignores: say so
        written = _option(options, _ARCHITECTURE[name], None)
        if name == "projection_clip" and written is not None and config[name] is None:
            return (f" (the options' {written!r} is ignored: TF1's LSTMCell has no projection "
                    "to clip when lstm.projection_dim == lstm.dim)")
        return ""

    mismatches = [
        f"{name}: the model has {getattr(bilm, name)!r}, "
        f"{_ARCHITECTURE[name]} gives {config[name]!r}{note(name)}"
        for name in _ARCHITECTURE
        if not same(name, getattr(bilm, name), config[name])
    ]
    if mismatches:
        raise ValueError(
            f"The model does not match the bilm-tf {source} ({len(mismatches)} "
            f"difference{'s' if len(mismatches) > 1 else ''}; "
            "build it with tfnlp.models.ELMoBiLM(word_vocabulary_size, "
            "**options_from_bilm_tf(options))):\n  "
            + "\n  ".join(mismatches)
        )


def _file_shapes(bilm):
    """`{dataset name: shape}` of the weights.hdf5 bilm-tf writes for this architecture."""
    dim, features = bilm.character_dim, bilm.character_cnn.num_features
    projection_dim, units = bilm.projection_dim, bilm.units
    shapes = {"char_embed": (CHARACTERS - 1, dim)}
    for i, (width, count) in enumerate(bilm.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, dim, count)
        shapes[f"CNN/b_cnn_{i}"] = (count,)
    for k in range(bilm.num_highway_layers):
        for part in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{part}"] = (features, features)
            shapes[f"CNN_high_{k}/b_{part}"] = (features,)
    if features != projection_dim:
        shapes["CNN_proj/W_proj"] = (features, projection_dim)
        shapes["CNN_proj/b_proj"] = (projection_dim,)
    for direction in range(2):
        for layer in range(bilm.num_layers):
            cell = _CELL.format(direction=direction, layer=layer)
            # Every layer reads projection_dim-wide inputs: token vectors or outputs.
            shapes[cell + "W_0"] = (2 * projection_dim, 4 * units)
            shapes[cell + "B"] = (4 * units,)
            if projection_dim < units:
                shapes[cell + "W_P_0"] = (units, projection_dim)
    return shapes


def _tf1_to_keras_gates(a):
    i, j, f, o = np.split(a, 4, axis=-1)
    return np.concatenate([i, f, j, o], axis=-1)


def _keras_to_tf1_gates(a):
    i, f, j, o = np.split(a, 4, axis=-1)
    return np.concatenate([i, j, f, o], axis=-1)


def _lstms(bilm):
    return (("0", bilm.forward_layers), ("1", bilm.backward_layers))


def _tfnlp_values(bilm, arrays):
    """`[(variable, value)]` from the bilm-tf arrays (checked by `_file_shapes`)."""
    cnn = bilm.character_cnn
    features, projection_dim, units = cnn.num_features, bilm.projection_dim, bilm.units
    char_embed = arrays["char_embed"]
    values = [(cnn.character_embedding.embeddings,
               np.concatenate([np.zeros_like(char_embed[:1]), char_embed]))]
    for i, conv in enumerate(cnn.convolutions):
        values += [(conv.kernel, arrays[f"CNN/W_cnn_{i}"][0]),
                   (conv.bias, arrays[f"CNN/b_cnn_{i}"])]
    for k, highway in enumerate(cnn.highways):
        # bilm-tf's "carry" gate multiplies the transform: it is Highway's gate.
        high = {part: arrays[f"CNN_high_{k}/{part}"]
                for part in ("W_transform", "W_carry", "b_transform", "b_carry")}
        values += [
            (highway.kernel, np.concatenate([high["W_transform"], high["W_carry"]], axis=1)),
            (highway.bias, np.concatenate([high["b_transform"], high["b_carry"]])),
        ]
    if features != projection_dim:
        values += [(cnn.projection.kernel, arrays["CNN_proj/W_proj"]),
                   (cnn.projection.bias, arrays["CNN_proj/b_proj"])]
    else:  # bilm-tf has no projection
        values += [(cnn.projection.kernel, np.eye(features)),
                   (cnn.projection.bias, np.zeros(features))]
    for direction, lstms in _lstms(bilm):
        for layer, lstm in enumerate(lstms):
            cell = _CELL.format(direction=direction, layer=layer)
            kernel = _tf1_to_keras_gates(arrays[cell + "W_0"])  # rows: [x_t; r_{t-1}]
            bias = _tf1_to_keras_gates(arrays[cell + "B"]).copy()
            bias[units : 2 * units] += 1.0  # TF1's forget_bias, added at run time there
            projection = arrays[cell + "W_P_0"] if projection_dim < units else np.eye(units)
            values += [(lstm.kernel, kernel[:projection_dim]),
                       (lstm.recurrent_kernel, kernel[projection_dim:]),
                       (lstm.bias, bias), (lstm.projection, projection)]
    return values


def _datasets(group):
    """`{path: h5py.Dataset}` of every dataset under `group`."""
    found = {}

    def visit(name, obj):  # returns None: a value would stop `visititems`
        if isinstance(obj, h5py.Dataset):
            found[name] = obj

    group.visititems(visit)
    return found


def load_bilm_tf_weights(model, weights_path, options_path):
    """Reads bilm-tf's / AllenNLP's released ELMo weights into an ELMo model.

    The options are compared with the model's architecture, and the whole
    `weights.hdf5` with the datasets bilm-tf writes for it, before any
    weight changes; then every weight of the character CNN and the LSTMs
    is replaced (the layouts and conventions are mapped exactly: see this
    module's docstring). The model's `word_softmax` is left untouched: the
    released files have none. The loaded model computes bilm-tf's
    `BidirectionalLanguageModel` on its first batch (zero LSTM states; bilm-tf
    then carries the states from batch to batch), `<S>` and `</S>` kept;
    feed it `tfnlp.data.character_ids`, which are bilm-tf's `Batcher` ids.

    Args:
        model: an `ELMoBiLM`, or an `ELMoEmbedder` (its biLM is loaded), of
            the file's architecture: build it with
            `ELMoBiLM(word_vocabulary_size, **options_from_bilm_tf(options_path))`.
        weights_path: path of `weights.hdf5` (e.g.
            `elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5`).
        options_path: path of the matching `options.json` (or the parsed dict).

    Returns:
        `model`.

    Raises:
        ValueError: when a file is unreadable (naming it), the options
            describe something tfnlp cannot compute exactly, the model's
            architecture differs from the options (every difference listed),
            or the weights file lacks, adds or mis-shapes datasets (all
            listed, naming the file). Nothing is assigned then.

    Example:

    >>> import os, tempfile
    >>> config = options_from_bilm_tf(bilm_tf_options(
    ...     {"num_layers": 1, "units": 16, "projection_dim": 8, "filters": ((1, 4), (2, 8)),
    ...      "num_highway_layers": 1, "max_characters": 10}))
    >>> bilm = ELMoBiLM(word_vocabulary_size=10, num_sampled=None, **config)
    >>> folder = tempfile.TemporaryDirectory()
    >>> weights = os.path.join(folder.name, "weights.hdf5")
    >>> options = os.path.join(folder.name, "options.json")
    >>> save_bilm_tf_weights(bilm, weights, options)
    >>> copy = ELMoBiLM(word_vocabulary_size=10, num_sampled=None, **options_from_bilm_tf(options))
    >>> copy = load_bilm_tf_weights(copy, weights, options)
    >>> ids = tfnlp.data.character_ids(tf.constant([["<S>", "Hello", "</S>"]]), 10)
    >>> float(np.abs(copy(ids)["layers"] - bilm(ids)["layers"]).max()) < 1e-6
    True
    >>> folder.cleanup()
    """
    bilm = _bilm_of(model)
    options, source = _read_options(options_path)
    _check_architecture(bilm, options, options_from_bilm_tf(options), source)
    expected = _file_shapes(bilm)
    path = os.fspath(weights_path)
    try:
        with h5py.File(path, "r") as f:
            found = _datasets(f)
            problems = [f"missing {name} {shape}"
                        for name, shape in expected.items() if name not in found]
            problems += [f"unexpected {name} {found[name].shape}"
                         for name in found if name not in expected]
            for name, shape in expected.items():
                if name in found and tuple(found[name].shape) != shape:
                    problems.append(f"{name}: shape {tuple(found[name].shape)}, expected {shape}")
                elif name in found and not np.issubdtype(found[name].dtype, np.floating):
                    problems.append(f"{name}: dtype {found[name].dtype}, expected floats")
            if problems:
                raise ValueError(
                    f"The bilm-tf weights {path} do not fit this ELMoBiLM ({len(problems)} "
                    "problems):\n  " + "\n  ".join(problems)
                )
            arrays = {name: np.asarray(found[name][...], np.float32) for name in expected}
    except OSError as error:  # not a file, not HDF5, truncated
        raise ValueError(f"Cannot read the bilm-tf weights {path}: {error}") from error
    for variable, value in _tfnlp_values(bilm, arrays):
        variable.assign(np.asarray(value, np.float32).astype(variable.dtype))
    return model


def save_bilm_tf_weights(model, weights_path, options_path):
    """Writes an ELMo model as bilm-tf's `weights.hdf5` + `options.json`.

    The inverse of `load_bilm_tf_weights` (AllenNLP's `Elmo` and bilm-tf
    read the files); the word softmax is not written, as in bilm-tf.

    Args:
        model: an `ELMoBiLM` or an `ELMoEmbedder` (its biLM is written).
        weights_path: path of the `weights.hdf5` to write.
        options_path: path of the `options.json` to write.

    Raises:
        ValueError: when bilm-tf cannot express the model: its architecture
            (see `bilm_tf_options`), or a projection bilm-tf does not have
            (filters adding up to `projection_dim`, or `projection_dim ==
            units`) that is not the identity.

    Example: see `load_bilm_tf_weights`.
    """
    bilm = _bilm_of(model)
    options = bilm_tf_options(bilm)
    cnn, projection_dim, units = bilm.character_cnn, bilm.projection_dim, bilm.units
    arrays = {"char_embed": cnn.character_embedding.embeddings.numpy()[1:]}
    for i, conv in enumerate(cnn.convolutions):
        arrays[f"CNN/W_cnn_{i}"] = conv.kernel.numpy()[None]
        arrays[f"CNN/b_cnn_{i}"] = conv.bias.numpy()
    features = cnn.num_features
    for k, highway in enumerate(cnn.highways):
        kernel, bias = highway.kernel.numpy(), highway.bias.numpy()
        high = f"CNN_high_{k}/"
        arrays[high + "W_transform"], arrays[high + "W_carry"] = np.split(kernel, 2, axis=1)
        arrays[high + "b_transform"], arrays[high + "b_carry"] = np.split(bias, 2)
    kernel, bias = cnn.projection.kernel.numpy(), cnn.projection.bias.numpy()
    if features != projection_dim:
        arrays["CNN_proj/W_proj"], arrays["CNN_proj/b_proj"] = kernel, bias
    elif not (np.array_equal(kernel, np.eye(features)) and not bias.any()):
        raise ValueError(
            f"bilm-tf has no CNN projection when the filters add up to projection_dim "
            f"({projection_dim}); this model's {cnn.projection.kernel.path} is not the identity."
        )
    for direction, lstms in _lstms(bilm):
        for layer, lstm in enumerate(lstms):
            cell = _CELL.format(direction=direction, layer=layer)
            kernel = np.concatenate([lstm.kernel.numpy(), lstm.recurrent_kernel.numpy()])
            bias = lstm.bias.numpy().copy()
            bias[units : 2 * units] -= 1.0
            arrays[cell + "W_0"] = _keras_to_tf1_gates(kernel)
            arrays[cell + "B"] = _keras_to_tf1_gates(bias)
            projection = lstm.projection.numpy()
            if projection_dim < units:
                arrays[cell + "W_P_0"] = projection
            elif not np.array_equal(projection, np.eye(units)):
                raise ValueError(
                    "bilm-tf's LSTMs have no projection when projection_dim == units; this "
                    f"model's {lstm.projection.path} is not the identity."
                )
    with open(options_path, "w", encoding="utf-8") as f:
        json.dump(options, f)
    with h5py.File(weights_path, "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=np.asarray(array, np.float32))
