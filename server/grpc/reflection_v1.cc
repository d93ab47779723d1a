#include "server/grpc/reflection_v1.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/impl/server_initializer.h"

namespace paceline::server {
namespace {

namespace pb = google::protobuf;
namespace rv1 = grpc::reflection::v1;

class ReflectionV1Service final
    : public rv1::ServerReflection::CallbackService {
 public:
  // Called once the server has started, with every service it registered.
  // A call before that lists none.
  void SetServices(std::vector<std::string> services) {
    absl::MutexLock lock(&mu_);
    services_ = std::move(services);
  }

  grpc::ServerBidiReactor<rv1::ServerReflectionRequest,
                          rv1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* /*context*/) override;

  rv1::ServerReflectionResponse Answer(
      const rv1::ServerReflectionRequest& request) const;

 private:
  absl::Status ListServices(rv1::ListServiceResponse* response) const;

  mutable absl::Mutex mu_;
  std::vector<std::string> services_ ABSL_GUARDED_BY(mu_);
};

// One per stream: read a request, write its answer, read the next; one
// read or write in flight. The client's half-close ends the call.
class ReflectionCall final
    : public grpc::ServerBidiReactor<rv1::ServerReflectionRequest,
                                     rv1::ServerReflectionResponse> {
 public:
  explicit ReflectionCall(const ReflectionV1Service* service)
      : service_(service) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    response_ = service_->Answer(request_);
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNKNOWN, "write failed"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  const ReflectionV1Service* const service_;
  rv1::ServerReflectionRequest request_;
  rv1::ServerReflectionResponse response_;
};

grpc::ServerBidiReactor<rv1::ServerReflectionRequest,
                        rv1::ServerReflectionResponse>*
ReflectionV1Service::ServerReflectionInfo(grpc::CallbackServerContext*) {
  return new ReflectionCall(this);
}

// `file` and, depth first, every file it imports, each once.
void AddFileAndImports(const pb::FileDescriptor* file,
                       absl::flat_hash_set<const pb::FileDescriptor*>* seen,
                       rv1::FileDescriptorResponse* response) {
  if (!seen->insert(file).second) return;
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  response->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddFileAndImports(file->dependency(i), seen, response);
  }
}

absl::Status FileResponse(const pb::FileDescriptor* file,
                          rv1::FileDescriptorResponse* response) {
  absl::flat_hash_set<const pb::FileDescriptor*> seen;
  AddFileAndImports(file, &seen, response);
  return absl::OkStatus();
}

const pb::Descriptor* MessageType(const std::string& name) {
  return pb::DescriptorPool::generated_pool()->FindMessageTypeByName(name);
}

absl::Status FileByName(const std::string& name,
                        rv1::FileDescriptorResponse* response) {
  const pb::FileDescriptor* file =
      pb::DescriptorPool::generated_pool()->FindFileByName(name);
  if (file == nullptr) return absl::NotFoundError("file not found: " + name);
  return FileResponse(file, response);
}

absl::Status FileContainingSymbol(const std::string& symbol,
                                  rv1::FileDescriptorResponse* response) {
  const pb::FileDescriptor* file =
      pb::DescriptorPool::generated_pool()->FindFileContainingSymbol(symbol);
  if (file == nullptr) {
    return absl::NotFoundError("symbol not found: " + symbol);
  }
  return FileResponse(file, response);
}

absl::Status FileContainingExtension(const rv1::ExtensionRequest& request,
                                     rv1::FileDescriptorResponse* response) {
  const pb::Descriptor* type = MessageType(request.containing_type());
  if (type == nullptr) {
    return absl::NotFoundError("type not found: " + request.containing_type());
  }
  const pb::FieldDescriptor* extension =
      pb::DescriptorPool::generated_pool()->FindExtensionByNumber(
          type, request.extension_number());
  if (extension == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("extension not found: ", request.containing_type(), " ",
                     request.extension_number()));
  }
  return FileResponse(extension->file(), response);
}

absl::Status ExtensionNumbers(const std::string& type_name,
                              rv1::ExtensionNumberResponse* response) {
  const pb::Descriptor* type = MessageType(type_name);
  if (type == nullptr)
    return absl::NotFoundError("type not found: " + type_name);
  std::vector<const pb::FieldDescriptor*> extensions;
  pb::DescriptorPool::generated_pool()->FindAllExtensions(type, &extensions);
  response->set_base_type_name(type->full_name());
  for (const pb::FieldDescriptor* extension : extensions) {
    response->add_extension_number(extension->number());
  }
  return absl::OkStatus();
}

absl::Status ReflectionV1Service::ListServices(
    rv1::ListServiceResponse* response) const {
  absl::MutexLock lock(&mu_);
  for (const std::string& name : services_) {
    response->add_service()->set_name(name);
  }
  return absl::OkStatus();
}

rv1::ServerReflectionResponse ReflectionV1Service::Answer(
    const rv1::ServerReflectionRequest& request) const {
  rv1::ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  absl::Status status;
  using Request = rv1::ServerReflectionRequest;
  switch (request.message_request_case()) {
    case Request::kFileByFilename:
      status = FileByName(request.file_by_filename(),
                          response.mutable_file_descriptor_response());
      break;
    case Request::kFileContainingSymbol:
      status =
          FileContainingSymbol(request.file_containing_symbol(),
                               response.mutable_file_descriptor_response());
      break;
    case Request::kFileContainingExtension:
      status =
          FileContainingExtension(request.file_containing_extension(),
                                  response.mutable_file_descriptor_response());
      break;
    case Request::kAllExtensionNumbersOfType:
      status =
          ExtensionNumbers(request.all_extension_numbers_of_type(),
                           response.mutable_all_extension_numbers_response());
      break;
    case Request::kListServices:
      status = ListServices(response.mutable_list_services_response());
      break;
    case Request::MESSAGE_REQUEST_NOT_SET:
      // Also a request kind newer than this file: v1alpha's answer.
      status = absl::UnimplementedError("the request asks for nothing known");
      break;
  }
  if (!status.ok()) {
    // absl's codes are gRPC's, number for number.
    rv1::ErrorResponse* error = response.mutable_error_response();
    error->set_error_code(static_cast<int>(status.code()));
    error->set_error_message(std::string(status.message()));
  }
  return response;
}

// Registers the service in InitServer; hands it the server's service list
// in Finish, which runs once the server has started.
class ReflectionV1Plugin final : public grpc::ServerBuilderPlugin {
 public:
  std::string name() override { return "paceline_reflection_v1"; }
  void InitServer(grpc::ServerInitializer* si) override {
    si->RegisterService(service_);
  }
  void Finish(grpc::ServerInitializer* si) override {
    service_->SetServices(*si->GetServiceList());
  }
  void ChangeArguments(const std::string& /*name*/, void* /*value*/) override {}

 private:
  std::shared_ptr<ReflectionV1Service> service_ =
      std::make_shared<ReflectionV1Service>();
};

class ReflectionV1BuilderOption final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->push_back(std::make_unique<ReflectionV1Plugin>());
  }
};

}  // namespace

std::unique_ptr<grpc::ServerBuilderOption> ReflectionV1Option() {
  return std::make_unique<ReflectionV1BuilderOption>();
}

}  // namespace paceline::server
