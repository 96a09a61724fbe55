// The C++ layer over the C inference API (weft/weft_inference.hpp): the
// same model as capi_test.c through Model, SessionOptions, Session and
// Array, and its errors as exceptions with the API's code and message.
//
//   capi_cpp_test MODEL.onnx X.bin ROWS Y.bin
//
// Writes the output to Y.bin (capi_test.py compares it with the C
// program's, bit for bit). Prints one line per failed check; exit 1 when
// any failed.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "weft/weft_inference.hpp"

namespace {

namespace wi = weft::inference;

int g_checks = 0;
int g_failures = 0;

void Check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    std::cout << "FAIL " << what << "\n";
  }
}

// |body| must throw an Error of |code| whose message holds |words|.
void Throws(const std::function<void()>& body, int32_t code, const std::vector<std::string>& words,
            const std::string& what) {
  try {
    body();
  } catch (const wi::Error& e) {
    bool ok = e.code() == code;
    for (const std::string& w : words) ok = ok && std::string(e.what()).find(w) != std::string::npos;
    Check(ok, what + ": code " + std::to_string(e.code()) + ", message: " + e.what());
    return;
  }
  Check(false, what + ": nothing thrown");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: capi_cpp_test MODEL.onnx X.bin ROWS Y.bin\n";
    return 2;
  }
  const int64_t rows = std::stoll(argv[3]);
  std::ifstream in(argv[2], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> x(bytes.size() / sizeof(float));
  std::memcpy(x.data(), bytes.data(), x.size() * sizeof(float));
  if (rows < 1 || static_cast<int64_t>(x.size()) != rows * 4) {
    std::cerr << "capi_cpp_test: " << argv[2] << " must hold " << rows << " x 4 float32 values\n";
    return 2;
  }
  try {
    wi::Model model = wi::Model::Load(argv[1]);
    wi::Session session(model, wi::SessionOptions().Threads(1, 1).OptimizerLevel(3).Device("CPU"));
    const auto inputs = session.Inputs();
    const auto outputs = session.Outputs();
    Check(inputs.size() == 1 && inputs[0].name == "x" && inputs[0].dtype == WEFT_DTYPE_F32 &&
              inputs[0].dims == std::vector<int64_t>{-1, 4},
          "Inputs(): x f32 [-1, 4]");
    Check(outputs.size() == 1 && outputs[0].name == "y" && outputs[0].dims == std::vector<int64_t>{-1, 3},
          "Outputs(): y [-1, 3]");
    auto y = session.Run({wi::Feed("x", x.data(), {rows, 4})}, {"y"});
    Check(y.size() == 1 && y[0].dtype() == WEFT_DTYPE_F32 && y[0].dims() == std::vector<int64_t>{rows, 3} &&
              y[0].byte_size() == static_cast<std::size_t>(rows * 3) * sizeof(float),
          "Run: y f32 [rows, 3]");
    std::ofstream(argv[4], std::ios::binary)
        .write(static_cast<const char*>(y[0].raw_data()), static_cast<std::streamsize>(y[0].byte_size()));
    Throws([&] { y[0].data<int32_t>(); }, WEFT_INVALID_ARGUMENT, {"dtype"}, "Array::data of another type");
    Throws(
        [&] {
          session.Run({wi::Feed("z", x.data(), {rows, 4})}, {"y"});
        },
        WEFT_INVALID_ARGUMENT, {"no input \"z\""}, "an unknown input");
    std::vector<int32_t> ints(static_cast<std::size_t>(rows * 4));
    Throws(
        [&] {
          session.Run({wi::Feed("x", ints.data(), {rows, 4})}, {"y"});
        },
        WEFT_INVALID_ARGUMENT, {"input \"x\" is f32, not i32"}, "an int32 feed");
    Throws([&] { wi::Model::Load("/nonexistent/m.onnx"); }, WEFT_NOT_FOUND, {"/nonexistent/m.onnx"}, "a missing model");
    Throws([&] { wi::SessionOptions().Threads(-2, 0); }, WEFT_INVALID_ARGUMENT, {"intra_op -2"}, "bad threads");
    Throws([&] { wi::Session(model, wi::SessionOptions().Device("TPU")); }, WEFT_NOT_FOUND, {"\"TPU\""},
           "an unknown device type");
  } catch (const wi::Error& e) {
    Check(false, std::string("unexpected error: ") + e.what());
  }
  std::cout << g_checks << " C++ checks, " << g_failures << " failed\n";
  return g_failures == 0 ? 0 : 1;
}
