// weft predict: one KServe v2 inference request to a model server (weft
// model-server, or any server of the v2 protocol) with its inputs read from
// .npy files; each output is written to a .npy file and the small ones are
// printed, as `weft run` does (docs/serving.md, "weft predict").
//
// The inputs go as binary tensors (the v2 binary data extension) unless
// --json is given, and the outputs are asked for as binary tensors too, so
// no number goes through JSON text and none is rounded on the way.
//
// An https:// URL is spoken over TLS (OpenSSL through Boost.Asio): the
// server's certificate must chain to the system's CAs or to --cacert and
// name the URL's host; --cert and --key present a client certificate to a
// server that asks for one ([serving] tls_ca, docs/serving.md "HTTPS").
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <type_traits>

#include "core/base/json.h"
#include "core/base/strings.h"
#include "core/serving/codec.h"
#include "core/tensor/npy.h"
#include "tools/weft/commands.h"

namespace weft::cli {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

struct PredictArgs {
  std::string url;
  std::vector<std::string> feeds;  // NAME=FILE.npy
  std::string out_dir = ".";
  std::string token_file;
  std::string cacert;  // https: the CA(s) to trust instead of the system's
  std::string cert;    // https: a client certificate, and its key
  std::string key;
  double timeout_s = 60;
  bool json = false;
  bool quiet = false;
};

// Where a request goes: http[s]://HOST[:PORT]/v2/models/NAME[/versions/V][/infer].
struct PredictUrl {
  bool tls = false;
  std::string host;
  std::string port = "80";
  std::string target;  // the path, ending in /infer
};

Expected<PredictUrl> ParsePredictUrl(const std::string& url) {
  const std::string expected = "expected http://HOST:PORT/v2/models/NAME[/versions/V] (or https://)";
  PredictUrl out;
  if (url.starts_with("https://")) {
    out.tls = true;
    out.port = "443";
  } else if (!url.starts_with("http://")) {
    return InvalidArgumentError("predict: ", Quote(url), " is not a URL: ", expected);
  }
  const std::string rest = url.substr(out.tls ? 8 : 7);
  const std::size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  std::string path = slash == std::string::npos ? "" : rest.substr(slash);
  std::size_t colon = authority.rfind(':');
  if (authority.starts_with('[')) {  // [::1]:8501
    const std::size_t close = authority.find(']');
    if (close == std::string::npos) return InvalidArgumentError("predict: ", Quote(url), ": unclosed '[' in the host");
    out.host = authority.substr(1, close - 1);
    colon = authority.find(':', close);
  } else {
    out.host = authority.substr(0, colon);
  }
  if (colon != std::string::npos) out.port = authority.substr(colon + 1);
  if (out.host.empty()) return InvalidArgumentError("predict: ", Quote(url), " names no host: ", expected);
  if (out.port.empty() || out.port.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgumentError("predict: ", Quote(url), ": the port must be a number");
  }
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.ends_with("/infer")) path.resize(path.size() - 6);
  if (!path.starts_with("/v2/models/") || path.size() == 11) {
    return InvalidArgumentError("predict: ", Quote(url), " is not a model's address: ", expected);
  }
  out.target = path + "/infer";
  return out;
}

