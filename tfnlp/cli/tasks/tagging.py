"""`--task tagging`: a tag for every word (part of speech, named entities) from CoNLL-U or CoNLL files.

`tfnlp finetune --task tagging` trains a `BertTokenClassifier` (with a
CRF: `--crf`) on a `tfnlp pretrain bert` run (`--pretrained`) or on a BERT
encoder from scratch (`--architecture`), a `TransformerTokenClassifier`
from scratch (`--model transformer`, no pretraining), or a
`BiLSTMTokenClassifier` over words and characters with a `tfnlp pretrain
elmo` run's biLM (`--model elmo --pretrained RUN`, TagLM) or without it
(`--model bilstm`, its control); `evaluate` writes its token
accuracy and, for IOB2/IOBES tags, the entity precision, recall and F1 per
type (seqeval's); `predict` one JSON line per sentence (its words, tags and
entities), from a CoNLL file or raw sentences; `export` a SavedModel that
takes raw text or words and returns words, tags and entity spans.

The files' formats: CoNLL-U (`.conllu`; the tags of any column, UPOS by
default) and token-per-line CoNLL/IOB2 files (`.iob2`, `.conll`, `.txt`,
`.tsv`; the words and the tags of any column, the last by default), read
by `tfnlp.data.read_conllu` and `read_conll`: a malformed line stops the
command with the file and line, before anything is written.
"""

import json
import logging
import os
import typing

import numpy as np

from tfnlp.cli import _runs
from tfnlp.cli._loading import data, export_lib, metrics, models, tf, training
from tfnlp.cli._settings import ConfigError, check_pretrained_length, check_wordpiece_file
from tfnlp.cli.pretrain import BERT_OPTIONS
from tfnlp.cli.tasks import Task, register_task

# tfnlp.data.tagged.CONLLU_COLUMNS, here without importing TensorFlow
# (tests/test_cli_tagging.py checks that they agree).
CONLLU_COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
# A file's format by its extension (after any `.gz`), where `format` is empty.
EXTENSIONS = {".conllu": "conllu", ".iob2": "conll", ".conll": "conll", ".txt": "conll",
              ".tsv": "conll"}
# `predict` reads a `.txt` file as raw sentences, one per line (`--format conll`: tokens).
PREDICT_EXTENSIONS = {**EXTENSIONS, ".txt": "text"}
# The models of `--model`, and why those not yet built are refused.
# The models of `--model` that read words and characters, not WordPieces.
WORD_MODELS = ("elmo", "bilstm")
# Settings that only --model bert reads, and why the others do without.
_OWN_WORDS = "learns its word vocabulary from the training sentences"
NOT_FOR = {
    "transformer": {"pretrained": "trains from scratch", "architecture": "has its own size"},
    "bilstm": {"pretrained": "trains from scratch (--model elmo reads a pretrained biLM)",
               "architecture": "has its own size", "vocabulary": _OWN_WORDS},
    "elmo": {"architecture": "has its own size", "vocabulary": _OWN_WORDS},
}
ARCHITECTURES = BERT_OPTIONS["architecture"][3]  # those `tfnlp pretrain bert` offers
# `sequence_length 0`: the longest training sentence, as a word past the length gets no tag
# (at most the encoder's positions).
SEQUENCE_PERCENTILE = 100

TAGGED_FILE = ("a CoNLL-U file (.conllu) or a token-per-line CoNLL/IOB2 file (.iob2, .conll, .txt, "
               ".tsv: a word per line, a blank line between sentences)")
