// The rdma transport's hardware-free logic: connection states, framing,
// the side-channel handshake codec, the registration cache and addresses.
// Compiled from the plugin's own sources; needs no RDMA device, no verbs
// header and no libweft. Expected bytes and tables are written out by hand
// from the formats documented in the headers, not produced by the code.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "rdma/address.h"
#include "rdma/connection_state.h"
#include "rdma/frame.h"
#include "rdma/handshake.h"
#include "rdma/registration_cache.h"

namespace weft::rdma {
namespace {

// --- Connection states -----------------------------------------------------

using S = ConnState;
using E = ConnEvent;

struct Expected {
  S to;
  bool notifies;
};

// The design of connection_state.h, written out independently.
const std::map<std::pair<S, E>, Expected>& DesignedTransitions() {
  static const std::map<std::pair<S, E>, Expected> table = {
      {{S::kIdle, E::kSideChannelConnected}, {S::kSideChannelConnected, false}},
      {{S::kIdle, E::kSetupFailed}, {S::kError, false}},
      {{S::kIdle, E::kCloseRequested}, {S::kClosed, false}},
      {{S::kSideChannelConnected, E::kQpInfoExchanged}, {S::kQpInfoExchanged, false}},
      {{S::kSideChannelConnected, E::kSetupFailed}, {S::kError, false}},
      {{S::kSideChannelConnected, E::kPeerClosed}, {S::kError, false}},
      {{S::kSideChannelConnected, E::kCloseRequested}, {S::kClosing, false}},
      {{S::kQpInfoExchanged, E::kQpReadyToReceive}, {S::kReadyToReceive, false}},
      {{S::kQpInfoExchanged, E::kSetupFailed}, {S::kError, false}},
      {{S::kQpInfoExchanged, E::kPeerClosed}, {S::kError, false}},
      {{S::kQpInfoExchanged, E::kCloseRequested}, {S::kClosing, false}},
      {{S::kReadyToReceive, E::kQpReadyToSend}, {S::kReadyToSend, false}},
      {{S::kReadyToReceive, E::kSetupFailed}, {S::kError, false}},
      {{S::kReadyToReceive, E::kQpError}, {S::kError, false}},
      {{S::kReadyToReceive, E::kPeerClosed}, {S::kError, false}},
      {{S::kReadyToReceive, E::kCloseRequested}, {S::kClosing, false}},
      {{S::kReadyToSend, E::kQpError}, {S::kError, true}},
      {{S::kReadyToSend, E::kPeerClosed}, {S::kError, true}},
      {{S::kReadyToSend, E::kCloseRequested}, {S::kClosing, false}},
      {{S::kClosing, E::kDrained}, {S::kClosed, false}},
      {{S::kClosing, E::kPeerClosed}, {S::kClosed, false}},
      {{S::kClosing, E::kQpError}, {S::kClosed, false}},
      {{S::kError, E::kCloseRequested}, {S::kClosed, false}},
  };
  return table;
}

// A machine brought to |state| along the shortest legal path.
ConnectionStateMachine DriveTo(S state) {
  static const std::map<S, std::vector<E>> paths = {
      {S::kIdle, {}},
      {S::kSideChannelConnected, {E::kSideChannelConnected}},
      {S::kQpInfoExchanged, {E::kSideChannelConnected, E::kQpInfoExchanged}},
      {S::kReadyToReceive, {E::kSideChannelConnected, E::kQpInfoExchanged, E::kQpReadyToReceive}},
      {S::kReadyToSend, {E::kSideChannelConnected, E::kQpInfoExchanged, E::kQpReadyToReceive, E::kQpReadyToSend}},
      {S::kClosing, {E::kSideChannelConnected, E::kCloseRequested}},
      {S::kClosed, {E::kCloseRequested}},
      {S::kError, {E::kSetupFailed}},
  };
  ConnectionStateMachine machine;
  for (E event : paths.at(state)) {
    Result<Transition> t = machine.Apply(event);
    EXPECT_TRUE(t.ok()) << t.failure().message;
  }
  EXPECT_EQ(machine.state(), state);
  return machine;
}

TEST(RdmaConnectionState, TheTableIsExactlyTheDesign) {
  std::map<std::pair<S, E>, Expected> actual;
  for (const Transition& t : LegalTransitions()) {
    EXPECT_TRUE(actual.emplace(std::make_pair(t.from, t.event), Expected{t.to, t.notifies_host}).second)
        << "duplicate: " << StateName(t.from) << " / " << EventName(t.event);
  }
  ASSERT_EQ(actual.size(), DesignedTransitions().size());
  for (const auto& [key, expected] : DesignedTransitions()) {
    auto it = actual.find(key);
    ASSERT_NE(it, actual.end()) << StateName(key.first) << " / " << EventName(key.second);
    EXPECT_EQ(it->second.to, expected.to) << StateName(key.first) << " / " << EventName(key.second);
    EXPECT_EQ(it->second.notifies, expected.notifies) << StateName(key.first) << " / " << EventName(key.second);
  }
}

TEST(RdmaConnectionState, EveryLegalTransitionApplies) {
  for (const auto& [key, expected] : DesignedTransitions()) {
    ConnectionStateMachine machine = DriveTo(key.first);
    Result<Transition> t = machine.Apply(key.second);
    ASSERT_TRUE(t.ok()) << t.failure().message;
    EXPECT_EQ(t->from, key.first);
    EXPECT_EQ(t->event, key.second);
    EXPECT_EQ(t->to, expected.to);
    EXPECT_EQ(t->notifies_host, expected.notifies);
    EXPECT_EQ(machine.state(), expected.to);
    std::optional<Transition> found = FindTransition(key.first, key.second);
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->to, expected.to);
  }
}

TEST(RdmaConnectionState, EveryOtherPairIsRefusedNamingEventAndState) {
  int refused = 0;
  for (S state : kAllStates) {
    for (E event : kAllEvents) {
      if (DesignedTransitions().count({state, event}) != 0) continue;
      ++refused;
      EXPECT_FALSE(FindTransition(state, event).has_value());
      ConnectionStateMachine machine = DriveTo(state);
      Result<Transition> t = machine.Apply(event);
      ASSERT_FALSE(t.ok()) << StateName(state) << " / " << EventName(event);
      EXPECT_EQ(t.failure().code, WEFT_FAILED_PRECONDITION);
      EXPECT_EQ(t.failure().message, "rdma connection: event '" + std::string(EventName(event)) +
                                         "' is not legal in state '" + std::string(StateName(state)) + "'");
      EXPECT_EQ(machine.state(), state);
    }
  }
  // 8 states x 9 events, less the 23 legal ones.
  EXPECT_EQ(refused, 8 * 9 - 23);
}

TEST(RdmaConnectionState, ClosedIsFinal) {
  for (E event : kAllEvents) EXPECT_FALSE(FindTransition(S::kClosed, event).has_value()) << EventName(event);
}

TEST(RdmaConnectionState, NamesAreDistinctAndReadable) {
  std::set<std::string_view> states, events;
  for (S s : kAllStates) states.insert(StateName(s));
  for (E e : kAllEvents) events.insert(EventName(e));
  EXPECT_EQ(states.size(), 8u);
  EXPECT_EQ(events.size(), 9u);
  EXPECT_EQ(StateName(S::kReadyToSend), "RTS");
  EXPECT_EQ(EventName(E::kQpReadyToReceive), "QP moved to RTR");
}

TEST(RdmaConnectionState, OnlyRtsCanSend) {
  for (S state : kAllStates) {
    ConnectionStateMachine machine = DriveTo(state);
    EXPECT_EQ(machine.can_send(), state == S::kReadyToSend) << StateName(state);
    EXPECT_EQ(machine.finished(), state == S::kClosed || state == S::kError) << StateName(state);
  }
}

// --- Framing -----------------------------------------------------------------

std::vector<uint8_t> Bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

std::vector<uint8_t> Prefix(const FramePrefix& prefix, const FrameLimits& limits = {}) {
  std::vector<uint8_t> out(kFramePrefixSize);
  Result<Ok> r = EncodeFramePrefix(prefix, limits, std::span<uint8_t, kFramePrefixSize>(out.data(), kFramePrefixSize));
  EXPECT_TRUE(r.ok()) << r.failure().message;
  return out;
}

TEST(RdmaFrame, PrefixLayoutIsLittleEndianAsDocumented) {
  const std::vector<uint8_t> expected = {
      'W',  'R',  'D',  'M',                           // magic
      0x01, 0x00,                                      // version 1
      0x00, 0x00,                                      // flags
      0x05, 0x00, 0x00, 0x00,                          // header length 5
      0x00, 0x00, 0x00, 0x00,                          // reserved
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // payload length 0x0102030405060708
      0x2A, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // sequence 42
  };
  FrameLimits limits;
  limits.max_payload_size = ~uint64_t{0};
  EXPECT_EQ(Prefix({5, 0x0102030405060708ull, 42}, limits), expected);
}

TEST(RdmaFrame, RoundTrips) {
  const FrameLimits limits;
  for (const auto& [header, payload] :
       std::vector<std::pair<std::string, std::string>>{{"", ""},
                                                        {"h", ""},
                                                        {"", "p"},
                                                        {"header", "payload bytes"},
                                                        {std::string(1000, 'x'), std::string(70000, 'y')}}) {
    Result<std::vector<uint8_t>> frame = EncodeFrame(7, Bytes(header), Bytes(payload), limits);
    ASSERT_TRUE(frame.ok()) << frame.failure().message;
    EXPECT_EQ(frame->size(), kFramePrefixSize + header.size() + payload.size());
    std::vector<uint8_t> with_more = *frame;
    with_more.push_back(0xEE);  // the start of a next frame is left alone
    Result<FrameView> view = DecodeFrame(with_more, limits);
    ASSERT_TRUE(view.ok()) << view.failure().message;
    EXPECT_EQ(view->prefix.sequence, 7u);
    EXPECT_EQ(std::string(view->header.begin(), view->header.end()), header);
    EXPECT_EQ(std::string(view->payload.begin(), view->payload.end()), payload);
    EXPECT_EQ(view->frame_size, frame->size());
  }
}

TEST(RdmaFrame, AcceptsExactlyTheLimits) {
  FrameLimits limits;
  limits.max_header_size = 3;
  limits.max_payload_size = 4;
  Result<std::vector<uint8_t>> frame = EncodeFrame(0, Bytes("abc"), Bytes("defg"), limits);
  ASSERT_TRUE(frame.ok()) << frame.failure().message;
  EXPECT_TRUE(DecodeFrame(*frame, limits).ok());
}

void ExpectFailure(const Failure& failure, weft_code_t code, const std::string& message) {
  EXPECT_EQ(failure.code, code) << failure.message;
  EXPECT_EQ(failure.message, message);
}

TEST(RdmaFrame, EncoderRefusesLengthsOverTheLimits) {
  FrameLimits limits;
  limits.max_header_size = 3;
  limits.max_payload_size = 4;
  std::vector<uint8_t> out(kFramePrefixSize);
  std::span<uint8_t, kFramePrefixSize> span(out.data(), kFramePrefixSize);
  Result<Ok> r = EncodeFramePrefix({4, 0, 0}, limits, span);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_INVALID_ARGUMENT, "rdma frame: header of 4 bytes is over the limit of 3 bytes");
  r = EncodeFramePrefix({0, 5, 0}, limits, span);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_INVALID_ARGUMENT, "rdma frame: payload of 5 bytes is over the limit of 4 bytes");
  Result<std::vector<uint8_t>> frame = EncodeFrame(0, Bytes("abcd"), {}, limits);
  ASSERT_FALSE(frame.ok());
  ExpectFailure(frame.failure(), WEFT_INVALID_ARGUMENT, "rdma frame: header of 4 bytes is over the limit of 3 bytes");
  frame = EncodeFrame(0, {}, Bytes("abcde"), limits);
  ASSERT_FALSE(frame.ok());
  ExpectFailure(frame.failure(), WEFT_INVALID_ARGUMENT, "rdma frame: payload of 5 bytes is over the limit of 4 bytes");
}