// The request: a JSON part, then (binary) the inputs' bytes in order.
Expected<std::pair<std::string, std::size_t>> PredictBody(const std::vector<std::pair<std::string, Tensor>>& inputs,
                                                          bool json_data) {
  Json header = Json::object();
  Json list = Json::array();
  std::string binary;
  for (const auto& [name, tensor] : inputs) {
    const std::string_view type = serving::V2DataType(tensor.dtype());
    if (type == "INVALID" || type == "BYTES") {
      return InvalidArgumentError("predict: --feed ", name, " holds ", DTypeName(tensor.dtype()),
                                  " values, which the v2 protocol's numeric tensors cannot carry");
    }
    Json input = {{"name", name}, {"datatype", type}, {"shape", tensor.shape().dims()}};
    if (json_data) {
      if (tensor.dtype() == DType::kF16 || tensor.dtype() == DType::kBF16) {
        return InvalidArgumentError("predict: --feed ", name, " is ", DTypeName(tensor.dtype()),
                                    ": send it as binary data (leave out --json)");
      }
      Json data = Json::array();
      for (int64_t i = 0; i < tensor.num_elements(); ++i) {
        switch (tensor.dtype()) {
          case DType::kF32: data.push_back(tensor.data<float>()[i]); break;
          case DType::kF64: data.push_back(tensor.data<double>()[i]); break;
          case DType::kI8: data.push_back(tensor.data<int8_t>()[i]); break;
          case DType::kI16: data.push_back(tensor.data<int16_t>()[i]); break;
          case DType::kI32: data.push_back(tensor.data<int32_t>()[i]); break;
          case DType::kI64: data.push_back(tensor.data<int64_t>()[i]); break;
          case DType::kU8: data.push_back(tensor.data<uint8_t>()[i]); break;
          default: data.push_back(tensor.data<bool>()[i]); break;
        }
      }
      input["data"] = std::move(data);
    } else {
      input["parameters"] = {{"binary_data_size", tensor.byte_size()}};
      binary.append(static_cast<const char*>(tensor.raw_data()), tensor.byte_size());
    }
    list.push_back(std::move(input));
  }
  header["inputs"] = std::move(list);
  header["parameters"] = {{"binary_data_output", true}};
  std::string body = DumpJson(header);
  const std::size_t json_length = body.size();
  body += binary;
  return std::make_pair(std::move(body), json_length);
}

Expected<DType> DTypeOfV2(const std::string& name, const std::string& output) {
  for (DType d : AllDTypes()) {
    if (serving::V2DataType(d) == name && d != DType::kString) return d;
  }
  return InvalidArgumentError("predict: output ", Quote(output), " has datatype ", Quote(name),
                              ", which weft predict cannot read");
}

// One output of the answer, from its binary bytes or its "data" list.
Expected<Tensor> ReadOutput(const Json& out, std::string_view binary, std::size_t& offset) {
  if (!out.is_object() || !out.contains("name") || !out["name"].is_string()) {
    return InvalidArgumentError("predict: the server's answer has an output without a name");
  }
  const std::string name = out["name"].get<std::string>();
  if (!out.contains("datatype") || !out["datatype"].is_string() || !out.contains("shape") || !out["shape"].is_array()) {
    return InvalidArgumentError("predict: output ", Quote(name), " has no datatype or shape");
  }
  WEFT_ASSIGN_OR_RETURN(DType dtype, DTypeOfV2(out["datatype"].get<std::string>(), name));
  std::vector<int64_t> dims;
  for (const Json& d : out["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return InvalidArgumentError("predict: output ", Quote(name), " has a bad shape ", DumpJson(out["shape"]));
    }
    dims.push_back(d.get<int64_t>());
  }
  WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(dtype, Shape(dims)));
  const Json* size = nullptr;
  if (out.contains("parameters") && out["parameters"].is_object() && out["parameters"].contains("binary_data_size")) {
    size = &out["parameters"]["binary_data_size"];
  }
  if (size != nullptr) {
    if (!size->is_number_unsigned() || size->get<uint64_t>() != t.byte_size() ||
        binary.size() - offset < t.byte_size()) {
      return InvalidArgumentError("predict: output ", Quote(name), "'s binary data is not the ", t.byte_size(),
                                  " bytes its shape and datatype take");
    }
    if (t.byte_size() > 0) std::memcpy(t.raw_data(), binary.data() + offset, t.byte_size());
    offset += t.byte_size();
    return t;
  }
  if (!out.contains("data") || !out["data"].is_array() ||
      static_cast<int64_t>(out["data"].size()) != t.num_elements()) {
    return InvalidArgumentError("predict: output ", Quote(name), "'s data is not ", t.num_elements(), " values");
  }
  if (dtype == DType::kF16 || dtype == DType::kBF16) {
    return InvalidArgumentError("predict: output ", Quote(name), " came as JSON ", DTypeName(dtype),
                                ", which weft predict cannot read");
  }
  int64_t i = 0;
  for (const Json& v : out["data"]) {
    const bool number = v.is_number() || v.is_boolean() || v.is_null();
    if (!number) return InvalidArgumentError("predict: output ", Quote(name), " has a value that is not a number");
    const double x = v.is_null() ? std::nan("") : v.get<double>();  // null: NaN or an infinity
    switch (dtype) {
      case DType::kF32: t.data<float>()[i] = static_cast<float>(x); break;
      case DType::kF64: t.data<double>()[i] = x; break;
      case DType::kI8: t.data<int8_t>()[i] = static_cast<int8_t>(v.get<int64_t>()); break;
      case DType::kI16: t.data<int16_t>()[i] = static_cast<int16_t>(v.get<int64_t>()); break;
      case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(v.get<int64_t>()); break;
      case DType::kI64: t.data<int64_t>()[i] = v.get<int64_t>(); break;
      case DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v.get<int64_t>()); break;
      default: t.data<bool>()[i] = v.is_boolean() ? v.get<bool>() : x != 0; break;
    }
    ++i;
  }
  return t;
}