FORMAT = (str, "", "conllu or conll (empty: from each file's extension)", ("", "conllu", "conll"))
COLUMNS = {
    "tag_column": (str, "", "column of the tags: for CoNLL-U a name (upos, xpos, deprel, ...; "
                   "empty: upos), for CoNLL an index from 0, negative from the end (empty: -1, the "
                   "last)", None),
    "word_column": (str, "", "column index of the words in a CoNLL file (empty: 0)", None),
}
FINETUNE = {
    "train": (str, None, f"labelled sentences: {TAGGED_FILE}", None),
    "validation": (str, "", "validation sentences, same format (empty: `validation_fraction` of "
                   "the training sentences are held out; none when it is 0)", None),
    "test": (str, "", "test sentences, same format: token accuracy (and entity precision, "
             "recall and F1 for IOB2/IOBES tags) go to OUTPUT/results.json (empty: no test)", None),
    "format": FORMAT,
    **COLUMNS,
    "model": (str, "bert", "bert: a BertTokenClassifier, on a `tfnlp pretrain bert` model "
              "(--pretrained) or from scratch (--architecture); transformer: a "
              "TransformerTokenClassifier from scratch (2 layers, 128 wide); elmo: a "
              "BiLSTMTokenClassifier (TagLM: word and character vectors, 2 BiLSTMs of 128) with the "
              "frozen biLM of a `tfnlp pretrain elmo` run (--pretrained); bilstm: the same without "
              "ELMo", ("bert", "transformer", "elmo", "bilstm")),
    "pretrained": (str, "", "a `tfnlp pretrain bert` output directory (--model bert; empty: a "
                   "BERT encoder from scratch) or a `tfnlp pretrain elmo` one (--model elmo, "
                   "required)", None),
    "architecture": (str, "", "size of a BERT encoder from scratch (empty: bert_tiny)",
                     ("",) + ARCHITECTURES),
    "vocabulary": (str, "", "WordPiece vocabulary of an encoder from scratch (`tfnlp vocab`; "
                   "empty: learn one from the training sentences)", None),
    "vocabulary_size": (int, 8000, "size of a learned WordPiece vocabulary (--model bert or "
                        "transformer from scratch; elmo and bilstm keep every training word seen "
                        "twice or more)", None),
    "crf": (bool, False, "decode with a linear-chain CRF over the word logits (its likelihood is "
            "the loss; IOB2 transitions constrained)", None),
    "sequence_length": (int, 0, "WordPiece tokens per sentence, [CLS] and [SEP] included (words "
                        "for --model elmo and bilstm); the words past it get no tag (0: the "
                        "longest training sentence, rounded up to a multiple of 8; the lengths "
                        "are printed)", None),
    "epochs": (int, 5, "passes over the training sentences", None),
    "steps": (int, 0, "optimizer steps in all (0: epochs x batches per epoch)", None),
    "learning_rate": (float, 0.0, "peak learning rate, linear warm-up and decay (0: by model "
                      "width: 1e-3 up to 256 (BERT-tiny, -mini), 3e-4 up to 512, 5e-5 wider)", None),
    "patience": (int, 2, "epochs without a better validation score (token accuracy; the loss for "
                 "entity tags, whose accuracy 'O' alone makes high) before training stops; the "
                 "best epoch's weights are kept (0: never stop early)", None),
    "validation_fraction": (float, 0.1, "share of the training sentences held out for validation "
                            "when no --validation file is given (0: no validation, the last "
                            "epoch's weights are kept)", None),
}
AS_IN_FINETUNE = {
    "format": FORMAT,
    **{name: (kind, "", text.split(" (empty")[0] + " (empty: as in finetune)", choices)
       for name, (kind, _, text, choices) in COLUMNS.items()},
}
EVALUATE = {
    "data": (str, None, f"labelled sentences: {TAGGED_FILE}", None),
    **AS_IN_FINETUNE,
    "output": (str, "", "JSON file for the results (empty: RUN/evaluation.json)", None),
    "batch_size": (int, 64, "sentences per batch", None),
}
PREDICT = {
    "input": (str, None, "sentences to tag: a CoNLL-U or CoNLL file (its words; tags, if any, "
              "are ignored), or a text file (.txt) of raw sentences, one per line", None),
    "format": (str, "", "conllu, conll or text (empty: from the extension; .txt is text)",
               ("", "conllu", "conll", "text")),
    "word_column": AS_IN_FINETUNE["word_column"],
    "output": (str, "", "JSONL file, one line per sentence: its words, tags and, for IOB2/IOBES "
               "tags, entities (empty: stdout)", None),
    "batch_size": (int, 64, "sentences per batch", None),
}


