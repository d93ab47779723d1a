#include "engine/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/gguf/gguf_reader.h"

namespace paceline::engine {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr absl::string_view kAlignmentKey = "general.alignment";

// The fewest bytes one metadata entry or tensor info can take on disk: used
// to reject counts the file cannot hold before reserving memory for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;  // key length, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // 1-d, no name

bool AddOverflows(uint64_t a, uint64_t b, uint64_t* sum) {
  return __builtin_add_overflow(a, b, sum);
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A name from the file, quoted for a message: escaped, since a corrupt file
// holds any bytes, and cut short, since it may be megabytes long.
std::string Quote(absl::string_view name) {
  constexpr size_t kMaxShown = 96;
  if (name.size() <= kMaxShown)
    return absl::StrCat("'", absl::CHexEscape(name), "'");
  return absl::StrCat("'", absl::CHexEscape(name.substr(0, kMaxShown)),
                      "'... (", name.size(), " bytes)");
}

std::string TensorWhere(const GgufTensorInfo& t, size_t index,
                        uint64_t info_offset) {
  return absl::StrCat("tensor ", Quote(t.name), " (#", index,
                      ", info at offset ", info_offset, ")");
}

std::string ValueTypeString(const GgufValue& v) {
  if (v.type != GgufValueType::kArray) {
    return std::string(GgufValueTypeName(v.type));
  }
  return absl::StrCat("array<", GgufValueTypeName(v.element_type), ">");
}

bool IsUnsignedType(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 ||
         t == GgufValueType::kUint32 || t == GgufValueType::kUint64;
}

bool IsSignedType(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 ||
         t == GgufValueType::kInt32 || t == GgufValueType::kInt64;
}

bool IsFloatType(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

absl::Status WrongType(absl::string_view key, const GgufValue& v,
                       absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(
      "metadata key '", key, "' is ", ValueTypeString(v), ", want ", want));
}

// Integer conversions shared by the scalar getters and GetIntArray. `what`
// names the value in errors ("metadata key 'k'" or "... element #3").
absl::StatusOr<int64_t> ToInt64(const GgufValue& v, absl::string_view what) {
  if (IsSignedType(v.type)) return v.i;
  if (IsUnsignedType(v.type)) {
    if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " holds ", GgufValueTypeName(v.type), " ", v.u,
                       ", which does not fit in int64"));
    }
    return static_cast<int64_t>(v.u);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " is ", ValueTypeString(v), ", want an integer"));
}

absl::Status ErrnoStatus(int err, absl::string_view what) {
  return absl::ErrnoToStatus(err, what);
}

}  // namespace

absl::string_view GgufValueTypeName(GgufValueType type) {
  // Indexed by the on-disk id.
  static constexpr absl::string_view kNames[] = {
      "uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
      "bool",  "string", "array",  "uint64", "int64",  "float64"};
  const auto id = static_cast<uint32_t>(type);
  return id < std::size(kNames) ? kNames[id] : "unknown";
}

