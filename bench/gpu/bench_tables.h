// The lookup benches' tables: kBenchTables item tables of kBenchRows rows of one format
// (row type and dim, laid out as the CUDA backend lays them out), filled with a non-zero
// byte pattern (never time on zeros), and their descriptors in device memory. Exits the
// process on a CUDA error (a benchmark has nothing to fall back to).
#ifndef FUSERANK_BENCH_GPU_BENCH_TABLES_H_
#define FUSERANK_BENCH_GPU_BENCH_TABLES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/batch.h"
#include "engine/cuda/batch_packer.h"
#include "engine/cuda/device_memory.h"
#include "engine/model_types.h"
#include "kernels/batch_layout.h"
#include "kernels/descriptors.h"

namespace fuserank::bench {

inline constexpr int kBenchTables = 18;
inline constexpr int kBenchRows = 200000;

// One row format: the row type and dim of every table, the bytes of a device row, and the
// bytes of it a lookup must read (int8: the codes and the scale and bias, not the padding).
struct Format {
  kernels::RowType type;
  std::string name;
  int dim;
  uint32_t row_bytes;
  uint32_t read_bytes;
  int lanes;
  bool vector;
};

// As the CUDA backend lays out a table of this dtype and dim (engine/cuda/gpu_layout.cc).
Format MakeFormat(engine::DType dtype, int dim);

engine::cuda::DeviceBuffer MustAllocate(size_t bytes, const char* what);

struct TableSet {
  std::vector<engine::cuda::DeviceBuffer> tables;
  engine::cuda::DeviceBuffer d_desc;  // kBenchTables kernels::LookupTable, out_col t * dim
};

TableSet MakeTables(const Format& f);

// The packer's view of the bench tables (item tables only, no dense features).
engine::cuda::PackInfo BenchPackInfo();

// `batch` packed by `packer`, its header in *header; exits when the packer refuses it.
std::vector<unsigned char> MustPack(engine::cuda::BatchPacker& packer, const engine::Batch& batch,
                                    kernels::PackedHeader* header);

// A device copy of `bytes`, complete when this returns.
engine::cuda::DeviceBuffer MustUpload(const std::vector<unsigned char>& bytes);

}  // namespace fuserank::bench

#endif  // FUSERANK_BENCH_GPU_BENCH_TABLES_H_