// What the server answered: the status, the body and its JSON part's length.
struct PredictAnswer {
  unsigned status = 0;
  std::string reason;
  std::string body;
  std::size_t json_length = 0;
};

// OpenSSL's reason for a TLS failure, with what to do about the usual one.
std::string TlsFailure(const beast::error_code& ec) {
  std::string why = ec.message();
  if (ec.category() == boost::asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    why +=
        " (the server's certificate does not chain to a CA this machine trusts, or does not name the URL's host; "
        "--cacert FILE trusts a private CA)";
  }
  return why;
}

// The client side of TLS: whom to trust, and the client certificate.
Expected<std::unique_ptr<ssl::context>> ClientTls(const PredictArgs& args, const std::string& host) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--cacert", args.cacert},
                                   {"--cert", args.cert},
                                   {"--key", args.key}}) {
    if (!path.empty() && access(path.c_str(), R_OK) != 0) {
      return InvalidArgumentError("predict: ", flag, " ", Quote(path), ": ", std::strerror(errno));
    }
  }
  beast::error_code ec;
  if (args.cacert.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) return UnavailableError("predict: this machine's CA certificates cannot be read (", ec.message(), ")");
  } else {
    ctx->load_verify_file(args.cacert, ec);
    if (ec) return InvalidArgumentError("predict: --cacert ", Quote(args.cacert), ": ", ec.message());
  }
  if (args.cert.empty() != args.key.empty()) {
    return InvalidArgumentError("predict: --cert and --key go together (a client certificate and its key)");
  }
  if (!args.cert.empty()) {
    ctx->use_certificate_chain_file(args.cert, ec);
    if (ec) return InvalidArgumentError("predict: --cert ", Quote(args.cert), ": ", ec.message());
    // An encrypted key fails here rather than asking for a pass phrase on
    // the terminal.
    ctx->set_password_callback([](std::size_t, ssl::context::password_purpose) { return std::string(); });
    ctx->use_private_key_file(args.key, ssl::context::pem, ec);
    const bool mismatch = ec && ec.category() == boost::asio::error::get_ssl_category() &&
                          ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
    if (ec && !mismatch) {
      return InvalidArgumentError("predict: --key ", Quote(args.key), ": ", ec.message(),
                                  " (a PEM private key without a pass phrase)");
    }
    if (mismatch || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      return InvalidArgumentError("predict: --key ", Quote(args.key), " is not the key of --cert ", Quote(args.cert));
    }
  }
  ctx->set_verify_mode(ssl::verify_peer);
  ctx->set_verify_callback(ssl::host_name_verification(host));
  return ctx;
}

