"""Import (and export) released BERT weights: Google's TF1 checkpoints, Hugging Face.

Both formats are read into one logical map, `{name: numpy array}` with
Google's variable names and layouts (kernels `(in, out)`), validated as a
whole (every missing, unexpected or mis-shaped tensor is reported at once,
before anything is assigned), then assigned to a `BertBackbone` (and, when
given, a `BertPretrainer`'s heads); a Hugging Face `BertForTokenClassification`
loads into a `BertTokenClassifier`.
"""

import json
import math
import numbers
import os

import numpy as np
import tensorflow as tf

from tfnlp import _checks
from tfnlp.models.bert_backbone import BertBackbone
from tfnlp.models.bert_token_classifier import BertTokenClassifier
from tfnlp.models.token_classifier import tagger_size

_LAYER = "bert/encoder/layer_{i}/"
_TOKEN_CLASSIFIER = "BertForTokenClassification"


# Google's BERT normalizes with epsilon 1e-12; Hugging Face writes it as
# `layer_norm_eps`, Google's `bert_config.json` leaves it out.
_EPSILON = 1e-12

# `hidden_act` -> `BertBackbone`'s `activation`, as transformers' ACT2FN
# computes each name (microsoft/unilm v1's "gelu" is exact too).
HUGGING_FACE_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
}
# google-research/bert's `get_activation("gelu")`: the tanh form since
# 2019-02-07 (commit bee6030), erf before; docs/weights.md has which
# released checkpoints each trained.
GOOGLE_GELU = {"tanh": "gelu_approximate", "erf": "gelu"}
# What `save_google_checkpoint` adds to `bert_config.json` so that its own
# files load as they were saved; Google's and Hugging Face's code ignore it.
_SAVED_GELU = "tfnlp_gelu"
_DEFAULT_GELU_NOTE = (
    " (Google's format says 'gelu' for both GELUs; it is read as the tanh form google-research/bert "
    'computes since 2019. Pass gelu="erf" for the 2018 releases and for folders saved by tfnlp '
    'before 2026-11-29, or build the backbone with activation="gelu_approximate".)'
)


def _google_activations(config, gelu, path):
    """`hidden_act` -> `activation` for a Google-format config (`path`) read with `gelu`."""
    if gelu is None:
        gelu = config.get(_SAVED_GELU, "tanh")
        if gelu not in GOOGLE_GELU:
            raise ValueError(
                f"The BERT config {path} has {_SAVED_GELU}={gelu!r}: it must be one of "
                f"{tuple(GOOGLE_GELU)}."
            )
    _checks.one_of("gelu", gelu, tuple(GOOGLE_GELU))
    return {"gelu": GOOGLE_GELU[gelu]}


def unsupported_config_values(config, activations=None):
    """What in a BERT config (a dict) tfnlp's `BertBackbone` cannot compute, one line each.

    Args:
        config: a `config.json` / `bert_config.json` dict.
        activations: `{hidden_act: BertBackbone activation}` the config's
            format means (`HUGGING_FACE_ACTIVATIONS` when None).

    Returns:
        A list of strings, empty when the model can be read exactly.
    """
    activations = HUGGING_FACE_ACTIVATIONS if activations is None else activations
    problems = []
    activation = config.get("hidden_act", "gelu")
    if not isinstance(activation, str) or activation not in activations:
        problems.append(
            f"hidden_act={activation!r} (tfnlp's BERT computes GELU: this format's "
            f"{', '.join(map(repr, activations))})"
        )
    epsilon = config.get("layer_norm_eps", _EPSILON)
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not 0 < epsilon < math.inf:
        problems.append(f"layer_norm_eps={epsilon!r} (must be a positive number)")
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        problems.append(f"position_embedding_type={position_type!r} (only 'absolute' is supported)")
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        problems.append(f"model_type={model_type!r} (only 'bert' is supported)")
    for flag in ("is_decoder", "add_cross_attention"):
        if config.get(flag, False):
            problems.append(f"{flag}={config[flag]!r} (tfnlp's BERT is an encoder only)")
    return problems


def backbone_config_from_google(config, activations=None):
    """`bert_config.json` (a dict) -> `BertBackbone` constructor arguments.

    Args:
        config: the config dict.
        activations: `{hidden_act: activation}` of the config's format
            (`HUGGING_FACE_ACTIVATIONS` when None).

    Raises:
        ValueError: listing every value the backbone cannot compute (see
            `unsupported_config_values`).
    """
    activations = HUGGING_FACE_ACTIVATIONS if activations is None else activations
    problems = unsupported_config_values(config, activations)
    if problems:
        raise ValueError(
            f"This BERT config has values tfnlp's BertBackbone does not support: {'; '.join(problems)}."
        )
    return {
        "vocabulary_size": config["vocab_size"],
        "num_layers": config["num_hidden_layers"],
        "num_heads": config["num_attention_heads"],
        "hidden_dim": config["hidden_size"],
        "intermediate_dim": config["intermediate_size"],
        "dropout": config.get("hidden_dropout_prob", 0.1),
        "max_sequence_length": config["max_position_embeddings"],
        "num_segments": config.get("type_vocab_size", 2),
        "layer_norm_epsilon": config.get("layer_norm_eps", _EPSILON),
        "activation": activations[config.get("hidden_act", "gelu")],
    }


