"""What the `tfnlp` commands do, once `tfnlp.cli` has validated their settings."""

import json
import os

import keras
import numpy as np
import tensorflow as tf

from tfnlp import data, datasets, metrics, models, training
from tfnlp import export as export_lib
from tfnlp.data._tensors import dense_row

BUNDLED = ("en_novels", "zh_poems")


LABELLED_EXTENSIONS = (".tsv", ".csv", ".jsonl", ".json")


def _fail(message):
    raise SystemExit(f"tfnlp: error: {message}")


def read_corpus(corpus, text_column="text"):
    """Documents (lists of sentences) of a bundled corpus, a text file, or a TSV/CSV/JSONL column."""
    if corpus in BUNDLED:
        return datasets.read_documents(corpus, "train")
    if corpus == "fine_food_reviews":
        return [[text] for text, _ in datasets.read_fine_food_reviews("train")]
    if corpus.lower().endswith(LABELLED_EXTENSIONS):  # one document per row
        try:
            return [[text.strip()] for text in data.read_texts(corpus, text_column)]
        except ValueError as error:
            _fail(f"`corpus`: {error}")
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
        raise SystemExit(f"tfnlp: error: `corpus` {corpus!r} holds no text.")
    return documents


def _write_lines(path, lines):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.rstrip("\n")]


def vocab(settings):
    documents = read_corpus(settings["corpus"], settings["text_column"])
    sentences = [s for d in documents for s in d]
    if settings["kind"] == "words":
        vocabulary = data.build_word_vocabulary(sentences, settings["size"])
    else:
        vocabulary = data.learn_wordpiece_vocabulary(sentences, settings["size"], progress=False)
    _write_lines(settings["output"], vocabulary)
    print(f"{len(vocabulary)} tokens written to {settings['output']}")
    return 0


def _setup(settings):
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


def _fit(model, dataset, settings, paths, callbacks=()):
    profile = tuple(int(p) for p in settings["profile"].split(":")) if settings["profile"] else None
    return training.fit(
        model, dataset, steps=settings["steps"], checkpoint_dir=paths["checkpoints"],
        checkpoint_every=settings["checkpoint_every"], log_dir=paths["logs"],
        log_every=settings["log_every"], callbacks=list(callbacks), verbose=1,
        histogram_every=settings["histogram_every"] or None, profile_steps=profile,
    )


def _save_config(paths, kind, settings, strategy, extra=None):
    if training.is_chief(strategy):
        with open(paths["config"], "w", encoding="utf-8") as f:
            json.dump({"kind": kind, "settings": settings, "normalization": "bert", **(extra or {})},
                      f, indent=2)


def _tokenizer(vocabulary, config=None):
    """A WordPieceTokenizer as the run that wrote `config` had it (before the
    key existed, tfnlp's tokenizer folded compatibility characters: "nfkc")."""
    normalization = "bert" if config is None else config.get("normalization", "nfkc")
    return data.WordPieceTokenizer(vocabulary, normalization=normalization)


