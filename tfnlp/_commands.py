"""What the `tfnlp` commands do, once `tfnlp.cli` has validated their settings."""

import json
import os

import keras
import numpy as np
import tensorflow as tf

from tfnlp import data, datasets, export as export_lib, models, training
from tfnlp.data._tensors import dense_row

BUNDLED = ("en_novels", "zh_poems")


def read_corpus(corpus):
    """Documents (lists of sentences) of a bundled corpus or a text file."""
    if corpus in BUNDLED:
        return datasets.read_documents(corpus, "train")
    if corpus == "fine_food_reviews":
        return [[text] for text, _ in datasets.read_fine_food_reviews("train")]
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
    documents = read_corpus(settings["corpus"])
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
            json.dump({"kind": kind, "settings": settings, **(extra or {})}, f, indent=2)


def pretrain(model_name, settings):
    strategy, paths = _setup(settings)
    documents = read_corpus(settings["corpus"])
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
            model = models.ELMoBiLM.from_preset(
                settings["preset"], len(vocabulary), max_characters=settings["max_characters"],
                seed=settings["seed"], num_sampled=num_sampled,
            )
            model.compile(
                optimizer=keras.optimizers.Adam(settings["learning_rate"], global_clipnorm=10.0),
                jit_compile=settings["jit_compile"],
            )
        embedding_layer, projector_vocabulary = model.word_softmax.kernel, vocabulary
    else:
        if settings["vocabulary"]:
            vocabulary = _read_lines(settings["vocabulary"])
        else:
            sentences = [s for d in documents for s in d]
            vocabulary = data.learn_wordpiece_vocabulary(
                sentences, settings["vocabulary_size"], progress=False
            )
        vocabulary_path = os.path.join(output, "vocab.txt")
        tokenizer = data.WordPieceTokenizer(vocabulary)
        # documents: 1-D tf.string
        once = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(documents, tf.string)).map(dense_row)
        common = dict(sequence_length=settings["sequence_length"],
                      max_predictions_per_seq=settings["max_predictions"],
                      batch_size=settings["batch_size"], seed=settings["seed"], shuffle_buffer=1000)
        schedule = training.LinearWarmupLinearDecay(
            settings["learning_rate"], max(1, settings["steps"] // 10), settings["steps"]
        )
        pipeline, batch, backbone_class, model_class = {
            "bert": (data.bert_pretraining_dataset, models.pretraining_batch, models.BertBackbone,
                     models.BertPretrainer),
            "unilm": (data.unilm_pretraining_dataset, models.unilm_batch, models.UniLMBackbone,
                      models.UniLM),
        }[model_name]
        # The pairs come from consecutive sentence chunks of one document: a
        # corpus of one-sentence documents (fine_food_reviews: one review
        # each) gives none, and the repeated pipeline would wait forever.
        if not list(pipeline(once, tokenizer, **common).take(1)):
            raise SystemExit(
                f"tfnlp: error: `corpus` {settings['corpus']!r} gives no {model_name} training "
                f"batch of {settings['batch_size']}: pretraining pairs consecutive sentences of a "
                "document, so it needs documents of several sentences (a blank line separates "
                "documents in a text file), enough for at least one batch."
            )
        dataset = pipeline(once.repeat(), tokenizer, **common).map(batch)
        with strategy.scope():
            backbone = backbone_class.from_preset(
                settings["preset"], vocabulary_size=len(vocabulary),
                max_sequence_length=settings["sequence_length"],
            )
            model = model_class(backbone)
            model.compile(optimizer=training.bert_adamw(schedule), jit_compile=settings["jit_compile"])
        embedding_layer, projector_vocabulary = backbone.token_embedding, vocabulary
    if training.is_chief(strategy):
        _write_lines(vocabulary_path, vocabulary)
    callbacks = []
    if model_name != "elmo":  # attention images (ELMo has no attention)
        callbacks.append(_attention_images(backbone, tokenizer, settings, paths, documents[0][0]))
    history = _fit(model, dataset, settings, paths, callbacks)
    if training.is_chief(strategy):
        model.save(paths["model"])
        training.write_embedding_projector(
            os.path.join(paths["logs"], "projector"), embedding_layer, projector_vocabulary
        )
    _save_config(paths, model_name, settings, strategy, {"vocabulary": os.path.basename(vocabulary_path)})
    _report(history, paths)
    return 0


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


def finetune(settings):
    strategy, paths = _setup(settings)
    pretrained = _pretrained(settings["pretrained"], ("bert",))
    vocabulary = _read_lines(os.path.join(settings["pretrained"], pretrained["vocabulary"]))
    preprocessor = data.BertPreprocessor(data.WordPieceTokenizer(vocabulary), settings["sequence_length"])
    reviews = datasets.load_fine_food_reviews("train").repeat()
    dataset = data.classification_dataset(
        reviews, preprocessor, settings["batch_size"], shuffle_buffer=4000, seed=settings["seed"]
    )
    with strategy.scope():
        pretrainer = keras.saving.load_model(
            os.path.join(settings["pretrained"], "model.keras"), safe_mode=True, compile=False
        )
        # The .keras file keeps the dtype policy it was pretrained with;
        # `--dtype` applies to the fine-tuned model, so the backbone is
        # rebuilt in it and given the pretrained weights.
        config = dict(pretrainer.backbone.get_config(), dtype=settings["dtype"])
        backbone = models.BertBackbone.from_config(config)
        backbone.set_weights(pretrainer.backbone.get_weights())
        model = models.BertClassifier(backbone, num_classes=len(datasets.FINE_FOOD_LABELS))
        schedule = training.LinearWarmupLinearDecay(
            settings["learning_rate"], max(1, settings["steps"] // 10), settings["steps"]
        )
        model.compile(optimizer=training.bert_adamw(schedule), jit_compile=settings["jit_compile"])
    if training.is_chief(strategy):
        _write_lines(os.path.join(settings["output"], "vocab.txt"), vocabulary)
    probe = "Great coffee, fresh and strong; I would buy it again."
    history = _fit(model, dataset, settings, paths,
                   [_attention_images(backbone, preprocessor.tokenizer, settings, paths, probe)])
    test = data.classification_dataset(
        datasets.load_fine_food_reviews("test"), preprocessor, settings["batch_size"], drop_remainder=False
    )
    labels = np.concatenate([y.numpy() for _, y in test])
    predictions = np.argmax(model.predict(test.map(lambda x, y: x), verbose=0), axis=-1)
    accuracy = float(np.mean(predictions == labels))
    if training.is_chief(strategy):
        model.save(paths["model"])
    _save_config(paths, "classifier", settings, strategy,
                 {"vocabulary": "vocab.txt", "labels": list(datasets.FINE_FOOD_LABELS),
                  "test_accuracy": accuracy})
    print(f"test accuracy {accuracy:.4f} on {len(labels)} held-out reviews")
    _report(history, paths)
    return 0


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
        tokenizer = data.WordPieceTokenizer(vocabulary)
        if kind == "classifier":
            preprocessor = data.BertPreprocessor(tokenizer, trained["sequence_length"])
            path = export_lib.export_classifier(model, preprocessor, settings["output"],
                                                labels=config["labels"], version=settings["version"])
        elif kind == "bert":
            preprocessor = data.BertPreprocessor(tokenizer, trained["sequence_length"])
            path = export_lib.export_backbone(model.backbone, preprocessor, settings["output"],
                                              version=settings["version"])
        else:  # unilm: text to text
            # Source and generated text share the position table.
            length = trained["sequence_length"]
            path = export_lib.export_seq2seq(model, tokenizer, tokenizer, settings["output"],
                                             source_length=length // 2,
                                             max_length=length - length // 2,
                                             version=settings["version"])
    print(f"SavedModel written to {path}")
    return 0


def generate(saved_model, texts):
    """Output lines of a SavedModel's `serving_default` on `texts`."""
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

    signature = tf.saved_model.load(saved_model).signatures["serving_default"]
    outputs = signature(text=tf.constant(texts, tf.string))
    for i in range(len(texts)):
        if "output_text" in outputs:
            yield outputs["output_text"][i].numpy().decode("utf-8", "replace")
        elif "label" in outputs:
            yield f"{outputs['label'][i].numpy().decode()}\t{float(np.max(outputs['probabilities'][i])):.4f}"
        else:
            shapes = {k: tuple(v.shape[1:]) for k, v in outputs.items()}
            yield json.dumps({"text": texts[i], "outputs": {k: list(s) for k, s in shapes.items()}})