def config_mismatches(config, backbone, activations=None, activation_note=""):
    """How a checkpoint's config differs from an existing `BertBackbone`, one line each.

    Compares every size (a wrong `num_attention_heads` keeps every weight's
    shape, so only the config can tell), the segment and position tables,
    the layer-norm epsilon (`layer_norm_eps`, 1e-12 when absent) and the
    activation with the backbone's arguments; values no `BertBackbone`
    supports are listed too.

    Args:
        config: the checkpoint's config dict.
        backbone: a `BertBackbone` (or subclass).
        activations: `{hidden_act: activation}` of the config's format
            (`HUGGING_FACE_ACTIVATIONS` when None).
        activation_note: what to add to an activation mismatch (how the
            format's `hidden_act` was read, what to pass instead).

    Returns:
        A list of strings, empty when the backbone is the checkpoint's model.
    """
    activations = HUGGING_FACE_ACTIVATIONS if activations is None else activations
    problems = unsupported_config_values(config, activations)
    pairs = (
        ("vocab_size", None, "vocabulary_size"),
        ("num_hidden_layers", None, "num_layers"),
        ("num_attention_heads", None, "num_heads"),
        ("hidden_size", None, "hidden_dim"),
        ("intermediate_size", None, "intermediate_dim"),
        ("max_position_embeddings", None, "max_sequence_length"),
        ("type_vocab_size", 2, "num_segments"),
        ("layer_norm_eps", _EPSILON, "layer_norm_epsilon"),
    )
    for key, default, attribute in pairs:
        value = config.get(key, default)
        if value != getattr(backbone, attribute):
            problems.append(f"{key}={value!r} but the model has {attribute}={getattr(backbone, attribute)!r}")
    act = config.get("hidden_act", "gelu")
    if isinstance(act, str) and act in activations and activations[act] != backbone.activation:
        problems.append(
            f"hidden_act={act!r} computes activation={activations[act]!r} but the model has "
            f"activation={backbone.activation!r}{activation_note}"
        )
    return problems


def tensor_mismatches(config, weights):
    """Config sizes the checkpoint's own tensors contradict, one line each, naming the setting.

    A wrong `vocab_size`, `hidden_size`, `num_hidden_layers`,
    `intermediate_size`, `max_position_embeddings` or `type_vocab_size`
    otherwise shows only as tensors that do not fit; this says which
    setting is wrong. (`num_attention_heads` changes no tensor's shape.)

    Args:
        config: the config dict.
        weights: `{Google name: array}`.

    Returns:
        A list of strings, empty when the tensors agree with the config.
    """
    problems = []

    def compare(key, name, axis, default=None):
        tensor = weights.get(name)
        value = config.get(key, default)
        if tensor is not None and np.ndim(tensor) > axis and value != np.shape(tensor)[axis]:
            problems.append(f"{key}={value!r} in the config, but the checkpoint's {name} says "
                            f"{np.shape(tensor)[axis]}")

    compare("vocab_size", "bert/embeddings/word_embeddings", 0)
    compare("hidden_size", "bert/embeddings/word_embeddings", 1)
    compare("max_position_embeddings", "bert/embeddings/position_embeddings", 0)
    compare("type_vocab_size", "bert/embeddings/token_type_embeddings", 0, 2)
    compare("intermediate_size", _LAYER.format(i=0) + "intermediate/dense/kernel", 1)
    layers = {name[len("bert/encoder/layer_"):].split("/")[0] for name in weights
              if name.startswith("bert/encoder/layer_")}
    if layers and len(layers) != config.get("num_hidden_layers"):
        problems.append(f"num_hidden_layers={config.get('num_hidden_layers')!r} in the config, but the "
                        f"checkpoint has {len(layers)} layers (bert/encoder/layer_*)")
    return problems


def _checked_backbone(config, backbone, path, backbone_cls=BertBackbone, activations=None,
                      activation_note=""):
    """`backbone`, after comparing it with `config`; or a new `backbone_cls` built from `config`."""
    if backbone is None:
        return backbone_cls(**backbone_config_from_google(config, activations))
    if not isinstance(backbone, backbone_cls):
        raise ValueError(
            f"`backbone` must be a {backbone_cls.__name__}, got {type(backbone).__name__}."
        )
    problems = config_mismatches(config, backbone, activations, activation_note)
    if problems:
        raise ValueError(
            f"The checkpoint's config {path} does not describe this backbone "
            f"({len(problems)} problems):\n  " + "\n  ".join(problems)
        )
    return backbone