TEST(RdmaFrame, DecoderNamesWhatIsWrong) {
  const FrameLimits limits;
  std::vector<uint8_t> good = *EncodeFrame(1, Bytes("hh"), Bytes("ppp"), limits);

  Result<FrameView> r = DecodeFrame(std::span<const uint8_t>(good).first(10), limits);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma frame: truncated prefix: 10 of 32 bytes");
  r = DecodeFrame({}, limits);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma frame: truncated prefix: 0 of 32 bytes");

  std::vector<uint8_t> bad = good;
  bad[0] = 'X';  // "XRDM" = 0x4d445258
  r = DecodeFrame(bad, limits);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS,
                "rdma frame: bad magic 0x4d445258 (expected 0x4d445257 \"WRDM\"); the peer is not a Weft rdma "
                "transport or the stream is corrupt");

  bad = good;
  bad[4] = 2;
  r = DecodeFrame(bad, limits);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma frame: version 2 is not supported (this side speaks 1)");

  r = DecodeFrame(std::span<const uint8_t>(good).first(good.size() - 1), limits);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS,
                "rdma frame: truncated: the prefix announces 2 header and 3 payload bytes, but only 4 follow");

  FrameLimits tight;
  tight.max_header_size = 1;
  r = DecodeFrame(good, tight);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma frame: header length 2 is over the limit of 1 bytes");
  tight = FrameLimits{};
  tight.max_payload_size = 2;
  r = DecodeFrame(good, tight);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma frame: payload length 3 is over the limit of 2 bytes");
}

