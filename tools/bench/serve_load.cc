// weft_serve_load: a closed-loop (or, with --rate, open-loop) HTTP/1.1 load
// generator for the model server's benchmarks (tools/bench/serve_bench.py).
// A plain client on Boost.Asio/Beast, free of core/, so it measures any server
// the same way (Weft's, or the ONNX Runtime peer in ort_serve_peer.js).
//
//   weft_serve_load --url http://127.0.0.1:8501/v2/models/m/infer --body req.json
//                   --header "Content-Type: application/json" --connections 64 --duration 8 --warmup 200
//
// N keep-alive connections each send the one request, read the answer, record
// the latency and send again. The request's bytes are serialised once and
// shared by every connection; answers go through a parser that keeps nothing
// but the status, so the steady state allocates nothing per request. Prints
//   requests=... seconds=... rps=... p50_ms=... p90_ms=... p99_ms=... max_ms=...
//   codes=200:N,429:N errors=N client_dropped=N bytes_in=N
// (or one JSON object with --json). Latencies cover every answer, whatever
// its status; `errors` counts transport failures (resets, timeouts, bad HTTP).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/read.hpp>

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

// Bounds every run: a server that never answers cannot keep a benchmark going.
constexpr double kHardCapSeconds = 600;
constexpr int kMaxStatus = 600;

const char kUsage[] =
    "usage: weft_serve_load --url http://127.0.0.1:PORT/PATH [--body FILE] [--header \"Name: value\"]...\n"
    "                       [--method POST|GET] --connections N (--requests R | --duration SECONDS)\n"
    "                       [--warmup W] [--timeout-ms T] [--rate RPS] [--threads K] [--json]\n"
    "\n"
    "A closed-loop HTTP/1.1 load generator: N keep-alive connections each send the request, read the\n"
    "answer and send again, until R requests (after the warm-up) or SECONDS have passed (default\n"
    "--duration 10; never more than 600 s). Talks to 127.0.0.1/localhost only.\n"
    "  --body FILE      the request body (default: none; the method defaults to POST with a body, else GET)\n"
    "  --header H       an extra request header, repeatable (e.g. \"Content-Type: application/json\")\n"
    "  --warmup W       the first W requests are sent but not recorded (default 0)\n"
    "  --timeout-ms T   an answer slower than T ms counts as an error and its connection is reopened\n"
    "                   (default 30000)\n"
    "  --rate RPS       open loop: issue RPS requests per second on whichever connection is idle;\n"
    "                   when none is, the request is counted as client_dropped\n"
    "  --threads K      event-loop threads, connections shared out among them (default 1)\n"
    "  --json           print the result as one JSON object\n"
    "Prints: requests= seconds= rps= p50_ms= p90_ms= p99_ms= max_ms= codes=200:N,... errors= client_dropped= "
    "bytes_in=\n";

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "weft_serve_load: %s\n", message.c_str());
  std::exit(1);
}

struct Options {
  std::string url, host, target, body_file, method;
  std::vector<std::string> headers;
  unsigned short port = 80;
  int connections = 1;
  int threads = 1;
  int64_t requests = 0;  // 0: run for |duration|
  double duration = 0;   // 0: not given
  int64_t warmup = 0;
  int64_t timeout_ms = 30000;
  double rate = 0;  // 0: closed loop
  bool json = false;
};

int64_t ParseInt(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > max) {
    Fail(flag + " " + text + ": expected an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return v;
}

double ParseSeconds(const std::string& flag, const std::string& text, double max) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0) || v > max) {
    Fail(flag + " " + text + ": expected a number above 0 and at most " + std::to_string(static_cast<int>(max)));
  }
  return v;
}