_REQUIRED_KEYS = ("vocab_size", "num_hidden_layers", "num_attention_heads", "hidden_size",
                  "intermediate_size", "max_position_embeddings")


def _read_config(path):
    """A BERT JSON config, or a ValueError naming the file and every missing or non-int key."""
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"Cannot read the BERT config {path}: {error}") from error
    if not isinstance(config, dict):
        raise ValueError(f"The BERT config {path} must be a JSON object, got {type(config).__name__}.")
    problems = [f"{key} missing" for key in _REQUIRED_KEYS if key not in config]
    problems += [f"{key}={config[key]!r} is not a positive int" for key in _REQUIRED_KEYS
                 if key in config and (isinstance(config[key], bool) or not isinstance(config[key], int)
                                       or config[key] <= 0)]
    if problems:
        raise ValueError(f"The BERT config {path} is invalid: {'; '.join(problems)}.")
    return config


def _check_vocabulary_file(directory, config):
    """A `vocab.txt` shipped with the checkpoint may not hold more than `vocab_size` tokens.

    Fewer is valid (some releases pad the embedding to a multiple of 8 with
    unused rows), so only the line count is compared here; the tokenizer
    checks the tokens themselves when it is built.
    """
    path = os.path.join(directory, "vocab.txt")
    if os.path.exists(path):
        with open(path, "rb") as f:
            size = sum(1 for line in f if line.strip(b"\r\n"))
        if size > config["vocab_size"]:
            raise ValueError(
                f"{path} has {size} tokens but the checkpoint's `vocab_size` is only "
                f"{config['vocab_size']}: the vocabulary does not belong to this checkpoint."
            )


def _targets(backbone, pretrainer=None):
    """Google name -> (tfnlp variable, (Google -> tfnlp, tfnlp -> Google) array maps).

    `pretrainer`: a task model with a `masked_lm_head` (`BertPretrainer`,
    `UniLM`) and, optionally, a `next_sentence_head`.
    """
    heads = backbone.num_heads
    head_dim = backbone.hidden_dim // heads
    same = (lambda a: a, lambda a: a)
    # Projections: (H, H) -> (H, heads, head_dim) and (H,) -> (heads, head_dim).
    split_heads = (lambda a: a.reshape(a.shape[:-1] + (heads, head_dim)),
                   lambda a: a.reshape(a.shape[:-2] + (heads * head_dim,)))
    # Attention output kernel: (H, H) -> (heads, head_dim, H).
    merge_heads = (lambda a: a.reshape(heads, head_dim, a.shape[-1]),
                   lambda a: a.reshape(heads * head_dim, a.shape[-1]))
    transpose = (np.transpose, np.transpose)

    targets = {
        "bert/embeddings/word_embeddings": (backbone.token_embedding.embeddings, same),
        "bert/embeddings/token_type_embeddings": (backbone.segment_embedding.embeddings, same),
        "bert/embeddings/position_embeddings": (backbone.position_embedding.position_embeddings, same),
        "bert/embeddings/LayerNorm/gamma": (backbone.embeddings_norm.gamma, same),
        "bert/embeddings/LayerNorm/beta": (backbone.embeddings_norm.beta, same),
        "bert/pooler/dense/kernel": (backbone.pooler.kernel, same),
        "bert/pooler/dense/bias": (backbone.pooler.bias, same),
    }
    for i, block in enumerate(backbone.transformer_layers):
        prefix = _LAYER.format(i=i)
        attention = block._self_attention
        for part, dense in (("query", attention._query_dense), ("key", attention._key_dense),
                            ("value", attention._value_dense)):
            targets[f"{prefix}attention/self/{part}/kernel"] = (dense.kernel, split_heads)
            targets[f"{prefix}attention/self/{part}/bias"] = (dense.bias, split_heads)
        targets[f"{prefix}attention/output/dense/kernel"] = (attention._output_dense.kernel, merge_heads)
        targets[f"{prefix}attention/output/dense/bias"] = (attention._output_dense.bias, same)
        for name, norm in (("attention/output/LayerNorm", block._self_attention_norm),
                           ("output/LayerNorm", block._feedforward_norm)):
            targets[f"{prefix}{name}/gamma"] = (norm.gamma, same)
            targets[f"{prefix}{name}/beta"] = (norm.beta, same)
        for name, dense in (("intermediate/dense", block._intermediate_dense),
                            ("output/dense", block._output_dense)):
            targets[f"{prefix}{name}/kernel"] = (dense.kernel, same)
            targets[f"{prefix}{name}/bias"] = (dense.bias, same)
    if pretrainer is not None:
        head = pretrainer.masked_lm_head
        targets.update({
            "cls/predictions/transform/dense/kernel": (head._transform.kernel, same),
            "cls/predictions/transform/dense/bias": (head._transform.bias, same),
            "cls/predictions/transform/LayerNorm/gamma": (head._norm.gamma, same),
            "cls/predictions/transform/LayerNorm/beta": (head._norm.beta, same),
            "cls/predictions/output_bias": (head.output_bias, same),
        })
        # None for masked-LM-only pretraining; UniLM has no such head.
        nsp = getattr(pretrainer, "next_sentence_head", None)
        if nsp is not None:
            targets.update({  # Google stores the NSP kernel as (2, H)
                "cls/seq_relationship/output_weights": (nsp.kernel, transpose),
                "cls/seq_relationship/output_bias": (nsp.bias, same),
            })
    return targets