TEST(RdmaFrame, HugeAnnouncedLengthsAreRefusedBeforeAnythingIsAllocated) {
  // A prefix announcing 2^64-1 payload bytes and 2^32-1 header bytes: with
  // the default limits both are refused, so no buffer is ever sized.
  std::vector<uint8_t> prefix = {'W',  'R',  'D',  'M',  1,    0,    0,    0,    0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0,
                                 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0,    0,    0,    0,    0, 0, 0, 0};
  FrameAssembler assembler{FrameLimits{}};
  Result<std::optional<AssembledMessage>> r = assembler.Consume(prefix);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma frame: header length 4294967295 is over the limit of 65536 bytes");
  prefix[8] = 0;
  prefix[9] = prefix[10] = prefix[11] = 0;
  FrameAssembler second{FrameLimits{}};
  r = second.Consume(prefix);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS,
                "rdma frame: payload length 18446744073709551615 is over the limit of 1073741824 bytes");
}

TEST(RdmaFrameAssembler, PutsChunksBackTogether) {
  const FrameLimits limits;
  FrameAssembler assembler(limits);
  for (uint64_t seq = 0; seq < 3; ++seq) {
    const std::string header = "hdr" + std::to_string(seq);
    const std::string payload(100 + seq, static_cast<char>('a' + seq));
    std::vector<uint8_t> frame = *EncodeFrame(seq, Bytes(header), Bytes(payload), limits);
    // Chunks of 40 bytes: the first carries the prefix and 8 more bytes.
    std::optional<AssembledMessage> done;
    for (std::size_t at = 0; at < frame.size(); at += 40) {
      ASSERT_FALSE(done.has_value());
      const std::size_t n = std::min<std::size_t>(40, frame.size() - at);
      Result<std::optional<AssembledMessage>> r = assembler.Consume(std::span<const uint8_t>(frame).subspan(at, n));
      ASSERT_TRUE(r.ok()) << r.failure().message;
      EXPECT_EQ(assembler.in_message(), !r->has_value());
      if (r->has_value()) done = std::move(**r);
    }
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->sequence, seq);
    EXPECT_EQ(std::string(done->header().begin(), done->header().end()), header);
    EXPECT_EQ(std::string(done->payload().begin(), done->payload().end()), payload);
    EXPECT_EQ(assembler.next_sequence(), seq + 1);
  }
}