// Sends |body| over |stream| (plain or TLS) and returns the status, the
// answer and its JSON part's length.
template <typename Stream>
Expected<PredictAnswer> Exchange(boost::asio::io_context& io, Stream& stream, const tcp::resolver::results_type& to,
                                 const PredictUrl& url, const std::string& body, std::size_t json_length,
                                 const std::string& token, double timeout_s) {
  const std::string where = StrCat(url.host, ":", url.port);
  boost::system::error_code ec;
  // Beast's deadline holds for asynchronous operations only: each step is
  // started asynchronously, then the io_context runs it to its end. The
  // deadline covers the whole exchange.
  auto finish = [&io] {
    io.restart();
    io.run();
  };
  auto timed_out = [&] {
    return Status(Code::kDeadlineExceeded,
                  StrCat("predict: ", where, " did not answer within ", timeout_s, " s (--timeout)"));
  };
  beast::tcp_stream& lowest = beast::get_lowest_layer(stream);
  lowest.expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  lowest.async_connect(to, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
  finish();
  if (ec == beast::error::timeout) return timed_out();
  if (ec) return UnavailableError("predict: cannot connect to ", where, ": ", ec.message());
  if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
    stream.async_handshake(ssl::stream_base::client, [&ec](beast::error_code e) { ec = e; });
    finish();
    if (ec == beast::error::timeout) return timed_out();
    if (ec) return UnavailableError("predict: the TLS handshake with ", where, " failed: ", TlsFailure(ec));
  }
  http::request<http::string_body> request{http::verb::post, url.target, 11};
  request.set(http::field::host, url.host);
  request.set(http::field::user_agent, "weft-predict");
  request.set(http::field::content_type, json_length == body.size() ? "application/json" : "application/octet-stream");
  if (json_length != body.size()) request.set("Inference-Header-Content-Length", std::to_string(json_length));
  if (!token.empty()) request.set(http::field::authorization, "Bearer " + token);
  request.body() = body;
  request.prepare_payload();
  http::async_write(stream, request, [&ec](beast::error_code e, std::size_t) { ec = e; });
  finish();
  if (ec == beast::error::timeout) return timed_out();
  if (ec) return UnavailableError("predict: sending to ", where, " failed: ", TlsFailure(ec));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::uint64_t{4} << 30);
  http::async_read(stream, buffer, parser, [&ec](beast::error_code e, std::size_t) { ec = e; });
  finish();
  if (ec == beast::error::timeout) return timed_out();
  if (ec) {
    // A plain HTTP client that reached a TLS port reads nothing back.
    const bool eof = ec == http::error::end_of_stream || ec == boost::asio::error::eof;
    return UnavailableError("predict: reading the answer from ", where, " failed: ", TlsFailure(ec),
                            eof && !url.tls ? " (if the server serves HTTPS, use an https:// URL)" : "");
  }
  auto response = parser.release();
  PredictAnswer answer;
  answer.status = response.result_int();
  answer.reason = std::string(response.reason());
  answer.body = std::move(response.body());
  answer.json_length = answer.body.size();
  const auto header = response.find("Inference-Header-Content-Length");
  if (header != response.end()) {
    const std::string value(header->value());
    char* end = nullptr;
    const unsigned long long n = std::strtoull(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n > answer.body.size()) {
      return InvalidArgumentError("predict: the answer's Inference-Header-Content-Length ", Quote(value),
                                  " does not fit its ", answer.body.size(), "-byte body");
    }
    answer.json_length = n;
  }
  // The answer is complete: close without waiting for the peer's goodbye.
  beast::error_code ignored;
  lowest.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return answer;
}

Expected<PredictAnswer> SendPredict(const PredictArgs& args, const PredictUrl& url, const std::string& body,
                                    std::size_t json_length, const std::string& token) {
  const std::string where = StrCat(url.host, ":", url.port);
  try {
    boost::asio::io_context io;
    tcp::resolver resolver(io);
    boost::system::error_code ec;
    auto addresses = resolver.resolve(url.host, url.port, ec);
    if (ec) return UnavailableError("predict: cannot resolve ", Quote(url.host), ": ", ec.message());
    if (!url.tls) {
      beast::tcp_stream stream(io);
      return Exchange(io, stream, addresses, url, body, json_length, token, args.timeout_s);
    }
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<ssl::context> ctx, ClientTls(args, url.host));
    beast::ssl_stream<beast::tcp_stream> stream(io, *ctx);
    boost::asio::ip::make_address(url.host, ec);
    // SNI names a host, never an address.
    if (ec && SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str()) != 1) {
      return InvalidArgumentError("predict: ", Quote(url.host), " cannot be sent as a TLS server name");
    }
    return Exchange(io, stream, addresses, url, body, json_length, token, args.timeout_s);
  } catch (const std::exception& e) {
    return UnavailableError("predict: ", where, ": ", e.what());
  }
}

// "dense/logits" -> "dense_logits.npy"
std::string PredictFileName(const std::string& output) {
  std::string name = output;
  for (char& c : name) {
    if (c == '/' || c == ':' || c == '\\') c = '_';
  }
  return name + ".npy";
}

