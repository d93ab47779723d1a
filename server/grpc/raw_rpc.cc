#include "server/grpc/raw_rpc.h"

#include <climits>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace paceline::server {

using Traits = grpc::SerializationTraits<google::protobuf::MessageLite>;

absl::Status ParseRequest(const grpc::ByteBuffer& bytes,
                          google::protobuf::MessageLite* request) {
  // A copy shares the slices; Deserialize clears the buffer it reads.
  grpc::ByteBuffer copy(bytes);
  if (Traits::Deserialize(&copy, request).ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid ", request->GetTypeName()));
}

absl::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer* bytes) {
  // (Serialize counts the size in an int and writes into an empty buffer.)
  if (message.ByteSizeLong() > static_cast<size_t>(INT_MAX)) {
    return absl::InternalError(
        absl::StrCat("a ", message.GetTypeName(), " past 2 GiB"));
  }
  bytes->Clear();
  bool own_buffer = false;
  const grpc::Status status = Traits::Serialize(message, bytes, &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot serialize a ",
                                          message.GetTypeName(), ": ",
                                          status.error_message()));
}

}  // namespace paceline::server