TEST(RdmaFrameAssembler, AnEmptyMessageCompletesInItsFirstChunk) {
  FrameAssembler assembler{FrameLimits{}};
  Result<std::optional<AssembledMessage>> r = assembler.Consume(Prefix({0, 0, 0}));
  ASSERT_TRUE(r.ok()) << r.failure().message;
  ASSERT_TRUE(r->has_value());
  EXPECT_TRUE((*r)->header().empty());
  EXPECT_TRUE((*r)->payload().empty());
}

TEST(RdmaFrameAssembler, RefusesAnOutOfOrderSequence) {
  FrameAssembler assembler{FrameLimits{}};
  Result<std::optional<AssembledMessage>> r = assembler.Consume(Prefix({0, 0, 1}));
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS,
                "rdma frame: sequence number 1 where 0 was expected; a message was lost or repeated");
}

TEST(RdmaFrameAssembler, RefusesBytesPastTheAnnouncedEndAndStaysBroken) {
  FrameAssembler assembler{FrameLimits{}};
  std::vector<uint8_t> chunk = Prefix({1, 2, 0});
  chunk.insert(chunk.end(), {'h', 'p', 'p', 'x', 'y'});
  Result<std::optional<AssembledMessage>> r = assembler.Consume(chunk);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS,
                "rdma frame: a chunk of message 0 carries 2 bytes past its end (3 bytes announced)");
  EXPECT_FALSE(assembler.in_message());
  r = assembler.Consume(Prefix({0, 0, 0}));
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma frame: the stream is already corrupt; no further chunk is read");
}

TEST(RdmaFrameAssembler, RefusesAChunkTooShortForAPrefix) {
  FrameAssembler assembler{FrameLimits{}};
  Result<std::optional<AssembledMessage>> r = assembler.Consume(Bytes("WRDM"));
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma frame: truncated prefix: 4 of 32 bytes");
}

// --- Handshake ---------------------------------------------------------------

HandshakeInfo SampleInfo() {
  HandshakeInfo info;
  info.qp_num = 0x123456;
  info.psn = 0xABCDEF;
  info.lid = 0x0102;
  info.port = 1;
  info.mtu = 5;
  for (std::size_t i = 0; i < info.gid.size(); ++i) info.gid[i] = static_cast<uint8_t>(0xF0 + i);
  info.ring_address = 0x00007F0011223344ull;
  info.ring_rkey = 0xCAFEBABE;
  info.ring_slots = 16;
  info.slot_size = 1 << 20;
  info.device_name = "mlx5_0";
  return info;
}

TEST(RdmaHandshake, LayoutIsAsDocumented) {
  Result<std::vector<uint8_t>> m = EncodeHandshake(SampleInfo());
  ASSERT_TRUE(m.ok()) << m.failure().message;
  const std::vector<uint8_t>& b = *m;
  ASSERT_EQ(b.size(), 12u + 50u + 6u);
  EXPECT_EQ(std::vector<uint8_t>(b.begin(), b.begin() + 12),
            (std::vector<uint8_t>{'W', 'R', 'H', 'S', 1, 0, 0, 0, 56, 0, 0, 0}));
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 12, b.begin() + 24),
            (std::vector<uint8_t>{0x56, 0x34, 0x12, 0, 0xEF, 0xCD, 0xAB, 0, 0x02, 0x01, 1, 5}));
  EXPECT_EQ(b[24], 0xF0);
  EXPECT_EQ(b[39], 0xFF);
  EXPECT_EQ(std::vector<uint8_t>(b.begin() + 40, b.begin() + 62),
            (std::vector<uint8_t>{0x44, 0x33, 0x22, 0x11, 0x00, 0x7F, 0, 0,  // ring address
                                  0xBE, 0xBA, 0xFE, 0xCA,                    // rkey
                                  16,   0,    0,    0,                       // slots
                                  0,    0,    0x10, 0,                       // slot size 1 MiB
                                  6,    0}));                                // name length
  EXPECT_EQ(std::string(b.begin() + 62, b.end()), "mlx5_0");
}

