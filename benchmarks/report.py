"""Summarise benchmarks/results/*.json as Markdown tables and PNG plots.

Reads every JSON file in the results directory, in the format written by
`_common.write_json` (`{"machine", "peak_rss_mb", "rows", ...}`, rows being
one table or a dict of tables) and in the older ones (a plain list of rows,
or a dict of sections holding lists of rows and single figures), and writes:

- `summary.md`: per benchmark, the machine line, peak resident memory, one
  Markdown table per list of rows (columns from the row keys, numbers
  formatted for reading), the remaining single figures, and the plots;
- `<benchmark>[_<table>]_speedup.png`: a bar chart of every column whose name
  contains "speedup", bars labelled from the row's text columns (1.0 marked);
- `serving_latency_vs_length.png`: latency of one request vs its length in
  characters (log-log), from `serving.json`;
- `machine_matmul_gflops.png`: matmul GFLOP/s per product, from `machine.json`.

Missing or unreadable files are reported in the summary, never fatal;
without matplotlib only the Markdown is written.

    python benchmarks/report.py [--results benchmarks/results] [--output PATH] [--no-plots]

It also writes the rows of the tables of `benchmarks/README.md` whose figures
come from tracked JSON files (`SECTIONS`: the H100 run in `gpu_h100/`), one
row per measured figure with the machine and versions the JSON records, the
commit that last changed the JSON (`git log`) and the command that wrote it
(the file's row in the README.md next to it). In the page each such table
sits between `<!-- report:begin NAME -->` and `<!-- report:end NAME -->`:

    python benchmarks/report.py --markdown gpu_bert        # print one table
    python benchmarks/report.py --update benchmarks/README.md  # rewrite every table
    python benchmarks/report.py --check benchmarks/README.md   # exit 1 if one is stale

These modes only read JSON; nothing is measured and TensorFlow is not imported.
"""

import argparse
import glob
import json
import math
import os
import re
import subprocess

from _common import machine_line

# Benchmarks in the order `make bench` runs them; others follow alphabetically.
ORDER = ("machine", "attention", "data", "bert", "seq2seq", "generation", "elmo", "serving",
         "input_length")
META_KEYS = ("machine", "peak_rss_mb", "settings", "rows")


def fmt(value):
    """A cell: thousands separators, about three significant digits for fractions."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        magnitude = abs(value)
        if magnitude >= 1000:
            return f"{value:,.0f}"
        if magnitude >= 100:
            return f"{value:.1f}"
        if magnitude >= 1:
            return f"{value:.2f}"
        if magnitude == 0:
            return "0"
        return f"{value:.3g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(", ", ": "))
    return str(value).replace("|", "\\|").replace("\n", " ")


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_table(value):
    return isinstance(value, list) and bool(value) and all(isinstance(r, dict) for r in value)


def columns(rows):
    """Union of the rows' keys, in order of first appearance."""
    names = []
    for row in rows:
        names += [k for k in row if k not in names]
    return names


