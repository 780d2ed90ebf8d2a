// What a model of a given spec will take in memory, computed from the spec alone before
// anything is read or allocated: the exact bytes its tensors take in a safetensors file
// (to check a weights file's size before reading it) and an upper estimate of the host
// memory one version takes when served by the CPU engine (the private copy of the weights,
// the dense layers copied out and the folded linear cross, the CPU plan's packed layers,
// every worker's scratch, the hot-row cache: two full hot sets per table and, for the
// frequency policy, the sketches, and the near cache of each storage: redis table). Device memory
// (engine.device: cuda) is not estimated. Arithmetic saturates instead of overflowing, so a spec
// that asks for an absurd size gets an absurd number, never a wrapped small one. Pure functions;
// thread-safe.
#ifndef FUSERANK_ENGINE_MODEL_MEMORY_H_
#define FUSERANK_ENGINE_MODEL_MEMORY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/model_spec.h"
#include "engine/safetensors.h"

namespace fuserank::engine {

// A tensor SPEC section 2 names for a spec, with the safetensors dtype and shape it must have.
struct SpecTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
};

// Every tensor of `spec`: tables (and int8 qparams), bottom layers, the cross, dcn, top layers.
std::vector<SpecTensor> SpecTensors(const ModelSpec& spec);

// Bytes of every tensor SPEC section 2 names for `spec`, as a safetensors data section
// holds them (tables in spec.embedding_dtype, int8 qparams, float32 layers).
uint64_t SpecTensorBytes(const ModelSpec& spec);

// How the version will be served (the engine.* keys); scratch is per worker thread.
struct ServingShape {
  int workers = 1;                  // engine.streams
  int threads_per_worker = 1;       // engine.cpu_threads
  int max_batch_candidates = 1;     // the backend's: max(engine.max_batch_candidates,
                                    // server.max_candidates)
  int hot_rows_per_table = 0;       // cache.hot_rows_per_table
  bool frequency_sketches = false;  // cache.policy: frequency (a sketch per table)
  int64_t near_cache_rows = 0;      // remote.near_cache_rows (per storage: redis table)
  bool host_tables = false;         // cache.placement: host (CUDA: tables in pinned host memory)
};

struct ModelMemory {
  uint64_t weights = 0;  // the private copy of the weights file (or the tables FromTensors copies)
  uint64_t dense = 0;    // dense layers copied out, the cross and its fold, dcn layers, at peak
  uint64_t plan = 0;     // the CPU engine's packed copies of the dense layers
  uint64_t scratch = 0;  // per-thread tiles, per-worker buffers, the warm-up batch
  // The hot-row cache: per table, two hot sets of min(hot_rows_per_table, rows) rows (the
  // serving one and the one a swap builds) and the frequency sketch; per storage: redis
  // table two sets of hot_rows_per_table values.
  uint64_t hot_rows = 0;
  // The remote tier's near cache: per storage: redis table, near_cache_rows rows.
  uint64_t near_cache = 0;
  // cache.placement: host: the CUDA backend's page-locked copy of every table in its device
  // row layout (int8 rows padded to 16 bytes with their scale and bias).
  uint64_t pinned_tables = 0;
  // Table tensors (int8 qparams included) the file places at offsets not aligned to their
  // element size, which Model::Load copies again into aligned memory (MisalignedTableBytes).
  uint64_t copies = 0;

  // What Model::Load / FromTensors allocate (weights, dense layers, copies).
  uint64_t model() const;
  // Everything (the number a memory budget is checked against).
  uint64_t total() const;
  // "1.2 GiB (weights 1.0 GiB, dense layers ..., CPU plan ..., scratch ..., hot rows ...)".
  std::string ToString() const;
  // "weights 1.0 GiB, dense layers ..., CPU plan ..., scratch ..., hot rows ...", and
  // ", near cache ..." for a model with storage: redis tables, ", pinned tables ..." with
  // cache.placement: host, ", misaligned tables copied ..." when there are copies.
  std::string Breakdown() const;
};

// The estimate for a version of `spec` whose weights file holds `file_bytes` bytes
// (0: the spec's tensors with no header, as Model::FromTensors copies them), of which
// `copied_bytes` (MisalignedTableBytes of its header) are copied again when it loads.
ModelMemory EstimateModelMemory(const ModelSpec& spec, uint64_t file_bytes,
                                const ServingShape& shape, uint64_t copied_bytes = 0);

// Bytes of the table tensors of `spec` (embeddings.<t>.weight, and for int8
// embeddings.<t>.qparams) that a safetensors header places at a data offset that is not a
// multiple of their element size (the spec's embedding dtype; 4 for qparams): Model::Load
// places the data section on a 64-byte boundary, so exactly these are copied again into
// aligned memory. Tensors the header lacks count 0 (the load refuses such a file).
uint64_t MisalignedTableBytes(const ModelSpec& spec,
                              const std::map<std::string, SafetensorsEntry>& header);

// Bytes of one hot set of `rows` rows of `row_bytes` each (HotSet: the compact copy, its
// row list, int8 qparams with `int8`, the row -> slot index).
uint64_t HotSetBytes(uint64_t rows, uint64_t row_bytes, bool int8);

// Bytes of one hot set of a storage: redis table holding `rows` values of `value_bytes`
// (HotSet::FromRemote: the values, their ids and the id -> slot index).
uint64_t RemoteHotSetBytes(uint64_t rows, uint64_t value_bytes);

// Bytes of one table's near cache (NearCache) of `rows` rows of `row_bytes` each: the
// slabs, each row's entry and its key index, per shard. Never below
// NearCache::MemoryBytes() of such a cache.
uint64_t NearCacheBytes(uint64_t rows, uint64_t row_bytes);

// "512 B", "3.0 KiB", "1.5 GiB".
std::string FormatBytes(uint64_t bytes);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_MODEL_MEMORY_H_