TEST(RdmaHandshake, RoundTrips) {
  for (const std::string& name : {std::string(), std::string("rxe0"), std::string(kHandshakeMaxDeviceName, 'd')}) {
    HandshakeInfo info = SampleInfo();
    info.device_name = name;
    Result<std::vector<uint8_t>> m = EncodeHandshake(info);
    ASSERT_TRUE(m.ok()) << m.failure().message;
    Result<uint32_t> body = DecodeHandshakePreamble(*m);
    ASSERT_TRUE(body.ok()) << body.failure().message;
    EXPECT_EQ(*body, kHandshakeFixedBodySize + name.size());
    Result<HandshakeInfo> back = DecodeHandshake(*m);
    ASSERT_TRUE(back.ok()) << back.failure().message;
    EXPECT_EQ(*back, info);
  }
}

TEST(RdmaHandshake, PreambleErrorsAreNamed) {
  std::vector<uint8_t> m = *EncodeHandshake(SampleInfo());
  Result<uint32_t> r = DecodeHandshakePreamble(std::span<const uint8_t>(m).first(11));
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma handshake: truncated preamble: 11 of 12 bytes");
  std::vector<uint8_t> bad = m;
  bad[3] = 'X';
  r = DecodeHandshakePreamble(bad);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS,
                "rdma handshake: bad magic; the peer is not a Weft rdma transport (is it a tcp endpoint?)");
  bad = m;
  bad[4] = 9;
  r = DecodeHandshakePreamble(bad);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma handshake: version 9 is not supported (this side speaks 1)");
  for (uint32_t body : {0u, 49u, 115u, 0xFFFFFFFFu}) {
    bad = m;
    bad[8] = static_cast<uint8_t>(body);
    bad[9] = static_cast<uint8_t>(body >> 8);
    bad[10] = static_cast<uint8_t>(body >> 16);
    bad[11] = static_cast<uint8_t>(body >> 24);
    r = DecodeHandshakePreamble(bad);
    ASSERT_FALSE(r.ok()) << body;
    ExpectFailure(r.failure(), WEFT_DATA_LOSS,
                  "rdma handshake: body length " + std::to_string(body) + " is outside 50..114 bytes");
  }
}

TEST(RdmaHandshake, MessageErrorsAreNamed) {
  const std::vector<uint8_t> m = *EncodeHandshake(SampleInfo());
  Result<HandshakeInfo> r = DecodeHandshake(std::span<const uint8_t>(m).first(m.size() - 1));
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS,
                "rdma handshake: truncated message: 67 bytes where the preamble announces 68");
  std::vector<uint8_t> longer = m;
  longer.push_back(0);
  r = DecodeHandshake(longer);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS,
                "rdma handshake: overlong message: 69 bytes where the preamble announces 68");
  std::vector<uint8_t> bad = m;
  bad[60] = 7;  // name length 7, body says 6
  r = DecodeHandshake(bad);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_DATA_LOSS, "rdma handshake: device name length 7 disagrees with the body length 56");
}

TEST(RdmaHandshake, EveryFieldIsRangeCheckedBothWays) {
  struct Case {
    void (*mutate)(HandshakeInfo&);
    std::string what;
  };
  const std::vector<Case> cases = {
      {[](HandshakeInfo& i) { i.qp_num = 0x1000000; }, "queue pair number 16777216 is over 24 bits"},
      {[](HandshakeInfo& i) { i.psn = 0x1000000; }, "packet sequence number 16777216 is over 24 bits"},
      {[](HandshakeInfo& i) { i.port = 0; }, "port number 0 (ports are numbered from 1)"},
      {[](HandshakeInfo& i) { i.mtu = 0; }, "MTU code 0 is not one of 1..5 (256..4096 bytes)"},
      {[](HandshakeInfo& i) { i.mtu = 6; }, "MTU code 6 is not one of 1..5 (256..4096 bytes)"},
      {[](HandshakeInfo& i) { i.ring_slots = 0; }, "ring slot count 0 is outside 1..1024"},
      {[](HandshakeInfo& i) { i.ring_slots = 1025; }, "ring slot count 1025 is outside 1..1024"},
      {[](HandshakeInfo& i) { i.slot_size = 4095; }, "ring slot size 4095 is outside 4096..67108864 bytes"},
      {[](HandshakeInfo& i) { i.slot_size = (64u << 20) + 1; },
       "ring slot size 67108865 is outside 4096..67108864 bytes"},
      {[](HandshakeInfo& i) { i.ring_address = 0; }, "ring address is null"},
  };
  for (const Case& c : cases) {
    HandshakeInfo info = SampleInfo();
    c.mutate(info);
    Result<std::vector<uint8_t>> encoded = EncodeHandshake(info);
    ASSERT_FALSE(encoded.ok()) << c.what;
    ExpectFailure(encoded.failure(), WEFT_INVALID_ARGUMENT, "rdma handshake to send: " + c.what);
    // The same field arriving from a peer: encode a good message and patch
    // the bytes the field occupies.
    std::vector<uint8_t> wire = *EncodeHandshake(SampleInfo());
    auto put = [&](std::size_t at, uint64_t value, std::size_t size) {
      for (std::size_t i = 0; i < size; ++i) wire[at + i] = static_cast<uint8_t>(value >> (8 * i));
    };
    put(12, info.qp_num, 4);
    put(16, info.psn, 4);
    wire[22] = info.port;
    wire[23] = info.mtu;
    put(40, info.ring_address, 8);
    put(52, info.ring_slots, 4);
    put(56, info.slot_size, 4);
    Result<HandshakeInfo> decoded = DecodeHandshake(wire);
    ASSERT_FALSE(decoded.ok()) << c.what;
    ExpectFailure(decoded.failure(), WEFT_DATA_LOSS, "rdma handshake from the peer: " + c.what);
  }
  HandshakeInfo info = SampleInfo();
  info.device_name.assign(kHandshakeMaxDeviceName + 1, 'n');
  Result<std::vector<uint8_t>> encoded = EncodeHandshake(info);
  ASSERT_FALSE(encoded.ok());
  ExpectFailure(encoded.failure(), WEFT_INVALID_ARGUMENT,
                "rdma handshake to send: device name of 65 bytes is over the limit of 64");
}

