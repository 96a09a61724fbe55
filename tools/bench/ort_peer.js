// The ONNX Runtime peer of Weft's ONNX benchmarks (tools/bench/run.sh
// onnx_resnet18_b1 ...): the same .onnx file run by ONNX Runtime's CPU
// execution provider (npm's onnxruntime-node, which ships its library in the
// package; run.sh installs it under build/ort), sequential execution, all
// graph optimisations, the Weft side's thread count, on a random batch.
//
//   node tools/bench/ort_peer.js ORT_PREFIX MODEL.onnx DIMS THREADS REPEATS
//
// DIMS is the input shape, "1,3,224,224". Prints
// `ms_per_step=<median> ort=<version>`.
'use strict';
const path = require('path');

async function main() {
  const [prefix, model, dims, threads, repeats] = process.argv.slice(2);
  const ort = require(path.join(prefix, 'node_modules', 'onnxruntime-node'));
  const version = require(path.join(prefix, 'node_modules', 'onnxruntime-node', 'package.json')).version;
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const shape = dims.split(',').map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(count);
  for (let i = 0; i < count; ++i) data[i] = Math.random() * 2 - 1;
  const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', data, shape)};
  for (let i = 0; i < 3; ++i) await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(repeats); ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log(`ms_per_step=${times[Math.floor(times.length / 2)].toFixed(4)} ort=${version}`);
}

main().catch((e) => {
  console.error(`ort_peer.js: ${e.message}`);
  process.exit(1);
});