@register_task("tagging")
class Tagging(Task):
    """A tag per word of each sentence, from a CoNLL-U or CoNLL file's columns."""

    kind = "tagger"
    help = "a tag per word (part of speech, named entities) from CoNLL-U or CoNLL/IOB2 files"
    finetune_options = FINETUNE
    evaluate_options = EVALUATE
    predict_options = PREDICT
    # Settings whose 0 means "choose for me".
    may_be_zero = ("steps", "sequence_length", "learning_rate", "patience")

    def check(self, command, settings):
        formats = {}
        for name in ("train", "validation", "test", "data", "input"):
            path = settings.get(name)
            if path:
                if not os.path.isfile(path):
                    raise ConfigError(f"`{name}` {path!r} is not a file.")
                formats[name] = _format(name, path, settings["format"],
                                        PREDICT_EXTENSIONS if name == "input" else EXTENSIONS)
        if command == "finetune":
            _check_finetune(settings, formats)
        elif command == "evaluate":
            _columns(settings, formats["data"])  # those given; the others are the run's
        elif formats["input"] != "text":
            _columns(settings, "conll")  # the word column

    def finetune(self, settings):
        return _finetune(settings)

    def evaluate(self, settings):
        return _evaluate(settings)

    def predict(self, settings):
        return _predict(settings)

    def export(self, model, run, config, settings):
        # The model carries its preprocessor and tag names.
        return export_lib.export_tagger(model, settings["output"], version=settings["version"])


def _format(name, path, given, extensions):
    """The format of the file `path` (setting `name`): `given`, else from its extension."""
    if given:
        return given
    stem = path[:-3] if path.lower().endswith(".gz") else path
    extension = os.path.splitext(stem)[1].lower()
    if extension not in extensions:
        known = ", ".join(sorted(extensions))
        raise ConfigError(f"`{name}` {path!r}: its extension does not tell the format ({known}, "
                          "optionally .gz); give --format.")
    return extensions[extension]


def _columns(settings, file_format):
    """`(tag_column, word_column)` of `settings` as the readers take them, for files of
    `file_format` (conllu or conll); refused with a `ConfigError` when they cannot be."""
    tag, word = settings.get("tag_column", ""), settings.get("word_column", "")
    try:
        word = int(word) if word else 0
    except ValueError:
        raise ConfigError(f"`word_column` must be a column index (0, 1, ...), got {word!r}.") from None
    if file_format == "conllu":
        column = (tag or "upos").lower()
        if _is_int(column):
            column = int(column)
            if not 2 <= column < len(CONLLU_COLUMNS):
                raise ConfigError(f"`tag_column` {tag} is not a tag column of CoNLL-U (2-9).")
        elif column not in CONLLU_COLUMNS[2:]:
            raise ConfigError(f"`tag_column` {tag!r} is not a CoNLL-U column: one of "
                              f"{', '.join(CONLLU_COLUMNS[2:])} (or its index 2-9).")
        return column, word
    if tag and not _is_int(tag):
        raise ConfigError(f"`tag_column` must be a column index for a CoNLL file (0, 1, ..., -1 "
                          f"for the last), got {tag!r}; column names are CoNLL-U's.")
    return (int(tag) if tag else -1), word


def _is_int(text):
    return text.lstrip("-").isdigit()


