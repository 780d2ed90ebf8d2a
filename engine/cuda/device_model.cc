#include "engine/cuda/device_model.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_rows.h"
#include "engine/status_macros.h"

namespace fuserank::engine::cuda {
namespace {

// Copies `bytes` host bytes into a new device buffer.
absl::StatusOr<DeviceBuffer> Upload(const void* src, size_t bytes, const std::string& what) {
  ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(bytes, what));
  if (bytes > 0) {
    RETURN_IF_CUDA_ERROR(cudaMemcpy(buffer.get(), src, bytes, cudaMemcpyHostToDevice),
                         absl::StrCat("cudaMemcpy ", what));
  }
  return buffer;
}

// Rows of an int8 table repacked per chunk (PackInt8Rows) into a host buffer of at most
// ~16 MiB and copied on, so a large table never needs a second whole host copy.
absl::StatusOr<DeviceBuffer> UploadInt8Rows(const EmbeddingTable& t, const std::string& what) {
  const size_t row_bytes = DeviceRowBytes(t);
  ASSIGN_OR_RETURN(DeviceBuffer buffer,
                   DeviceBuffer::Allocate(static_cast<size_t>(t.rows) * row_bytes, what));
  const int64_t chunk_rows = std::max<int64_t>(1, (size_t{16} << 20) / row_bytes);
  std::vector<std::byte> chunk;
  for (int64_t first = 0; first < t.rows; first += chunk_rows) {
    const int64_t count = std::min(chunk_rows, t.rows - first);
    chunk.resize(static_cast<size_t>(count) * row_bytes);
    PackInt8Rows(t, first, count, chunk.data());
    // Synchronous from pageable memory: `chunk` may be reused as soon as this returns.
    RETURN_IF_CUDA_ERROR(
        cudaMemcpy(buffer.get<std::byte>() + static_cast<size_t>(first) * row_bytes, chunk.data(),
                   chunk.size(), cudaMemcpyHostToDevice),
        absl::StrCat("cudaMemcpy ", what));
  }
  return buffer;
}

// A table's device rows in mapped host memory, written in place (int8 rows repacked).
absl::StatusOr<MappedHostBuffer> HostRows(const EmbeddingTable& t, const std::string& what) {
  const size_t bytes = static_cast<size_t>(t.rows) * DeviceRowBytes(t);
  ASSIGN_OR_RETURN(MappedHostBuffer rows, MappedHostBuffer::Allocate(bytes, what));
  if (DeviceRowsAreStored(t)) {
    if (bytes > 0) std::memcpy(rows.get(), t.data, bytes);
  } else {
    PackInt8Rows(t, 0, t.rows, rows.get<std::byte>());
  }
  return rows;
}

template <typename T>
absl::StatusOr<DeviceBuffer> UploadVector(const std::vector<T>& v, const std::string& what) {
  return Upload(v.data(), v.size() * sizeof(T), what);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceModel>> DeviceModel::Upload(const Model& model,
                                                                 const GpuLayout& layout,
                                                                 bool host_tables) {
  std::unique_ptr<DeviceModel> dm(new DeviceModel());
  std::vector<kernels::LookupTable> desc = layout.lookup;
  dm->host_tables_ = host_tables;
  for (size_t k = 0; k < desc.size(); ++k) {
    const EmbeddingTable& t = model.tables()[layout.lookup_spec_index[k]];
    const size_t bytes = static_cast<size_t>(t.rows) * DeviceRowBytes(t);
    const std::string what = absl::StrCat("table '", t.name, "'");
    dm->table_bytes_ += bytes;
    if (host_tables) {
      ASSIGN_OR_RETURN(MappedHostBuffer rows, HostRows(t, what));
      desc[k].d_rows = rows.device_ptr<unsigned char>();
      dm->host_rows_.push_back(std::move(rows));
      continue;
    }
    ASSIGN_OR_RETURN(DeviceBuffer rows, DeviceRowsAreStored(t) ? cuda::Upload(t.data, bytes, what)
                                                               : UploadInt8Rows(t, what));
    desc[k].d_rows = rows.get<unsigned char>();
    dm->tables_.push_back(std::move(rows));
  }
  ASSIGN_OR_RETURN(dm->tables_desc_, UploadVector(desc, "table descriptors"));
  ASSIGN_OR_RETURN(dm->dot_slots_, UploadVector(layout.dot_slots, "dot slots"));
  ASSIGN_OR_RETURN(dm->concat_slots_, UploadVector(layout.concat_slots, "concat slots"));
  auto upload_mlp = [&](const std::vector<DenseLayer>& layers, const char* name,
                        std::vector<MlpLayerShape>* out) -> absl::Status {
    for (size_t l = 0; l < layers.size(); ++l) {
      const DenseLayer& layer = layers[l];
      if (layer.weight.size() != size_t{1} * layer.in * layer.out ||
          layer.bias.size() != static_cast<size_t>(layer.out)) {
        return absl::InternalError(absl::StrCat(name, ".", l, ": weight or bias size mismatch"));
      }
      const int w_ld = PaddedLd(layer.in);
      ASSIGN_OR_RETURN(DeviceBuffer w,
                       UploadVector(PitchedRows(layer.weight, layer.out, layer.in, w_ld),
                                    absl::StrCat(name, ".", l, ".weight")));
      ASSIGN_OR_RETURN(DeviceBuffer b,
                       UploadVector(layer.bias, absl::StrCat(name, ".", l, ".bias")));
      MlpLayerShape s;
      s.in = layer.in;
      s.out = layer.out;
      s.relu = layer.relu;
      s.d_weight = w.get<float>();
      s.w_ld = w_ld;
      s.d_bias = b.get<float>();
      out->push_back(s);
      dm->weights_.push_back(std::move(w));
      dm->weights_.push_back(std::move(b));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(upload_mlp(model.bottom_mlp(), "bottom_mlp", &dm->bottom_));
  RETURN_IF_ERROR(upload_mlp(model.top_mlp(), "top_mlp", &dm->top_));
  for (size_t l = 0; l < model.dcn().size(); ++l) {
    const CrossLayer& cross = model.dcn()[l];
    std::vector<DenseLayer> gemms;
    if (cross.down.out > 0) gemms.push_back(cross.down);
    gemms.push_back(cross.up);
    dm->dcn_.emplace_back();
    RETURN_IF_ERROR(upload_mlp(gemms, absl::StrCat("dcn.", l).c_str(), &dm->dcn_.back()));
  }
  // A pageable cudaMemcpy may return before its DMA lands, and the workers' streams do
  // not wait for the legacy stream.
  RETURN_IF_CUDA_ERROR(cudaDeviceSynchronize(), "model upload");
  return dm;
}

}  // namespace fuserank::engine::cuda
