// The peer of Weft's serving benchmarks (tools/bench/serve_bench.py): the
// server a user would otherwise deploy in a few lines, Node's http module
// around one ONNX Runtime session (npm's onnxruntime-node; run.sh installs it
// under build/ort). CPU execution provider, sequential execution, all graph
// optimisations, THREADS intra-op threads; no batching: each request is one
// session.run.
//
//   node tools/bench/ort_serve_peer.js ORT_PREFIX MODEL.onnx PORT THREADS
//
// Answers KServe v2 JSON on 127.0.0.1 (PORT 0: any free port):
//   POST /v2/models/<any>/infer {"inputs":[{"name","shape","datatype":"FP32","data":[flat]}]}
//     -> {"model_name","outputs":[{"name","datatype":"FP32","shape","data":[...]}]}
//   GET /v2/health/live, /v2/health/ready -> 200
// Errors: 400 {"error": "..."} (404 for other paths, 413 past 64 MiB).
// Prints `listening <port>` once ready.
'use strict';
const http = require('http');
const path = require('path');

const kMaxBody = 64 << 20;
const kInferPath = /^\/v2\/models\/([^/]+)(\/versions\/[^/]+)?\/infer$/;

class BadRequest extends Error {}

function reply(res, code, body) {
  const text = JSON.stringify(body);
  res.writeHead(code, {'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text)});
  res.end(text);
}

// The session's feeds from a KServe v2 JSON request.
function feedsOf(ort, session, request) {
  if (!request || !Array.isArray(request.inputs) || request.inputs.length === 0) {
    throw new BadRequest('expected {"inputs": [{"name", "shape", "datatype", "data"}, ...]}');
  }
  const feeds = {};
  for (const input of request.inputs) {
    if (!session.inputNames.includes(input.name)) {
      const names = session.inputNames.join(', ');
      throw new BadRequest(`no input ${JSON.stringify(input.name)}; the model's inputs: ${names}`);
    }
    if (input.datatype !== 'FP32') {
      throw new BadRequest(`input ${input.name}: datatype ${input.datatype}, expected FP32`);
    }
    if (!Array.isArray(input.shape) || !Array.isArray(input.data)) {
      throw new BadRequest(`input ${input.name}: needs "shape" and "data" arrays`);
    }
    // Flat data as sent; nested arrays (allowed by KServe v2) flattened first (flat() is slow: only when needed).
    const data = Float32Array.from(Array.isArray(input.data[0]) ? input.data.flat(Infinity) : input.data);
    const count = input.shape.reduce((a, b) => a * b, 1);
    if (count !== data.length) {
      throw new BadRequest(`input ${input.name}: shape [${input.shape}] holds ${count} values, data ${data.length}`);
    }
    feeds[input.name] = new ort.Tensor('float32', data, input.shape);
  }
  return feeds;
}

async function infer(ort, session, model, body) {
  let request;
  try {
    request = JSON.parse(body);
  } catch (e) {
    throw new BadRequest(`the body is not JSON: ${e.message}`);
  }
  const results = await session.run(feedsOf(ort, session, request));
  const outputs = session.outputNames.map((name) => ({
    name,
    datatype: 'FP32',
    shape: results[name].dims,
    data: Array.from(results[name].data),
  }));
  return {model_name: model, outputs};
}

function handle(ort, session, req, res) {
  if (req.method === 'GET' && (req.url === '/v2/health/ready' || req.url === '/v2/health/live')) {
    return reply(res, 200, {});
  }
  const match = kInferPath.exec(req.url);
  if (!match) return reply(res, 404, {error: `no such path: ${req.method} ${req.url}`});
  if (req.method !== 'POST') return reply(res, 405, {error: `${req.url} takes POST`});
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size <= kMaxBody) chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > kMaxBody) return reply(res, 413, {error: `the body is over ${kMaxBody} bytes`});
    infer(ort, session, match[1], Buffer.concat(chunks).toString('utf8'))
        .then((answer) => reply(res, 200, answer))
        .catch((e) => reply(res, 400, {error: e.message}));
  });
}

async function main() {
  const [prefix, model, port, threads] = process.argv.slice(2);
  if (threads === undefined) throw new Error('usage: node ort_serve_peer.js ORT_PREFIX MODEL.onnx PORT THREADS');
  const ort = require(path.join(prefix, 'node_modules', 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const server = http.createServer((req, res) => handle(ort, session, req, res));
  server.listen(Number(port), '127.0.0.1', () => console.log(`listening ${server.address().port}`));
  const stop = () => {
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 3000).unref();  // requests still in flight get 3 s
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => {
  console.error(`ort_serve_peer.js: ${e.message}`);
  process.exit(1);
});