def assign_google_weights(weights, backbone, pretrainer=None, source="checkpoint", problems=()):
    """Assigns a `{google name: array}` map, after checking all of it.

    Args:
        weights: `{Google name: array}`, kernels `(in, out)`.
        backbone: a `BertBackbone` (or subclass).
        pretrainer: optional task model with a `masked_lm_head` (and
            optionally a `next_sentence_head`) whose heads are filled too.
        source: what to call the weights in the error.
        problems: problems the caller found already (config mismatches,
            unsupported tensors), reported with these.

    Raises:
        ValueError: listing every missing tensor, every shape mismatch and
            (for the backbone part) every unexpected `bert/` tensor, before
            any variable is changed.
    """
    targets = _targets(backbone, pretrainer)
    problems = list(problems) + [f"missing {name}" for name in targets if name not in weights]
    converted = {}
    for name, (variable, (to_tfnlp, to_google)) in targets.items():
        if name in weights:
            value = np.asarray(weights[name])
            # Converted only from Google's layout of this variable's shape.
            google_shape = to_google(np.empty(variable.shape, np.int8)).shape
            value = to_tfnlp(value) if value.shape == google_shape else value
            if tuple(value.shape) != tuple(variable.shape):
                problems.append(
                    f"{name}: shape {tuple(np.shape(weights[name]))} does not fit "
                    f"{variable.path} {tuple(variable.shape)}"
                )
            converted[name] = value
    unexpected = [n for n in weights if n.startswith("bert/") and n not in targets]
    problems += [f"unexpected {name}" for name in unexpected]
    if problems:
        raise ValueError(
            f"The {source} does not match this model ({len(problems)} problems):\n  "
            + "\n  ".join(problems)
        )
    for name, (variable, _) in targets.items():
        variable.assign(converted[name].astype(variable.dtype))


def _backbone_weights_as_google(backbone, pretrainer=None):
    """The inverse map: tfnlp variables -> `{google name: array}`."""
    return {
        name: to_google(variable.numpy())
        for name, (variable, (_, to_google)) in _targets(backbone, pretrainer).items()
    }


