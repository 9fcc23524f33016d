"""Import microsoft/unilm's UniLM v1 checkpoints (PyTorch state dicts) into a `UniLMBackbone`.

UniLM v1 (`unilm1-large-cased.bin`, `unilm1-base-cased.bin`,
`unilm1.2-base-uncased.bin`, and models fine-tuned with
`unilm-v1/src/biunilm/run_seq2seq.py`) are `torch.save`d state dicts of
`BertForPreTrainingLossMask` (`unilm-v1/src/pytorch_pretrained_bert/
modeling.py`): BERT's names (`bert.encoder.layer.3.attention.self.query.
weight`, `cls.predictions.*`; LayerNorm `weight`/`bias`, or `gamma`/`beta`
in older files) and BERT's network with three differences, all handled here:

- six segment rows (`--new_segment_ids`, `type_vocab_size=6`): the row is
  both the segment and the LM objective. `BertForPreTrainingLossMask.forward`
  computes it as `(task_idx + 1 + [task_idx == 3]) - [segment A and task_idx
  in (0, 3)]`: bidirectional A / B 0 / 1, left-to-right 2, right-to-left 3,
  seq2seq source / target 4 / 5 (as `seq2seq_loader.py` writes them for
  fine-tuning). tfnlp's `unilm_backbone.SEGMENT_ROWS` is the same layout
  and its objectives the same `task_idx` order, so the rows are copied as
  they are (`_V1_SEGMENT_ROWS` is checked against it);
- every `BertLayerNorm` has epsilon 1e-5 (hard-coded there, and apex's
  `FusedLayerNorm` default), not BERT's 1e-12: the backbone is built with
  `layer_norm_epsilon=1e-5` (whatever the config's `layer_norm_eps`, which
  v1 ignores), and its task's masked-LM head uses it too;
- options tfnlp has no equivalent for: `relax_projection` (4 masked-LM
  transforms), `new_pos_ids` (4 position tables), `num_qkv`, `seg_emb`,
  `ffn_type`, and `s2s_add_segment` (7 segment rows). They are refused
  (their tensors do not fit), with every other problem, before anything
  is assigned.

The names are mapped, checked and assigned by `bert_checkpoints` (the
BERT importers' machinery).
"""

import glob
import os

import numpy as np

from tfnlp.models import bert_checkpoints
from tfnlp.models.unilm_backbone import NUM_SEGMENT_ROWS, SEGMENT_ROWS, UniLMBackbone

# `BertLayerNorm(hidden_size, eps=1e-5)` throughout unilm-v1's modeling.py.
V1_LAYER_NORM_EPSILON = 1e-5
# Segment row of (task_idx, segment A / B) in BertForPreTrainingLossMask.forward.
_V1_SEGMENT_ROWS = ((0, 1), (2, 2), (3, 3), (4, 5))
# unilm-v1 BertConfig options: the values that give BERT's network.
_V1_OPTIONS = {"relax_projection": (None, 0, 1), "new_pos_ids": (None, False), "num_qkv": (None, 0, 1),
               "seg_emb": (None, False), "ffn_type": (None, 0)}
# What a training run saves besides weights (`crit_mask_lm_smoothed.one_hot`, a loss buffer).
_NOT_WEIGHTS = "crit_"
# unilm-v1's ACT2FN: its "gelu" is exact (erf); no tanh form.
_V1_ACTIVATIONS = {"gelu": "gelu"}


def _state_dict_path(path):
    """The `.bin` of `path` (a file, or a folder with `pytorch_model.bin` or one `*.bin`)."""
    if not os.path.isdir(path):
        if not os.path.exists(path):
            raise ValueError(f"No UniLM checkpoint at {path}.")
        return path
    found = os.path.join(path, "pytorch_model.bin")
    if os.path.exists(found):
        return found
    candidates = sorted(glob.glob(os.path.join(path, "*.bin")))
    if len(candidates) != 1:
        raise ValueError(
            f"{path} must hold pytorch_model.bin or exactly one `.bin` state dict, found "
            f"{[os.path.basename(c) for c in candidates] or 'none'}."
        )
    return candidates[0]


def _config(path, config):
    """The BERT config: the `config` dict or file, else the folder's `config.json` / `bert_config.json`."""
    if isinstance(config, dict):
        config_path = "(the `config` argument)"
        missing = [key for key in bert_checkpoints._REQUIRED_KEYS if key not in config]
        if missing:
            raise ValueError(f"`config` lacks {', '.join(missing)}.")
        return dict(config), config_path
    if config is None:
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        names = [os.path.join(folder, n) for n in ("config.json", "bert_config.json")]
        config = next((n for n in names if os.path.exists(n)), None)
        if config is None:
            raise ValueError(
                f"No config for {path}: UniLM v1 releases ship the weights alone. Pass "
                "`config=` the `bert_config.json` of the BERT they start from (e.g. "
                "bert-large-cased's for unilm1-large-cased: run_seq2seq.py's `--bert_model`), "
                "or put it next to the `.bin` as config.json."
            )
    return bert_checkpoints._read_config(config), config


