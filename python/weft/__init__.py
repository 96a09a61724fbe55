"""Weft from Python: build graphs, run them with NumPy arrays, train them.

A 20-line example and the whole API are in docs/python.md. In short::

    import numpy as np
    import weft
    from weft import ops

    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (None, 3), name="x")
        y = ops.relu(ops.matmul(x, weft.constant(np.eye(3, dtype=np.float32))))
    with weft.Session(g) as sess:
        print(sess.run(y, {x: np.ones((2, 3), np.float32)}))

Every op Weft registers is a function of :mod:`weft.ops`, made from the op
registry when the module is imported; errors are :class:`weft.Error`
subclasses carrying Weft's message (:mod:`weft.errors`).
"""

from . import _weft
from .errors import *  # noqa: F401,F403  (the exception classes)
from .errors import Error, InvalidArgumentError
from .graph import (Graph, Tensor, Variable, constant, control_dependencies, device, get_default_graph,
                    global_variables_initializer, gradients, import_onnx, load, name_scope, placeholder,
                    reset_default_graph, cond, while_loop)
from .session import InferenceSession, Session
from .training import train
from . import cluster, nn, ops

__version__ = _weft.__version__

# The dtypes by their NumPy names, as TensorFlow spells them.
float32 = "f32"
float64 = "f64"
float16 = "f16"
bfloat16 = "bf16"
int8 = "i8"
int16 = "i16"
int32 = "i32"
int64 = "i64"
uint8 = "u8"
bool_ = "bool"
string = "string"

__all__ = [
    "Graph", "Tensor", "Variable", "Session", "InferenceSession", "ops", "placeholder", "constant",
    "gradients", "cond", "while_loop", "name_scope", "device", "control_dependencies", "load",
    "import_onnx", "get_default_graph", "reset_default_graph", "global_variables_initializer", "Error",
    "train", "cluster", "nn", "__version__",
]