// http://HOST[:PORT][/PATH], HOST 127.0.0.1 or localhost.
void ParseUrl(Options& o) {
  const std::string prefix = "http://";
  if (o.url.rfind("https://", 0) == 0) Fail("--url " + o.url + ": https is not supported; use http://127.0.0.1:PORT");
  if (o.url.rfind(prefix, 0) != 0) Fail("--url " + o.url + ": expected http://127.0.0.1:PORT/PATH");
  const std::string rest = o.url.substr(prefix.size());
  const std::size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  o.target = slash == std::string::npos ? "/" : rest.substr(slash);
  const std::size_t colon = authority.rfind(':');
  o.host = authority.substr(0, colon);
  if (colon != std::string::npos) {
    o.port = static_cast<unsigned short>(ParseInt("--url port", authority.substr(colon + 1), 1, 65535));
  }
  if (o.host != "127.0.0.1" && o.host != "localhost") {
    Fail("--url " + o.url + ": host " + (o.host.empty() ? "(none)" : o.host) +
         " refused; weft_serve_load talks to this machine only (127.0.0.1 or localhost)");
  }
  for (char c : o.target) {
    if (c == ' ' || c == '\r' || c == '\n') Fail("--url " + o.url + ": the path has a space or line break");
  }
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--json") {
      o.json = true;
      continue;
    }
    if (i + 1 >= argc) Fail(flag + " needs a value (see --help)");
    const std::string value = argv[++i];
    if (flag == "--url")
      o.url = value;
    else if (flag == "--body")
      o.body_file = value;
    else if (flag == "--header")
      o.headers.push_back(value);
    else if (flag == "--method")
      o.method = value;
    else if (flag == "--connections")
      o.connections = static_cast<int>(ParseInt(flag, value, 1, 10000));
    else if (flag == "--threads")
      o.threads = static_cast<int>(ParseInt(flag, value, 1, 256));
    else if (flag == "--requests")
      o.requests = ParseInt(flag, value, 1, int64_t{1} << 40);
    else if (flag == "--duration")
      o.duration = ParseSeconds(flag, value, kHardCapSeconds);
    else if (flag == "--warmup")
      o.warmup = ParseInt(flag, value, 0, int64_t{1} << 40);
    else if (flag == "--timeout-ms")
      o.timeout_ms = ParseInt(flag, value, 1, 3600000);
    else if (flag == "--rate")
      o.rate = ParseSeconds(flag, value, 1e7);
    else
      Fail("unknown option " + flag + " (see --help)");
  }
  if (o.url.empty()) Fail("--url is required (see --help)");
  ParseUrl(o);
  if (o.method.empty()) o.method = o.body_file.empty() ? "GET" : "POST";
  if (o.method != "GET" && o.method != "POST") Fail("--method " + o.method + ": expected POST or GET");
  if (o.requests == 0 && o.duration == 0) o.duration = 10;
  for (const std::string& h : o.headers) {
    const std::size_t colon = h.find(':');
    if (colon == 0 || colon == std::string::npos || h.find_first_of("\r\n") != std::string::npos) {
      Fail("--header \"" + h + "\": expected \"Name: value\" on one line");
    }
  }
  o.threads = std::min(o.threads, o.connections);
  return o;
}

// The request as it goes on the wire, built once.
std::string BuildRequest(const Options& o) {
  std::string body;
  if (!o.body_file.empty()) {
    std::ifstream in(o.body_file, std::ios::binary);
    if (!in) Fail("--body " + o.body_file + ": cannot read the file");
    body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string r = o.method + " " + o.target + " HTTP/1.1\r\nHost: " + o.host + ":" + std::to_string(o.port) + "\r\n";
  if (o.method == "POST" || !body.empty()) r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const std::string& h : o.headers) r += h + "\r\n";
  return r + "\r\n" + body;
}

// Parses an answer keeping only its status (and, when it is not 200, the
// start of its body, to show what went wrong), in place.
class AnswerParser : public http::basic_parser<false> {
 public:
  int status = 0;
  char snippet[160];
  std::size_t snippet_size = 0;