def _v1_problems(config, tensors):
    """unilm-v1 options and tensors tfnlp cannot compute, one line each."""
    problems = [
        f"{name}={config[name]!r} (UniLM v1's `--{name}`: tfnlp has BERT's network only)"
        for name, supported in _V1_OPTIONS.items() if config.get(name) not in supported
    ]
    segments = tensors.get("bert.embeddings.token_type_embeddings.weight")
    if segments is not None and segments.shape[0] != NUM_SEGMENT_ROWS:
        problems.append(
            f"bert.embeddings.token_type_embeddings.weight has {segments.shape[0]} rows; UniLM v1 "
            f"with `--new_segment_ids` has {NUM_SEGMENT_ROWS} (7 is `--s2s_add_segment`, "
            "2 a BERT checkpoint: use `UniLMBackbone.from_bert`)"
        )
    return problems


def load_unilm_checkpoint(path, task_cls=None, *, config=None, backbone=None):
    """Builds a `UniLMBackbone` (or a `UniLM`) holding a microsoft/unilm v1 checkpoint.

    The state dict is read with torch (`weights_only=True`: tensors only),
    its names mapped to BERT's, and everything checked before anything is
    assigned: the config's values, v1 options tfnlp cannot compute, and
    every missing, unexpected or mis-shaped tensor, in one error. The six
    segment rows keep their v1 meaning (see the module docstring), so
    `objective` 0-3 are v1's `task_idx` 0-3 with segment ids 0 / 1.

    The returned backbone has v1's `layer_norm_epsilon=1e-5` as a
    constructor argument, so its config, a `.keras` file and
    `to_bert()` keep it.

    At padding positions the outputs differ from v1's (v1 gives padding
    segment row 0 and lets padding queries attend uniformly to every key);
    real tokens never see padding, so their outputs are v1's.

    Args:
        path: a `.bin` state dict, or a folder with `pytorch_model.bin` (or
            a single `*.bin`) and `config.json` / `bert_config.json`.
        task_cls: pass `tfnlp.models.UniLM` to also load the masked-LM head
            (`cls.predictions`: transform, LayerNorm and output bias; the
            decoder must be tied to the word embeddings, as in v1); then
            the `UniLM` is returned.
        config: the BERT config (a dict or a JSON path) when `path` has
            none; v1 releases ship the `.bin` alone and were trained from
            BERT's config with `type_vocab_size=6` (which is assumed).
        backbone: optional existing `UniLMBackbone` to load into instead of
            building one; it must be the model the config describes (sizes,
            position table, `layer_norm_epsilon=1e-5`), or every difference
            is listed in one error and nothing is assigned.

    Returns:
        A `UniLMBackbone`, or a `task_cls` model around it.

    Raises:
        ValueError: when no checkpoint or config is found, torch is not
            installed, the config has values tfnlp cannot compute (listed),
            `backbone` differs from the config (listed), or the tensors do
            not fit (every problem listed).

    Example:

    >>> model = load_unilm_checkpoint("unilm1-base-cased.bin",  # doctest: +SKIP
    ...                               tfnlp.models.UniLM, config="bert_config.json")
    """
    state_path = _state_dict_path(path)  # a mistyped path says so first
    config, config_path = _config(path, config)
    tensors = bert_checkpoints.read_pytorch_state_dict(state_path)
    tensors = {name: value for name, value in tensors.items() if not name.startswith(_NOT_WEIGHTS)}
    config["type_vocab_size"] = NUM_SEGMENT_ROWS  # as run_seq2seq.py overrides BERT's 2
    # v1's modeling.py ignores a `layer_norm_eps` key: 1e-5 it is.
    config["layer_norm_eps"] = V1_LAYER_NORM_EPSILON
    problems = bert_checkpoints.unsupported_config_values(config, _V1_ACTIVATIONS)
    if problems:
        raise ValueError(
            f"The config {config_path} has values tfnlp cannot compute: {'; '.join(problems)}."
        )
    backbone = bert_checkpoints._checked_backbone(
        config, backbone, config_path, UniLMBackbone, _V1_ACTIVATIONS
    )
    model = task_cls(backbone) if task_cls is not None else None
    if model is not None:
        bert_checkpoints._check_tied_decoder({}, tensors, state_path)

    weights = {}
    for name, value in tensors.items():
        google, transpose = bert_checkpoints._google_name(name)
        if google is not None:
            weights[google] = value.T if transpose else value
    segments = "bert/embeddings/token_type_embeddings"
    if segments in weights and len(weights[segments]) == NUM_SEGMENT_ROWS:
        rows = np.empty(NUM_SEGMENT_ROWS, int)  # tfnlp row -> v1 row
        for ours, theirs in zip(SEGMENT_ROWS, _V1_SEGMENT_ROWS, strict=True):
            rows[list(ours)] = theirs
        weights[segments] = weights[segments][rows]
    bert_checkpoints.assign_google_weights(
        weights, backbone, model, source=f"UniLM v1 checkpoint {state_path}",
        problems=_v1_problems(config, tensors) + [  # _v1_problems explains the segment rows
            line for line in bert_checkpoints.tensor_mismatches(config, weights)
            if not line.startswith("type_vocab_size=")
        ],
    )
    return model if model is not None else backbone