// --- Registration cache ------------------------------------------------------

// Counts registrations of a fake NIC; addresses are never dereferenced.
struct FakeNic {
  int registered = 0;
  std::vector<std::pair<uintptr_t, uint64_t>> live;
  std::vector<uintptr_t> unregistered;
  bool fail_next = false;

  RegistrationCache Cache(uint64_t budget) {
    return RegistrationCache(
        budget,
        [this](void* address, uint64_t size) -> Result<RegisteredMemory> {
          if (fail_next) {
            fail_next = false;
            return Fail(WEFT_RESOURCE_EXHAUSTED, "fake ibv_reg_mr: out of pinnable memory");
          }
          ++registered;
          live.emplace_back(reinterpret_cast<uintptr_t>(address), size);
          return RegisteredMemory{address, static_cast<uint32_t>(registered), static_cast<uint32_t>(100 + registered)};
        },
        [this](const RegisteredMemory& memory) {
          const uintptr_t at = reinterpret_cast<uintptr_t>(memory.handle);
          unregistered.push_back(at);
          std::erase_if(live, [&](const auto& entry) { return entry.first == at; });
        });
  }
};

const void* At(uintptr_t address) { return reinterpret_cast<const void*>(address); }

TEST(RdmaRegistrationCache, MissRegistersThenContainedRangesHit) {
  FakeNic nic;
  RegistrationCache cache = nic.Cache(1 << 20);
  Result<const Region*> first = cache.Acquire(At(0x10000), 4096);
  ASSERT_TRUE(first.ok()) << first.failure().message;
  EXPECT_EQ(nic.registered, 1);
  EXPECT_EQ((*first)->memory.lkey, 1u);
  EXPECT_EQ((*first)->uses, 1u);
  // The same range, an inner range, and the exact last byte: all hits.
  for (auto [address, size] :
       std::vector<std::pair<uintptr_t, uint64_t>>{{0x10000, 4096}, {0x10100, 100}, {0x10FFF, 1}}) {
    Result<const Region*> hit = cache.Acquire(At(address), size);
    ASSERT_TRUE(hit.ok());
    EXPECT_EQ(*hit, *first);
  }
  EXPECT_EQ(nic.registered, 1);
  EXPECT_EQ(cache.hits(), 3u);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ((*first)->uses, 4u);
  EXPECT_EQ(cache.Find(At(0x10000), 4096), *first);
  EXPECT_EQ(cache.Find(At(0x10000), 4097), nullptr);
}

TEST(RdmaRegistrationCache, OverlapsAndNeighboursAreNotContainedSoTheyRegisterAnew) {
  FakeNic nic;
  RegistrationCache cache = nic.Cache(1 << 20);
  const Region* a = *cache.Acquire(At(0x10000), 0x1000);
  // Straddles a's end; just before a; just after the straddling one.
  const Region* straddle = *cache.Acquire(At(0x10800), 0x1000);
  const Region* before = *cache.Acquire(At(0xF000), 0x1000);
  const Region* after = *cache.Acquire(At(0x11800), 0x10);
  EXPECT_EQ(nic.registered, 4);
  EXPECT_NE(straddle, a);
  EXPECT_NE(before, a);
  EXPECT_NE(after, a);
  EXPECT_EQ(cache.misses(), 4u);
  EXPECT_EQ(cache.region_count(), 4u);
  EXPECT_EQ(cache.cached_bytes(), 0x1000u * 3 + 0x10);
}