 private:
  void on_request_impl(http::verb, boost::beast::string_view, boost::beast::string_view, int, error_code&) override {}
  void on_response_impl(int code, boost::beast::string_view, int, error_code&) override { status = code; }
  void on_field_impl(http::field, boost::beast::string_view, boost::beast::string_view, error_code&) override {}
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(boost::beast::string_view body, error_code&) override {
    Keep(body);
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view body, error_code&) override {
    Keep(body);
    return body.size();
  }
  void on_finish_impl(error_code&) override {}
  void Keep(boost::beast::string_view body) {
    if (status == 200) return;
    const std::size_t n = std::min(body.size(), sizeof snippet - snippet_size);
    std::copy_n(body.data(), n, snippet + snippet_size);
    snippet_size += n;
  }
};

// What every thread shares: the plan and the claims on it.
struct Plan {
  Options opts;
  std::string request;
  tcp::endpoint endpoint;
  Clock::time_point start;
  Clock::time_point hard_end;
  std::atomic<int64_t> claimed{0};
  // When recording began (the warm-up's end), in ns since |start|; -1: not yet.
  std::atomic<int64_t> record_start_ns{-1};
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::string first_error;
  std::string first_bad_answer;

  // Claims the next request. Returns false when the run is over; |record|
  // says whether its latency counts.
  bool Claim(Clock::time_point now, bool* record) {
    if (stop.load(std::memory_order_relaxed) || now >= hard_end) return false;
    const int64_t begun = record_start_ns.load(std::memory_order_relaxed);
    if (opts.duration > 0 && begun >= 0 &&
        now - start >= std::chrono::nanoseconds(begun) + std::chrono::duration<double>(opts.duration)) {
      stop = true;
      return false;
    }
    const int64_t index = claimed.fetch_add(1, std::memory_order_relaxed);
    if (opts.requests > 0 && index >= opts.warmup + opts.requests) {
      stop = true;
      return false;
    }
    if (index == opts.warmup) {
      record_start_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now - start).count());
    }
    *record = index >= opts.warmup;
    return true;
  }

  void NoteError(const std::string& what) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (first_error.empty()) first_error = what;
  }
};

struct Stats {
  std::vector<int64_t> latency_ns;
  int64_t codes[kMaxStatus + 1] = {};
  int64_t errors = 0;
  int64_t client_dropped = 0;
  int64_t bytes_in = 0;
  Clock::time_point last_done{};
};

class Worker;

// One keep-alive connection.
class Connection {
 public:
  Connection(Worker& worker, asio::io_context& ioc) : worker_(worker), socket_(ioc), retry_timer_(ioc) {}
  void Connect();
  void Send(bool record);
  void CheckDeadline(Clock::time_point now);
  void Close() {
    error_code ignored;
    socket_.close(ignored);
  }
  bool busy() const { return busy_; }

 private:
  void Read();
  void OnAnswer(std::size_t bytes);
  void OnError(const char* stage, const error_code& ec);
  void Done();

  Worker& worker_;
  tcp::socket socket_;
  asio::steady_timer retry_timer_;
  boost::beast::flat_buffer buffer_;
  std::optional<AnswerParser> parser_;
  Clock::time_point sent_at_;
  bool busy_ = false;
  bool record_ = false;
  bool timed_out_ = false;
  bool reused_ = false;  // has answered before: a failure before any byte may be a stale keep-alive
  bool retried_ = false;
};

// One event loop and its share of the connections.
class Worker {
 public:
  Worker(Plan& plan, int connections) : plan_(plan), watchdog_(ioc_), rate_timer_(ioc_) {
    for (int i = 0; i < connections; ++i) conns_.push_back(std::make_unique<Connection>(*this, ioc_));
    stats_.latency_ns.reserve(1 << 16);
  }

  void Run(double rate) {
    rate_ = rate;
    active_ = static_cast<int>(conns_.size());
    for (auto& c : conns_) c->Connect();
    Watch();
    ioc_.run();
  }

