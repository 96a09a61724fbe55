"""MatMul and BatchMatMul against NumPy's matmul (computed in float64)."""
import numpy as np

NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32, "i32": np.int32, "i64": np.int64}


def cases(g):
    r = np.random.default_rng(21)
    for dtype in ["f32", "f64", "f16", "bf16", "i32", "i64"]:
        for ta in (False, True):
            for tb in (False, True):
                m, k, n = 5, 7, 3
                if dtype in ("i32", "i64"):
                    a = r.integers(-9, 9, (k, m) if ta else (m, k)).astype(NP[dtype])
                    b = r.integers(-9, 9, (n, k) if tb else (k, n)).astype(NP[dtype])
                else:
                    a = r.uniform(-1, 1, (k, m) if ta else (m, k))
                    b = r.uniform(-1, 1, (n, k) if tb else (k, n))
                    if dtype == "bf16":
                        a, b = g.to_bf16(a), g.to_bf16(b)
                    else:
                        a, b = a.astype(NP[dtype]), b.astype(NP[dtype])
                want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
                rtol, atol = g.tolerance.get(dtype, (0, 0))
                g.add(f"MatMul/{dtype}_{'t' if ta else 'n'}{'t' if tb else 'n'}", "MatMul", [a, b],
                      {"T": dtype, "transpose_a": ta, "transpose_b": tb},
                      [want.astype(NP[dtype]) if dtype != "bf16" else g.to_bf16(want)],
                      rtol=rtol * 8, atol=atol * 8, input_dtypes=["bf16", "bf16"] if dtype == "bf16" else None,
                      output_dtypes=["bf16"] if dtype == "bf16" else None)
    a = r.standard_normal((64, 300)).astype(np.float32)
    b = r.standard_normal((300, 129)).astype(np.float32)
    g.add("MatMul/f32_large", "MatMul", [a, b], {"T": "f32"}, [(a.astype(np.float64) @ b).astype(np.float32)],
          rtol=1e-4, atol=1e-4)
    a = r.standard_normal((33, 130))
    b = r.standard_normal((130, 17))
    g.add("MatMul/f64_large", "MatMul", [a, b], {"T": "f64"}, [a @ b], rtol=1e-12, atol=1e-12)
    g.add("MatMul/empty_inner", "MatMul", [np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32)], {"T": "f32"},
          [np.zeros((3, 4), np.float32)])
    g.add("MatMul/empty_rows", "MatMul", [np.zeros((0, 5), np.float32), np.ones((5, 4), np.float32)], {"T": "f32"},
          [np.zeros((0, 4), np.float32)])
    g.add("MatMul/nan", "MatMul", [np.float32([[np.nan, 1], [0, 0]]), np.float32([[0, 1], [1, 0]])], {"T": "f32"},
          [np.float32([[np.nan, np.nan], [0, 0]])])
    g.add("MatMul/inner_mismatch", "MatMul", [np.zeros((2, 3), np.float32), np.zeros((4, 2), np.float32)],
          {"T": "f32"}, error="inner dimensions differ")
    g.add("MatMul/rank3", "MatMul", [np.zeros((2, 2, 2), np.float32), np.zeros((2, 2), np.float32)],
          {"T": "f32"}, error="MatMul takes rank-2 tensors")
    g.add("MatMul/i32_wrap", "MatMul", [np.int32([[2**30, 2**30]]), np.int32([[2], [2]])], {"T": "i32"},
          [np.int32([[0]])])  # 2^31 + 2^31 = 2^32 wraps to 0 (hand-derived)
    for dtype in ["f32", "f64"]:
        for ax, ay in [(False, False), (True, False), (False, True)]:
            x = r.standard_normal((2, 1, 4, 3) if not ax else (2, 1, 3, 4)).astype(NP[dtype])
            y = r.standard_normal((3, 3, 5) if not ay else (3, 5, 3)).astype(NP[dtype])
            xm = np.swapaxes(x, -1, -2) if ax else x
            ym = np.swapaxes(y, -1, -2) if ay else y
            want = np.matmul(xm.astype(np.float64), ym.astype(np.float64)).astype(NP[dtype])
            rtol, atol = g.tolerance[dtype]
            g.add(f"BatchMatMul/{dtype}_{int(ax)}{int(ay)}", "BatchMatMul", [x, y],
                  {"T": dtype, "adj_x": ax, "adj_y": ay}, [want], rtol=rtol * 8, atol=atol * 8)
    x = r.standard_normal((3, 2, 4)).astype(np.float16)
    y = r.standard_normal((3, 4, 2)).astype(np.float16)
    g.add("BatchMatMul/f16", "BatchMatMul", [x, y], {"T": "f16"},
          [np.matmul(x.astype(np.float64), y.astype(np.float64)).astype(np.float16)], rtol=4e-3, atol=4e-3)
    x = r.integers(-5, 5, (2, 2, 3)).astype(np.int64)
    y = r.integers(-5, 5, (3, 2)).astype(np.int64)
    g.add("BatchMatMul/i64_broadcast_rank2", "BatchMatMul", [x, y], {"T": "i64"}, [np.matmul(x, y)])
    g.add("BatchMatMul/batch_mismatch", "BatchMatMul", [np.zeros((2, 3, 3), np.float32), np.zeros((4, 3, 3), np.float32)],
          {"T": "f32"}, error="batch dimensions")