def markdown_table(rows):
    names = columns(rows)
    lines = ["| " + " | ".join(n.replace("_", " ") for n in names) + " |",
             "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(fmt(row.get(n)) for n in names) + " |" for row in rows]
    return "\n".join(lines)


def flatten(value, prefix=""):
    """{"a": {"b": 1}} -> [("a.b", 1)]; lists of rows are left to tables."""
    if isinstance(value, dict):
        items = []
        for key, inner in value.items():
            items += flatten(inner, f"{prefix}.{key}" if prefix else str(key))
        return items
    return [(prefix, value)]


def parse(results):
    """(machine, peak RSS MiB, settings, {table name: rows}, [(figure, value)]) of a file."""
    if isinstance(results, list):  # the old plain-list format
        return None, None, None, ({"": results} if is_table(results) else {}), (
            [] if is_table(results) else [("value", results)])
    if not isinstance(results, dict):
        return None, None, None, {}, [("value", results)]
    tables, figures = {}, []
    rows = results.get("rows")
    if is_table(rows):
        tables[""] = rows
    elif isinstance(rows, dict):
        for name, inner in rows.items():
            if is_table(inner):
                tables[name] = inner
            elif inner not in ([], None):
                figures += flatten(inner, name)
    for key, value in results.items():
        if key in META_KEYS:
            continue
        if is_table(value):
            tables[key] = value
        elif value != []:
            figures += flatten(value, key)
    return (results.get("machine"), results.get("peak_rss_mb"), results.get("settings"),
            tables, figures)


def load(directory):
    """[(name, parsed or None, error or None)] of every JSON file, in benchmark order."""
    # Smoke runs (`--quick`, written as *_quick.json) are not results.
    paths = sorted(p for p in glob.glob(os.path.join(directory, "*.json"))
                   if not p.endswith("_quick.json"))

    def key(path):
        name = os.path.splitext(os.path.basename(path))[0]
        prefix = name.split("_")[0]
        return (ORDER.index(prefix) if prefix in ORDER else len(ORDER), name)

    loaded = []
    for path in sorted(paths, key=key):
        name = os.path.splitext(os.path.basename(path))[0]
        try:
            with open(path) as f:
                loaded.append((name, parse(json.load(f)), None))
        except (OSError, ValueError) as error:
            loaded.append((name, None, f"{type(error).__name__}: {error}"))
    return loaded


# --- Plots ---

def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def bar_labels(rows, speedups):
    """A label per row from its text columns, plus varying integer columns if needed."""
    names = columns(rows)
    text = [n for n in names if n not in speedups and "error" not in n
            and any(isinstance(r.get(n), (str, bool)) for r in rows)
            and not any(is_number(r.get(n)) for r in rows)]

    def label(row, keys):
        return " / ".join(f"{k}={row[k]}" if is_number(row[k]) or isinstance(row[k], bool)
                          else str(row[k]) for k in keys if row.get(k) is not None)

    labels = [label(r, text) for r in rows]
    if len(set(labels)) < len(labels):
        integers = [n for n in names if n not in speedups and n not in text
                    and all(isinstance(r.get(n), int) and not isinstance(r.get(n), bool)
                            for r in rows)
                    and len({r.get(n) for r in rows}) > 1]
        labels = [label(r, text + integers) for r in rows]
    return [lab or f"row {i + 1}" for i, lab in enumerate(labels)]


def speedup_chart(plt, rows, title, path):
    speedups = [n for n in columns(rows) if "speedup" in n.lower()
                and any(is_number(r.get(n)) for r in rows)]
    if not speedups:
        return None
    labels = bar_labels(rows, speedups)
    height = 0.8 + 0.32 * len(rows)
    figure, axes = plt.subplots(len(speedups), 1, figsize=(8, height * len(speedups)),
                                squeeze=False)
    for axis, name in zip(axes[:, 0], speedups, strict=True):
        values = [r.get(name) if is_number(r.get(name)) else float("nan") for r in rows]
        positions = range(len(rows))
        colors = ["tab:green" if v >= 1 else "tab:red" for v in values]
        axis.barh(positions, values, color=colors)
        axis.axvline(1.0, color="black", linewidth=0.8)
        for y, v in zip(positions, values, strict=True):
            if math.isfinite(v):
                axis.text(v, y, f" {v:.2f}", va="center", fontsize=8)
        axis.set_yticks(list(positions), labels, fontsize=8)
        axis.invert_yaxis()
        axis.set_xlabel(f"{name} (> 1: faster)")
        axis.set_xlim(0, max([v for v in values if math.isfinite(v)] + [1.0]) * 1.15)
    axes[0, 0].set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def serving_chart(plt, rows, path):
    rows = [r for r in rows if is_number(r.get("characters")) and is_number(r.get("median_ms"))]
    if not rows:
        return None
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for model in dict.fromkeys(r.get("model", "") for r in rows):
        mine = sorted((r for r in rows if r.get("model", "") == model),
                      key=lambda r: r["characters"])
        axis.plot([r["characters"] for r in mine], [r["median_ms"] for r in mine], marker="o",
                  label=str(model))
    axis.set_xscale("log")
    axis.set_yscale("log")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    axis.yaxis.set_major_formatter(ScalarFormatter())  # 3, 10, 30 ms, not 3 x 10^0
    axis.yaxis.set_minor_formatter(NullFormatter())
    axis.axvline(100_000, color="grey", linestyle=":", linewidth=1)
    axis.text(100_000, axis.get_ylim()[1], " max_input_bytes", va="top", fontsize=8, color="grey")
    axis.set_xlabel("characters in the request (one text)")
    axis.set_ylabel("median latency, ms")
    axis.set_title("Served classifier: latency vs input length")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def machine_chart(plt, rows, path):
    rows = [r for r in rows if "shape" in r and "dtype" in r]
    if not rows:
        return None
    series = [n for n in ("no_xla_gflops", "xla_gflops") if any(is_number(r.get(n)) for r in rows)]
    if not series:
        return None
    figure, axis = plt.subplots(figsize=(8, 0.8 + 0.45 * len(rows)))
    width = 0.8 / len(series)
    for index, name in enumerate(series):
        values = [r.get(name) if is_number(r.get(name)) else 0 for r in rows]
        axis.barh([i + index * width for i in range(len(rows))], values, height=width,
                  label=name.replace("_gflops", "").replace("_", " "))
    axis.set_yticks([i + width * (len(series) - 1) / 2 for i in range(len(rows))],
                    [f"{r['dtype']} {r['shape']}" for r in rows], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("GFLOP/s")
    axis.set_title("tf.matmul throughput")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def plots(plt, name, tables, directory):
    """Writes the plots of one benchmark; returns their file names."""
    written = []
    for table, rows in tables.items():
        stem = f"{name}_{table}" if table else name
        title = f"{name} {table}".strip()
        written.append(speedup_chart(plt, rows, title,
                                     os.path.join(directory, f"{stem}_speedup.png")))
    if name == "serving" and "input_length" in tables:
        written.append(serving_chart(plt, tables["input_length"],
                                     os.path.join(directory, "serving_latency_vs_length.png")))
    if name == "machine" and "matmul" in tables:
        written.append(machine_chart(plt, tables["matmul"],
                                     os.path.join(directory, "machine_matmul_gflops.png")))
    return [os.path.basename(p) for p in written if p]


# --- Summary ---

def summary(loaded, directory, draw):
    plt = _pyplot() if draw else None
    lines = ["# Benchmark results", "",
             f"Generated by `benchmarks/report.py` from `{directory}/*.json`."]
    if draw and plt is None:
        lines += ["", "(matplotlib is not installed: no plots; `pip install -e .[bench]`.)"]
    if not loaded:
        lines += ["", "No results yet: run `make bench` (or the scripts one by one)."]
    for name, parsed, error in loaded:
        lines += ["", f"## {name}", ""]
        if error:
            lines.append(f"Could not read `{name}.json`: {error}")
            continue
        machine, peak_rss, settings, tables, figures = parsed
        if machine:
            lines.append(f"Machine: {machine_line(machine)}.  ")
        if peak_rss is not None:
            lines.append(f"Peak RSS: {fmt(peak_rss)} MiB.  ")
        if settings:
            lines.append("Settings: " + ", ".join(f"{k}={fmt(v)}" for k, v in settings.items()
                                                  if v is not None) + ".  ")
        for table, rows in tables.items():
            if table:
                lines += ["", f"### {table.replace('_', ' ')}"]
            lines += ["", markdown_table(rows)]
        if figures:
            lines += ["", "| figure | value |", "|---|---|"]
            lines += [f"| {key} | {fmt(value)} |" for key, value in figures]
        if plt is not None:
            try:
                images = plots(plt, name, tables, directory)
            except Exception as error:  # a plot must never cost the summary
                lines += ["", f"(plots failed: {type(error).__name__}: {error})"]
                images = []
            lines += [""] + [f"![{image}]({image})" for image in images] if images else []
    return "\n".join(lines) + "\n"


# --- Tables of benchmarks/README.md generated from tracked JSON ---

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(<!-- report:begin (\S+) -->\n).*?(<!-- report:end \2 -->)", re.S)
NOT_RECORDED = "not recorded"


def ratio(value):
    """A same-run ratio, two decimals (1.1 -> 1.10)."""
    return f"{value:.2f}" if is_number(value) else ""


def percent(value):
    """A fraction as a percentage, one decimal: 0.175 -> 17.5%."""
    return f"{100 * value:.1f}%" if is_number(value) else ""


def machine_cell(machine):
    """`NVIDIA H100 80GB HBM3; 16-core Intel Xeon Processor host`, or a CPU's cores and flags."""
    if not isinstance(machine, dict):
        return NOT_RECORDED
    cpu = re.sub(r"\((R|TM)\)", "", machine.get("cpu") or "unknown CPU")
    cores = machine.get("cores", machine.get("cpus"))
    cpu = f"{cores}-core {cpu}" if cores else cpu
    if machine.get("gpus"):
        return f"{', '.join(machine['gpus'])}; {cpu} host"
    flags = machine.get("cpu_flags")
    return f"{cpu} ({', '.join(flags)})" if flags else cpu


def versions_cell(machine):
    """The library versions the JSON recorded: `TF 2.21.0, Keras 3.15.1`."""
    machine = machine if isinstance(machine, dict) else {}
    parts = [f"{label} {machine[key]}" for key, label in
             (("tensorflow", "TF"), ("keras", "Keras"), ("keras_hub", "keras-hub"))
             if machine.get(key)]
    return ", ".join(parts) or NOT_RECORDED


def commit_of(path):
    """Short hash of the last commit that changed `path`; None without git history."""
    try:
        shallow = subprocess.run(["git", "-C", ROOT, "rev-parse", "--is-shallow-repository"],
                                 capture_output=True, text=True, timeout=30)
        if shallow.returncode != 0 or shallow.stdout.strip() != "false":
            return None
        found = subprocess.run(["git", "-C", ROOT, "log", "-1", "--abbrev=7", "--format=%h", "--",
                                os.path.relpath(path, ROOT)],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return (found.stdout.strip() or None) if found.returncode == 0 else None


def command_of(path):
    """The command that wrote `path`: the first code span of its row in the README.md beside it."""
    readme = os.path.join(os.path.dirname(path), "README.md")
    name = re.escape(os.path.basename(path))
    try:
        with open(readme, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    found = re.search(rf"^\| `{name}` \| `([^`]+)`", text, re.M)
    return found.group(1).removeprefix("python benchmarks/") if found else None


def provenance(path, machine):
    """The four cells every generated row ends with: machine, versions, commit, command."""
    command = command_of(path)
    return [machine_cell(machine), versions_cell(machine), commit_of(path) or NOT_RECORDED,
            f"`{command}`" if command else NOT_RECORDED]


PROVENANCE = ["machine", "versions", "commit", "command"]


def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def matmul_rows(paths):
    """machine_benchmark.py: TFLOP/s of each product, without and with XLA."""
    header = ["dtype", "product", "TFLOP/s, no XLA", "TFLOP/s, XLA", "XLA / no XLA"] + PROVENANCE
    rows = []
    for path in paths:
        results = _read(path)
        for row in results["rows"]["matmul"]:
            product = row["shape"]
            if row.get("what") != "square":
                product += f": {row['what']}"
            rows.append([row["dtype"], product, f"{row['no_xla_gflops'] / 1000:.1f}",
                         f"{row['xla_gflops'] / 1000:.1f}", ratio(row.get("xla_speedup"))]
                        + provenance(path, results.get("machine")))
    return header, rows


def _peaks(paths):
    """{dtype: GFLOP/s} of the machine benchmark in the same directory, if there is one."""
    machine = os.path.join(os.path.dirname(paths[0]), "machine_gpu.json")
    try:
        return _read(machine).get("peak_gflops", {})
    except (OSError, ValueError):
        return {}


def bert_rows(paths):
    """bert_benchmark.py: tfnlp vs keras-hub training tokens/s, MFU, train and inference ratios.

    MFU is against the matmul peak of the machine benchmark beside the files
    (the same reference for every row), else the script's own end-of-run peak.
    """
    peaks = _peaks(paths)
    header = ["preset", "policy", "XLA", "tfnlp train tok/s (MFU)", "keras-hub train tok/s (MFU)",
              "train: keras-hub time / tfnlp", "inference: the same"] + PROVENANCE
    rows = []
    for path in paths:
        results = _read(path)
        for row in results["rows"]:
            peak = peaks.get("bfloat16" if "bfloat16" in row["policy"] else "float32")

            def mfu(side, row=row, peak=peak):
                if peak:
                    return percent(row[f"train_{side}_gflops"] / peak)
                return percent(row.get(f"train_{side}_mfu"))

            rows.append([row["preset"], row["policy"], "yes" if row.get("jit_compile") else "no",
                         f"{fmt(row['train_tfnlp_tokens_per_s'])} ({mfu('tfnlp')})",
                         f"{fmt(row['train_keras_hub_tokens_per_s'])} ({mfu('keras_hub')})",
                         ratio(row["train_speedup"]), ratio(row["infer_speedup"])]
                        + provenance(path, results.get("machine")))
    return header, rows


def generation_rows(paths):
    """generation_benchmark.py: ms per decoding step vs keras-hub, and the cache's speed-up."""
    header = ["64 new tokens, 16 sources of 32 tokens", "tfnlp", "baseline, same run",
              "baseline time / tfnlp"] + PROVENANCE
    rows = []
    for path in paths:
        results = _read(path)
        tables, machine = results["rows"], results.get("machine")
        for key, what, other in (("vs_keras_hub", "UniLM vs GPT-2", "GPT-2"),
                                 ("translator_vs_keras_hub", "translator vs BART", "BART")):
            for row in tables.get(key, []):
                xla = "with XLA" if row["jit_compile (both)"] else "without XLA"
                rows.append([f"{what}, greedy, {xla}", f"{fmt(row['tfnlp_ms_per_step'])} ms/step",
                             f"keras-hub {other} {fmt(row['keras_hub_ms_per_step'])} ms/step",
                             ratio(row["keras_hub_time_over_tfnlp"])] + provenance(path, machine))
        for row in tables.get("cache_vs_recomputation", []):
            search = "greedy" if row["beam_size"] == 1 else f"beam {row['beam_size']}"
            rows.append([f"UniLM cache vs recomputation, {search}, without XLA",
                         f"cached {fmt(row['cached_tokens_per_s'])} tok/s",
                         f"recomputed {fmt(row['recomputed_tokens_per_s'])} tok/s",
                         ratio(row["cache_speedup"])] + provenance(path, machine))
    return header, rows


# name: (JSON files, relative to the repository root; the function that tables them)
SECTIONS = {
    "gpu_matmul": (["benchmarks/gpu_h100/machine_gpu.json"], matmul_rows),
    "gpu_bert": (["benchmarks/gpu_h100/bert_gpu_nojit.json",
                  "benchmarks/gpu_h100/bert_gpu_jit.json"], bert_rows),
    "gpu_bert_batch256": (["benchmarks/gpu_h100/bert_gpu_batch256.json"], bert_rows),
    "gpu_generation": (["benchmarks/gpu_h100/generation_gpu.json"], generation_rows),
}


def section(name):
    """The Markdown table of one of `SECTIONS`, without the markers."""
    paths, build = SECTIONS[name]
    header, rows = build([os.path.join(ROOT, p) for p in paths])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def update(text):
    """`text` with every `report:begin NAME` ... `report:end NAME` block regenerated."""
    def replace(found):
        name = found.group(2)
        if name not in SECTIONS:
            raise KeyError(f"no generated table named {name!r} (known: {', '.join(SECTIONS)})")
        return found.group(1) + section(name) + found.group(3)

    return BLOCK.sub(replace, text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default="benchmarks/results")
    parser.add_argument("--output", default=None, help="default RESULTS/summary.md")
    parser.add_argument("--no-plots", action="store_true")
    generated = parser.add_mutually_exclusive_group()
    generated.add_argument("--markdown", choices=sorted(SECTIONS),
                           help="print one generated table of benchmarks/README.md")
    generated.add_argument("--update", metavar="PAGE",
                           help="regenerate the report:begin/end tables of PAGE in place")
    generated.add_argument("--check", metavar="PAGE",
                           help="exit 1 if a report:begin/end table of PAGE is stale")
    args = parser.parse_args()
    if args.markdown:
        print(section(args.markdown), end="")
        return
    if args.update or args.check:
        page = args.update or args.check
        with open(page, encoding="utf-8") as f:
            text = f.read()
        new = update(text)
        if args.check:
            pairs = zip(BLOCK.finditer(text), BLOCK.finditer(new), strict=True)
            stale = [old.group(2) for old, fresh in pairs if old.group(0) != fresh.group(0)]
            if stale:
                raise SystemExit(f"{page}: stale generated tables: {', '.join(stale)} "
                                 f"(python benchmarks/report.py --update {page})")
            print(f"{page}: {len(BLOCK.findall(text))} generated tables up to date")
            return
        if new != text:
            with open(page, "w", encoding="utf-8") as f:
                f.write(new)
        print(f"{page}: {len(BLOCK.findall(text))} generated tables written")
        return
    output = args.output or os.path.join(args.results, "summary.md")
    os.makedirs(args.results, exist_ok=True)
    loaded = load(args.results)
    text = summary(loaded, args.results, not args.no_plots)
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    with open(output, "w") as f:
        f.write(text)
    images = sorted(os.path.basename(p) for p in glob.glob(os.path.join(args.results, "*.png")))
    print(f"{len(loaded)} result files -> {output}; plots in {args.results}: {', '.join(images)}")


if __name__ == "__main__":
    main()