def _check_finetune(settings, formats):
    for name in ("validation", "test"):
        if name in formats and formats[name] != formats["train"]:
            raise ConfigError(f"`{name}` {settings[name]!r} is a {formats[name]} file but `train` "
                              f"{settings['train']!r} is {formats['train']}: the tag and word "
                              "columns are read alike in all three, give files of one format.")
    # Resolved, so that config.json says which columns were read.
    settings["tag_column"], settings["word_column"] = (
        str(value) for value in _columns(settings, formats["train"]))
    model = settings["model"]
    if 0 < settings["sequence_length"] < 3 and model not in WORD_MODELS:  # theirs counts words
        raise ConfigError(f"`sequence_length` must be at least 3 ([CLS], a piece, [SEP]), got "
                          f"{settings['sequence_length']}.")
    if model == "elmo" and not settings["pretrained"]:
        raise ConfigError("--model elmo needs --pretrained RUN, a `tfnlp pretrain elmo` output "
                          "directory (its biLM); --model bilstm is the same tagger without ELMo.")
    for name, why in NOT_FOR.get(model, {}).items():
        if settings[name]:
            raise ConfigError(f"`{name}` is for --model bert; --model {model} {why}.")
    if model in WORD_MODELS:
        return
    if settings["pretrained"]:
        for name in ("vocabulary", "architecture"):
            if settings[name]:
                raise ConfigError(f"`{name}` is for a BERT encoder from scratch; --pretrained "
                                  "brings its own.")
        check_pretrained_length(settings)
    elif settings["vocabulary"]:
        check_wordpiece_file(settings["vocabulary"])


def _read(name, path, tag_column, word_column, file_format, tag_names=None):
    """`read_conllu` or `read_conll` of a file (`tag_column` None: words alone); its errors end
    the command."""
    try:
        if file_format == "conllu":
            return data.read_conllu(path, tag_column=tag_column, tag_names=tag_names)
        return data.read_conll(path, word_column=word_column, tag_column=tag_column,
                               tag_names=tag_names)
    except (ValueError, OSError) as error:
        _runs.fail(f"`{name}`: {error}")


def _read_labelled(settings, name, tag_names=None):
    """The tagged file of the setting `name`, read as `settings` say."""
    path = settings[name]
    file_format = _format(name, path, settings["format"], EXTENSIONS)
    tag_column, word_column = _columns(settings, file_format)
    return _read(name, path, tag_column, word_column, file_format, tag_names)


def _finetune_data(settings):
    """`(train, validation or None, test or None)` `TaggedData`; every file read before training."""
    train = _read_labelled(settings, "train")
    names = train.tag_names
    validation = None
    if settings["validation"]:
        validation = _read_labelled(settings, "validation", names)
    elif settings["validation_fraction"]:  # held out from the training file, at random
        order = np.random.default_rng(settings["seed"]).permutation(len(train))
        count = max(1, round(settings["validation_fraction"] * len(train)))
        if count >= len(train):
            _runs.fail(f"`train` {settings['train']!r} has {len(train)} sentences: too few to hold "
                       "out a validation split; give --validation (or --validation-fraction 0).")
        validation, train = _subset(train, order[:count]), _subset(train, order[count:])
    test = _read_labelled(settings, "test", names) if settings["test"] else None
    return train, validation, test


def _subset(tagged, indices):
    indices = sorted(int(i) for i in indices)
    return data.TaggedData([tagged.words[i] for i in indices], [tagged.tags[i] for i in indices],
                           tagged.tag_names, tagged.path, [tagged.sentence_ids[i] for i in indices],
                           [tagged.texts[i] for i in indices])


def _length(settings, tokenizer, train, longest):
    """`sequence_length`: as set, or the longest training sentence's length (rounded up)."""
    suggested = data.suggest_sequence_length(
        tokenizer, [" ".join(words) for words in train.words], percentile=SEQUENCE_PERCENTILE,
        max_length=longest)
    shown = ", ".join(f"{p}th {n}" for p, n in suggested["percentiles"].items())
    print(f"training sentences' lengths in tokens ([CLS] and [SEP] included): {shown}", flush=True)
    length = settings["sequence_length"] or suggested["sequence_length"]
    print(f"sequence_length {length}", flush=True)
    return length