int64_t GgufTensorInfo::num_elements() const {
  // Parse() rejected shapes whose product overflows int64.
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------
// Construction

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat("stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file"));
  }
  if (st.st_size == 0) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(path, ": file is empty"));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  // MAP_PRIVATE + PROT_READ: we never write, and another process truncating
  // the file is the one hazard no validation can rule out (SIGBUS).
  void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (mapping == MAP_FAILED) {
    return ErrnoStatus(mmap_errno, absl::StrCat("mmap ", path));
  }

  std::unique_ptr<GgufFile> file(new GgufFile());
  file->mapping_ = mapping;
  file->base_ = static_cast<const uint8_t*>(mapping);
  file->size_ = size;
  absl::Status status = file->Parse();
  if (!status.ok()) return AnnotateStatus(status, path);
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(
    const uint8_t* data, size_t size) {
  if (data == nullptr && size != 0) {
    return absl::InvalidArgumentError("null buffer with nonzero size");
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->base_ = data;
  file->size_ = size;
  RETURN_IF_ERROR(file->Parse());
  return file;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

// ---------------------------------------------------------------------------
// Parsing

absl::Status GgufFile::Parse() {
  GgufReader r(base_, size_);

  // Header: magic, version, tensor count, metadata count.
  ASSIGN_OR_RETURN(const uint32_t magic, r.ReadU32("magic"));
  if (magic != kMagic) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a GGUF file: magic at offset 0 is ",
                     absl::CHexEscape(absl::string_view(
                         reinterpret_cast<const char*>(base_), 4)),
                     ", want GGUF"));
  }
  ASSIGN_OR_RETURN(version_, r.ReadU32("version"));
  if (version_ == 1) {
    return absl::UnimplementedError("unsupported GGUF version 1 (offset 4)");
  }
  if (version_ != 2 && version_ != 3) {
    // A big-endian file shows its small version number in the high bytes.
    if ((version_ & 0xFFFF) == 0) {
      return absl::UnimplementedError(absl::StrCat(
          "unsupported GGUF version ", version_,
          " (offset 4): looks like a big-endian file; only little-endian "
          "files are supported"));
    }
    return absl::UnimplementedError(absl::StrCat(
        "unsupported GGUF version ", version_, " (offset 4); supported: 2, 3"));
  }
  // v2 and v3 share one layout; v3 only allowed big-endian files.
  ASSIGN_OR_RETURN(const uint64_t tensor_count, r.ReadU64("tensor count"));
  ASSIGN_OR_RETURN(const uint64_t kv_count, r.ReadU64("metadata count"));
  if (tensor_count > r.remaining() / kMinTensorInfoBytes) {
    return absl::DataLossError(absl::StrCat(
        "tensor count ", tensor_count,
        " at offset 8 cannot fit: a tensor info takes at least ",
        kMinTensorInfoBytes, " bytes and only ", r.remaining(), " remain"));
  }
  if (kv_count > r.remaining() / kMinKvBytes) {
    return absl::DataLossError(absl::StrCat(
        "metadata count ", kv_count,
        " at offset 16 cannot fit: an entry takes at least ", kMinKvBytes,
        " bytes and only ", r.remaining(), " remain"));
  }

  RETURN_IF_ERROR(ParseMetadata(r, kv_count));
  RETURN_IF_ERROR(ParseAlignment());
  std::vector<uint64_t> info_offsets;
  RETURN_IF_ERROR(ParseTensorInfos(r, tensor_count, &info_offsets));

  // The data section starts at the first aligned offset after the infos. A
  // file without tensors may end before it; data_offset_ then exceeds size_.
  const uint64_t end = r.offset();
  data_offset_ = end + (alignment_ - end % alignment_) % alignment_;
  return CheckTensorData(info_offsets);
}

absl::Status GgufFile::ParseMetadata(GgufReader& r, uint64_t kv_count) {
  metadata_.reserve(kv_count);
  metadata_offsets_.reserve(kv_count);
  uint64_t elements_left = kGgufMaxArrayElements;
  for (uint64_t i = 0; i < kv_count; ++i) {
    const uint64_t at = r.offset();
    absl::StatusOr<absl::string_view> key = r.ReadString("key");
    if (!key.ok()) {
      return AnnotateStatus(
          key.status(), absl::StrCat("metadata #", i, " (at offset ", at, ")"));
    }
    const auto where = [&] {
      return absl::StrCat("metadata ", Quote(*key), " (#", i, ", at offset ",
                          at, ")");
    };
    absl::StatusOr<uint32_t> type = r.ReadU32("value type");
    if (!type.ok()) return AnnotateStatus(type.status(), where());
    absl::StatusOr<GgufValue> value = r.ReadValue(*type, &elements_left);
    if (!value.ok()) return AnnotateStatus(value.status(), where());

    auto [it, inserted] = metadata_index_.try_emplace(*key, metadata_.size());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": duplicate key, first defined as metadata #", it->second,
          " at offset ", metadata_offsets_[it->second]));
    }
    metadata_.emplace_back(std::string(*key), *std::move(value));
    metadata_offsets_.push_back(at);
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ParseAlignment() {
  auto it = metadata_index_.find(kAlignmentKey);
  if (it == metadata_index_.end()) {
    alignment_ = kDefaultAlignment;
    return absl::OkStatus();
  }
  const GgufValue& v = metadata_[it->second].second;
  const std::string where =
      absl::StrCat("metadata '", kAlignmentKey, "' (#", it->second,
                   ", at offset ", metadata_offsets_[it->second], ")");
  // ggml writes and requires uint32; accepting other types would let two
  // readers disagree on where the data starts.
  if (v.type != GgufValueType::kUint32) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": is ", ValueTypeString(v), ", want uint32"));
  }
  if (v.u == 0 || (v.u & (v.u - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": alignment ", v.u, " is not a nonzero power of two"));
  }
  alignment_ = v.u;
  return absl::OkStatus();
}