def load_google_checkpoint(directory, pretrainer_cls=None, *, backbone=None, gelu=None):
    """Builds a `BertBackbone` from Google's release format (or fills one).

    Google's `bert_config.json` says `"hidden_act": "gelu"` for two
    functions: google-research/bert's `modeling.py` computed GELU with erf
    until 2019-02-07 and with its tanh approximation since (they differ by
    up to 4.7e-4 per activation). `gelu` chooses; the default is what
    Google's code computes today, which the 2019 whole-word-masking and
    the 2020 small BERTs (BERT-Tiny to -Medium) were released with; the
    2018 BERT-Base and -Large were trained with erf, which is also what
    Hugging Face's conversions of them compute (`docs/weights.md`).

    Args:
        directory: a folder with `bert_config.json` and `bert_model.ckpt.*`
            (and `vocab.txt`, which `tfnlp.data.WordPieceTokenizer` reads).
        pretrainer_cls: pass `tfnlp.models.BertPretrainer` to also load the
            masked-LM and next-sentence heads; then a pretrainer is returned.
        backbone: optional existing `BertBackbone` to load into instead of
            building one; it must be the model `bert_config.json`
            describes (heads, sizes, segment and position tables, epsilon,
            activation).
        gelu: `"tanh"` or `"erf"`: how `"hidden_act": "gelu"` is computed.
            None: `"tanh"`, google-research/bert's, unless the folder was
            written by `save_google_checkpoint` (which records its
            backbone's form).

    Returns:
        A `BertBackbone` (or a pretrainer) holding the released weights.

    Raises:
        ValueError: when `bert_config.json` is unreadable, lacks a size or
            has a value tfnlp cannot compute (e.g. `hidden_act` other than
            `"gelu"`), `vocab.txt` has more than `vocab_size` tokens,
            `backbone` differs from the config, or the checkpoint's tensors
            do not fit (every problem of a kind is listed in one error,
            naming the config setting the tensors contradict).

    Example:

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> save_google_checkpoint(BertBackbone(50, 1, 2, 8, max_sequence_length=16), folder)
    >>> load_google_checkpoint(folder, backbone=BertBackbone(50, 1, 4, 8, max_sequence_length=16))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: The checkpoint's config .../bert_config.json does not describe this backbone (1 problems):
      num_attention_heads=2 but the model has num_heads=4
    """
    config_path = os.path.join(directory, "bert_config.json")
    config = _read_config(config_path)
    activations = _google_activations(config, gelu, config_path)
    _check_vocabulary_file(directory, config)
    # Google's "gelu" was read as tanh by default: say so where a backbone disagrees.
    note = "" if gelu is not None or _SAVED_GELU in config else _DEFAULT_GELU_NOTE
    backbone = _checked_backbone(config, backbone, config_path, activations=activations,
                                 activation_note=note)
    pretrainer = pretrainer_cls(backbone) if pretrainer_cls is not None else None
    prefix = os.path.join(directory, "bert_model.ckpt")
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as error:
        raise ValueError(f"Cannot read the TF checkpoint {prefix}: {error}") from error
    # Checkpoints written while training (Google's run_pretraining.py) also
    # hold Adam's slots: not weights.
    names = [n for n in reader.get_variable_to_shape_map() if not n.endswith(("/adam_m", "/adam_v"))]
    try:
        weights = {name: reader.get_tensor(name) for name in names}
    except Exception as error:  # the reader raises IndexError, OpError, ... on bad data
        raise ValueError(f"The TF checkpoint {prefix} is corrupt or truncated: {error}") from error
    assign_google_weights(weights, backbone, pretrainer, source=f"checkpoint {prefix}",
                          problems=tensor_mismatches(config, weights))
    return pretrainer if pretrainer is not None else backbone


