#!/usr/bin/env bash
# Runs Weft's benchmarks, each against its peer in the same process, and
# prints one line per benchmark:
#   BENCH <name> weft=<v> peer=<v> unit=<u> speedup=<x>
#
#   tools/bench/run.sh                    every benchmark
#   tools/bench/run.sh matmul_1024 ...    these only
#   REPEATS=5 tools/bench/run.sh ...      fewer repeats (noisier)
set -euo pipefail
cd "$(dirname "$0")/../.."
all=(matmul_256 matmul_1024 matmul_2048 conv_lenet conv_resnet executor_chain executor_fanout while_loop_iter run_trivial
     transfer_h2d transfer_d2h train_mlp_sgd train_mlp_adam train_cnn_sgd lstm_cell
     onnx_resnet18_b1 onnx_resnet18_b32 onnx_mobilenet_b1 onnx_efficientnet_b0 onnx_bert_encoder graph_prepare_1m startup_run
     tensor_send_64m tensor_send_64m_tls tensor_send_4k null_step null_step_auth null_step_tls remote_loop ps_train_mlp sparse_step sync_train_mlp sync_straggler allreduce_busbw
     startup_rss serve_mobilenet serve_resnet18 serve_null lite int8 python_run_overhead)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")
# The distributed runtime's benchmarks live in their own binary.
dist_names=" tensor_send_64m tensor_send_64m_tls tensor_send_4k null_step null_step_auth null_step_tls remote_loop ps_train_mlp sparse_step sync_train_mlp sync_straggler allreduce_busbw "
if [ ! -x build/bin/weft_bench ] || [ ! -x build/bin/weft_dist_bench ] ||
   [ -n "$(find core plugins tools -newer build/bin/weft_dist_bench -name '*.cc' -print -quit)" ]; then
  tools/setup.sh >/dev/null
  cmake --build --preset release --target weft_bench weft_dist_bench >/dev/null
fi
echo "# $(date -u +%FT%TZ) on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" >&2
# The ONNX benchmarks' second peer, ONNX Runtime: npm's onnxruntime-node
# ships its CPU library inside the package (no install scripts needed).
if [[ " ${names[*]} " == *" onnx_"* || " ${names[*]} " == *" serve_"* ]] && [ ! -f build/ort/node_modules/onnxruntime-node/package.json ]; then
  npm install --silent --ignore-scripts --no-audit --no-fund --prefix build/ort onnxruntime-node >&2 ||
    echo "run.sh: npm could not install onnxruntime-node; the ONNX benchmarks run without ONNX Runtime" >&2
fi
for name in "${names[@]}"; do
  if [ "$name" = startup_run ] || [ "$name" = graph_prepare_1m ]; then
    # These time the weft CLI with every plugin built.
    cmake --build --preset release >/dev/null
  fi
  if [ "$name" = startup_rss ]; then
    # `weft devices` with every plugin against the same without the GPU ones.
    cmake --build --preset release >/dev/null
    /usr/bin/python3 tools/bench/startup_rss.py build/bin/weft ${REPEATS:-7}
  elif [ "$name" = python_run_overhead ]; then
    # weft.Session.run from Python against the same session's C++ run.
    cmake --build --preset release --target weft_python >/dev/null
    PYTHONPATH=build/python /usr/bin/python3 tools/bench/python_run_overhead.py
  elif [[ "$name" == serve_* ]]; then
    # The model server over HTTP, driven by weft_serve_load (tools/bench/serve_bench.py).
    cmake --build --preset release >/dev/null
    /usr/bin/python3 tools/bench/serve_bench.py --weft build/bin/weft --load build/bin/weft_serve_load \
      --ort-prefix build/ort "$name"
  elif [ "$name" = lite ]; then
    # lite_size, lite_first_inference and lite_inference: the lite build for
    # each sample model alone against the full build (tools/bench/lite_bench.py).
    cmake --build --preset release >/dev/null
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    /usr/bin/python3 tools/onnx/export_models.py "$dir" --models mlp,cnn,mobilenet_v2 --batch 2 >/dev/null 2>&1
    for m in mlp cnn mobilenet_v2; do
      WEFT_PLUGIN_PATH= build/bin/weft optimize "$dir/$m.onnx" -o "$dir/$m.wg" >/dev/null
    done
    /usr/bin/python3 tools/bench/lite_bench.py --rounds "${REPEATS:-5}" "mlp=$dir/mlp.wg:$dir/mlp.input.npy" \
      "cnn=$dir/cnn.wg:$dir/cnn.input.npy" "mobilenet_v2=$dir/mobilenet_v2.wg:$dir/mobilenet_v2.input.npy"
    rm -rf "$dir"
  elif [ "$name" = int8 ]; then
    # int8_resnet18_b32 (against f32), int8_resnet18_b32_torch (against
    # PyTorch's int8) and int8_w8_resnet18_b32 (tools/bench/int8_bench.py).
    cmake --build --preset release >/dev/null
    /usr/bin/python3 tools/bench/int8_bench.py build/bin/weft --rounds "${REPEATS:-5}"
  elif [[ "$dist_names" == *" $name "* ]]; then
    build/bin/weft_dist_bench "$name" ${REPEATS:+--repeats "$REPEATS"}
  else
    build/bin/weft_bench "$name" ${REPEATS:+--repeats "$REPEATS"}
  fi
done