absl::Status GgufFile::ParseTensorInfos(GgufReader& r, uint64_t tensor_count,
                                        std::vector<uint64_t>* info_offsets) {
  tensors_.reserve(tensor_count);
  info_offsets->reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    const uint64_t at = r.offset();
    absl::StatusOr<absl::string_view> name = r.ReadString("tensor name");
    if (!name.ok()) {
      return AnnotateStatus(
          name.status(),
          absl::StrCat("tensor #", i, " (info at offset ", at, ")"));
    }
    GgufTensorInfo t;
    t.name = std::string(*name);
    const auto where = [&] { return TensorWhere(t, i, at); };
    absl::Status status = ParseTensorInfo(r, &t);
    if (!status.ok()) return AnnotateStatus(status, where());

    auto [it, inserted] = tensor_index_.try_emplace(t.name, tensors_.size());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": duplicate name, first defined as tensor #", it->second,
          " (info at offset ", (*info_offsets)[it->second], ")"));
    }
    tensors_.push_back(std::move(t));
    info_offsets->push_back(at);
  }
  return absl::OkStatus();
}

// Reads what follows the name: n_dims, dims, type, offset. Fills `t` except
// `data`, which needs the data section's start.
absl::Status GgufFile::ParseTensorInfo(GgufReader& r, GgufTensorInfo* t) {
  const uint64_t dims_at = r.offset();
  ASSIGN_OR_RETURN(const uint32_t n_dims, r.ReadU32("n_dims"));
  if (n_dims == 0 || n_dims > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_dims ", n_dims, " at offset ", dims_at,
                     " is not in [1, ", kMaxDims, "]"));
  }
  t->shape.reserve(n_dims);
  int64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t at = r.offset();
    ASSIGN_OR_RETURN(const uint64_t dim, r.ReadU64("dimension"));
    // Zero-sized tensors are legal in ggml but no model has one, and an
    // empty tensor has no data to point at: rejecting them keeps every
    // GgufTensorInfo::data valid and every size positive.
    if (dim == 0 ||
        dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat("dimension ", d, " at offset ", at, " is ", dim,
                       "; want 1 to 2^63-1"));
    }
    if (__builtin_mul_overflow(elements, static_cast<int64_t>(dim),
                               &elements)) {
      return absl::InvalidArgumentError(
          absl::StrCat("element count overflows int64 at dimension ", d,
                       " (offset ", at, ", value ", dim, ")"));
    }
    t->shape.push_back(static_cast<int64_t>(dim));
  }
  const uint64_t type_at = r.offset();
  ASSIGN_OR_RETURN(const uint32_t type_id, r.ReadU32("tensor type"));
  const GgmlTypeTraits* traits = FindGgmlType(type_id);
  if (traits == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ggml type id ", type_id, " at offset ", type_at));
  }
  t->type = traits->type;
  if (t->shape[0] % traits->block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("row length ", t->shape[0], " is not a multiple of ",
                     traits->name, "'s block size ", traits->block_size));
  }
  absl::StatusOr<uint64_t> row_bytes = GgmlRowBytes(t->type, t->shape[0]);
  if (!row_bytes.ok()) {
    return AnnotateStatus(row_bytes.status(),
                          absl::StrCat("shape ", ShapeString(t->shape)));
  }
  const auto rows = static_cast<uint64_t>(elements / t->shape[0]);
  if (__builtin_mul_overflow(*row_bytes, rows, &t->size_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size of ", traits->name, " ", ShapeString(t->shape),
                     " overflows uint64"));
  }
  ASSIGN_OR_RETURN(t->offset, r.ReadU64("tensor data offset"));
  return absl::OkStatus();
}