  // A connection is ready for its next request: the closed loop sends it,
  // the open loop parks it until the clock says so.
  void Ready(Connection& c) {
    if (rate_ > 0) {
      if (plan_.stop || Clock::now() >= plan_.hard_end) return Finished(c);
      idle_.push_back(&c);
      if (!ticking_) {  // the clock starts with the first open connection
        ticking_ = true;
        rate_start_ = Clock::now();
        Tick();
      }
      return;
    }
    bool record = false;
    if (!plan_.Claim(Clock::now(), &record)) return Finished(c);
    c.Send(record);
  }

  void Finished(Connection& c) {
    c.Close();
    if (--active_ == 0) {
      watchdog_.cancel();
      rate_timer_.cancel();
    }
  }

  Plan& plan() { return plan_; }
  Stats& stats() { return stats_; }
  std::string& bad_answer() { return bad_answer_; }

 private:
  // Times out slow answers every 50 ms (cheaper than a timer per request) and
  // ends the run at the hard cap.
  void Watch() {
    watchdog_.expires_after(std::chrono::milliseconds(50));
    watchdog_.async_wait([this](const error_code& ec) {
      if (ec || active_ == 0) return;
      const Clock::time_point now = Clock::now();
      for (auto& c : conns_) c->CheckDeadline(now);
      if (now >= plan_.hard_end) {
        plan_.stop = true;
        for (auto& c : conns_) c->Close();  // the hard cap: answers still missing are errors
      }
      if (plan_.stop) DrainIdle();
      Watch();
    });
  }

  void DrainIdle() {
    std::vector<Connection*> idle;
    idle.swap(idle_);
    for (Connection* c : idle) Finished(*c);
  }

  // The open loop: every tick issues the requests due since the start.
  void Tick() {
    const Clock::time_point now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - rate_start_).count();
    const auto due = static_cast<int64_t>(elapsed * rate_) + 1;
    for (; issued_ < due; ++issued_) {
      bool record = false;
      if (!plan_.Claim(now, &record)) {
        DrainIdle();
        return;
      }
      if (idle_.empty()) {
        if (record) ++stats_.client_dropped;
        continue;
      }
      Connection* c = idle_.back();
      idle_.pop_back();
      c->Send(record);
    }
    const double period = std::max(1.0 / rate_, 0.0002);  // 5 kHz at most: cheap, and fine-grained
    rate_timer_.expires_at(rate_start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                             (std::floor(elapsed / period) + 1) * period)));
    rate_timer_.async_wait([this](const error_code& ec) {
      if (!ec && active_ > 0) Tick();
    });
  }

  Plan& plan_;
  asio::io_context ioc_{1};
  asio::steady_timer watchdog_;
  asio::steady_timer rate_timer_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::vector<Connection*> idle_;
  Stats stats_;
  std::string bad_answer_;
  int active_ = 0;
  double rate_ = 0;
  int64_t issued_ = 0;
  bool ticking_ = false;
  Clock::time_point rate_start_{};
};

void Connection::Connect() {
  busy_ = false;
  reused_ = false;
  buffer_.clear();
  Close();
  socket_.async_connect(worker_.plan().endpoint, [this](const error_code& ec) {
    if (ec) return OnError("connect", ec);
    socket_.set_option(tcp::no_delay(true));
    worker_.Ready(*this);
  });
}

void Connection::Send(bool record) {
  record_ = record;
  retried_ = false;
  busy_ = true;
  timed_out_ = false;
  parser_.reset();
  sent_at_ = Clock::now();
  asio::async_write(socket_, asio::buffer(worker_.plan().request), [this](const error_code& ec, std::size_t) {
    if (ec) return OnError("send", ec);
    Read();
  });
}

void Connection::Read() {
  parser_.emplace();
  parser_->body_limit(std::uint64_t{1} << 30);
  parser_->header_limit(1 << 20);
  http::async_read(socket_, buffer_, *parser_, [this](const error_code& ec, std::size_t bytes) {
    if (ec) return OnError("read", ec);
    OnAnswer(bytes);
  });
}

