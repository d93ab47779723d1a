// Bytes that are not a valid request message, sent to the real pacelined
// through grpc::GenericStub for every RPC of paceline.v1.Paceline (read
// from its descriptor, so a new RPC is covered without editing this
// file): INVALID_ARGUMENT naming the request type for a caller with a
// key, UNAUTHENTICATED without one (the key is checked first), a server
// that still answers valid requests, a log that does not grow with them,
// and the message limit, reflection and health as before. They skip when
// ../shared/models is absent.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "server/library_logs.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::server {
namespace {

using ::paceline::testing::DaemonProcess;
using ::paceline::testing::HaveStories260K;
using ::paceline::testing::kStories260KPath;
using ::paceline::testing::MakeClientContext;

constexpr char kKey[] = "alice-test-key";

// Not a message of any type: a tag varint that never ends, a
// length-delimited field 1 that claims more bytes than follow, and a
// field number 0.
const std::vector<std::string>& MalformedBodies() {
  static const auto* bodies =
      new std::vector<std::string>{"\xff\xff\xff",
                                   "\x0a\x05"
                                   "ab",
                                   std::string("\x00", 1)};
  return *bodies;
}

const google::protobuf::ServiceDescriptor& PacelineDescriptor() {
  return *v1::GenerateRequest::descriptor()->file()->FindServiceByName(
      "Paceline");
}

grpc::ByteBuffer Bytes(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

std::string String(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// What one raw call got back.
struct RawAnswer {
  grpc::Status status;
  std::vector<std::string> messages;
};

// Calls `method` ("/package.Service/Method") with `body` as the one request
// message, whatever the method's kind (the wire does not tell them apart),
// and reads every response message.
RawAnswer CallRaw(grpc::GenericStub& stub, const std::string& method,
                  const std::string& body, grpc::ClientContext* context) {
  grpc::CompletionQueue cq;
  auto wait = [&cq] {
    void* tag = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&tag, &ok));
    return ok;
  };
  RawAnswer out;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(context, method, &cq);
  call->StartCall(nullptr);
  if (wait()) {
    call->Write(Bytes(body), nullptr);
    if (wait()) {
      call->WritesDone(nullptr);
      wait();
    }
    grpc::ByteBuffer reply;
    for (call->Read(&reply, nullptr); wait(); call->Read(&reply, nullptr)) {
      out.messages.push_back(String(reply));
    }
  }
  call->Finish(&out.status, nullptr);
  wait();
  cq.Shutdown();
  return out;
}

std::string Path(const google::protobuf::MethodDescriptor& method) {
  return absl::StrCat("/", method.service()->full_name(), "/", method.name());
}

class MalformedRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
    ASSERT_TRUE(
        daemon_
            .Start({"--model", kStories260KPath, "--listen", "127.0.0.1:0",
                    "--tenant", absl::StrCat("alice:", kKey), "--allow-root"})
            .ok())
        << daemon_.stderr_text();
    stub_ = std::make_unique<grpc::GenericStub>(daemon_.Channel());
  }

  void TearDown() override {
    if (stub_ != nullptr) {
      EXPECT_EQ(daemon_.Drain().value_or(-1), 0) << daemon_.stderr_text();
    }
  }

  RawAnswer Call(const google::protobuf::MethodDescriptor& method,
                 const std::string& body, const std::string& key = kKey) {
    std::unique_ptr<grpc::ClientContext> context =
        key.empty() ? std::make_unique<grpc::ClientContext>()
                    : MakeClientContext(key, absl::Seconds(30));
    return CallRaw(*stub_, Path(method), body, context.get());
  }

  DaemonProcess daemon_;
  std::unique_ptr<grpc::GenericStub> stub_;
};

