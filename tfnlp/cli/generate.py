"""`tfnlp generate --saved-model DIR`: a SavedModel's outputs for text lines (sampled, for text-to-text exports)."""

import json
import os
import sys

import numpy as np

from tfnlp.cli._loading import tf
from tfnlp.cli._settings import CommandError

# The sampling options: name -> (flag type, the signature input's dtype, default, help).
SAMPLING = {
    "temperature": (float, "float32", 1.0, "> 0 (default 1)"),
    "top_k": (int, "int32", 0, "keep the k most probable tokens (default 0: all)"),
    "top_p": (float, "float32", 1.0, "nucleus mass in (0, 1] (default 1: all)"),
    "seed": (int, "int64", 0, "each text gets its own seed made from this one (default 0)"),
    "max_new_tokens": (int, "int32", None, "at most the export's max_length (default)"),
    "repetition_penalty": (float, "float32", 1.0, "> 0 (default 1: off)"),
}


def add_parser(commands, argv=()):
    """The `generate` sub-command."""
    generate = commands.add_parser("generate", help="run a SavedModel on text lines")
    generate.add_argument("--saved-model", required=True, help="a SavedModel version directory")
    generate.add_argument("--text", action="append", help="input text (repeatable; default: stdin lines)")
    sampling = generate.add_argument_group(
        "sampling", "decode with the `sample` signature (or `continue` with --continue) of a "
        "text-to-text export: sampled with --temperature, --top-k, --top-p or --seed, else greedy")
    for name, (kind, _, _, text) in SAMPLING.items():
        sampling.add_argument("--" + name.replace("_", "-"), type=kind, help=text)
    sampling.add_argument("--continue", dest="continue_prompt", action="store_true",
                          help="continue each text as a prompt (a UniLM export's `continue`)")


def schema(args):
    """No settings: `generate` takes flags only."""
    return {}


def configure(args):
    """The sampling options given (None: not given)."""
    return {name: getattr(args, name) for name in SAMPLING}


def run(args, settings):
    """Prints an output line per input text."""
    texts = args.text if args.text else [line.rstrip("\n") for line in sys.stdin]
    for line in generate(args.saved_model, texts, settings, args.continue_prompt):
        print(line)
    return 0


def _sampling_inputs(signature, options, count):
    """The `sample`/`continue` inputs: each option for every text.

    Without temperature, top-k, top-p or seed the decoding is greedy
    (`top_k=1`), as in Python; each text gets its own seed made from
    `seed` (`generation.sampling.seeds`, the same rows as in Python).
    """
    from tfnlp.generation import sampling

    if not any(options.get(name) is not None for name in ("temperature", "top_k", "top_p", "seed")):
        options = {**options, "top_k": 1}
    inputs = {}
    for name, (_, dtype, default, _) in SAMPLING.items():
        value = options.get(name)
        if value is None:
            # The export's max_length: the width of its token_ids output.
            default = signature.structured_outputs["token_ids"].shape[1] if default is None else default
            value = default
        if name == "seed":
            if not 0 <= value < 2**63:
                raise CommandError(f"`--seed` must be in [0, 2**63), got {value}.")
            inputs[name] = sampling.seeds(value, count)
            continue
        if np.issubdtype(dtype, np.integer) and not -2**31 <= value < 2**31:
            raise CommandError(f"`--{name.replace('_', '-')}` is out of range: {value}.")
        inputs[name] = tf.constant(np.full(count, value, dtype))
    return inputs


def generate(saved_model, texts, options=None, continue_prompt=False):
    """Output lines of a SavedModel's `serving_default` on `texts`.

    With sampling `options` (any not None) or `continue_prompt`, a
    text-to-text export's `sample` or `continue` signature instead.
    """
    if not os.path.isdir(saved_model):
        raise CommandError(f"`--saved-model` {saved_model!r} is not a directory.")
    if not tf.saved_model.contains_saved_model(saved_model):
        versions = sorted(
            d for d in os.listdir(saved_model)
            if tf.saved_model.contains_saved_model(os.path.join(saved_model, d))
        )
        hint = f"; it holds the version(s) {versions}: pass e.g. {os.path.join(saved_model, versions[-1])!r}" if versions else ""
        raise CommandError(f"`--saved-model` {saved_model!r} is not a SavedModel{hint}.")
    import tensorflow_text  # noqa: F401  (registers the ops the SavedModels use)

    signatures = tf.saved_model.load(saved_model).signatures
    options = {k: v for k, v in (options or {}).items() if v is not None}
    name = "continue" if continue_prompt else "sample" if options else "serving_default"
    if name not in signatures:
        what = "--continue" if continue_prompt else "sampling options"
        raise CommandError(
            f"{what} need a `{name}` signature, and {saved_model!r} has only "
            f"{sorted(signatures)} (text-to-text exports have `sample`; UniLM's also `continue`)."
        )
    signature = signatures[name]
    inputs = {"text": tf.constant(texts, tf.string)}
    if name != "serving_default":
        inputs.update(_sampling_inputs(signature, options, len(texts)))
    try:
        outputs = signature(**inputs)
    except tf.errors.InvalidArgumentError as error:  # a bad option: the line that names it
        lines = error.message.splitlines()
        named = [line.strip() for line in lines if "` must" in line] or lines[:1]
        raise CommandError(named[0]) from None
    for i in range(len(texts)):
        if "output_text" in outputs:
            yield outputs["output_text"][i].numpy().decode("utf-8", "replace")
        elif "label" in outputs:
            yield f"{outputs['label'][i].numpy().decode()}\t{float(np.max(outputs['probabilities'][i])):.4f}"
        else:
            shapes = {k: tuple(v.shape[1:]) for k, v in outputs.items()}
            yield json.dumps({"text": texts[i], "outputs": {k: list(s) for k, s in shapes.items()}})
