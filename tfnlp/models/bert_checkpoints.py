"""Import (and export) released BERT weights: Google's TF1 checkpoints, Hugging Face.

Both formats are read into one logical map, `{name: numpy array}` with
Google's variable names and layouts (kernels `(in, out)`), validated as a
whole (every missing, unexpected or mis-shaped tensor is reported at once,
before anything is assigned), then assigned to a `BertBackbone` (and, when
given, a `BertPretrainer`'s heads).
"""

import json
import os

import numpy as np
import tensorflow as tf

from tfnlp.models.bert_backbone import BertBackbone

_LAYER = "bert/encoder/layer_{i}/"


def backbone_config_from_google(config):
    """`bert_config.json` (a dict) -> `BertBackbone` constructor arguments."""
    if config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"Only GELU BERT models are supported, got hidden_act={config['hidden_act']!r}.")
    return {
        "vocabulary_size": config["vocab_size"],
        "num_layers": config["num_hidden_layers"],
        "num_heads": config["num_attention_heads"],
        "hidden_dim": config["hidden_size"],
        "intermediate_dim": config["intermediate_size"],
        "dropout": config.get("hidden_dropout_prob", 0.1),
        "max_sequence_length": config["max_position_embeddings"],
        "num_segments": config.get("type_vocab_size", 2),
    }


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
    """Google name -> (tfnlp variable, (Google -> tfnlp, tfnlp -> Google) array maps)."""
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
        nsp = pretrainer.next_sentence_head  # None for masked-LM-only pretraining
        if nsp is not None:
            targets.update({  # Google stores the NSP kernel as (2, H)
                "cls/seq_relationship/output_weights": (nsp.kernel, transpose),
                "cls/seq_relationship/output_bias": (nsp.bias, same),
            })
    return targets


def assign_google_weights(weights, backbone, pretrainer=None, source="checkpoint"):
    """Assigns a `{google name: array}` map, after checking all of it.

    Raises:
        ValueError: listing every missing tensor, every shape mismatch and
            (for the backbone part) every unexpected `bert/` tensor, before
            any variable is changed.
    """
    targets = _targets(backbone, pretrainer)
    problems = [f"missing {name}" for name in targets if name not in weights]
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
            f"The {source} does not match this BERT ({len(problems)} problems):\n  "
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


def load_google_checkpoint(directory, pretrainer_cls=None):
    """Builds a `BertBackbone` from Google's release format.

    Args:
        directory: a folder with `bert_config.json` and `bert_model.ckpt.*`
            (and `vocab.txt`, which `tfnlp.data.WordPieceTokenizer` reads).
        pretrainer_cls: pass `tfnlp.models.BertPretrainer` to also load the
            masked-LM and next-sentence heads; then a pretrainer is returned.

    Returns:
        A `BertBackbone` (or a pretrainer) holding the released weights.

    Raises:
        ValueError: when `bert_config.json` is unreadable or lacks a size,
            `vocab.txt` has more than `vocab_size` tokens, or
            the checkpoint's tensors do not fit the configuration (all the
            problems are listed).
    """
    config = _read_config(os.path.join(directory, "bert_config.json"))
    _check_vocabulary_file(directory, config)
    backbone = BertBackbone(**backbone_config_from_google(config))
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
    assign_google_weights(weights, backbone, pretrainer, source=f"checkpoint {prefix}")
    return pretrainer if pretrainer is not None else backbone


def save_google_checkpoint(backbone, directory, pretrainer=None):
    """Writes `bert_config.json` and `bert_model.ckpt` with Google's names and layouts.

    Args:
        backbone: a `BertBackbone`.
        directory: the folder to write.
        pretrainer: optionally its `BertPretrainer`, to write the heads too.

    Example:

    >>> import tempfile
    >>> backbone = BertBackbone.from_preset("bert_tiny", vocabulary_size=50)
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
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout,
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "initializer_range": 0.02,
    }
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
    if "LayerNorm" in parts:
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


def load_hugging_face_checkpoint(directory, pretrainer_cls=None):
    """Builds a `BertBackbone` from a Hugging Face BERT folder.

    Reads `config.json` and `model.safetensors` with the `safetensors`
    NumPy API (no torch needed). Works for `BertModel` and
    `BertForPreTraining` weights (the latter also fill the heads when
    `pretrainer_cls` is given).

    Args:
        directory: the folder written by `save_pretrained`.
        pretrainer_cls: pass `tfnlp.models.BertPretrainer` to also load the
            heads; then a pretrainer is returned.

    Returns:
        A `BertBackbone` (or a pretrainer) holding the weights.
    """
    from safetensors.numpy import load_file

    config = _read_config(os.path.join(directory, "config.json"))
    if config.get("layer_norm_eps", 1e-12) != 1e-12:
        raise ValueError(f"Only layer_norm_eps=1e-12 is supported, got {config['layer_norm_eps']}.")
    _check_vocabulary_file(directory, config)
    backbone = BertBackbone(**backbone_config_from_google(config))
    pretrainer = pretrainer_cls(backbone) if pretrainer_cls is not None else None
    path = os.path.join(directory, "model.safetensors")
    try:
        tensors = load_file(path)
    except Exception as error:  # safetensors raises its own error types
        raise ValueError(f"Cannot read {path}: {error}") from error
    if pretrainer is not None:
        _check_tied_decoder(config, tensors, path)
    weights = {}
    for name, value in tensors.items():
        google, transpose = _google_name(name)
        if google is not None:
            weights[google] = value.T if transpose else value
    assign_google_weights(weights, backbone, pretrainer, source=f"checkpoint {path}")
    return pretrainer if pretrainer is not None else backbone
