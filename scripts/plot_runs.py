#!/usr/bin/python3
"""Curves of noeira runs from their metrics.jsonl (src/train/metrics.hpp), several runs overlaid.

    plot_runs.py -o curves.png RUN [RUN ...]     (what `noeira plot` runs)

Four panels against optimizer steps: the training loss (step records, or the periods' mean when
a run logged no steps), the held-out loss (a classifier's test split, a language model's
validation windows), the test accuracy (classifiers only) and the training throughput (samples/s
or tokens/s). Each run is labelled by its directory's name. Every failure is one line on stderr,
"noeira: error: ...", and exit status 1.
"""
import argparse
import json
import os
import sys

DPI = 100  # the figure is sized in pixels: inches = pixels / DPI


def fail(message):
    print(f"noeira: error: {message}", file=sys.stderr)
    sys.exit(1)


class Run:
    """One run's records: `steps` (type "step") and `periods` (an epoch's or an evaluation
    interval's record, type "epoch" or "eval"), in file order."""

    def __init__(self, directory):
        self.directory = directory
        self.steps = []
        self.periods = []

    def held_out_split(self):
        """'test' for a classifier, 'val' for a language model: the prefix of *_loss."""
        for r in self.periods:
            for key in r:
                if key.endswith("_loss") and key != "train_loss":
                    return key[: -len("_loss")]
        return None


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_record(record, where):
    """Every field the panels read is a number where it is there, and the ones each record type
    must have are there: a file that says otherwise is refused by line and key, never drawn
    half or answered with a traceback."""
    kind = record["type"]
    if not isinstance(kind, str):
        fail(f"{where}: 'type' is not a string")
    required = ["step", "loss"] if kind == "step" else ["step", "train_loss"]
    for key in required:
        if not is_number(record.get(key)):
            fail(f"{where}: '{key}' is {'missing' if key not in record else 'not a number'}")
    for key, value in record.items():
        if key.endswith(("_loss", "_accuracy", "_per_s")) and not is_number(value):
            fail(f"{where}: '{key}' is not a number")


def read_run(directory):
    if not os.path.isdir(directory):
        fail(f"{directory}: no such run directory")
    path = os.path.join(directory, "metrics.jsonl")
    if not os.path.isfile(path):
        fail(f"{path}: no such file (is {directory} the output directory of noeira train?)")
    run = Run(directory)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{number}: not a JSON record ({e.msg})")
            if not isinstance(record, dict) or "step" not in record or "type" not in record:
                fail(f"{path}:{number}: not a noeira metrics record (no type or step)")
            check_record(record, f"{path}:{number}")
            (run.steps if record["type"] == "step" else run.periods).append(record)
    if not run.steps and not run.periods:
        fail(f"{path}: no records (did the run train a step?)")
    return run


def legend_names(directories):
    """Each run's directory name, or its whole path where two runs share a name."""
    names = [os.path.basename(os.path.normpath(d)) for d in directories]
    return [os.path.normpath(d) if names.count(n) > 1 else n for d, n in zip(directories, names)]


def rate_key(record):
    return "tokens_per_s" if "tokens_per_s" in record else "samples_per_s"


def draw(runs, names, out, width, height):
    import matplotlib

    matplotlib.use("Agg")  # no display: render to the file only
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, axes = plt.subplots(2, 2, figsize=(width / DPI, height / DPI), dpi=DPI)
    train_ax, held_out_ax, accuracy_ax, rate_ax = axes.flat
    splits, rate_units = set(), set()
    any_accuracy = False
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]  # one color per run, all panels
    for index, (run, name) in enumerate(zip(runs, names)):
        color = colors[index % len(colors)]
        if run.steps:
            train_ax.plot([r["step"] for r in run.steps], [r["loss"] for r in run.steps],
                          color=color, label=name)
        else:
            train_ax.plot([r["step"] for r in run.periods],
                          [r["train_loss"] for r in run.periods], "o-", color=color, label=name)
        split = run.held_out_split()
        if split is not None:
            splits.add(split)
            evaluated = [r for r in run.periods if f"{split}_loss" in r]
            held_out_ax.plot([r["step"] for r in evaluated],
                             [r[f"{split}_loss"] for r in evaluated], "o-", color=color,
                             label=name)
            accuracy = [r for r in run.periods if f"{split}_accuracy" in r]
            if accuracy:
                any_accuracy = True
                accuracy_ax.plot([r["step"] for r in accuracy],
                                 [100.0 * r[f"{split}_accuracy"] for r in accuracy], "o-",
                                 color=color, label=name)
        rated = run.steps or run.periods
        key = rate_key(rated[0])
        rated = [r for r in rated if key in r]
        if rated:
            rate_units.add(key.replace("_per_s", "/s"))
            rate_ax.plot([r["step"] for r in rated], [r[key] for r in rated], color=color,
                         label=name)

    held_out = {"test": "test", "val": "validation"}
    train_ax.set_title("training loss")
    held_out_ax.set_title(" / ".join(sorted(held_out.get(s, s) for s in splits)) + " loss"
                          if splits else "held-out loss")
    accuracy_ax.set_title("test accuracy (%)")
    rate_ax.set_title("training throughput (" + " | ".join(sorted(rate_units)) + ")")
    if not splits:
        held_out_ax.text(0.5, 0.5, "no evaluation records", ha="center", va="center",
                         transform=held_out_ax.transAxes)
    if not any_accuracy:
        accuracy_ax.text(0.5, 0.5, "no accuracy records\n(language models report loss only)",
                         ha="center", va="center", transform=accuracy_ax.transAxes)
    for ax in axes.flat:
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole
        ax.grid(True, alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize="small")
    figure.tight_layout()
    try:
        figure.savefig(out, dpi=DPI)  # no bbox_inches="tight": the file keeps the asked size
    except (OSError, ValueError) as e:
        fail(f"{out}: cannot write the plot ({e})")


IMAGE_FORMATS = (".png", ".svg", ".pdf")


def check_out(out):
    """The file written is the one named: matplotlib would add '.png' to a name without an
    extension (so `-o dir` wrote dir.png and said dir)."""
    if os.path.isdir(out):
        example = os.path.join(out, "curves.png")
        fail(f"{out}: is a directory (-o names the image file, e.g. {example})")
    if os.path.splitext(out)[1].lower() not in IMAGE_FORMATS:
        fail(f"{out}: the image file's name must end in {', '.join(IMAGE_FORMATS)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="RUN", help="output directory of noeira train")
    parser.add_argument("-o", "--out", default="curves.png", help="image file (PNG, SVG, PDF)")
    parser.add_argument("--width", type=int, default=1200, help="pixels")
    parser.add_argument("--height", type=int, default=800, help="pixels")
    args = parser.parse_args()
    if not (100 <= args.width <= 10000 and 100 <= args.height <= 10000):
        fail(f"--width {args.width} --height {args.height}: each must be 100 to 10000 pixels")
    check_out(args.out)
    try:
        import matplotlib  # noqa: F401  (checked before any work: draw() imports it again)
    except ImportError:
        fail(f"noeira plot needs matplotlib for {sys.executable} (Debian: apt install "
             "python3-matplotlib)")
    runs = [read_run(d) for d in args.runs]
    draw(runs, legend_names(args.runs), args.out, args.width, args.height)
    print(f"noeira plot: {args.out} ({len(runs)} run{'s' if len(runs) > 1 else ''})")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001  (one line, never a traceback: see the docstring)
        fail(f"noeira plot: {type(e).__name__}: {e}")