TEST_F(MalformedRequestTest, EveryRpcRefusesBytesThatAreNotItsRequest) {
  const google::protobuf::ServiceDescriptor& service = PacelineDescriptor();
  ASSERT_GE(service.method_count(), 8);
  for (int m = 0; m < service.method_count(); ++m) {
    const google::protobuf::MethodDescriptor& method = *service.method(m);
    for (const std::string& body : MalformedBodies()) {
      SCOPED_TRACE(
          absl::StrCat(method.name(), " body of ", body.size(), " bytes"));
      const RawAnswer answer = Call(method, body);
      EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << answer.status.error_message();
      EXPECT_TRUE(absl::StrContains(answer.status.error_message(),
                                    method.input_type()->full_name()))
          << answer.status.error_message();
      EXPECT_TRUE(answer.messages.empty());
    }
    // The same call well formed (an empty message: every field unset) is
    // answered by the RPC itself, whatever it makes of it.
    const RawAnswer empty = Call(method, "");
    EXPECT_NE(empty.status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
        << method.name();
    EXPECT_FALSE(absl::StrContains(empty.status.error_message(), "not a valid"))
        << method.name() << ": " << empty.status.error_message();
  }
}

TEST_F(MalformedRequestTest, WithoutAKeyTheKeyIsCheckedFirst) {
  const google::protobuf::ServiceDescriptor& service = PacelineDescriptor();
  for (int m = 0; m < service.method_count(); ++m) {
    const google::protobuf::MethodDescriptor& method = *service.method(m);
    for (const std::string& key : {std::string(), std::string("not-a-key")}) {
      SCOPED_TRACE(absl::StrCat(method.name(), " key '", key, "'"));
      const RawAnswer answer = Call(method, MalformedBodies().front(), key);
      EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << answer.status.error_message();
    }
  }
}

TEST_F(MalformedRequestTest, ValidRequestsStillWorkAfterMalformedOnes) {
  const google::protobuf::ServiceDescriptor& service = PacelineDescriptor();
  for (int m = 0; m < service.method_count(); ++m) {
    Call(*service.method(m), MalformedBodies().front());
  }
  v1::GenerateRequest request;
  request.set_text("Once upon a time");
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(4);
  request.mutable_stopping()->set_ignore_eos(true);
  const std::string bytes = request.SerializeAsString();

  const RawAnswer streamed = Call(*service.FindMethodByName("Generate"), bytes);
  ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message();
  ASSERT_GE(streamed.messages.size(), 2u);
  v1::GenerateResponse first, last;
  ASSERT_TRUE(first.ParseFromString(streamed.messages.front()));
  ASSERT_TRUE(last.ParseFromString(streamed.messages.back()));
  EXPECT_TRUE(first.has_accepted());
  ASSERT_TRUE(last.has_finished());
  EXPECT_EQ(last.finished().usage().completion_tokens(), 4);

  const RawAnswer unary = Call(*service.FindMethodByName("Complete"), bytes);
  ASSERT_TRUE(unary.status.ok()) << unary.status.error_message();
  ASSERT_EQ(unary.messages.size(), 1u);
  v1::CompleteResponse complete;
  ASSERT_TRUE(complete.ParseFromString(unary.messages.front()));
  EXPECT_EQ(complete.token_ids_size(), 4);

  // The typed stub, as every client has it.
  auto typed = v1::Paceline::NewStub(daemon_.Channel());
  v1::TokenizeRequest tokenize;
  tokenize.set_text("Once");
  v1::TokenizeResponse tokens;
  auto ctx = MakeClientContext(kKey);
  ASSERT_TRUE(typed->Tokenize(ctx.get(), tokenize, &tokens).ok());
  EXPECT_GT(tokens.token_ids_size(), 0);
}

TEST_F(MalformedRequestTest, ManyMalformedCallsWriteAFewLogLines) {
  const google::protobuf::ServiceDescriptor& service = PacelineDescriptor();
  // Besides the bodies above: a TokenizeRequest whose text (field 2) is
  // not UTF-8, which libprotobuf refuses with a log line of its own.
  std::vector<std::string> bodies = MalformedBodies();
  bodies.push_back("\x12\x02\xc3\x28");
  const google::protobuf::MethodDescriptor& tokenize =
      *service.FindMethodByName("Tokenize");

  const std::string before = daemon_.stderr_text();
  constexpr int kCalls = 200;
  int refused = 0;
  for (int i = 0; i < kCalls; ++i) {
    const bool utf8 = i % 2 == 0;
    const RawAnswer answer =
        utf8 ? Call(tokenize, bodies.back())
             : Call(*service.method(i % service.method_count()),
                    bodies[i % (bodies.size() - 1)]);
    refused += answer.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT;
  }
  EXPECT_EQ(refused, kCalls);
  const std::string after = daemon_.stderr_text();
  ASSERT_GE(after.size(), before.size());
  const std::string added = after.substr(before.size());
  // libprotobuf's UTF-8 complaint, at most kLibraryLogLines lines and a
  // "dropped" line per window (the calls take well under two); nothing
  // else writes a line for a refused request.
  EXPECT_LE(std::count(added.begin(), added.end(), '\n'),
            2 * (kLibraryLogLines + 1))
      << added;
}

// The message limit still holds before any parsing: gRPC refuses a
// request past grpc.max_message_bytes (4 MiB by default) itself.
TEST_F(MalformedRequestTest, AnOversizedRequestIsRefusedByGrpcFirst) {
  const RawAnswer answer =
      Call(*PacelineDescriptor().FindMethodByName("Tokenize"),
           std::string((4 << 20) + 1, '\xff'));
  EXPECT_EQ(answer.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << answer.status.error_message();
}

// The other services on the port are typed as before: server reflection
// still lists and describes paceline.v1.Paceline, the health service
// answers SERVING.
TEST_F(MalformedRequestTest, ReflectionAndHealthStillAnswer) {
  grpc::ClientContext list_ctx;
  // ServerReflectionRequest{list_services: "*"} (field 7).
  const RawAnswer list = CallRaw(
      *stub_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      "\x3a\x01*", &list_ctx);
  ASSERT_TRUE(list.status.ok()) << list.status.error_message();
  ASSERT_EQ(list.messages.size(), 1u);
  EXPECT_TRUE(absl::StrContains(list.messages[0], "paceline.v1.Paceline"));

  grpc::ClientContext file_ctx;
  // ServerReflectionRequest{file_containing_symbol: ...} (field 4).
  const std::string symbol = "paceline.v1.Paceline";
  const RawAnswer file = CallRaw(
      *stub_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      absl::StrCat("\x22", std::string(1, static_cast<char>(symbol.size())),
                   symbol),
      &file_ctx);
  ASSERT_TRUE(file.status.ok()) << file.status.error_message();
  ASSERT_EQ(file.messages.size(), 1u);
  EXPECT_TRUE(absl::StrContains(file.messages[0], "GenerateRequest"));

  grpc::ClientContext health_ctx;
  const RawAnswer health =
      CallRaw(*stub_, "/grpc.health.v1.Health/Check", "", &health_ctx);
  ASSERT_TRUE(health.status.ok()) << health.status.error_message();
  ASSERT_EQ(health.messages.size(), 1u);
  EXPECT_EQ(health.messages[0], "\x08\x01");  // status: SERVING
}

}  // namespace
}  // namespace paceline::server