// Every tensor's bytes must be aligned, inside the file and disjoint from
// every other tensor's. Messages give absolute file offsets.
absl::Status GgufFile::CheckTensorData(
    const std::vector<uint64_t>& info_offsets) {
  std::vector<std::pair<uint64_t, size_t>> starts;  // (file offset, index)
  starts.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensorInfo& t = tensors_[i];
    const auto where = [&] { return TensorWhere(t, i, info_offsets[i]); };
    if (t.offset % alignment_ != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": data offset ", t.offset,
                       " is not a multiple of the alignment ", alignment_));
    }
    uint64_t begin, end;
    if (AddOverflows(data_offset_, t.offset, &begin) ||
        AddOverflows(begin, t.size_bytes, &end)) {
      return absl::DataLossError(absl::StrCat(
          where(), ": data offset ", t.offset, " plus ", t.size_bytes,
          " bytes overflows; end of file is ", size_));
    }
    if (end > size_) {
      return absl::DataLossError(
          absl::StrCat(where(), ": data [", begin, ", ", end,
                       ") extends past end of file (", size_, " bytes)"));
    }
    t.data = base_ + begin;
    starts.emplace_back(begin, i);
  }
  std::sort(starts.begin(), starts.end());
  for (size_t k = 1; k < starts.size(); ++k) {
    const GgufTensorInfo& prev = tensors_[starts[k - 1].second];
    const GgufTensorInfo& next = tensors_[starts[k].second];
    const uint64_t prev_end = starts[k - 1].first + prev.size_bytes;
    if (starts[k].first < prev_end) {
      const size_t i = starts[k].second;
      return absl::InvalidArgumentError(absl::StrCat(
          TensorWhere(next, i, info_offsets[i]), ": data [", starts[k].first,
          ", ", starts[k].first + next.size_bytes, ") overlaps tensor ",
          Quote(prev.name), " (#", starts[k - 1].second, ") data [",
          starts[k - 1].first, ", ", prev_end, ")"));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Lookup and typed getters

const GgufValue* GgufFile::Find(absl::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensorInfo* GgufFile::FindTensor(absl::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<const GgufValue*> GgufFile::FindOrNotFound(
    absl::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("metadata key '", key, "' not found"));
  }
  return v;
}

absl::StatusOr<absl::string_view> GgufFile::GetString(
    absl::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(key));
  if (v->type != GgufValueType::kString) return WrongType(key, *v, "string");
  return v->s;
}

absl::StatusOr<uint64_t> GgufFile::GetUint(absl::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(key));
  if (IsUnsignedType(v->type)) return v->u;
  if (IsSignedType(v->type)) {
    if (v->i < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata key '", key, "' holds ", GgufValueTypeName(v->type), " ",
          v->i, ", which does not fit in uint64"));
    }
    return static_cast<uint64_t>(v->i);
  }
  return WrongType(key, *v, "an unsigned integer");
}

absl::StatusOr<int64_t> GgufFile::GetInt(absl::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(key));
  return ToInt64(*v, absl::StrCat("metadata key '", key, "'"));
}

absl::StatusOr<double> GgufFile::GetFloat(absl::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(key));
  if (IsFloatType(v->type)) return v->f;
  if (IsSignedType(v->type)) return static_cast<double>(v->i);
  if (IsUnsignedType(v->type)) return static_cast<double>(v->u);
  return WrongType(key, *v, "a number");
}

absl::StatusOr<bool> GgufFile::GetBool(absl::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(key));
  if (v->type != GgufValueType::kBool) return WrongType(key, *v, "bool");
  return v->u != 0;
}

absl::StatusOr<std::vector<absl::string_view>> GgufFile::GetStringArray(
    absl::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(key));
  if (v->type != GgufValueType::kArray ||
      v->element_type != GgufValueType::kString) {
    return WrongType(key, *v, "array<string>");
  }
  std::vector<absl::string_view> out;
  out.reserve(v->elements.size());
  for (const GgufValue& e : v->elements) out.push_back(e.s);
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(
    absl::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(key));
  const GgufValueType et = v->element_type;
  if (v->type != GgufValueType::kArray ||
      !(IsFloatType(et) || IsSignedType(et) || IsUnsignedType(et))) {
    return WrongType(key, *v, "an array of numbers");
  }
  std::vector<float> out;
  out.reserve(v->elements.size());
  for (const GgufValue& e : v->elements) {
    out.push_back(IsFloatType(et)    ? static_cast<float>(e.f)
                  : IsSignedType(et) ? static_cast<float>(e.i)
                                     : static_cast<float>(e.u));
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(
    absl::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* v, FindOrNotFound(key));
  const GgufValueType et = v->element_type;
  if (v->type != GgufValueType::kArray ||
      !(IsSignedType(et) || IsUnsignedType(et))) {
    return WrongType(key, *v, "an array of integers");
  }
  std::vector<int64_t> out;
  out.reserve(v->elements.size());
  for (size_t i = 0; i < v->elements.size(); ++i) {
    ASSIGN_OR_RETURN(const int64_t x,
                     ToInt64(v->elements[i], absl::StrCat("metadata key '", key,
                                                          "' element #", i)));
    out.push_back(x);
  }
  return out;
}

}  // namespace paceline::engine
