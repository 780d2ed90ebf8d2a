#include "tests/testing/int8_layout_model.h"

#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fuserank::testing {
namespace {

struct RawTensor {
  std::string name;
  std::string dtype;
  std::string shape;  // JSON, e.g. "[5, 2]"
  std::string bytes;
};

std::string Floats(const std::vector<float>& values) {
  std::string out(values.size() * sizeof(float), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

}  // namespace

std::string WriteInt8LayoutModel(const std::string& dir, int64_t rows, bool misaligned) {
  EXPECT_EQ(rows % 2, 1) << "test bug: an even row count aligns the qparams anyway";
  std::vector<float> qparams;
  for (int64_t r = 0; r < rows; ++r) qparams.insert(qparams.end(), {0.01f, 0.0f});
  const std::string shape = absl::StrCat("[", rows, ", 1]");
  const std::string qshape = absl::StrCat("[", rows, ", 2]");
  RawTensor u{"embeddings.u.weight", "I8", shape, std::string(rows, '\1')};
  RawTensor uq{"embeddings.u.qparams", "F32", qshape, Floats(qparams)};
  RawTensor i{"embeddings.i.weight", "I8", shape, std::string(rows, '\2')};
  RawTensor iq{"embeddings.i.qparams", "F32", qshape, Floats(qparams)};
  RawTensor w{"top_mlp.0.weight", "F32", "[1, 1]", Floats({0.5f})};
  RawTensor b{"top_mlp.0.bias", "F32", "[1]", Floats({0.0f})};
  const std::vector<RawTensor> order = misaligned ? std::vector<RawTensor>{u, uq, i, iq, w, b}
                                                  : std::vector<RawTensor>{w, b, uq, iq, u, i};
  std::string header = "{";
  std::string data;
  for (const RawTensor& t : order) {
    absl::StrAppend(&header, header.size() > 1 ? "," : "", "\"", t.name, "\":{\"dtype\":\"",
                    t.dtype, "\",\"shape\":", t.shape, ",\"data_offsets\":[", data.size(), ",",
                    data.size() + t.bytes.size(), "]}");
    data += t.bytes;
  }
  header += "}";
  std::string length(8, '\0');
  for (int k = 0; k < 8; ++k) length[k] = static_cast<char>((header.size() >> (8 * k)) & 0xFF);
  std::ofstream(dir + "/m.safetensors", std::ios::binary | std::ios::trunc)
      << length << header << data;
  const std::string spec = dir + "/m.yaml";
  std::ofstream(spec, std::ios::trunc) << absl::StrCat(
      "name: m\nweights: m.safetensors\nembedding_dtype: int8\ntables:\n"
      "  - {name: u, side: user, rows: ",
      rows, ", dim: 1}\n  - {name: i, side: item, rows: ", rows,
      ", dim: 1}\ninteraction: dot\ntop_mlp: [1]\n");
  return spec;
}

}  // namespace fuserank::testing
