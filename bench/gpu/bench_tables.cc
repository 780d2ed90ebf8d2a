#include "bench/gpu/bench_tables.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "bench/gpu/bench_timer.h"
#include "engine/cuda/device_rows.h"
#include "engine/cuda/gpu_layout.h"
#include "engine/model.h"
#include "kernels/layout_math.h"

namespace fuserank::bench {

using engine::cuda::DeviceBuffer;

Format MakeFormat(engine::DType dtype, int dim) {
  const int elem = engine::DTypeBytes(dtype);
  engine::EmbeddingTable table;
  table.dtype = dtype;
  table.dim = dim;
  table.row_bytes = static_cast<size_t>(dim) * elem;
  Format f;
  f.type = engine::cuda::RowTypeOf(dtype);
  f.name = std::string(engine::DTypeName(dtype));
  f.dim = dim;
  f.row_bytes = static_cast<uint32_t>(engine::cuda::DeviceRowBytes(table));
  f.read_bytes = static_cast<uint32_t>(table.row_bytes) +
                 (dtype == engine::DType::kInt8 ? 2 * sizeof(float) : 0);
  f.vector = kernels::UseVectorLoads(dim, elem) && f.row_bytes % 16 == 0;
  f.lanes = kernels::LookupLanes(kernels::RowUnits(dim, elem));
  return f;
}

DeviceBuffer MustAllocate(size_t bytes, const char* what) {
  auto b = DeviceBuffer::Allocate(bytes, what);
  if (!b.ok()) {
    std::fprintf(stderr, "%s\n", b.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(b);
}

TableSet MakeTables(const Format& f) {
  TableSet set;
  std::vector<kernels::LookupTable> desc(kBenchTables);
  for (int t = 0; t < kBenchTables; ++t) {
    set.tables.push_back(MustAllocate(size_t{kBenchRows} * f.row_bytes, "table"));
    Check(cudaMemset(set.tables.back().get(), 0x3c + t, size_t{kBenchRows} * f.row_bytes), "fill");
    desc[t].d_rows = set.tables.back().get<unsigned char>();
    desc[t].row_bytes = f.row_bytes;
    desc[t].dim = f.dim;
    desc[t].vector = f.vector ? 1 : 0;
    desc[t].out_col = t * f.dim;
  }
  set.d_desc = MustAllocate(desc.size() * sizeof(desc[0]), "descriptors");
  Check(cudaMemcpy(set.d_desc.get(), desc.data(), desc.size() * sizeof(desc[0]),
                   cudaMemcpyHostToDevice),
        "copy descriptors");
  Check(cudaDeviceSynchronize(), "copy descriptors");
  return set;
}

engine::cuda::PackInfo BenchPackInfo() {
  engine::cuda::PackInfo info;
  info.item_rows.assign(kBenchTables, kBenchRows);
  return info;
}

std::vector<unsigned char> MustPack(engine::cuda::BatchPacker& packer, const engine::Batch& batch,
                                    kernels::PackedHeader* header) {
  auto h = packer.Plan(batch);
  if (!h.ok()) {
    std::fprintf(stderr, "%s\n", h.status().ToString().c_str());
    std::exit(1);
  }
  *header = *h;
  std::vector<unsigned char> packed(h->total_bytes);
  packer.Write(batch, *h, packed.data());
  return packed;
}

DeviceBuffer MustUpload(const std::vector<unsigned char>& bytes) {
  DeviceBuffer d = MustAllocate(bytes.size(), "batch");
  Check(cudaMemcpy(d.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "copy batch");
  // From pageable memory the copy may still be in flight, and the benches' streams do not
  // wait for the legacy stream.
  Check(cudaDeviceSynchronize(), "copy batch");
  return d;
}

}  // namespace fuserank::bench