TEST(RdmaRegistrationCache, FindsALargeRegionBehindASmallerOneThatStartsLater) {
  FakeNic nic;
  RegistrationCache cache = nic.Cache(1 << 20);
  // The small one first: registered after it, the big one would contain
  // it and a lookup of the small range would simply hit the big one.
  const Region* small = *cache.Acquire(At(0x5000), 0x100);
  const Region* big = *cache.Acquire(At(0x1000), 0x10000);
  EXPECT_NE(big, small);
  // The nearest region starting before 0x6000 is |small|, which ends at
  // 0x5100; only |big| contains it.
  EXPECT_EQ(cache.Find(At(0x6000), 0x10), big);
  EXPECT_EQ(cache.Find(At(0x5000), 0x100), small);
  EXPECT_EQ(cache.Find(At(0x10FFF), 2), nullptr);  // past big's end
}

TEST(RdmaRegistrationCache, EvictsLeastRecentlyUsedFirstToStayInBudget) {
  FakeNic nic;
  RegistrationCache cache = nic.Cache(3000);
  const Region* a = *cache.Acquire(At(0x1000), 1000);
  const Region* b = *cache.Acquire(At(0x2000), 1000);
  const Region* c = *cache.Acquire(At(0x3000), 1000);
  for (const Region* r : {a, b, c}) cache.Release(r);
  EXPECT_EQ(cache.cached_bytes(), 3000u);
  // Touch a: b is now the oldest.
  ASSERT_NE(cache.Find(At(0x1000), 1), nullptr);
  EXPECT_EQ(cache.LruOrder(), (std::vector<std::pair<uintptr_t, uintptr_t>>{
                                  {0x2000, 0x2000 + 1000}, {0x3000, 0x3000 + 1000}, {0x1000, 0x1000 + 1000}}));
  cache.Release(*cache.Acquire(At(0x4000), 1000));
  EXPECT_EQ(nic.unregistered, (std::vector<uintptr_t>{0x2000}));
  EXPECT_EQ(cache.evictions(), 1u);
  // A 2000-byte region needs two more to go: c, then a.
  cache.Release(*cache.Acquire(At(0x8000), 2000));
  EXPECT_EQ(nic.unregistered, (std::vector<uintptr_t>{0x2000, 0x3000, 0x1000}));
  EXPECT_EQ(cache.cached_bytes(), 3000u);
  EXPECT_LE(cache.cached_bytes(), cache.budget());
}

TEST(RdmaRegistrationCache, NeverEvictsARegionInUse) {
  FakeNic nic;
  RegistrationCache cache = nic.Cache(2000);
  const Region* held = *cache.Acquire(At(0x1000), 1000);
  cache.Release(*cache.Acquire(At(0x2000), 1000));
  // The oldest, |held|, is in use: the next one evicts the other.
  const Region* third = *cache.Acquire(At(0x3000), 1000);
  EXPECT_EQ(nic.unregistered, (std::vector<uintptr_t>{0x2000}));
  // Both in use now: nothing can go.
  Result<const Region*> refused = cache.Acquire(At(0x4000), 1000);
  ASSERT_FALSE(refused.ok());
  ExpectFailure(refused.failure(), WEFT_RESOURCE_EXHAUSTED,
                "rdma registration cache: no room for 1000 bytes: 2000 of the 2000 byte budget are held by sends "
                "in flight");
  cache.Release(held);
  EXPECT_TRUE(cache.Acquire(At(0x4000), 1000).ok());
  EXPECT_EQ(nic.unregistered, (std::vector<uintptr_t>{0x2000, 0x1000}));
  cache.Release(third);
}

TEST(RdmaRegistrationCache, RefusesARangeLargerThanTheBudget) {
  FakeNic nic;
  RegistrationCache cache = nic.Cache(4096);
  Result<const Region*> r = cache.Acquire(At(0x1000), 4097);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_RESOURCE_EXHAUSTED,
                "rdma registration cache: 4097 bytes are more than the whole budget of 4096 bytes");
  EXPECT_EQ(nic.registered, 0);
}

TEST(RdmaRegistrationCache, RefusesEmptyAndWrappingRanges) {
  FakeNic nic;
  RegistrationCache cache = nic.Cache(4096);
  Result<const Region*> r = cache.Acquire(At(0x1000), 0);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_INVALID_ARGUMENT, "rdma memory registration: empty range (address 4096, 0 bytes)");
  r = cache.Acquire(nullptr, 16);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_INVALID_ARGUMENT, "rdma memory registration: empty range (address 0, 16 bytes)");
  const uintptr_t high = ~uintptr_t{0} - 15;
  r = cache.Pin(At(high), 32);
  ASSERT_FALSE(r.ok());
  ExpectFailure(
      r.failure(), WEFT_INVALID_ARGUMENT,
      "rdma memory registration: the range of 32 bytes at " + std::to_string(high) + " wraps around the address space");
  EXPECT_EQ(cache.Find(At(0x1000), 0), nullptr);
}

