# Sourced (`. "$(dirname "$0")/fashion_mnist_work.sh"`) by the shell tests that train on
# Fashion-MNIST, after they set $work: sets $data, skips the test (exit 77) where the data set is
# not installed, and leaves $work an empty directory.
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "skipped: Fashion-MNIST not installed at $data"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