def save_google_checkpoint(backbone, directory, pretrainer=None):
    """Writes `bert_config.json` and `bert_model.ckpt` with Google's names and layouts.

    Args:
        backbone: a `BertBackbone`.
        directory: the folder to write.
        pretrainer: optionally its `BertPretrainer`, to write the heads too.

    `bert_config.json` says `"hidden_act": "gelu"` for either activation,
    as Google's format can only say; a `"tfnlp_gelu"` entry (`"erf"` or
    `"tanh"`, ignored by Google's and Hugging Face's code) records which,
    so that `load_google_checkpoint` reads the model back as it was.

    Example:

    >>> import tempfile
    >>> backbone = BertBackbone.from_architecture("bert_tiny", vocabulary_size=50)
    >>> folder = tempfile.mkdtemp()
    >>> save_google_checkpoint(backbone, folder)
    >>> dict(tf.train.list_variables(folder + "/bert_model.ckpt"))["bert/pooler/dense/kernel"]
    [128, 128]
    >>> load_google_checkpoint(folder).count_params() == backbone.count_params()
    True
    """
    os.makedirs(directory, exist_ok=True)
    config = {
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": "gelu",
        _SAVED_GELU: {v: k for k, v in GOOGLE_GELU.items()}[backbone.activation],
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout,
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "initializer_range": 0.02,
    }
    if backbone.layer_norm_epsilon != _EPSILON:  # Google's format leaves BERT's out
        config["layer_norm_eps"] = backbone.layer_norm_epsilon
    with open(os.path.join(directory, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    weights = _backbone_weights_as_google(backbone, pretrainer)
    names = sorted(weights)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(directory, "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(weights[n]) for n in names],
    )


def _google_name(hugging_face_name):
    """`encoder.layer.3.attention.self.query.weight` -> Google's name, and whether to transpose.

    Returns `(None, False)` for tensors with no Google counterpart (the tied
    decoder weight, buffers such as `position_ids`).
    """
    name = hugging_face_name.removeprefix("bert.")
    if name in ("cls.predictions.decoder.weight", "embeddings.position_ids") or name.endswith(
        "decoder.bias"
    ):
        return None, False
    if name == "cls.predictions.bias":
        return "cls/predictions/output_bias", False
    if name.startswith("cls.seq_relationship."):  # (2, H) in both formats
        return "cls/seq_relationship/output_" + ("bias" if name.endswith("bias") else "weights"), False
    parts = name.split(".")
    if parts[0] == "encoder":  # encoder.layer.3.* -> encoder/layer_3/*
        parts = ["encoder", f"layer_{parts[2]}"] + parts[3:]
    leaf = parts.pop()
    if "LayerNorm" in parts:  # pytorch_pretrained_bert's files still say gamma / beta
        leaf = {"weight": "gamma", "bias": "beta"}.get(leaf, leaf)
    elif parts[-1].endswith("embeddings"):
        leaf = None  # embedding tables have no leaf in Google's names
    elif leaf == "weight":
        leaf = "kernel"
    path = "/".join(parts + ([leaf] if leaf else []))
    prefix = "" if path.startswith("cls/") else "bert/"
    return prefix + path, leaf == "kernel"


def _check_tied_decoder(config, tensors, path):
    """tfnlp's masked-LM head reads the token embeddings: refuse an untied decoder."""
    decoder = tensors.get("cls.predictions.decoder.weight")
    embeddings = tensors.get("bert.embeddings.word_embeddings.weight")
    untied = config.get("tie_word_embeddings") is False or (
        decoder is not None and embeddings is not None and not np.array_equal(decoder, embeddings)
    )
    if untied:
        raise ValueError(
            f"The checkpoint {path} has a masked-LM decoder not tied to the word embeddings "
            "(`tie_word_embeddings` false, or `cls.predictions.decoder.weight` differs from "
            "`bert.embeddings.word_embeddings.weight`); tfnlp's `MaskedLMHead` reuses the "
            "embeddings, so its scores would differ. Load the backbone alone "
            "(`pretrainer_cls=None`)."
        )


def read_pytorch_state_dict(path):
    """A PyTorch state dict file (`pytorch_model.bin`, UniLM's `.bin`) as `{name: float32 array}`.

    Read with `torch.load(..., map_location="cpu", weights_only=True)`:
    tensors only, no pickled code runs. Half-precision tensors become
    float32.

    Args:
        path: the file.

    Returns:
        `{name: numpy array}`.

    Raises:
        ValueError: when torch is not installed (naming the file, and
            saying to install torch or convert it to safetensors) or the
            file cannot be read as a state dict.
    """
    try:
        import torch
    except ImportError as error:
        raise ValueError(
            f"{path} is a PyTorch `torch.save` file: reading it needs torch (`pip install torch`), or "
            "convert it to `model.safetensors` (e.g. `save_pretrained(..., "
            "safe_serialization=True)` in transformers)."
        ) from error
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises its own error types (zip, unpickling, runtime)
        raise ValueError(f"Cannot read the PyTorch checkpoint {path}: {error}") from error
    state = state.get("state_dict", state) if isinstance(state, dict) else state
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ValueError(f"{path} does not hold a PyTorch state dict (`{{name: tensor}}`).")
    return {
        name: (value.float() if value.is_floating_point() else value).numpy()
        for name, value in state.items()
    }


def _read_hugging_face_tensors(directory):
    """`{name: array}` from `model.safetensors`, else `pytorch_model.bin` (either maybe sharded)."""
    from safetensors.numpy import load_file

    def safetensors(path):
        try:
            return load_file(path)
        except Exception as error:  # safetensors raises its own error types
            raise ValueError(f"Cannot read {path}: {error}") from error

    readers = (("model.safetensors", safetensors), ("pytorch_model.bin", read_pytorch_state_dict))
    for name, read in readers:
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return read(path), path
        index = path + ".index.json"
        if os.path.exists(index):  # shards: {"weight_map": {tensor: file}}
            try:
                with open(index, encoding="utf-8") as f:
                    files = sorted(set(json.load(f)["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
                raise ValueError(f"Cannot read the shard index {index}: {error}") from error
            tensors = {}
            for file in files:
                tensors.update(read(os.path.join(directory, file)))
            return tensors, index
    raise ValueError(
        f"{directory} has no weights: expected model.safetensors or pytorch_model.bin "
        "(or their sharded `.index.json`), as `save_pretrained` writes them."
    )


def _hugging_face_config(directory):
    """`(config, path)`: `config.json` (or, without it, `bert_config.json`), checked with `vocab.txt`."""
    config_path = os.path.join(directory, "config.json")
    if not os.path.exists(config_path) and os.path.exists(os.path.join(directory, "bert_config.json")):
        config_path = os.path.join(directory, "bert_config.json")
    config = _read_config(config_path)
    _check_vocabulary_file(directory, config)
    return config, config_path


def load_hugging_face_checkpoint(directory, pretrainer_cls=None, *, backbone=None):
    """Builds a `BertBackbone` from a Hugging Face BERT folder (or fills one).

    Reads `config.json` (or, without it, `bert_config.json`) and
    `model.safetensors` with the `safetensors` NumPy API (no torch needed);
    without it, `pytorch_model.bin` with torch (`weights_only=True`).
    Sharded weights (`*.index.json`) are read too. Works for `BertModel`
    and `BertForPreTraining` weights (the latter also fill the heads when
    `pretrainer_cls` is given). `hidden_act` is computed as transformers
    computes it: `"gelu"` exactly (erf), `"gelu_new"` /
    `"gelu_pytorch_tanh"` / `"gelu_fast"` with the tanh approximation.

    Args:
        directory: the folder written by `save_pretrained`.
        pretrainer_cls: pass `tfnlp.models.BertPretrainer` to also load the
            heads; then a pretrainer is returned.
        backbone: optional existing `BertBackbone` to load into instead of
            building one; it must be the model the config describes.

    Returns:
        A `BertBackbone` (or a pretrainer) holding the weights.

    Raises:
        ValueError: when the config is unreadable, lacks a size or has a
            value tfnlp cannot compute (`hidden_act` other than `"gelu"`,
            `"gelu_python"` (erf) or `"gelu_new"`, `"gelu_pytorch_tanh"`,
            `"gelu_fast"` (tanh),
            `position_embedding_type` other than `"absolute"`, a decoder),
            `backbone` differs from
            it, no weights file is found (or `pytorch_model.bin` without
            torch), or the tensors do not fit; each error lists every
            problem of its kind.

    Example:

    >>> import transformers  # doctest: +SKIP
    >>> transformers.BertModel(transformers.BertConfig(
    ...     num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
    ...     intermediate_size=512)).save_pretrained("/tmp/bert")  # doctest: +SKIP
    >>> load_hugging_face_checkpoint("/tmp/bert").num_layers  # doctest: +SKIP
    2
    """
    config, config_path = _hugging_face_config(directory)
    backbone = _checked_backbone(config, backbone, config_path)
    pretrainer = pretrainer_cls(backbone) if pretrainer_cls is not None else None
    tensors, path = _read_hugging_face_tensors(directory)
    if pretrainer is not None:
        _check_tied_decoder(config, tensors, path)
    weights = {}
    for name, value in tensors.items():
        google, transpose = _google_name(name)
        if google is not None:
            weights[google] = value.T if transpose else value
    assign_google_weights(weights, backbone, pretrainer, source=f"checkpoint {path}",
                          problems=tensor_mismatches(config, weights))
    return pretrainer if pretrainer is not None else backbone


def _hugging_face_labels(config, path):
    """`(num_labels, names)`: the config's label count and its `id2label` names in id order
    (None where it has only transformers' placeholders `LABEL_0`, `LABEL_1`, ... or none)."""
    id2label = config.get("id2label")
    num_labels = config.get("num_labels")
    if id2label is None:  # `save_pretrained` leaves transformers' default (2 labels) out
        num_labels = 2 if num_labels is None else num_labels
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels <= 0:
            raise ValueError(f"The config {path} has num_labels={num_labels!r}: it must be a positive int.")
        return num_labels, None
    try:
        ids = {int(key): value for key, value in id2label.items()}
    except (AttributeError, TypeError, ValueError):
        ids = None
    if (ids is None or sorted(ids) != list(range(len(ids)))
            or not all(isinstance(name, str) for name in ids.values()) or len(set(ids.values())) != len(ids)):
        raise ValueError(f"The config {path} has id2label={id2label!r}: it must map each id 0, 1, ... to "
                         "a label name of its own.")
    names = [ids[i] for i in range(len(ids))]
    if num_labels is not None and num_labels != len(names):
        raise ValueError(f"The config {path} has num_labels={num_labels!r} but {len(names)} names in id2label.")
    if names == [f"LABEL_{i}" for i in range(len(names))]:
        return len(names), None
    return len(names), names


def load_hugging_face_token_classifier(directory, *, tag_names=None, preprocessor=None, crf=False):
    """Builds a `BertTokenClassifier` from a Hugging Face `BertForTokenClassification` folder.

    The backbone is read as `load_hugging_face_checkpoint` reads it, and the
    head `classifier.weight` `(num_labels, H)` / `classifier.bias` into the
    tagger's `output_dense`. transformers' model scores every piece; the
    tagger scores each word at its first piece (`word_positions`), so its
    logits are transformers' at those positions (BERT's tagging recipe, which
    `BertForTokenClassification` fine-tunes with too). The tagger's dropout is
    the config's `classifier_dropout`, else `hidden_dropout_prob`, as
    transformers' head. `BertForTokenClassification` has no pooler: the
    backbone keeps its initial pooler weights, which the tagger does not read.

    Args:
        directory: the folder written by `save_pretrained` (`config.json`
            and `model.safetensors`, or `pytorch_model.bin` with torch;
            sharded too).
        tag_names: optional list of tag names, one per label in id order.
            None: the config's `id2label` in id order, unless it holds only
            transformers' placeholders (`LABEL_0`, `LABEL_1`, ...): then the
            tagger has no tag names (and takes no `preprocessor`).
        preprocessor: optional `tfnlp.data.BertPreprocessor` (e.g. on
            `data.WordPieceTokenizer` of the folder's `vocab.txt`), so that
            the tagger takes words and text; it needs tag names.
        crf: bool, a CRF over the word logits (`BertTokenClassifier`'s
            `crf`); transformers' model has none, so its transitions start
            at zero (decoding is then the best tag of each word, within the
            IOB2 constraints when the tag names are IOB2's): fine-tune it.

    Returns:
        A `BertTokenClassifier` holding the checkpoint's weights.

    Raises:
        ValueError: as `load_hugging_face_checkpoint` for the config and the
            backbone's tensors; when `tag_names` does not have one name per
            label (`num_labels`), or is not a list of distinct names;
            `id2label` is not one name per id 0, 1, ...; the checkpoint has no
            `classifier.weight` / `classifier.bias` (a `BertModel`, a
            `BertForPreTraining`) or its config's `architectures` is another
            model's (a `BertForSequenceClassification` has a `classifier`
            too, on the pooled output); the head's shapes do not fit
            `num_labels` and `hidden_size`; a `preprocessor` is given without
            tag names; or `num_labels` is below 2.

    Example:

    >>> import transformers  # doctest: +SKIP
    >>> transformers.BertForTokenClassification(transformers.BertConfig(
    ...     num_hidden_layers=2, hidden_size=128, num_attention_heads=2, intermediate_size=512,
    ...     id2label={0: "O", 1: "B-PER", 2: "I-PER"})).save_pretrained("/tmp/bert-ner")  # doctest: +SKIP
    >>> load_hugging_face_token_classifier("/tmp/bert-ner").tag_names  # doctest: +SKIP
    ['O', 'B-PER', 'I-PER']
    """
    config, config_path = _hugging_face_config(directory)
    num_labels, names = _hugging_face_labels(config, config_path)
    if tag_names is not None:
        _, tag_names = tagger_size(None, tag_names)
        if len(tag_names) != num_labels:
            raise ValueError(
                f"`tag_names` has {len(tag_names)} names but the checkpoint has `num_labels`={num_labels} "
                f"({config_path}): give one name per label, in id order."
            )
    else:
        tag_names = names
    if preprocessor is not None and tag_names is None:
        raise ValueError(
            f"The config {config_path} does not name its labels (no `id2label`, or transformers' "
            "placeholders LABEL_0, LABEL_1, ...): pass `tag_names`, one per label in id order, to give "
            "the tagger a `preprocessor`."
        )
    tensors, path = _read_hugging_face_tensors(directory)
    kernel, bias = tensors.pop("classifier.weight", None), tensors.pop("classifier.bias", None)
    architectures = config.get("architectures") or []
    said = f" (its config says architectures={architectures!r})" if architectures else ""
    if kernel is None or bias is None:
        raise ValueError(
            f"The checkpoint {path} has no token-classification head (`classifier.weight` and "
            f"`classifier.bias`){said}: it is not a {_TOKEN_CLASSIFIER}. Load its backbone with "
            "`load_hugging_face_checkpoint` and build a `BertTokenClassifier` on it to fine-tune."
        )
    if architectures and _TOKEN_CLASSIFIER not in architectures:
        raise ValueError(
            f"The config {config_path} says architectures={architectures!r}, not {_TOKEN_CLASSIFIER}: "
            "its `classifier` is another model's head (a BertForSequenceClassification's reads the "
            "pooled [CLS] vector, not each piece). Load its backbone with `load_hugging_face_checkpoint`."
        )
    hidden = config["hidden_size"]
    if np.shape(kernel) != (num_labels, hidden) or np.shape(bias) != (num_labels,):
        raise ValueError(
            f"The checkpoint {path}'s classifier.weight {np.shape(kernel)} and classifier.bias "
            f"{np.shape(bias)} do not fit the config's `num_labels`={num_labels} and "
            f"`hidden_size`={hidden}: expected (num_labels, hidden_size) and (num_labels,)."
        )
    dropout = config.get("classifier_dropout")
    dropout = config.get("hidden_dropout_prob", 0.1) if dropout is None else dropout
    backbone = _checked_backbone(config, None, config_path)
    tagger = BertTokenClassifier(backbone, num_tags=num_labels, tag_names=tag_names, dropout=dropout,
                                 preprocessor=preprocessor, crf=crf)
    weights = {}
    for name, value in tensors.items():
        google, transpose = _google_name(name)
        if google is not None:
            weights[google] = value.T if transpose else value
    # BertForTokenClassification is built with `add_pooling_layer=False`.
    weights.setdefault("bert/pooler/dense/kernel", backbone.pooler.kernel.numpy())
    weights.setdefault("bert/pooler/dense/bias", backbone.pooler.bias.numpy())
    assign_google_weights(weights, backbone, source=f"checkpoint {path}",
                          problems=tensor_mismatches(config, weights))
    tagger.output_dense.kernel.assign(np.transpose(kernel).astype("float32"))  # (H, num_labels)
    tagger.output_dense.bias.assign(np.asarray(bias, "float32"))
    return tagger
