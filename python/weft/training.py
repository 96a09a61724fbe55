"""weft.train: `weft train` from Python, its progress streamed to a callback
(docs/python.md, "Training")."""

import math
import os
import sys

from . import _weft
from .errors import InvalidArgumentError
from .graph import Graph
from .session import config_from


def _steps(value, what):
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        raise InvalidArgumentError("%s: give a step (10) or a range of steps (10, 20), not %r" % (what, value))
    if isinstance(value, int):
        return (value, value)
    try:
        first, last = value
        return (int(first), int(last))
    except (TypeError, ValueError):
        raise InvalidArgumentError("%s: give a step (10) or a range of steps (10, 20), not %r" % (what, value)) \
            from None


def _printer(out):
    """The default callback: a line per progress record, evaluation and
    note, as `weft train` prints them."""

    def show(record):
        if "note" in record:
            line = record["note"]
        elif record.get("final"):
            line = "final: step=%d loss=%.4f" % (record["step"], record["loss"])
            if record.get("test_accuracy") is not None and not math.isnan(record["test_accuracy"]):
                line += " test_accuracy=%.4f" % record["test_accuracy"]
        elif "test_loss" in record:
            line = "eval at step %d: test_loss %.4f" % (record["step"], record["test_loss"])
            if record.get("test_accuracy") is not None and not math.isnan(record["test_accuracy"]):
                line += "  test_accuracy %.4f" % record["test_accuracy"]
        elif "loss" in record:
            line = "step %d  loss %.4f" % (record["step"], record["loss"])
            if record.get("accuracy") is not None and not math.isnan(record["accuracy"]):
                line += "  accuracy %.4f" % record["accuracy"]
            line += "  %d examples/s" % round(record.get("examples_per_sec") or 0)
        else:
            return
        print(line, file=out, flush=True)

    return show


def train(model, config, steps=None, callback=None, verbose=None, resume=False, trace=None, trace_steps=10,
          profile_steps=None, job=None, task=None):
    """Trains |model| as ``weft train`` does and returns the final metrics
    as a dict (step, loss, test_loss, test_accuracy, examples_per_sec,
    input_wait_fraction, checkpoint; on a cluster wire_bytes_per_step).

    model:    a weft.Graph, or the path of a .wg, .wgt or .onnx file.
    config:   a TOML file's path or a dict with the training sections
              ([model], [data], [training], [optimizer], ...;
              docs/training.md).
    steps:    stop after this many steps in all (overrides [training]
              steps and epochs).
    callback: called with each record as it is made: progress
              ({"step", "loss", "accuracy", "learning_rate",
              "examples_per_sec", "wall_time"}, every [training]
              log_every steps), evaluations ({"step", "test_loss",
              "test_accuracy"}), notes ({"note": text}) and the final
              summary ({"final": True, ...}). An exception it raises stops
              the run after the current step and is raised here.
    verbose:  print the records as lines on stdout (the default when no
              callback is given).
    resume:   continue from the newest checkpoint of [checkpoint] dir.
    trace:    write a Chrome trace of ``trace_steps`` (a step or a
              (first, last) range, from 1) to this path.
    profile_steps: a step or (first, last): the result's "profile" says
              where those steps' time went, per task.
    job, task: on a cluster (a config with [cluster.jobs]), train as this
              worker ("worker", i); worker 0 is the chief.

    Ctrl-C stops the run before its next step (the chief saves a
    checkpoint first when [checkpoint] dir is set) and raises
    KeyboardInterrupt; ``resume=True`` continues from there.
    """
    if not isinstance(model, Graph):
        if not isinstance(model, (str, os.PathLike)):
            raise InvalidArgumentError("train: model is a %s; give a weft.Graph or a model file's path"
                                       % type(model).__name__)
        model = os.fspath(model)
    if steps is not None and (not isinstance(steps, int) or steps < 1):
        raise InvalidArgumentError("train: steps must be a positive int, not %r" % (steps,))
    if verbose is None:
        verbose = callback is None
    show = _printer(sys.stdout) if verbose else None
    if callback is not None and not callable(callback):
        raise InvalidArgumentError("train: callback is a %s, not a function" % type(callback).__name__)

    def each(record):
        if show is not None:
            show(record)
        if callback is not None:
            callback(record)

    first_last = _steps(trace_steps, "trace_steps")
    return _weft._train(model, config_from(config), steps or 0, bool(resume),
                        each if (show is not None or callback is not None) else None, os.fspath(trace) if trace else "", first_last,
                        _steps(profile_steps, "profile_steps"), job, task)
