#ifndef PACELINE_SERVER_GRPC_REFLECTION_V1_H_
#define PACELINE_SERVER_GRPC_REFLECTION_V1_H_

// grpc.reflection.v1.ServerReflection, next to the grpc.reflection.v1alpha
// one that gRPC's plugin serves (grpcpp/ext/proto_server_reflection_plugin.h):
// current clients (grpcurl, grpcui, Postman, grpcio-reflection) ask for v1
// first. Answers come from protobuf's generated DescriptorPool, as
// v1alpha's do; an unknown file, symbol, type or extension is an
// error_response with NOT_FOUND, a request of no known kind one with
// UNIMPLEMENTED. Like v1alpha, it needs no key: it tells only the public
// schema.
//
// Registered through a ServerBuilderOption, so that it lists exactly the
// services the server registered (the same list v1alpha gets):
//
//   builder.SetOption(ReflectionV1Option());
//
// Thread-safe.

#include <memory>

#include "grpcpp/impl/server_builder_option.h"

namespace paceline::server {

// A ServerBuilder option adding the v1 reflection service to the server it
// builds; the server owns the service.
std::unique_ptr<grpc::ServerBuilderOption> ReflectionV1Option();

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_REFLECTION_V1_H_
