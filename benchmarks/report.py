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
"""

import argparse
import glob
import json
import math
import os

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default="benchmarks/results")
    parser.add_argument("--output", default=None, help="default RESULTS/summary.md")
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args()
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