def _batches(words, tagged, batch_size, seed=None):
    """`TaggedData` as model-input batches (`(inputs, tag ids)`); repeated and shuffled with a
    `seed`, else once in file order."""
    sentences = tagged.as_dataset()
    if seed is not None:
        sentences = sentences.shuffle(len(tagged), seed=seed, reshuffle_each_iteration=True).repeat()
    return words.batches(sentences, batch_size=batch_size, shuffle=False,
                         mode="fit" if seed is not None else "evaluate", count=None, batched=False)


def _finetune(settings):
    train, validation, test = _finetune_data(settings)  # bad files fail before anything starts
    strategy, paths = _runs.setup(settings)
    pretrained = settings["pretrained"]
    bilm = None
    if settings["model"] in WORD_MODELS:
        if pretrained:
            bilm = _runs.pretrained_elmo(pretrained, settings["dtype"])
        # Words seen once read as <UNK>, so that <UNK>'s vector is trained for the unseen words
        # of new text.
        vocabulary = data.build_tagger_vocabulary(train.words, min_count=2)
        length = settings["sequence_length"] or -(-max(len(w) for w in train.words) // 8) * 8
        print(f"max_words {length} (the longest training sentence: "
              f"{max(len(w) for w in train.words)} words); {len(vocabulary)} words in the vocabulary",
              flush=True)
        preprocessor = words = data.WordTaggerPreprocessor(
            vocabulary, train.tag_names, max_words=length,
            max_characters=bilm.max_characters if bilm is not None else 50)
    else:
        if pretrained:
            vocabulary, tokenizer, longest = _runs.pretrained_bert(pretrained)
        else:
            vocabulary = _runs.fine_tuning_vocabulary(settings, paths,
                                                      [" ".join(words) for words in train.words])
            tokenizer, longest = data.WordPieceTokenizer(vocabulary), 512
        length = _length(settings, tokenizer, train, longest)
        preprocessor = data.BertPreprocessor(tokenizer, length)
        words = data.TaggerPreprocessor(preprocessor, train.tag_names)
    batch_size = settings["batch_size"]
    per_epoch = max(1, len(train) // batch_size)
    steps = settings["steps"] or settings["epochs"] * per_epoch
    held = f"{len(validation)} validation" if validation is not None else "no validation"
    print(f"{len(train)} training sentences ({train.num_words} words), {held} sentences, "
          f"{len(train.tag_names)} tags; {steps} steps of {batch_size} "
          f"({steps / per_epoch:.1f} epochs)", flush=True)
    dataset = _batches(words, train, batch_size, seed=settings["seed"])
    with strategy.scope():
        model = _tagger(settings, vocabulary, preprocessor, train.tag_names, bilm)
        learning_rate = settings["learning_rate"] or (
            1e-3 if settings["model"] in WORD_MODELS else _runs.fine_tuning_learning_rate(
                model.hidden_dim if settings["model"] == "transformer" else model.backbone.hidden_dim))
        print(f"peak learning rate {learning_rate:g}", flush=True)
        schedule = training.LinearWarmupLinearDecay(learning_rate, max(1, steps // 10), steps)
        model.compile(optimizer=training.bert_adamw(schedule), jit_compile=settings["jit_compile"])
    if training.is_chief(strategy):
        _runs.write_lines(os.path.join(settings["output"], "vocab.txt"), vocabulary)
    callbacks = []
    if validation is not None:
        # Entity tags: most words are "O", so a tagger of "O" alone has a high accuracy that
        # a better one may not beat for epochs; the loss follows the entities.
        monitor, mode = ("loss", "min") if data.is_entity_tag_set(train.tag_names) else ("accuracy", "max")
        callbacks.append(training.ValidationEvaluation(
            _batches(words, validation, batch_size), per_epoch, monitor=monitor, mode=mode,
            patience=settings["patience"] or None, directory=os.path.join(settings["output"], "best"),
            restore_best=True, log_dir=paths["logs"],
        ))
    if isinstance(model, models.BertTokenClassifier):
        callbacks.append(_runs.attention_images(
            model.backbone, tokenizer, dict(settings, sequence_length=length), paths,
            " ".join(train.words[0])))
    history = _runs.fit(model, dataset, dict(settings, steps=steps), paths, callbacks)
    results = {
        "tag_names": train.tag_names,
        "entity_tags": data.is_entity_tag_set(train.tag_names),
        "train_sentences": len(train),
        "train_words": train.num_words,
        "validation": callbacks[0].best if validation is not None else None,
        "sequence_length": length,
    }
    if test is not None:
        results["test"] = _report_on(model, test, batch_size)
    if training.is_chief(strategy):
        model.save(paths["model"])
        with open(os.path.join(settings["output"], "results.json"), "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    _runs.save_config(paths, Tagging.kind, settings, strategy,
                      {"vocabulary": "vocab.txt", "tag_names": train.tag_names,
                       "format": _format("train", settings["train"], settings["format"], EXTENSIONS),
                       "sequence_length": length,
                       "test_accuracy": results.get("test", {}).get("token_accuracy")})
    if test is not None:
        print(f"test {_summary(results['test'])}; results: "
              f"{os.path.join(settings['output'], 'results.json')}", flush=True)
    _runs.report(history, paths)
    return 0


def _tagger(settings, vocabulary, preprocessor, tag_names, bilm=None):
    """The tagger of `--model`, under the strategy's scope: BERT (pretrained or not), a
    Transformer from scratch, or a BiLSTM over words (with ELMo's `bilm` or without)."""
    if settings["model"] in WORD_MODELS:
        return models.BiLSTMTokenClassifier(elmo=bilm, preprocessor=preprocessor, crf=settings["crf"])
    if settings["model"] == "transformer":
        return models.TransformerTokenClassifier(preprocessor=preprocessor, tag_names=tag_names,
                                                 num_segments=1, crf=settings["crf"])
    if settings["pretrained"]:
        backbone = _runs.pretrained_bert_backbone(settings["pretrained"], settings["dtype"])
    else:
        backbone = models.BertBackbone.from_architecture(
            settings["architecture"] or "bert_tiny", vocabulary_size=len(vocabulary),
            max_sequence_length=preprocessor.sequence_length)
    return models.BertTokenClassifier(backbone, tag_names=tag_names, preprocessor=preprocessor,
                                      crf=settings["crf"])


def _report_on(model, tagged, batch_size):
    """Token accuracy (a word past the sequence length counts as wrong) and, for entity tags,
    `metrics.entity_report` (such a word read as "O") of `model` on `TaggedData`."""
    # The count of words past the length goes to the report: not also the tagger's warning.
    logger = logging.getLogger(type(model).predict_tags.__module__)  # where predict_tags logs
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        predicted = model.predict_tags(tagged.words, batch_size=batch_size)
    finally:
        logger.setLevel(level)
    untagged = sum(tag is None for tags in predicted for tag in tags)
    correct = sum(p == t for tags, true in zip(predicted, tagged.tags, strict=True)
                  for p, t in zip(tags, true, strict=True))
    report = {
        "sentences": len(tagged),
        "words": tagged.num_words,
        "token_accuracy": correct / tagged.num_words,
        "words_past_sequence_length": untagged,
    }
    if data.is_entity_tag_set(model.tag_names):
        outside = [[tag or "O" for tag in tags] for tags in predicted]
        report["entities"] = metrics.entity_report(tagged.tags, outside)
    return report


def _summary(report):
    """One line of a `_report_on` report."""
    line = f"token accuracy {report['token_accuracy']:.4f}"
    if "entities" in report:
        micro = report["entities"]["micro"]
        line += (f", entity micro-F1 {micro['f1']:.4f} (P {micro['precision']:.4f}, "
                 f"R {micro['recall']:.4f}, {micro['support']} entities)")
    line += f" on {report['sentences']} sentences ({report['words']} words"
    if report["words_past_sequence_length"]:
        line += f", {report['words_past_sequence_length']} past the sequence length: untagged"
    return line + ")"


def _trained_columns(settings, config, file_format):
    """`(tag_column, word_column)` of evaluate/predict: as given, else as in finetune (for a
    file of the training format), else the format's defaults."""
    trained = config["settings"]
    same = file_format == config.get("format")
    columns = {name: settings.get(name) or (trained.get(name, "") if same else "")
               for name in ("tag_column", "word_column")}
    try:
        return _columns(columns, file_format)
    except ConfigError as error:
        _runs.fail(str(error))


def _evaluate(settings):
    model, config = _runs.load_fine_tuned(settings["run"], Tagging.kind)
    file_format = _format("data", settings["data"], settings["format"], EXTENSIONS)
    tag_column, word_column = _trained_columns(settings, config, file_format)
    tagged = _read("data", settings["data"], tag_column, word_column, file_format, model.tag_names)
    results = _report_on(model, tagged, settings["batch_size"])
    output = settings["output"] or os.path.join(settings["run"], "evaluation.json")
    with open(output, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print(f"{_summary(results)}; results: {output}")
    return 0


def _predict(settings):
    model, config = _runs.load_fine_tuned(settings["run"], Tagging.kind)
    path = settings["input"]
    file_format = _format("input", path, settings["format"], PREDICT_EXTENSIONS)
    if file_format == "text":  # BERT's words of each text, where they are in it
        texts = _read_texts(path)
        tags = model.predict_tags(texts, batch_size=settings["batch_size"])
        found = model._task_preprocessor().words_of(tf.constant(texts))
        sentences = [_Sentence([text[s:e] for s, e in zip(starts, ends, strict=True)], text,
                               starts, ends)
                     for text, starts, ends in zip(texts, found["char_starts"].to_list(),
                                                   found["char_ends"].to_list(), strict=True)]
    else:
        _, word_column = _trained_columns(settings, config, file_format)
        words = _read("input", path, None, word_column, file_format).words
        tags = model.predict_tags(words, batch_size=settings["batch_size"])
        sentences = [_Sentence(sentence) for sentence in words]
    entities = data.is_entity_tag_set(model.tag_names)
    lines = []
    for sentence, sentence_tags in zip(sentences, tags, strict=True):
        line = {} if sentence.text is None else {"text": sentence.text}
        line.update(words=sentence.words, tags=sentence_tags)
        if entities:  # an untagged word (past the sequence length) is in none
            spans = metrics.entity_spans([tag or "O" for tag in sentence_tags])
            line["entities"] = [sentence.entity(*span) for span in spans]
        lines.append(json.dumps(line, ensure_ascii=False))
    if settings["output"]:
        _runs.write_lines(settings["output"], lines)
        print(f"{len(lines)} tagged sentences written to {settings['output']}")
    else:
        print("\n".join(lines))
    return 0


class _Sentence(typing.NamedTuple):
    """A sentence `predict` tags: its words, and for a raw text the text and the words' offsets."""

    words: list
    text: str | None = None
    starts: list | None = None  # each word's first character in `text`
    ends: list | None = None  # each word's end (exclusive)

    def entity(self, label, first, last):
        """The entity of the words `[first, last)`: its text (as written in the raw text, with
        its character offsets; else the words joined by a space)."""
        entity = {"label": label, "word_start": first, "word_end": last}
        if self.text is None:
            return {**entity, "text": " ".join(self.words[first:last])}
        start, end = self.starts[first], self.ends[last - 1]
        return {**entity, "text": self.text[start:end], "start": start, "end": end}


def _read_texts(path):
    """The lines of a UTF-8 text file, raw sentences (trailing empty lines dropped)."""
    try:
        with open(path, encoding="utf-8") as f:
            texts = [line.rstrip("\r\n") for line in f]
    except UnicodeDecodeError as error:
        _runs.fail(f"`input` {path!r} is not UTF-8 text: {error}.")
    while texts and not texts[-1]:
        texts.pop()
    if not texts:
        _runs.fail(f"`input` {path!r} holds no text.")
    return texts
