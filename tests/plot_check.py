"""`noeira plot` end to end: train two tiny classifier runs and a tiny language model, plot them
overlaid, decode the PNG and check its size; and the one-line errors for a missing run
directory, a metrics file without records and a Python without matplotlib.

    plot_check.py curves NOEIRA WORK_DIR
    plot_check.py errors NOEIRA WORK_DIR

Exit 0: passed; 1: failed (what, on stderr); 77: skipped (no Fashion-MNIST, no matplotlib).
"""
import json
import os
import shutil
import struct
import subprocess
import sys

FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
FORTUNES = "/usr/share/games/fortunes"  # noeira train --data text's default corpus
WIDTH, HEIGHT = 900, 600


def fail(message):
    print(f"FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def skip(message):
    print(f"skipped: {message}")
    sys.exit(77)


def noeira(binary, *args, env=None):
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=240, env=env)
    sys.stdout.write(done.stdout)
    sys.stdout.write(done.stderr)
    return done


def png_size(path):
    """(width, height) from the IHDR chunk, which the PNG format puts first."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        fail(f"{path} is not a PNG file")
    return struct.unpack(">II", head[16:24])


def check_curves(binary, work):
    if not os.path.isfile(os.path.join(FASHION_MNIST, "train-images-idx3-ubyte.gz")):
        skip(f"Fashion-MNIST not installed at {FASHION_MNIST}")
    runs = []
    for lr in ("1e-3", "3e-3"):  # two runs to overlay
        run = os.path.join(work, f"lr-{lr}")
        done = noeira(binary, "train", "--limit-train", "500", "--limit-test", "200", "--epochs",
                      "2", "--batch", "100", "--log-every", "1", "--lr", lr, "--threads", "1",
                      "--out", run)
        if done.returncode != 0:
            fail(f"noeira train exited {done.returncode}")
        runs.append(run)
    # A language model's records (eval periods, validation loss, tokens/s, no accuracy) beside
    # the classifiers', where the default corpus is installed.
    if os.path.isdir(FORTUNES):
        run = os.path.join(work, "gpt-tiny")
        done = noeira(binary, "train", "--data", "text", "--model", "gpt-tiny", "--steps", "20",
                      "--eval-every", "10", "--eval-batches", "2", "--log-every", "5",
                      "--threads", "1", "--out", run)
        if done.returncode != 0:
            fail(f"noeira train --data text exited {done.returncode}")
        runs.append(run)
    else:
        print(f"note: no text corpus at {FORTUNES}: classifier runs only")
    png = os.path.join(work, "curves.png")
    done = noeira(binary, "plot", *runs, "-o", png, "--width", str(WIDTH), "--height",
                  str(HEIGHT))
    if done.returncode != 0:
        fail(f"noeira plot exited {done.returncode}")
    if png_size(png) != (WIDTH, HEIGHT):
        fail(f"{png}: IHDR says {png_size(png)}, expected {(WIDTH, HEIGHT)}")
    import matplotlib.image  # decodes the whole image, not only its header

    pixels = matplotlib.image.imread(png)
    if pixels.shape[:2] != (HEIGHT, WIDTH):
        fail(f"{png} decodes to {pixels.shape}, expected {HEIGHT} rows of {WIDTH}")
    if pixels.min() == pixels.max():
        fail(f"{png} is blank")
    print(f"ok: {png}, {WIDTH}x{HEIGHT}, decodes")


def expect_one_line_error(binary, args, words, env=None):
    done = noeira(binary, "plot", *args, env=env)
    lines = done.stderr.strip().splitlines()
    if done.returncode == 0:
        fail(f"noeira plot {' '.join(args)} succeeded")
    if len(lines) != 1 or not lines[0].startswith("noeira: error: ") or \
            not all(w in lines[0] for w in words):
        fail(f"noeira plot {' '.join(args)}: expected one 'noeira: error:' line naming "
             f"{words}, got {lines}")


def check_errors(binary, work):
    out = os.path.join(work, "never.png")
    missing = os.path.join(work, "no-such-run")
    expect_one_line_error(binary, [missing, "-o", out], [missing, "no such run directory"])
    empty = os.path.join(work, "empty-run")
    os.makedirs(empty)
    open(os.path.join(empty, "metrics.jsonl"), "w").close()
    expect_one_line_error(binary, [empty, "-o", out],
                          [os.path.join(empty, "metrics.jsonl"), "no records"])
    # A matplotlib that cannot be imported (a package of that name that refuses, found first
    # through PYTHONPATH, which the binary passes on to the script).
    hidden = os.path.join(work, "no-matplotlib")
    os.makedirs(os.path.join(hidden, "matplotlib"))
    with open(os.path.join(hidden, "matplotlib", "__init__.py"), "w") as f:
        f.write('raise ImportError("hidden by plot_check.py")\n')
    expect_one_line_error(binary, [empty, "-o", out], ["needs matplotlib", "python3-matplotlib"],
                          env=dict(os.environ, PYTHONPATH=hidden))
    if os.path.exists(out):
        fail(f"{out} was written by a failed plot")
    # Records that lie: each field the panels read, wrong in turn, refused by line and key.
    good_step = {"type": "step", "step": 1, "loss": 2.0, "samples_per_s": 10.0}
    good_epoch = {"type": "epoch", "step": 1, "train_loss": 2.0, "test_loss": 1.0,
                  "test_accuracy": 0.5, "samples_per_s": 10.0}
    lies = [(good_step, "loss", None), (good_step, "loss", "two"), (good_step, "step", [1]),
            (good_epoch, "train_loss", None), (good_epoch, "test_loss", {"a": 1}),
            (good_epoch, "test_accuracy", True), (good_step, "samples_per_s", "fast"),
            (good_step, "type", 7)]
    bad = os.path.join(work, "bad-run")
    os.makedirs(bad)
    for record, key, value in lies:
        lie = dict(record)
        if value is None:
            del lie[key]
        else:
            lie[key] = value
        with open(os.path.join(bad, "metrics.jsonl"), "w") as f:
            f.write(json.dumps(good_step) + "\n" + json.dumps(lie) + "\n")
        expect_one_line_error(binary, [bad, "-o", out], ["metrics.jsonl:2", f"'{key}'"])
    # The file written is the one named: a directory or a name without an image extension is
    # refused, where matplotlib would have written <name>.png.
    with open(os.path.join(bad, "metrics.jsonl"), "w") as f:
        f.write(json.dumps(good_step) + "\n")
    expect_one_line_error(binary, [bad, "-o", work], [work, "is a directory"])
    expect_one_line_error(binary, [bad, "-o", os.path.join(work, "curves")],
                          ["curves", "must end in .png"])
    for written in (work + ".png", os.path.join(work, "curves.png"), out):
        if os.path.exists(written):
            fail(f"{written} was written by a refused plot")
    print("ok: one-line errors for a missing run, a metrics file without records or with lying "
          "records, an output that is not an image file's name, and no matplotlib")


def main():
    check, binary, work = sys.argv[1], sys.argv[2], sys.argv[3]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        skip(f"no matplotlib for {sys.executable}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    {"curves": check_curves, "errors": check_errors}[check](binary, work)


if __name__ == "__main__":
    main()
