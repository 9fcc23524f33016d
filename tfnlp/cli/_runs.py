"""What the training commands share: corpora, run directories, the training loop and its report.

A run directory (`--output` of `pretrain` or `finetune`) holds
`checkpoints/`, `logs/`, `model.keras` and `config.json`: the run's `kind`
(a pretraining spec's name, or a task's kind such as `classifier`), its
resolved settings and what `export`, `evaluate` and `predict` read back.
"""

import json
import os

from tfnlp.cli._loading import data, datasets, keras, models, tf, training
from tfnlp.cli._settings import BUNDLED_CORPORA, TABLE_EXTENSIONS, CommandError


def fail(message):
    """Ends the command: `tfnlp: error: MESSAGE` on stderr, exit status 1 (a `CommandError`)."""
    raise CommandError(message)


def read_corpus(corpus, text_column="text"):
    """Documents (lists of sentences) of a bundled corpus, a text file, or a TSV/CSV/JSONL column."""
    if corpus == "fine_food_reviews":
        return [[text] for text, _ in datasets.read_fine_food_reviews("train")]
    if corpus in BUNDLED_CORPORA:
        return datasets.read_documents(corpus, "train")
    if corpus.lower().endswith(TABLE_EXTENSIONS):  # one document per row
        try:
            return [[text.strip()] for text in data.read_texts(corpus, text_column)]
        except ValueError as error:
            fail(f"`corpus`: {error}")
    # A line that is empty once stripped (spaces, tabs, a Windows "\r")
    # ends a document.
    documents = [[]]
    with open(corpus, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip():
                documents[-1].append(line.strip())
            elif documents[-1]:
                documents.append([])
    documents = [d for d in documents if d]
    if not documents:
        fail(f"`corpus` {corpus!r} holds no text.")
    return documents


def write_lines(path, lines):
    """`lines` to the file `path`, one a line (its directory made)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def read_lines(path):
    """The non-empty lines of the file `path`."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.rstrip("\n")]


def setup(settings):
    """Seeds, dtype policy and strategy; the output layout."""
    keras.utils.set_random_seed(settings["seed"])
    keras.config.set_dtype_policy(settings["dtype"])
    strategy = training.strategy(settings["strategy"])
    output = settings["output"]
    os.makedirs(output, exist_ok=True)
    return strategy, {
        "checkpoints": os.path.join(output, "checkpoints"),
        "logs": os.path.join(output, "logs"),
        "model": os.path.join(output, "model.keras"),
        "config": os.path.join(output, "config.json"),
    }


def fit(model, dataset, settings, paths, callbacks=()):
    """`tfnlp.training.fit` with the training settings: checkpoints, logs, profile."""
    profile = tuple(int(p) for p in settings["profile"].split(":")) if settings["profile"] else None
    return training.fit(
        model, dataset, steps=settings["steps"], checkpoint_dir=paths["checkpoints"],
        checkpoint_every=settings["checkpoint_every"], log_dir=paths["logs"],
        log_every=settings["log_every"], callbacks=list(callbacks), verbose=1,
        histogram_every=settings["histogram_every"] or None, profile_steps=profile,
    )


def save_config(paths, kind, settings, strategy, extra=None):
    """The run's `config.json` (by the chief only)."""
    if training.is_chief(strategy):
        with open(paths["config"], "w", encoding="utf-8") as f:
            json.dump({"kind": kind, "settings": settings, "normalization": "bert", **(extra or {})},
                      f, indent=2)


def read_run(directory, kinds):
    """The `config.json` of a run directory, which must hold one of `kinds`."""
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:  # checked by tfnlp.cli
        config = json.load(f)
    if config.get("kind") not in kinds:
        fail(f"{directory!r} holds a {config.get('kind')!r} model; expected one of {kinds}.")
    return config


def tokenizer(vocabulary, config=None):
    """A WordPieceTokenizer as the run that wrote `config` had it (before the
    key existed, tfnlp's tokenizer folded compatibility characters: "nfkc")."""
    normalization = "bert" if config is None else config.get("normalization", "nfkc")
    return data.WordPieceTokenizer(vocabulary, normalization=normalization)


def pretrained_bert(directory):
    """`(vocabulary, tokenizer, longest)` of a `tfnlp pretrain bert` run: its WordPiece
    vocabulary and tokenizer, and its position table's length (its pretraining `sequence_length`)."""
    config = read_run(directory, ("bert",))
    vocabulary = read_lines(os.path.join(directory, config["vocabulary"]))
    return vocabulary, tokenizer(vocabulary, config), config["settings"]["sequence_length"]


def pretrained_bert_backbone(directory, dtype):
    """The `BertBackbone` of a `tfnlp pretrain bert` run, in the dtype policy `dtype` (under the
    strategy's scope).

    The .keras file keeps the dtype policy it was pretrained with; `--dtype`
    applies to the fine-tuned model, so the backbone is rebuilt in it and
    given the pretrained weights.
    """
    pretrainer = keras.saving.load_model(os.path.join(directory, "model.keras"), safe_mode=True,
                                         compile=False)
    backbone = models.BertBackbone.from_config(dict(pretrainer.backbone.get_config(), dtype=dtype))
    backbone.set_weights(pretrainer.backbone.get_weights())
    return backbone


def pretrained_elmo(directory, dtype):
    """The `ELMoBiLM` of a `tfnlp pretrain elmo` run, in the dtype policy `dtype` (as
    `pretrained_bert_backbone` rebuilds a BERT)."""
    read_run(directory, ("elmo",))
    bilm = keras.saving.load_model(os.path.join(directory, "model.keras"), safe_mode=True, compile=False)
    rebuilt = models.ELMoBiLM.from_config(dict(bilm.get_config(), dtype=dtype))
    rebuilt.set_weights(bilm.get_weights())
    return rebuilt


def fine_tuning_vocabulary(settings, paths, texts):
    """The WordPiece vocabulary of a model fine-tuned from scratch: the `vocabulary` file, the
    run's own `vocab.txt` when it resumes from a checkpoint, or one learned from `texts`."""
    learned = os.path.join(settings["output"], "vocab.txt")
    if settings["vocabulary"]:
        return read_lines(settings["vocabulary"])
    if os.path.exists(learned) and tf.train.latest_checkpoint(paths["checkpoints"]):
        return read_lines(learned)  # a resumed run: the checkpoint's own vocabulary
    return data.learn_wordpiece_vocabulary(texts, settings["vocabulary_size"], progress=False)


def fine_tuning_learning_rate(hidden_dim):
    """The fine-tuning learning rate of a BERT encoder `hidden_dim` wide, for `--learning-rate 0`.

    BERT-base and larger fine-tune at 2e-5 to 5e-5 (Devlin et al.); the small
    BERTs (Turc et al.) and a Transformer from scratch need far more in the few
    thousand steps of a typical fine-tuning run (`tests/test_own_data.py`
    trains BERT-tiny: 1e-4 had not left chance level after 3 epochs there,
    1e-3 reached the top).
    """
    return 1e-3 if hidden_dim <= 256 else 3e-4 if hidden_dim <= 512 else 5e-5


def load_fine_tuned(directory, kind):
    """The model of a `tfnlp finetune` run of `kind` (it carries its preprocessor), and its config."""
    config = read_run(directory, (kind,))
    model = keras.saving.load_model(os.path.join(directory, "model.keras"), safe_mode=True,
                                    compile=False)
    if getattr(model, "preprocessor", None) is None:
        fail(f"`run` {directory!r} was fine-tuned by an older tfnlp (its model has no "
             "preprocessor); fine-tune it again.")
    return model, config


def attention_images(backbone, tokenizer, settings, paths, probe):
    """Every layer's attention over a probe sentence, at each checkpoint."""
    return training.AttentionImages(
        backbone, data.BertPreprocessor(tokenizer, settings["sequence_length"]), probe,
        paths["logs"], every_n_steps=settings["checkpoint_every"],
    )


def report(history, paths):
    """The last line of a training command: steps, last loss, where the model and logs are."""
    losses = history.get("loss", [])
    last = f"{losses[-1]:.4f}" if losses else "n/a (already trained)"
    print(f"{history['steps']} steps done; last loss {last}; model: {paths['model']}; "
          f"TensorBoard: tensorboard --logdir {paths['logs']}")