void Connection::OnAnswer(std::size_t bytes) {
  const Clock::time_point now = Clock::now();
  Stats& s = worker_.stats();
  busy_ = false;
  reused_ = true;
  s.bytes_in += static_cast<int64_t>(bytes);
  if (record_) {
    s.latency_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(now - sent_at_).count());
    ++s.codes[std::clamp(parser_->status, 0, kMaxStatus)];
    if (parser_->status != 200 && worker_.bad_answer().empty()) {
      worker_.bad_answer() =
          std::to_string(parser_->status) + " " + std::string(parser_->snippet, parser_->snippet_size);
    }
    s.last_done = now;
  }
  if (!parser_->keep_alive()) {
    buffer_.clear();
    return Connect();
  }
  worker_.Ready(*this);
}

void Connection::CheckDeadline(Clock::time_point now) {
  if (busy_ && !timed_out_ && now - sent_at_ > std::chrono::milliseconds(worker_.plan().opts.timeout_ms)) {
    timed_out_ = true;
    Close();
  }
}

void Connection::OnError(const char* stage, const error_code& ec) {
  Plan& plan = worker_.plan();
  buffer_.clear();
  // The server closed an idle keep-alive connection just as we reused it:
  // resend once on a fresh one, as browsers do; not an error.
  const bool stale = reused_ && !retried_ && !timed_out_ && busy_ && (!parser_ || !parser_->got_some()) &&
                     (ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe);
  if (stale) {
    const bool record = record_;
    reused_ = false;
    Close();
    socket_.async_connect(plan.endpoint, [this, record](const error_code& e) {
      if (e) return OnError("connect", e);
      socket_.set_option(tcp::no_delay(true));
      const Clock::time_point first_sent = sent_at_;
      Send(record);
      sent_at_ = first_sent;
      retried_ = true;
    });
    return;
  }
  ++worker_.stats().errors;
  const std::string where = plan.opts.host + ":" + std::to_string(plan.opts.port);
  plan.NoteError(timed_out_ ? "no answer from " + where + " within --timeout-ms " + std::to_string(plan.opts.timeout_ms)
                            : std::string(stage) + " " + where + ": " + ec.message());
  busy_ = false;
  Close();
  // Reconnect after a pause, so a dead server is not hammered in a tight loop.
  retry_timer_.expires_after(std::chrono::milliseconds(20));
  retry_timer_.async_wait([this](const error_code&) {
    if (worker_.plan().stop || Clock::now() >= worker_.plan().hard_end) return worker_.Finished(*this);
    Connect();
  });
}

double PercentileMs(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return static_cast<double>(sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)]) / 1e6;
}

std::string Fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  return text;
}

