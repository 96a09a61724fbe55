"""Weft's errors as Python exceptions.

Every error Weft reports has a code (docs/errors.md); each code is a class
here, all subclasses of :class:`weft.Error`, and each also a subclass of the
built-in exception a Python user would expect (an invalid argument is a
``ValueError``, a missing name a ``LookupError``), so ``except ValueError``
works too. The message is Weft's own, naming what and where.
"""

from . import _weft


class Error(Exception):
    """Any error Weft reports. ``code`` is its name ("INVALID_ARGUMENT")."""

    code = "UNKNOWN"


# (class, Weft's code, the built-in exception it also is, when it happens)
_TABLE = [
    ("CancelledError", "CANCELLED", (), "the step was cancelled"),
    ("UnknownError", "UNKNOWN", (), "an error without a better code"),
    ("InvalidArgumentError", "INVALID_ARGUMENT", (ValueError,), "a bad attr, dtype, shape, feed or file"),
    ("DeadlineExceededError", "DEADLINE_EXCEEDED", (TimeoutError,), "a step ran past its deadline"),
    ("NotFoundError", "NOT_FOUND", (LookupError,), "no such op, node, tensor, file or device"),
    ("AlreadyExistsError", "ALREADY_EXISTS", (), "a name is taken"),
    ("PermissionDeniedError", "PERMISSION_DENIED", (PermissionError,), "not allowed"),
    ("ResourceExhaustedError", "RESOURCE_EXHAUSTED", (), "out of memory or another limit"),
    ("FailedPreconditionError", "FAILED_PRECONDITION", (RuntimeError,),
     "the state does not allow it: a closed session, an uninitialized variable"),
    ("AbortedError", "ABORTED", (), "aborted, usually by another failure"),
    ("OutOfRangeError", "OUT_OF_RANGE", (IndexError,), "an index or position past the end"),
    ("UnimplementedError", "UNIMPLEMENTED", (NotImplementedError,), "a kernel or feature that is not there"),
    ("InternalError", "INTERNAL", (), "a bug in Weft or a plugin; please report it"),
    ("UnavailableError", "UNAVAILABLE", (), "a device, plugin or task that is not available"),
    ("DataLossError", "DATA_LOSS", (), "a file or message that is damaged"),
    ("UnauthenticatedError", "UNAUTHENTICATED", (), "a peer that did not prove who it is"),
]

_CLASSES = []
for _name, _code, _bases, _doc in _TABLE:
    _cls = type(_name, (Error,) + _bases, {"code": _code, "__doc__": "%s: %s." % (_code, _doc),
                                          "__module__": __name__})
    globals()[_name] = _cls
    _CLASSES.append(_cls)

_weft._set_error_classes({cls.code: cls for cls in _CLASSES})

__all__ = ["Error"] + [cls.__name__ for cls in _CLASSES]