Status Predict(const PredictArgs& args) {
  WEFT_ASSIGN_OR_RETURN(PredictUrl url, ParsePredictUrl(args.url));
  if (!url.tls && !(args.cacert.empty() && args.cert.empty() && args.key.empty())) {
    return InvalidArgumentError("predict: --cacert, --cert and --key are for https:// URLs; ", Quote(args.url),
                                " is plain HTTP");
  }
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const std::string& feed : args.feeds) {
    WEFT_ASSIGN_OR_RETURN(auto input, ReadFeedFlag(feed));
    inputs.push_back(std::move(input));
  }
  std::string token;
  if (!args.token_file.empty()) {
    WEFT_ASSIGN_OR_RETURN(token, ReadBearerToken(args.token_file, "--token-file"));
  }
  WEFT_ASSIGN_OR_RETURN(auto request, PredictBody(inputs, args.json));
  WEFT_ASSIGN_OR_RETURN(PredictAnswer answer, SendPredict(args, url, request.first, request.second, token));
  const std::string_view json_text(answer.body.data(), answer.json_length);
  const Json parsed = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (answer.status != 200) {
    std::string message = std::string(json_text.substr(0, 500));
    if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()) {
      message = parsed["error"].get<std::string>();
    }
    return UnavailableError("predict: the server answered ", answer.status, " ", answer.reason, ": ", message);
  }
  if (!parsed.is_object() || !parsed.contains("outputs") || !parsed["outputs"].is_array()) {
    return InvalidArgumentError("predict: the server's answer is not a v2 inference response (no \"outputs\" list)");
  }
  std::error_code ec;
  std::filesystem::create_directories(args.out_dir, ec);
  if (ec) return InvalidArgumentError("predict: cannot create --out-dir ", Quote(args.out_dir), ": ", ec.message());
  const std::string_view binary = std::string_view(answer.body).substr(answer.json_length);
  std::size_t offset = 0;
  for (const Json& out : parsed["outputs"]) {
    WEFT_ASSIGN_OR_RETURN(Tensor t, ReadOutput(out, binary, offset));
    const std::string name = out["name"].get<std::string>();
    const std::string path = (std::filesystem::path(args.out_dir) / PredictFileName(name)).string();
    WEFT_RETURN_IF_ERROR(WriteNpy(path, t));
    if (!args.quiet) {
      std::cout << name << " -> " << path;
      if (t.num_elements() <= 64) std::cout << "  " << t.DebugString(64);
      std::cout << '\n';
    }
  }
  if (offset != binary.size()) {
    return InvalidArgumentError("predict: the answer has ", binary.size() - offset,
                                " bytes of binary data that no output claims");
  }
  return Status::Ok();
}

}  // namespace

void AddPredictCommand(CLI::App& app, Runner& run) {
  auto args = std::make_shared<PredictArgs>();
  CLI::App* cmd = app.add_subcommand(
      "predict", "Send one KServe v2 inference request with inputs from .npy files and write the outputs (.npy)");
  cmd->add_option("url", args->url, "http[s]://HOST:PORT/v2/models/NAME[/versions/V]")->required();
  cmd->add_option("--feed", args->feeds, "An input: NAME=FILE.npy (repeatable)")->required();
  cmd->add_option("--out-dir", args->out_dir, "Where each output goes, as NAME.npy (default: .)");
  cmd->add_option("--token-file", args->token_file, "A file holding the server's bearer token");
  cmd->add_option("--cacert", args->cacert, "https: trust the CA certificate(s) in this PEM file, not the system's");
  cmd->add_option("--cert", args->cert, "https: present this client certificate (PEM; with --key)");
  cmd->add_option("--key", args->key, "https: the private key of --cert (PEM)");
  cmd->add_option("--timeout", args->timeout_s, "Seconds to wait for the answer (default 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "Send the inputs as JSON numbers rather than binary tensors");
  cmd->add_flag("-q,--quiet", args->quiet, "Print nothing but errors");
  cmd->footer(
      "Example: weft model-server --models models/ &\n"
      "         weft predict http://localhost:8501/v2/models/mnist --feed x=digit.npy\n"
      "         weft predict https://models.example:8501/v2/models/mnist --feed x=digit.npy --cacert ca.pem");
  cmd->callback([&run, args] {
    run = [args](Context&) {
      const Status status = Predict(*args);
      return status.ok() ? 0 : ReportError(status);
    };
  });
}

}  // namespace weft::cli