void Report(const Plan& plan, const std::vector<std::unique_ptr<Worker>>& workers) {
  std::vector<int64_t> all;
  int64_t codes[kMaxStatus + 1] = {};
  int64_t errors = 0, dropped = 0, bytes_in = 0;
  Clock::time_point last = plan.start;
  for (const auto& w : workers) {
    Stats& s = w->stats();
    all.insert(all.end(), s.latency_ns.begin(), s.latency_ns.end());
    for (int c = 0; c <= kMaxStatus; ++c) codes[c] += s.codes[c];
    errors += s.errors;
    dropped += s.client_dropped;
    bytes_in += s.bytes_in;
    last = std::max(last, s.last_done);
  }
  std::sort(all.begin(), all.end());
  const int64_t begun = std::max<int64_t>(0, plan.record_start_ns.load());
  const double seconds =
      std::max(1e-9, std::chrono::duration<double>(last - plan.start).count() - static_cast<double>(begun) / 1e9);
  const auto n = static_cast<int64_t>(all.size());
  std::string code_list, code_json;
  for (int c = 0; c <= kMaxStatus; ++c) {
    if (codes[c] == 0) continue;
    code_list += (code_list.empty() ? "" : ",") + std::to_string(c) + ":" + std::to_string(codes[c]);
    code_json += (code_json.empty() ? "\"" : ",\"") + std::to_string(c) + "\":" + std::to_string(codes[c]);
  }
  const std::string rps = Fixed(n > 0 ? static_cast<double>(n) / seconds : 0, 1);
  const std::string p50 = Fixed(PercentileMs(all, 0.5), 3), p90 = Fixed(PercentileMs(all, 0.9), 3);
  const std::string p99 = Fixed(PercentileMs(all, 0.99), 3), max = Fixed(PercentileMs(all, 1.0), 3);
  const std::string secs = Fixed(n > 0 ? seconds : 0, 3);
  if (plan.opts.json) {
    std::printf(
        "{\"requests\":%lld,\"seconds\":%s,\"rps\":%s,\"p50_ms\":%s,\"p90_ms\":%s,\"p99_ms\":%s,\"max_ms\":%s,"
        "\"codes\":{%s},\"errors\":%lld,\"client_dropped\":%lld,\"bytes_in\":%lld}\n",
        static_cast<long long>(n), secs.c_str(), rps.c_str(), p50.c_str(), p90.c_str(), p99.c_str(), max.c_str(),
        code_json.c_str(), static_cast<long long>(errors), static_cast<long long>(dropped),
        static_cast<long long>(bytes_in));
  } else {
    std::printf(
        "requests=%lld seconds=%s rps=%s p50_ms=%s p90_ms=%s p99_ms=%s max_ms=%s codes=%s errors=%lld "
        "client_dropped=%lld bytes_in=%lld\n",
        static_cast<long long>(n), secs.c_str(), rps.c_str(), p50.c_str(), p90.c_str(), p99.c_str(), max.c_str(),
        code_list.empty() ? "none" : code_list.c_str(), static_cast<long long>(errors), static_cast<long long>(dropped),
        static_cast<long long>(bytes_in));
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Plan plan;
  plan.opts = ParseArgs(argc, argv);
  const Options& o = plan.opts;
  plan.request = BuildRequest(o);
  plan.endpoint = tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), o.port);
  {
    // Fail early and clearly when nothing listens there.
    asio::io_context probe_ioc;
    tcp::socket probe(probe_ioc);
    error_code ec;
    probe.connect(plan.endpoint, ec);
    if (ec) Fail("cannot connect to " + o.host + ":" + std::to_string(o.port) + " (" + o.url + "): " + ec.message());
  }
  plan.start = Clock::now();
  const double cap = o.duration > 0 ? std::min(kHardCapSeconds, o.duration + 120) : kHardCapSeconds;
  plan.hard_end = plan.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cap));
  if (o.warmup == 0) plan.record_start_ns = 0;

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < o.threads; ++t) {
    const int share = o.connections / o.threads + (t < o.connections % o.threads ? 1 : 0);
    workers.push_back(std::make_unique<Worker>(plan, share));
  }
  std::vector<std::thread> threads;
  for (int t = 1; t < o.threads; ++t) {
    threads.emplace_back([&plan, &workers, t] { workers[t]->Run(plan.opts.rate / plan.opts.threads); });
  }
  workers[0]->Run(o.rate / o.threads);
  for (std::thread& t : threads) t.join();

  Report(plan, workers);
  for (const auto& w : workers) {
    if (!w->bad_answer().empty()) {
      std::fprintf(stderr, "weft_serve_load: the first non-200 answer: %s\n", w->bad_answer().c_str());
      break;
    }
  }
  if (!plan.first_error.empty()) std::fprintf(stderr, "weft_serve_load: first error: %s\n", plan.first_error.c_str());
  int64_t answered = 0;
  for (const auto& w : workers) answered += static_cast<int64_t>(w->stats().latency_ns.size());
  if (answered == 0) Fail("no request was answered" + (plan.first_error.empty() ? "" : ": " + plan.first_error));
  return 0;
}
