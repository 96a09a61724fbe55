// The one JSON writer (core/base/json.h) and each emitter built on it:
// whatever they are given, what they write parses as JSON (nlohmann's
// strict parser), with invalid UTF-8 replaced by U+FFFD and non-finite
// numbers as null.
#include "core/base/json.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <map>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/base/logging.h"
#include "core/runtime/trace.h"

namespace weft {
namespace {

const std::string kBad =
    "a\xff"
    "b\xc3";  // a stray byte, and a truncated two-byte sequence
const std::string kReplaced =
    "a\xef\xbf\xbd"
    "b\xef\xbf\xbd";  // each as U+FFFD

nlohmann::json Parse(const std::string& text) {
  // Throws (failing the test with the parser's message) on invalid JSON or
  // invalid UTF-8.
  return nlohmann::json::parse(text);
}

TEST(Json, InvalidUtf8BecomesReplacementCharacters) {
  const std::string text = DumpJson(Json{{"name", kBad}, {kBad, 1}});
  const nlohmann::json back = Parse(text);
  EXPECT_EQ(back["name"], kReplaced);
  EXPECT_EQ(back[kReplaced], 1);
}

TEST(Json, NonFiniteNumbersAreNull) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const nlohmann::json back = Parse(DumpJson(Json{{"nan", nan}, {"inf", inf}, {"-inf", -inf}, {"x", 0.1}}));
  EXPECT_TRUE(back["nan"].is_null());
  EXPECT_TRUE(back["inf"].is_null());
  EXPECT_TRUE(back["-inf"].is_null());
  EXPECT_EQ(back["x"], 0.1);  // round-trips
}

TEST(Json, KeysKeepTheirOrderAndControlCharactersAreEscaped) {
  EXPECT_EQ(DumpJson(Json{{"z", 1}, {"a", "q\"\n\x01"}}), "{\"z\":1,\"a\":\"q\\\"\\n\\u0001\"}");
}

TEST(JsonWriter, WritesWhatTheCallerStructures) {
  std::ostringstream out;
  JsonWriter w(out);
  w.BeginObject();
  w.Key("name");
  w.String(kBad);
  w.Key("values");
  w.BeginArray();
  w.Number(std::nan(""));
  w.Int(-3);
  w.Bool(true);
  w.Null();
  w.BeginObject();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  EXPECT_EQ(out.str(), "{\"name\":\"" + kReplaced + "\",\"values\":[null,-3,true,null,{}]}\n");
  Parse(out.str());
}

// The emitters.

TEST(JsonEmitters, LogLinesWithInvalidUtf8AreValidJson) {
  char path[] = "/tmp/weft_json_log_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  LogSink old = SetLogSink(nullptr);
  ASSERT_TRUE(SetLogDestination(path, LogFormat::kJson).ok());
  WEFT_LOG(WARNING) << "file " << kBad << " is odd";
  ASSERT_TRUE(SetLogDestination("", LogFormat::kText).ok());
  SetLogSink(old);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::remove(path);
  const nlohmann::json back = Parse(line);
  EXPECT_EQ(back["level"], "warning");
  EXPECT_EQ(back["message"], "file " + kReplaced + " is odd");
}

TEST(JsonEmitters, TracesWithInvalidUtf8AreValidJson) {
  runtime::TraceRecorder trace;
  trace.Record({kBad, "Add", "/device:CPU:0", 7, 1, 10, -5, {}});
  const nlohmann::json back = Parse(trace.ToJson());
  // The node's event, then its track's name.
  ASSERT_EQ(back["traceEvents"].size(), 2u);
  EXPECT_EQ(back["traceEvents"][0]["name"], kReplaced);
  EXPECT_EQ(back["traceEvents"][0]["dur"], 0);  // a negative duration is clamped
  EXPECT_EQ(back["traceEvents"][0]["args"]["step"], 7);
  EXPECT_EQ(back["traceEvents"][1]["ph"], "M");
  EXPECT_EQ(back["traceEvents"][1]["args"]["name"], "CPU:0 thread 1");
}

// Events of other processes (a cluster's tasks) get a process each, named;
// a track per device and thread within it; flows pair by id.
TEST(JsonEmitters, ATraceOfSeveralProcessesNamesEachAndItsTracks) {
  runtime::TraceRecorder trace;
  trace.Record({"local", "Add", "/device:CPU:0", 1, 5, 0, 3, {}});
  trace.Record({"send", "_Send", "/job:ps/task:0/device:CPU:0", 1, 9, 10, 2, "/job:ps/task:0"});
  trace.Record({"recv", "_Recv", "/job:worker/task:0/device:CPU:0", 1, 9, 8, 20, "/job:worker/task:0"});
  trace.Record({"other", "Mul", "/job:worker/task:0/device:CPU:1", 1, 9, 30, 2, "/job:worker/task:0"});
  trace.AddFlow({42, "t", "/job:ps/task:0", "/job:ps/task:0/device:CPU:0", 9, 10, "/job:worker/task:0",
                 "/job:worker/task:0/device:CPU:0", 9, 27});
  trace.SetClockOffset("/job:ps/task:0", 12.5, 40);
  const nlohmann::json back = Parse(trace.ToJson());
  std::map<std::string, int64_t> pid;
  std::map<std::pair<int64_t, int64_t>, std::string> track;
  for (const auto& e : back["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") pid[e["args"]["name"]] = e["pid"];
    if (e["ph"] == "M" && e["name"] == "thread_name") track[{e["pid"], e["tid"]}] = e["args"]["name"];
  }
  ASSERT_EQ(pid.size(), 2u);  // this process has no name of its own
  EXPECT_NE(pid["/job:ps/task:0"], pid["/job:worker/task:0"]);
  EXPECT_EQ(track.size(), 4u);  // one each: local CPU:0, ps CPU:0, worker CPU:0 and CPU:1 on thread 9
  for (const auto& e : back["traceEvents"]) {
    if (e["name"] == "other") {
      EXPECT_EQ(e["pid"], pid["/job:worker/task:0"]);
      EXPECT_EQ((track[{e["pid"], e["tid"]}]), "CPU:1 thread 9");
    }
    if (e["ph"] == "s") {
      EXPECT_EQ(e["id"], 42);
      EXPECT_EQ(e["pid"], pid["/job:ps/task:0"]);
    }
    if (e["ph"] == "f") {
      EXPECT_EQ(e["bp"], "e");
      EXPECT_EQ(e["ts"], 27);
      EXPECT_EQ(e["pid"], pid["/job:worker/task:0"]);
    }
  }
  EXPECT_EQ(back["otherData"]["clock_offsets_us"]["/job:ps/task:0"][0], 12.5);
  EXPECT_EQ(back["otherData"]["clock_offsets_us"]["/job:ps/task:0"][1], 40);
}

TEST(JsonEmitters, TraceFilesAreWrittenAtomicallyWithIoErrors) {
  runtime::TraceRecorder trace;
  Status status = trace.WriteJson("/nonexistent-dir/trace.json");
  EXPECT_EQ(status.code(), Code::kNotFound) << status.ToString();
  EXPECT_NE(status.message().find("writing the trace: "), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("/nonexistent-dir/trace.json"), std::string::npos) << status.ToString();
}

}  // namespace
}  // namespace weft
