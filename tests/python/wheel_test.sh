#!/usr/bin/env bash
# The wheel (tools/python_wheel.sh) installs with pip into a fresh folder,
# and the package imported from there runs a graph on the CPU device and
# trains a step with an optimizer plugin, both found inside the wheel
# (WEFT_PLUGIN_PATH empty, no build tree on the path).
#   wheel_test.sh BUILD_DIR PYTHON
set -euo pipefail
build=$1
python=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/tools/python_wheel.sh" --no-build "$build" "$tmp/dist"
wheel=$(ls "$tmp"/dist/weft-*.whl)
echo "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
"$python" -m pip install --quiet --no-deps --no-index --target "$tmp/site" "$wheel"
cd "$tmp"
env -u PYTHONPATH -u LD_PRELOAD PYTHONPATH="$tmp/site" WEFT_PLUGIN_PATH= "$python" - "$tmp/site" <<'PY'
import os, sys
import numpy as np
import weft
from weft import ops
site = sys.argv[1]
assert weft.__file__.startswith(site), weft.__file__
print("weft", weft.__version__, "from", os.path.dirname(weft.__file__))
g = weft.Graph()
with g.as_default():
    x = weft.placeholder("f32", (2, 2), name="x")
    w = weft.Variable(np.eye(2, dtype=np.float32), name="w")
    loss = ops.sum(ops.square(ops.matmul(x, w.value())), axis=[0, 1], name="loss")
    grad, = weft.gradients(loss, [w])
    step = w.assign_sub(grad * np.float32(0.1))
    init = weft.global_variables_initializer()
with weft.Session(g) as sess:
    sess.run(init)
    x0 = np.array([[1, 2], [3, 4]], np.float32)
    sess.run(step, {x: x0})
    want = np.eye(2, dtype=np.float32) - 0.1 * 2 * x0.T @ x0
    np.testing.assert_allclose(sess.run(w), want, rtol=1e-6)
print("a gradient step from the wheel: ok")
# weft.train with the sgd optimizer plugin, on 64 examples of 4 features.
rng = np.random.default_rng(0)
np.save("images.npy", rng.normal(size=(64, 4)).astype(np.float32))
np.save("labels.npy", rng.integers(0, 3, 64).astype(np.int64))
g = weft.Graph()
with g.as_default():
    images = weft.placeholder("f32", (None, 4), name="images")
    labels = weft.placeholder("i64", (None,), name="labels")
    logits = weft.nn.dense(images, 3, name="out")
    weft.nn.softmax_cross_entropy(logits, labels)
    weft.nn.accuracy(logits, labels)
    weft.global_variables_initializer()
result = weft.train(g, {"data": {"format": "npy", "train_images": "images.npy", "train_labels": "labels.npy"},
                        "training": {"batch_size": 16, "steps": 8, "log_every": 4},
                        "optimizer": {"name": "sgd", "learning_rate": 0.1}}, verbose=False)
assert result["step"] == 8, result
print("weft.train with the sgd plugin from the wheel: step", result["step"], "loss", round(result["loss"], 4))
PY
