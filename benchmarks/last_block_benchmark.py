"""BERT pretraining steps with the last block at the read positions only vs every position.

`BertPretrainer` runs its backbone's last `TransformerBlock` at `[CLS]` and the masked
positions only (`output_positions`), as its heads read nothing else. This times it against
the same pretrainer, weights, heads, optimizer and loss wired through `backbone(...)` (the
last block at every position, as before), alternating in one process: batch 32 x 128,
20 masked positions, 30,522-token vocabulary, `train_on_batch` (the setup of
`bert_benchmark.py`). Reported: median step ms of each and the median per-round speed-up.

    python benchmarks/last_block_benchmark.py [--presets bert_tiny bert_mini] [--rounds 7]
"""

import argparse
import os
import statistics
import sys

import tfnlp  # noqa: F401  (tfnlp's CPU defaults, as its users get them)

# isort: split
import keras  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_benchmark  # noqa: E402
from _common import markdown_table, write_json  # noqa: E402


def full_pass_model(preset, policy, jit):
    """`BertPretrainer`'s layers and compile(), the heads on `backbone(...)`'s full output."""
    model, backbone, positions = bert_benchmark.tfnlp_model(preset, policy, jit)
    inputs = model.input
    outputs = backbone({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})
    mlm = model.masked_lm_head(outputs["sequence_output"], masked_positions=inputs[positions])
    nsp = model.next_sentence_head(outputs["pooled_output"])
    full = keras.Model(inputs, {"mlm": mlm, "nsp": nsp})
    full.compile(optimizer=type(model.optimizer).from_config(model.optimizer.get_config()),
                 loss=model.loss, jit_compile=jit)
    return full, backbone, positions


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["bert_tiny", "bert_mini"])
    parser.add_argument("--policy", default="float32")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results",
                                                       "last_block.json"))
    args = parser.parse_args()
    rows = []
    for preset in args.presets:
        sparse = bert_benchmark.prepared(bert_benchmark.tfnlp_model, preset, args.policy, False)[0]
        full = bert_benchmark.prepared(full_pass_model, preset, args.policy, False)[0]
        times = {"sparse": [], "full": []}
        for _ in range(args.rounds):
            times["sparse"].append(bert_benchmark.timed(sparse, args.steps))
            times["full"].append(bert_benchmark.timed(full, args.steps))
        rows.append({
            "preset": preset, "policy": args.policy,
            "read positions ms": round(1000 * statistics.median(times["sparse"]), 1),
            "every position ms": round(1000 * statistics.median(times["full"]), 1),
            "speed-up": round(statistics.median(
                f / s for s, f in zip(times["sparse"], times["full"], strict=True)), 3),
        })
        print(rows[-1], flush=True)
    print(markdown_table(list(rows[0]), [list(row.values()) for row in rows]))
    write_json(args.json, rows, rounds=args.rounds, steps=args.steps)


if __name__ == "__main__":
    main()