TEST(RdmaRegistrationCache, PassesOnTheRegisterFunctionsFailure) {
  FakeNic nic;
  RegistrationCache cache = nic.Cache(1 << 20);
  nic.fail_next = true;
  Result<const Region*> r = cache.Acquire(At(0x1000), 64);
  ASSERT_FALSE(r.ok());
  ExpectFailure(r.failure(), WEFT_RESOURCE_EXHAUSTED, "fake ibv_reg_mr: out of pinnable memory");
  EXPECT_EQ(cache.region_count(), 0u);
  nic.fail_next = true;
  r = cache.Pin(At(0x1000), 64);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(cache.region_count(), 0u);
}

TEST(RdmaRegistrationCache, PinnedRegionsStayOutsideTheBudgetUntilUnpinned) {
  FakeNic nic;
  RegistrationCache cache = nic.Cache(1000);
  // Pinned regions may exceed the budget: they are the host's explicit
  // registrations.
  const Region* pinned = *cache.Pin(At(0x10000), 5000);
  EXPECT_EQ(cache.cached_bytes(), 0u);
  EXPECT_EQ(pinned->pins, 1u);
  // Sends inside it hit and never evict it.
  const Region* hit = *cache.Acquire(At(0x10010), 100);
  EXPECT_EQ(hit, pinned);
  cache.Release(hit);
  cache.Release(*cache.Acquire(At(0x1000), 1000));
  cache.Release(*cache.Acquire(At(0x2000), 1000));
  EXPECT_EQ(nic.unregistered, (std::vector<uintptr_t>{0x1000}));
  // A second pin of a contained range shares the region.
  const Region* again = *cache.Pin(At(0x10000), 10);
  EXPECT_EQ(again, pinned);
  EXPECT_EQ(pinned->pins, 2u);
  cache.Unpin(again);
  EXPECT_EQ(cache.cached_bytes(), 1000u);
  // The last unpin makes it cached, over budget: it goes at once, after
  // the older cached region.
  cache.Unpin(pinned);
  EXPECT_EQ(nic.unregistered, (std::vector<uintptr_t>{0x1000, 0x2000, 0x10000}));
  EXPECT_EQ(cache.cached_bytes(), 0u);
  EXPECT_EQ(cache.region_count(), 0u);
}

TEST(RdmaRegistrationCache, UnregistersEverythingWhenDestroyed) {
  FakeNic nic;
  {
    RegistrationCache cache = nic.Cache(1 << 20);
    (void)cache.Pin(At(0x1000), 10);
    (void)cache.Acquire(At(0x2000), 10);
    cache.Release(*cache.Acquire(At(0x3000), 10));
  }
  EXPECT_TRUE(nic.live.empty());
  EXPECT_EQ(nic.unregistered.size(), 3u);
}

// --- Addresses ---------------------------------------------------------------

TEST(RdmaAddress, ParsesBothForms) {
  struct Case {
    const char* text;
    RdmaAddress expected;
  };
  for (const Case& c : std::vector<Case>{
           {"rdma://10.0.0.5:7072", {"", "10.0.0.5", 7072}},
           {"rdma://mlx5_0/10.0.0.5:7072", {"mlx5_0", "10.0.0.5", 7072}},
           {"rdma://rxe0/host.example:0", {"rxe0", "host.example", 0}},
           {"rdma://[::1]:65535", {"", "::1", 65535}},
           {"rdma://mlx5_1/[fe80::1]:1", {"mlx5_1", "fe80::1", 1}},
       }) {
    Result<RdmaAddress> r = ParseAddress(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.failure().message;
    EXPECT_EQ(*r, c.expected) << c.text;
    EXPECT_EQ(FormatAddress(*r), c.text);
  }
}

TEST(RdmaAddress, NamesWhatIsWrong) {
  for (const auto& [text, what] : std::vector<std::pair<std::string, std::string>>{
           {"tcp://h:1", "must start with rdma://"},
           {"rdma:/h:1", "must start with rdma://"},
           {"rdma:///h:1", "empty device name before '/'"},
           {"rdma://a/b/h:1", "expected rdma://DEVICE/HOST:PORT, found a second '/'"},
           {"rdma://host", "missing ':PORT'"},
           {"rdma://:7072", "empty host"},
           {"rdma://h:", "the port must be a number from 0 to 65535"},
           {"rdma://h:65536", "the port must be a number from 0 to 65535"},
           {"rdma://h:123456", "the port must be a number from 0 to 65535"},
           {"rdma://h:7a", "the port must be a number from 0 to 65535"},
           {"rdma://::1:5", "an IPv6 host must be written in brackets"},
           {"rdma://[::1:5", "an IPv6 host needs its closing ']'"},
           {"rdma://[::1]5", "missing ':PORT' after the IPv6 host"},
       }) {
    Result<RdmaAddress> r = ParseAddress(text);
    ASSERT_FALSE(r.ok()) << text;
    ExpectFailure(r.failure(), WEFT_INVALID_ARGUMENT, "rdma address '" + text + "': " + what);
  }
}

}  // namespace
}  // namespace weft::rdma
