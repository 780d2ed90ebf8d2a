// The CUDA backend's end-to-end tests share these: a model of a given shape with its
// double reference, random requests, and the check of a GPU result against the CPU
// backend's and the reference scores.
#ifndef FUSERANK_TESTS_KERNELS_PIPELINE_UTIL_H_
#define FUSERANK_TESTS_KERNELS_PIPELINE_UTIL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "engine/batch.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model.h"
#include "tests/engine/cpu/cpu_reference_util.h"
#include "tests/testing/test_model.h"

namespace fuserank::engine::cuda {

struct PipelineCase {
  Interaction interaction;
  DType dtype;
  int dim;
  bool graphs;
  bool bottom = true;
  bool reorder = false;
  int user_tables = 2;
  int item_tables = 3;
};

struct TestSetup {
  fuserank::testing::TestModel test_model;
  std::shared_ptr<const Model> model;
};

// The model of `p` (SmallSpec tables, a 32-16-1 top MLP) with seeded random weights; int8
// models hold codes with a drawn (scale, bias) per row. A failure to build is a test
// failure (model null).
TestSetup MakeModel(const PipelineCase& p, uint64_t seed);

// Requests of exactly these candidate counts, bags of 0..max_bag ids, top_k random (0: all).
std::vector<engine::test::RefRequest> MakeRequests(const ModelSpec& spec,
                                                   const std::vector<int>& sizes,
                                                   std::mt19937_64& rng, int max_bag = 6);

// The CUDA options of a test backend: the defaults, but with the MLP autotune off when
// FUSERANK_TEST_MLP_AUTOTUNE=0 (bench/gpu/run_tests.sh sets it for its compute-sanitizer
// step, where timing every cuBLASLt proposal would cost minutes and test nothing more).
CudaOptions TestCudaOptions();

// Checks `got` against the CPU backend's result and the reference scores.
void ExpectMatches(const TestSetup& s, const std::vector<engine::test::RefRequest>& requests,
                   const Batch& batch, const BatchResult& got, const BatchResult& cpu,
                   double tolerance);

}  // namespace fuserank::engine::cuda

#endif  // FUSERANK_TESTS_KERNELS_PIPELINE_UTIL_H_
