"""The row-routing ops: Unique, DynamicPartition, DynamicStitch.

References: Unique from numpy.unique(return_index, return_inverse)
reordered by first occurrence (so y keeps x's order); DynamicPartition
from boolean masks (data[partitions == p]); DynamicStitch by assigning the
rows in order into a NumPy array (later writes win, as the op documents).
"""
import numpy as np

from .array import NP, rng, values

FLOATS = ["f32", "f64", "f16", "bf16"]
INTS = ["i8", "i16", "i32", "i64", "u8"]


def unique_reference(x):
    """y in order of first occurrence, and idx with x = y[idx]."""
    _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")      # distinct values by first position
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return x[np.sort(first)], rank[inverse.reshape(-1)]


def unique_cases(g):
    r = rng(31)
    for dtype in FLOATS + INTS:
        if dtype in FLOATS:
            pool = values(g, r, (5,), dtype)
            x = pool[r.integers(0, 5, 12)]
        else:
            x = r.integers(0, 6, 12).astype(NP[dtype])
        y, idx = unique_reference(x)
        for out_idx in ["i32", "i64"]:
            g.add(f"Unique/{dtype}_{out_idx}", "Unique", [x], {"T": dtype, "out_idx": out_idx},
                  [y, idx.astype(NP[out_idx])])
    x = np.float32([0.0, -0.0, 1.5, 0.0])   # +0 and -0 are one value; the first one is kept
    g.add("Unique/signed_zeros", "Unique", [x], {"T": "f32", "out_idx": "i32"},
          [np.float32([0.0, 1.5]), np.int32([0, 0, 1, 0])])
    x = np.float32([np.nan, 1.0, np.nan])    # each NaN is its own value
    g.add("Unique/nans", "Unique", [x], {"T": "f32", "out_idx": "i32"},
          [np.float32([np.nan, 1.0, np.nan]), np.int32([0, 1, 2])])
    g.add("Unique/empty", "Unique", [np.zeros((0,), np.int64)], {"T": "i64", "out_idx": "i64"},
          [np.zeros((0,), np.int64), np.zeros((0,), np.int64)])
    x = r.integers(0, 1000, 5000).astype(np.int64)
    y, idx = unique_reference(x)
    g.add("Unique/many", "Unique", [x], {"T": "i64", "out_idx": "i32"}, [y, idx.astype(np.int32)])
    g.add("Unique/not_1d", "Unique", [np.zeros((2, 2), np.int32)], {"T": "i32", "out_idx": "i32"},
          error="x must be 1-D")


def dynamic_partition_cases(g):
    r = rng(32)
    for dtype in FLOATS + INTS + ["bool"]:
        data = values(g, r, (6, 3), dtype)
        parts = np.int32([2, 0, 2, 1, 0, 2])
        g.add(f"DynamicPartition/{dtype}", "DynamicPartition", [data, parts], {"T": dtype, "num_partitions": 3},
              [data[parts == p] for p in range(3)])
    data = values(g, r, (2, 3, 4), "f32")
    parts = np.int32([[1, 0, 1], [3, 1, 0]])
    g.add("DynamicPartition/rank2_partitions", "DynamicPartition", [data, parts],
          {"T": "f32", "num_partitions": 4}, [data[parts == p] for p in range(4)])
    data = values(g, r, (5,), "i64")
    parts = np.int32([1, 1, 1, 1, 1])
    g.add("DynamicPartition/an_empty_output", "DynamicPartition", [data, parts],
          {"T": "i64", "num_partitions": 2}, [data[parts == p] for p in range(2)])
    data = values(g, r, (3, 2), "f32")
    g.add("DynamicPartition/partition_out_of_range", "DynamicPartition", [data, np.int32([0, 2, 1])],
          {"T": "f32", "num_partitions": 2}, error="partitions[1] = 2 is outside [0, 2)")
    g.add("DynamicPartition/negative_partition", "DynamicPartition", [data, np.int32([0, -1, 1])],
          {"T": "f32", "num_partitions": 2}, error="partitions[1] = -1 is outside [0, 2)")
    g.add("DynamicPartition/not_a_prefix", "DynamicPartition", [data, np.int32([0, 1])],
          {"T": "f32", "num_partitions": 2}, error="is not a prefix of data's shape")


def stitch_reference(indices, data):
    rows = max([int(i.max()) + 1 for i in indices if i.size] + [0])
    inner = data[0].shape[indices[0].ndim:]
    out = np.zeros((rows,) + inner, data[0].dtype)
    for ind, d in zip(indices, data):
        flat = d.reshape((-1,) + inner)
        for k, i in enumerate(ind.reshape(-1)):
            out[i] = flat[k]
    return out


def dynamic_stitch_cases(g):
    r = rng(33)
    for dtype in FLOATS + INTS + ["bool"]:
        indices = [np.int32([0, 4]), np.int32([[3, 1], [2, 5]])]
        data = [values(g, r, (2, 3), dtype), values(g, r, (2, 2, 3), dtype)]
        g.add(f"DynamicStitch/{dtype}", "DynamicStitch", indices + data, {"T": dtype, "N": 2},
              [stitch_reference(indices, data)])
    indices = [np.int32([0, 1, 2]), np.int32([1])]
    data = [values(g, r, (3,), "f32"), values(g, r, (1,), "f32")]
    g.add("DynamicStitch/repeated_index_last_wins", "DynamicStitch", indices + data, {"T": "f32", "N": 2},
          [stitch_reference(indices, data)])
    indices = [np.zeros((0,), np.int32)]
    data = [np.zeros((0, 4), np.float32)]
    g.add("DynamicStitch/empty", "DynamicStitch", indices + data, {"T": "f32", "N": 1}, [np.zeros((0, 4), np.float32)])
    # The inverse of DynamicPartition: stitching the partitioned positions
    # gives back the data.
    data = values(g, r, (7, 2), "f64")
    parts = np.int32([1, 0, 2, 2, 0, 1, 0])
    pos = np.arange(7, dtype=np.int32)
    indices = [pos[parts == p] for p in range(3)]
    pieces = [data[parts == p] for p in range(3)]
    g.add("DynamicStitch/undoes_partition", "DynamicStitch", indices + pieces, {"T": "f64", "N": 3}, [data])
    g.add("DynamicStitch/gap", "DynamicStitch", [np.int32([0, 2]), values(g, r, (2,), "f32")], {"T": "f32", "N": 1},
          error="index 1 is below the largest index, 2, but no indices list names it")
    g.add("DynamicStitch/negative_index", "DynamicStitch", [np.int32([0, -1]), values(g, r, (2,), "f32")],
          {"T": "f32", "N": 1}, error="indices[0][1] = -1 is negative")
    g.add("DynamicStitch/rows_differ", "DynamicStitch",
          [np.int32([0]), np.int32([1]), values(g, r, (1, 2), "f32"), values(g, r, (1, 3), "f32")],
          {"T": "f32", "N": 2}, error="data[1] has rows of shape [3], but the data before it has rows of shape [2]")


def cases(g):
    unique_cases(g)
    dynamic_partition_cases(g)
    dynamic_stitch_cases(g)