def pretrain(model_name, settings):
    strategy, paths = _setup(settings)
    documents = read_corpus(settings["corpus"], settings["text_column"])
    output = settings["output"]
    if model_name == "elmo":
        sentences = [s for d in documents for s in d]
        if settings["vocabulary"]:
            vocabulary = _read_lines(settings["vocabulary"])
        else:
            vocabulary = data.build_word_vocabulary(sentences, settings["vocabulary_size"], min_count=1)
        vocabulary_path = os.path.join(output, "words.txt")
        dataset = data.elmo_dataset(
            tf.data.Dataset.from_tensor_slices(sentences).repeat(), vocabulary,
            sequence_length=settings["sequence_length"], max_characters=settings["max_characters"],
            batch_size=settings["batch_size"], shuffle_buffer=min(len(sentences), 10_000),
            seed=settings["seed"],
        ).map(models.elmo_batch)
        num_sampled = models.ELMO_PRESETS[settings["preset"]]["num_sampled"]
        if num_sampled >= len(vocabulary):  # a small corpus: the full softmax is cheap anyway
            print(f"{len(vocabulary)} output words: full softmax instead of {num_sampled} samples")
            num_sampled = None
        with strategy.scope():
            model = models.ELMoBiLM.from_architecture(
                settings["preset"], len(vocabulary), max_characters=settings["max_characters"],
                seed=settings["seed"], num_sampled=num_sampled,
            )
            model.compile(
                optimizer=keras.optimizers.Adam(settings["learning_rate"], global_clipnorm=10.0),
                jit_compile=settings["jit_compile"],
            )
        embedding_layer, projector_vocabulary = model.word_softmax.kernel, vocabulary
    else:
        # Held out first, so that neither the vocabulary nor the model sees it.
        documents, held_out = _held_out(documents, settings.get("validation_fraction", 0), settings["seed"])
        if settings["vocabulary"]:
            vocabulary = _read_lines(settings["vocabulary"])
        else:
            sentences = [s for d in documents for s in d]
            vocabulary = data.learn_wordpiece_vocabulary(
                sentences, settings["vocabulary_size"], progress=False
            )
        vocabulary_path = os.path.join(output, "vocab.txt")
        tokenizer = data.WordPieceTokenizer(vocabulary)
        if held_out and training.is_chief(strategy):
            rate = data.unknown_rate(tokenizer, [s for d in held_out for s in d])
            print(f"Vocabulary: {len(vocabulary):,} tokens; [UNK] on held-out text: "
                  f"{rate['unknown_tokens']:.2%} of tokens, in {rate['texts_with_unknown']:.1%} of sentences")
        next_sentence = settings.get("objectives", "mlm,nsp") == "mlm,nsp"  # UniLM: n/a
        common = dict(sequence_length=settings["sequence_length"],
                      max_predictions_per_seq=settings["max_predictions"],
                      batch_size=settings["batch_size"], seed=settings["seed"], shuffle_buffer=1000)
        if model_name == "bert":
            common["next_sentence"] = next_sentence
        schedule = training.LinearWarmupLinearDecay(
            settings["learning_rate"], max(1, settings["steps"] // 10), settings["steps"]
        )
        pipeline, batch, backbone_class, model_class = {
            "bert": (data.bert_pretraining_dataset, models.pretraining_batch, models.BertBackbone,
                     models.BertPretrainer),
            "unilm": (data.unilm_pretraining_dataset, models.unilm_batch, models.UniLMBackbone,
                      models.UniLM),
        }[model_name]
        once = _documents_dataset(documents)
        # The pairs come from consecutive sentence chunks of one document: a
        # corpus of one-sentence documents (fine_food_reviews: one review
        # each) gives none, and the repeated pipeline would wait forever.
        if not list(pipeline(once, tokenizer, **common).take(1)):
            hint = (" (or pretrain with --objectives mlm, which packs consecutive texts and needs "
                    "no sentence pairs)") if model_name == "bert" else ""
            _fail(
                f"`corpus` {settings['corpus']!r} gives no {model_name} training batch of "
                f"{settings['batch_size']}: pretraining pairs consecutive sentences of a document, "
                "so it needs documents of several sentences (a blank line separates documents in "
                f"a text file), enough for at least one batch{hint}." if next_sentence else
                f"`corpus` {settings['corpus']!r} gives no {model_name} training batch of "
                f"{settings['batch_size']}: it holds too little text for one batch."
            )
        dataset = pipeline(once.repeat(), tokenizer, **common).map(batch)
        with strategy.scope():
            backbone = backbone_class.from_architecture(
                settings["preset"], vocabulary_size=len(vocabulary),
                max_sequence_length=settings["sequence_length"],
            )
            # The model keeps its tokenizer (and lengths), so that the saved
            # model.keras takes text: `fit(documents)`, UniLM's `generate(texts)`.
            length = settings["sequence_length"]
            if model_name == "bert":
                model = model_class(backbone, next_sentence=next_sentence, tokenizer=tokenizer,
                                    sequence_length=length,
                                    max_predictions_per_seq=settings["max_predictions"])
            else:  # source and generated text share the position table
                model = model_class(backbone, tokenizer=tokenizer, source_length=length // 2,
                                    max_length=length - length // 2)
            model.compile(optimizer=training.bert_adamw(schedule), jit_compile=settings["jit_compile"])
        embedding_layer, projector_vocabulary = backbone.token_embedding, vocabulary
    if training.is_chief(strategy):
        _write_lines(vocabulary_path, vocabulary)
    callbacks = []
    if model_name != "elmo":  # attention images (ELMo has no attention)
        callbacks.append(_attention_images(backbone, tokenizer, settings, paths, documents[0][0]))
    if model_name == "bert" and held_out:
        # Batches of at most 8, so that a small held-out share still gives some.
        held = dict(common, shuffle_buffer=0, batch_size=min(8, settings["batch_size"]))
        validation = pipeline(_documents_dataset(held_out), tokenizer, **held).map(batch)
        validation = validation.take(VALIDATION_BATCHES).cache()
        if list(validation.take(1)):
            print(f"held out {len(held_out)} of {len(held_out) + len(documents)} documents for "
                  "validation", flush=True)
            callbacks.append(training.ValidationEvaluation(
                validation, settings["validate_every"] or settings["checkpoint_every"],
                monitor="loss", mode="min", log_dir=paths["logs"],
            ))
        else:
            print(f"no validation: the {len(held_out)} held-out documents give no batch of "
                  f"{held['batch_size']} (raise --validation-fraction)", flush=True)
    history = _fit(model, dataset, settings, paths, callbacks)
    if training.is_chief(strategy):
        model.save(paths["model"])
        if model_name != "elmo":  # the encoder alone, for fine-tuning in Python
            backbone.save(os.path.join(output, "backbone.keras"))
        training.write_embedding_projector(
            os.path.join(paths["logs"], "projector"), embedding_layer, projector_vocabulary
        )
    _save_config(paths, model_name, settings, strategy, {"vocabulary": os.path.basename(vocabulary_path)})
    _report(history, paths)
    return 0


VALIDATION_BATCHES = 50  # at most, of held-out pretraining data (cached: the same masks each time)


def _documents_dataset(documents):
    """Documents (lists of sentences) as a dataset of 1-D `tf.string` tensors."""
    return tf.data.Dataset.from_tensor_slices(tf.ragged.constant(documents, tf.string)).map(dense_row)


def _held_out(documents, fraction, seed):
    """`(training documents, held-out documents)`: `fraction` of them, at least 1, chosen at random."""
    if not fraction or len(documents) < 2:
        return documents, []
    order = np.random.default_rng(seed).permutation(len(documents))
    count = min(len(documents) - 1, max(1, round(fraction * len(documents))))
    held = set(order[:count].tolist())
    return ([d for i, d in enumerate(documents) if i not in held],
            [d for i, d in enumerate(documents) if i in held])


def _attention_images(backbone, tokenizer, settings, paths, probe):
    """Every layer's attention over a probe sentence, at each checkpoint."""
    return training.AttentionImages(
        backbone, data.BertPreprocessor(tokenizer, settings["sequence_length"]), probe,
        paths["logs"], every_n_steps=settings["checkpoint_every"],
    )


def _report(history, paths):
    losses = history.get("loss", [])
    last = f"{losses[-1]:.4f}" if losses else "n/a (already trained)"
    print(f"{history['steps']} steps done; last loss {last}; model: {paths['model']}; "
          f"TensorBoard: tensorboard --logdir {paths['logs']}")


def _pretrained(directory, kinds):
    with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:  # checked by tfnlp.cli
        config = json.load(f)
    if config.get("kind") not in kinds:
        raise SystemExit(
            f"tfnlp: error: {directory!r} holds a {config.get('kind')!r} model; expected one of {kinds}."
        )
    return config


def _labelled(settings, name, path, label_names=None):
    """`data.read_labelled` of a `--train`/`--validation`/`--test` file; its errors end the command."""
    pair = settings["text_pair_column"] or None
    try:
        return data.read_labelled(path, settings["text_column"], settings["label_column"],
                                  text_pair_column=pair, label_names=label_names)
    except (ValueError, OSError) as error:
        _fail(f"`{name}`: {error}")


def _finetune_data(settings):
    """`(train, validation, test or None)` `LabelledData`: files, or the bundled reviews."""
    if settings["train"] == "fine_food_reviews":
        labels = list(datasets.FINE_FOOD_LABELS)

        def split(name):
            examples = datasets.read_fine_food_reviews(name)
            return data.LabelledData([t for t, _ in examples], None, [y for _, y in examples], labels,
                                     f"fine_food_reviews:{name}")

        train, validation, test = split("train"), split("validation"), split("test")
        if settings["validation"]:
            validation = _labelled(settings, "validation", settings["validation"], labels)
        if settings["test"]:
            test = _labelled(settings, "test", settings["test"], labels)
        return train, validation, test
    train = _labelled(settings, "train", settings["train"])
    names = train.label_names
    if settings["validation"]:
        validation = _labelled(settings, "validation", settings["validation"], names)
    else:  # held out from the training file, at random
        order = np.random.default_rng(settings["seed"]).permutation(len(train))
        count = max(1, round(settings["validation_fraction"] * len(train)))
        if count >= len(train):
            _fail(f"`train` {settings['train']!r} has {len(train)} examples: too few to hold out "
                  "a validation split; give --validation.")
        validation, train = _subset(train, order[:count]), _subset(train, order[count:])
    test = _labelled(settings, "test", settings["test"], names) if settings["test"] else None
    return train, validation, test


def _subset(examples, indices):
    indices = sorted(int(i) for i in indices)
    pairs = examples.text_pairs
    return data.LabelledData(
        [examples.texts[i] for i in indices], None if pairs is None else [pairs[i] for i in indices],
        examples.labels[indices], examples.label_names, examples.path,
    )


def _lengths(settings, tokenizer, train, longest):
    """`(sequence_length, bucket_boundaries)`: as set, or from the training examples' lengths."""
    suggested = data.suggest_sequence_length(tokenizer, train.texts, train.text_pairs,
                                             max_length=longest)
    shown = ", ".join(f"{p}th {n}" for p, n in suggested["percentiles"].items())
    print(f"training examples' lengths in tokens ([CLS] and [SEP] included): {shown}", flush=True)
    length = settings["sequence_length"] or suggested["sequence_length"]
    buckets = settings["bucket_boundaries"]
    if buckets == "auto":
        buckets = [b for b in suggested["bucket_boundaries"] if b < length]
    elif buckets == "none":
        buckets = []
    elif any(b >= length for b in buckets):
        _fail(f"`bucket_boundaries` {buckets} must all be below `sequence_length` ({length}).")
    print(f"sequence_length {length}, bucket boundaries {buckets or 'none'}", flush=True)
    return length, buckets


def finetune(settings):
    train, validation, test = _finetune_data(settings)  # bad files fail before anything starts
    strategy, paths = _setup(settings)
    bert = settings["model"] == "bert"
    if bert:
        pretrained = _pretrained(settings["pretrained"], ("bert",))
        vocabulary = _read_lines(os.path.join(settings["pretrained"], pretrained["vocabulary"]))
        longest = pretrained["settings"]["sequence_length"]
        tokenizer = _tokenizer(vocabulary, pretrained)
    else:
        learned = os.path.join(settings["output"], "vocab.txt")
        if settings["vocabulary"]:
            vocabulary = _read_lines(settings["vocabulary"])
        elif os.path.exists(learned) and tf.train.latest_checkpoint(paths["checkpoints"]):
            vocabulary = _read_lines(learned)  # a resumed run: the checkpoint's own vocabulary
        else:
            vocabulary = data.learn_wordpiece_vocabulary(
                train.texts + (train.text_pairs or []), settings["vocabulary_size"], progress=False
            )
        longest = 512
        tokenizer = data.WordPieceTokenizer(vocabulary)
    length, buckets = _lengths(settings, tokenizer, train, longest)
    preprocessor = data.BertPreprocessor(tokenizer, length)
    batch_size = settings["batch_size"]
    per_epoch = max(1, len(train) // batch_size)
    steps = settings["steps"] or settings["epochs"] * per_epoch
    print(f"{len(train)} training, {len(validation)} validation examples, "
          f"{len(train.label_names)} classes; {steps} steps of {batch_size} "
          f"({steps / per_epoch:.1f} epochs)", flush=True)
    dataset = data.classification_dataset(
        train.as_dataset(), preprocessor, batch_size, shuffle_buffer=len(train),
        seed=settings["seed"], bucket_boundaries=buckets or None,
    ).repeat()
    held_out = data.classification_dataset(
        validation.as_dataset(), preprocessor, batch_size, drop_remainder=False,
        bucket_boundaries=buckets or None,
    )
    with strategy.scope():
        if bert:
            pretrainer = keras.saving.load_model(
                os.path.join(settings["pretrained"], "model.keras"), safe_mode=True, compile=False
            )
            # The .keras file keeps the dtype policy it was pretrained with;
            # `--dtype` applies to the fine-tuned model, so the backbone is
            # rebuilt in it and given the pretrained weights.
            config = dict(pretrainer.backbone.get_config(), dtype=settings["dtype"])
            backbone = models.BertBackbone.from_config(config)
            backbone.set_weights(pretrainer.backbone.get_weights())
            model = models.BertClassifier(backbone, preprocessor=preprocessor, labels=train.label_names)
        else:
            model = models.TransformerClassifier(preprocessor=preprocessor, labels=train.label_names,
                                                 num_segments=2 if train.text_pairs else 1)
        learning_rate = settings["learning_rate"] or _default_learning_rate(model)
        print(f"peak learning rate {learning_rate:g}", flush=True)
        schedule = training.LinearWarmupLinearDecay(learning_rate, max(1, steps // 10), steps)
        model.compile(optimizer=training.bert_adamw(schedule), jit_compile=settings["jit_compile"])
    if training.is_chief(strategy):
        _write_lines(os.path.join(settings["output"], "vocab.txt"), vocabulary)
    callbacks = [training.ValidationEvaluation(
        held_out, per_epoch, monitor="accuracy", mode="max", patience=settings["patience"] or None,
        directory=os.path.join(settings["output"], "best"), restore_best=True, log_dir=paths["logs"],
    )]
    if bert:
        probe = train.texts[0]
        callbacks.append(_attention_images(backbone, tokenizer, dict(settings, sequence_length=length),
                                           paths, probe))
    history = _fit(model, dataset, dict(settings, steps=steps), paths, callbacks)
    results = {
        "labels": train.label_names,
        "train_examples": len(train),
        "validation": callbacks[0].best,
        "sequence_length": length,
        "bucket_boundaries": buckets,
    }
    if test is not None:
        results["test"] = _report_on(model, test, batch_size)
        results["test"]["majority_class_accuracy"] = _majority(train, test)
    if training.is_chief(strategy):
        model.save(paths["model"])
        with open(os.path.join(settings["output"], "results.json"), "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    _save_config(paths, "classifier", settings, strategy,
                 {"vocabulary": "vocab.txt", "labels": train.label_names,
                  "sequence_length": length, "bucket_boundaries": buckets,
                  "test_accuracy": results.get("test", {}).get("accuracy")})
    if test is not None:
        figures = results["test"]
        print(f"test accuracy {figures['accuracy']:.4f}, macro-F1 {figures['macro_f1']:.4f} on "
              f"{figures['examples']} held-out examples (majority class "
              f"{figures['majority_class_accuracy']:.4f}); results: "
              f"{os.path.join(settings['output'], 'results.json')}", flush=True)
    _report(history, paths)
    return 0


def _default_learning_rate(model):
    """The fine-tuning learning rate for `--learning-rate 0`: smaller for wider models.

    BERT-base and larger fine-tune at 2e-5 to 5e-5 (Devlin et al.); the small
    BERTs (Turc et al.) and a Transformer from scratch need far more in the few
    thousand steps of a typical fine-tuning run (`tests/test_own_data.py`
    trains BERT-tiny: 1e-4 had not left chance level after 3 epochs there,
    1e-3 reached the top).
    """
    if isinstance(model, models.TransformerClassifier):
        return 1e-3
    hidden = model.backbone.hidden_dim
    return 1e-3 if hidden <= 256 else 3e-4 if hidden <= 512 else 5e-5


def _majority(train, test):
    """Test accuracy of always predicting the training file's most frequent class."""
    majority = int(np.bincount(train.labels, minlength=len(train.label_names)).argmax())
    return float(np.mean(test.labels == majority))


def _report_on(model, examples, batch_size):
    """`metrics.classification_report` of `model` on `LabelledData`."""
    scores = model.predict(examples.x, batch_size=batch_size, verbose=0)
    return metrics.classification_report(examples.labels, np.argmax(scores, axis=-1),
                                         examples.label_names)


def _classifier(directory):
    """The fine-tuned classifier of a `tfnlp finetune` output directory, and its config."""
    config = _pretrained(directory, ("classifier",))
    model = keras.saving.load_model(os.path.join(directory, "model.keras"), safe_mode=True,
                                    compile=False)
    if getattr(model, "preprocessor", None) is None:
        _fail(f"`model` {directory!r} was fine-tuned by an older tfnlp (its model has no "
              "preprocessor); fine-tune it again.")
    return model, config


def _columns(settings, config):
    """The column settings of evaluate/predict: as given, else as in finetune."""
    trained = config["settings"]
    return {name: settings.get(name) or trained.get(name, "")
            for name in ("text_column", "text_pair_column", "label_column")}


def evaluate(settings):
    model, config = _classifier(settings["model"])
    columns = _columns(settings, config)
    examples = _labelled(columns, "data", settings["data"], model.labels)
    results = _report_on(model, examples, settings["batch_size"])
    output = settings["output"] or os.path.join(settings["model"], "evaluation.json")
    with open(output, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    print(f"accuracy {results['accuracy']:.4f}, macro-F1 {results['macro_f1']:.4f} on "
          f"{results['examples']} examples; results: {output}")
    return 0


def predict(settings):
    model, config = _classifier(settings["model"])
    columns = _columns(settings, config)
    path = settings["input"]
    if path.lower().endswith(LABELLED_EXTENSIONS):
        try:
            texts = data.read_texts(path, columns["text_column"], columns["text_pair_column"] or None)
        except (ValueError, OSError) as error:
            _fail(f"`input`: {error}")
    elif columns["text_pair_column"]:
        _fail(f"`input` {path!r}: this classifier reads text pairs (column "
              f"{columns['text_pair_column']!r}); give a TSV, CSV or JSONL file with both columns.")
    else:  # one text per line
        try:
            with open(path, encoding="utf-8") as f:
                texts = [line.rstrip("\r\n") for line in f]
        except UnicodeDecodeError as error:
            _fail(f"`input` {path!r} is not UTF-8 text: {error}.")
        while texts and not texts[-1]:
            texts.pop()
        if not texts:
            _fail(f"`input` {path!r} holds no text.")
    scores = model.predict(texts, batch_size=settings["batch_size"], verbose=0)
    softmax = getattr(model, "activation", None) == "softmax"  # else logits
    probabilities = scores if softmax else _softmax(scores)
    ids = np.argmax(probabilities, axis=-1)
    lines = [f"{model.labels[i]}\t{p[i]:.4f}" for i, p in zip(ids, probabilities, strict=True)]
    if settings["output"]:
        _write_lines(settings["output"], lines)
        print(f"{len(lines)} predictions written to {settings['output']}")
    else:
        print("\n".join(lines))
    return 0


def _softmax(scores):
    scores = scores - scores.max(axis=-1, keepdims=True)
    exp = np.exp(scores)
    return exp / exp.sum(axis=-1, keepdims=True)


def export(settings):
    config = _pretrained(settings["model"], ("bert", "unilm", "elmo", "classifier"))
    model = keras.saving.load_model(os.path.join(settings["model"], "model.keras"), safe_mode=True,
                                    compile=False)
    kind, trained = config["kind"], config["settings"]
    if kind == "elmo":
        path = export_lib.export_elmo(model, settings["output"], max_tokens=trained["sequence_length"],
                                      version=settings["version"])
    else:
        vocabulary = _read_lines(os.path.join(settings["model"], config["vocabulary"]))
        tokenizer = _tokenizer(vocabulary, config)
        if kind == "classifier":  # the model carries its preprocessor and labels
            path = export_lib.export_classifier(model, settings["output"], version=settings["version"])
        elif kind == "bert":
            preprocessor = data.BertPreprocessor(tokenizer, trained["sequence_length"])
            path = export_lib.export_backbone(model.backbone, preprocessor, settings["output"],
                                              version=settings["version"])
        elif getattr(model, "tokenizer", None) is not None:  # unilm: its own tokenizer, lengths
            path = export_lib.export_seq2seq(model, settings["output"], version=settings["version"])
        else:  # unilm saved by an older tfnlp: source and generated text share the positions
            length = trained["sequence_length"]
            path = export_lib.export_seq2seq(model, tokenizer, tokenizer, settings["output"],
                                             source_length=length // 2,
                                             max_length=length - length // 2,
                                             version=settings["version"])
    print(f"SavedModel written to {path}")
    return 0


SAMPLING_OPTIONS = {"temperature": (np.float32, 1.0), "top_k": (np.int32, 0),
                    "top_p": (np.float32, 1.0), "seed": (np.int64, 0),
                    "max_new_tokens": (np.int32, None), "repetition_penalty": (np.float32, 1.0)}


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
    for name, (dtype, default) in SAMPLING_OPTIONS.items():
        value = options.get(name)
        if value is None:
            # The export's max_length: the width of its token_ids output.
            default = signature.structured_outputs["token_ids"].shape[1] if default is None else default
            value = default
        if name == "seed":
            if not 0 <= value < 2**63:
                raise SystemExit(f"tfnlp: error: `--seed` must be in [0, 2**63), got {value}.")
            inputs[name] = sampling.seeds(value, count)
            continue
        if np.issubdtype(dtype, np.integer) and not -2**31 <= value < 2**31:
            raise SystemExit(f"tfnlp: error: `--{name.replace('_', '-')}` is out of range: {value}.")
        inputs[name] = tf.constant(np.full(count, value, dtype))
    return inputs


def generate(saved_model, texts, options=None, continue_prompt=False):
    """Output lines of a SavedModel's `serving_default` on `texts`.

    With sampling `options` (any not None) or `continue_prompt`, a
    text-to-text export's `sample` or `continue` signature instead.
    """
    if not os.path.isdir(saved_model):
        raise SystemExit(f"tfnlp: error: `--saved-model` {saved_model!r} is not a directory.")
    if not tf.saved_model.contains_saved_model(saved_model):
        versions = sorted(
            d for d in os.listdir(saved_model)
            if tf.saved_model.contains_saved_model(os.path.join(saved_model, d))
        )
        hint = f"; it holds the version(s) {versions}: pass e.g. {os.path.join(saved_model, versions[-1])!r}" if versions else ""
        raise SystemExit(f"tfnlp: error: `--saved-model` {saved_model!r} is not a SavedModel{hint}.")
    import tensorflow_text  # noqa: F401  (registers the ops the SavedModels use)

    signatures = tf.saved_model.load(saved_model).signatures
    options = {k: v for k, v in (options or {}).items() if v is not None}
    name = "continue" if continue_prompt else "sample" if options else "serving_default"
    if name not in signatures:
        what = "--continue" if continue_prompt else "sampling options"
        raise SystemExit(
            f"tfnlp: error: {what} need a `{name}` signature, and {saved_model!r} has only "
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
        raise SystemExit(f"tfnlp: error: {named[0]}") from None
    for i in range(len(texts)):
        if "output_text" in outputs:
            yield outputs["output_text"][i].numpy().decode("utf-8", "replace")
        elif "label" in outputs:
            yield f"{outputs['label'][i].numpy().decode()}\t{float(np.max(outputs['probabilities'][i])):.4f}"
        else:
            shapes = {k: tuple(v.shape[1:]) for k, v in outputs.items()}
            yield json.dumps({"text": texts[i], "outputs": {k: list(s) for k, s in shapes.items()}})
