#ifndef PACELINE_SERVER_GRPC_RAW_RPC_H_
#define PACELINE_SERVER_GRPC_RAW_RPC_H_

// paceline.v1.Paceline's RPCs are registered raw: gRPC hands the service
// a request's bytes and takes its response's bytes, and these two turn
// them into messages and back. The reason: grpc++'s typed callback
// handlers answer bytes that do not parse as the request type with
// UNIMPLEMENTED and no message, before the service sees the call; raw,
// the service answers them with INVALID_ARGUMENT saying so (after the key
// check, like every refusal).
//
// Both use grpc++'s own protobuf serialization (SerializationTraits), so
// a valid message is read and written exactly as the typed handlers did.

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"

namespace paceline::server {

// Parses `bytes` into *request (which is cleared first). InvalidArgument
// "the request is not a valid paceline.v1.TokenizeRequest" (the type
// `request` has) for bytes that are not one: malformed wire format, a
// string field that is not UTF-8, no message at all. `bytes` is left as
// it was.
absl::Status ParseRequest(const grpc::ByteBuffer& bytes,
                          google::protobuf::MessageLite* request);

// Serializes `message` into *bytes, replacing what it held; Internal when
// it cannot be (a message past protobuf's 2 GiB).
absl::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer* bytes);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_RAW_RPC_H_
