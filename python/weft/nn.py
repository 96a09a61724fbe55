"""Building blocks of models (docs/python.md, "Training"): dense layers with
Glorot-uniform kernels, the usual losses and accuracy. Each is a few ops
of :mod:`weft.ops` made under a name scope; ``weft.train`` trains the
variables they make."""

import math

import numpy as np

from . import ops
from .errors import InvalidArgumentError
from .graph import Variable, constant, name_scope


def glorot_uniform(shape, dtype="f32"):
    """Values drawn uniformly from [-limit, limit), limit =
    sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010): a
    RandomUniform scaled and shifted. Seeded by [training] seed when
    ``weft.train`` trains it, else by the node's name."""
    shape = [int(d) for d in shape]
    if len(shape) < 2:
        raise InvalidArgumentError("glorot_uniform: shape %s needs at least 2 dimensions" % (shape,))
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    limit = math.sqrt(6.0 / ((shape[-2] + shape[-1]) * receptive))
    u = ops.random_uniform(constant(np.array(shape, np.int64), name="shape"), dtype=dtype)
    return u * constant(2 * limit, dtype, name="width") - constant(limit, dtype, name="limit")


def dense(x, units, activation=None, name="dense"):
    """``activation(x @ kernel + bias)`` for x of shape [batch, n]: the
    variables ``<name>/kernel`` (n x units, Glorot uniform) and
    ``<name>/bias`` (zeros). ``activation`` is a function of a tensor
    (``ops.relu``) or None."""
    if not isinstance(units, int) or units < 1:
        raise InvalidArgumentError("dense: units must be a positive int, not %r" % (units,))
    shape = x.shape
    if shape is None or len(shape) != 2 or shape[1] is None:
        raise InvalidArgumentError("dense %r: the input %s has shape %s; a [batch, n] input with n known is needed"
                                   % (name, x.name, shape))
    with name_scope(name):
        kernel = Variable(lambda: glorot_uniform((shape[1], units), x.dtype), x.dtype, (shape[1], units),
                          name="kernel")
        bias = Variable(lambda: ops.fill(constant(np.array([units], np.int64), name="shape"),
                                         constant(0, x.dtype, name="zero")), x.dtype, (units,), name="bias")
        y = ops.bias_add(ops.matmul(x, kernel.value()), bias.value())
        return activation(y) if activation is not None else y


def softmax_cross_entropy(logits, labels, name="loss"):
    """The mean over the batch of the cross entropy of softmax(logits)
    ([batch, classes]) against integer class indices ([batch])."""
    xent, _ = ops.sparse_softmax_cross_entropy_with_logits(logits, labels)
    return ops.mean(xent, name=name)


def accuracy(logits, labels, name="accuracy"):
    """The fraction of rows whose largest logit is at the label (f32)."""
    hits = ops.cast(ops.equal(ops.arg_max(logits, axis=1), labels), DstT="f32")
    return ops.mean(hits, name=name)


__all__ = ["dense", "glorot_uniform", "softmax_cross_entropy", "accuracy"]
