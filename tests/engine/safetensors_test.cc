// Safetensors parsing and writing: round trips through files, and every malformed file
// (truncated, bad header length, bad JSON, unknown dtype, bad offsets) refused clearly.
#include "engine/safetensors.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/mapped_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fuserank::engine {
namespace {

using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("fuserank_st_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::vector<std::byte> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

// A file made of an 8-byte length, `header` and `data_bytes` zero bytes.
std::vector<std::byte> RawFile(const std::string& header, size_t data_bytes,
                               uint64_t declared_len = UINT64_MAX) {
  const uint64_t len = declared_len == UINT64_MAX ? header.size() : declared_len;
  std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0});
  for (int i = 0; i < 8; ++i) out[i] = std::byte(static_cast<unsigned char>(len >> (8 * i)));
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

absl::Status ParseRaw(const std::vector<std::byte>& file) {
  return ParseSafetensors(file.data(), file.size()).status();
}

TEST(SafetensorsTest, RoundTripsEveryDtypeThroughAFile) {
  const uint32_t seed = 20240601;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::vector<std::vector<std::byte>> storage;
  std::vector<std::pair<std::string, TensorView>> tensors;
  auto add = [&](std::string name, std::string dtype, std::vector<int64_t> shape) {
    size_t n = SafetensorsDTypeSize(dtype);
    for (int64_t d : shape) n *= d;
    storage.emplace_back(n);
    for (std::byte& b : storage.back()) b = std::byte(static_cast<unsigned char>(rng()));
    tensors.push_back({std::move(name), {dtype, shape, storage.back().data(), n}});
  };
  add("a.f16", "F16", {3, 5});  // odd byte count first: the writer must realign
  add("b.f32", "F32", {7, 3});
  add("c.i8", "I8", {13});
  add("d.bf16", "BF16", {2, 2, 2});
  add("e.f64", "F64", {3});
  add("scalar", "F32", {});
  add("empty", "F32", {0, 4});
  add("quote\"back\\slash é", "U8", {1});
  TempDir dir;
  const std::string path = dir.File("t.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<TensorMap> parsed = ParseSafetensors((*file)->data(), (*file)->size());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), tensors.size());
  for (const auto& [name, want] : tensors) {
    SCOPED_TRACE(name);
    auto it = parsed->find(name);
    ASSERT_NE(it, parsed->end());
    const TensorView& got = it->second;
    EXPECT_EQ(got.dtype, want.dtype);
    EXPECT_EQ(got.shape, want.shape);
    ASSERT_EQ(got.nbytes, want.nbytes);
    EXPECT_TRUE((*file)->Contains(got.data) || got.nbytes == 0);
    if (want.nbytes > 0) {
      EXPECT_EQ(std::memcmp(got.data, want.data, want.nbytes), 0);
    }
    // Widest dtype first: every tensor sits at a multiple of its element size.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(got.data) % SafetensorsDTypeSize(got.dtype), 0u);
  }
}

TEST(SafetensorsTest, StreamingWriterKeepsMetadataAndOrder) {
  TempDir dir;
  const std::string path = dir.File("s.safetensors");
  auto writer = SafetensorsWriter::Create(path, {{"x", "F32", {4}}, {"y", "I32", {2}}},
                                          {{"format", "pt"}, {"note", "a \"b\"\n"}});
  ASSERT_TRUE(writer.ok()) << writer.status();
  const float x[4] = {1, 2, 3, 4};
  const int32_t y[2] = {-5, 6};
  ASSERT_TRUE((*writer)->Append(x, 6).ok());  // chunks need not follow tensor edges
  ASSERT_TRUE((*writer)->Append(reinterpret_cast<const char*>(x) + 6, 10).ok());
  ASSERT_TRUE((*writer)->Append(y, sizeof(y)).ok());
  EXPECT_FALSE((*writer)->Append(y, 1).ok());  // more than declared
  ASSERT_TRUE((*writer)->Close().ok());

  std::vector<std::byte> bytes = ReadAll(path);
  std::map<std::string, std::string> metadata;
  absl::StatusOr<TensorMap> parsed = ParseSafetensors(bytes.data(), bytes.size(), &metadata);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(metadata["format"], "pt");
  EXPECT_EQ(metadata["note"], "a \"b\"\n");
  EXPECT_EQ(std::memcmp(parsed->at("x").data, x, sizeof(x)), 0);
  EXPECT_EQ(std::memcmp(parsed->at("y").data, y, sizeof(y)), 0);
  EXPECT_EQ(parsed->at("y").data - parsed->at("x").data, 16);
}

TEST(SafetensorsTest, IncompleteWriteLeavesNoFile) {
  TempDir dir;
  const std::string path = dir.File("partial.safetensors");
  {
    auto writer = SafetensorsWriter::Create(path, {{"x", "F32", {4}}});
    ASSERT_TRUE(writer.ok());
    const float x[2] = {1, 2};
    ASSERT_TRUE((*writer)->Append(x, sizeof(x)).ok());
    absl::Status status = (*writer)->Close();
    EXPECT_THAT(status.message(), HasSubstr("8 tensor bytes written, 16 declared"));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_FALSE(SafetensorsWriter::Create(path, {{"x", "F99", {4}}}).ok());
  EXPECT_FALSE(SafetensorsWriter::Create(path, {{"x", "F32", {1}}, {"x", "F32", {1}}}).ok());
}

// Whatever is at the writer's temporary name is removed, not followed nor written into: a
// symbolic link (its target keeps its bytes), a hard link to another file (that file keeps
// its bytes), a file a run that died left.
TEST(SafetensorsTest, TheWriterNeverWritesThroughWhatIsAtItsTemporaryName) {
  TempDir dir;
  const std::string path = dir.File("w.safetensors");
  const std::string victim = dir.File("victim");
  auto read = [](const std::string& file) {
    std::ifstream in(file);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  auto write_one = [&] {
    auto writer = SafetensorsWriter::Create(path, {{"x", "F32", {1}}});
    ASSERT_TRUE(writer.ok()) << writer.status();
    const float x = 2.5f;
    ASSERT_TRUE((*writer)->Append(&x, sizeof(x)).ok());
    ASSERT_TRUE((*writer)->Close().ok());
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    std::vector<std::byte> bytes = ReadAll(path);
    absl::StatusOr<TensorMap> parsed = ParseSafetensors(bytes.data(), bytes.size(), nullptr);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(std::memcmp(parsed->at("x").data, &x, sizeof(x)), 0);
  };
  std::ofstream(victim) << "keep me";
  std::filesystem::create_symlink(victim, path + ".tmp");
  ASSERT_NO_FATAL_FAILURE(write_one());
  EXPECT_EQ(read(victim), "keep me");
  std::filesystem::create_hard_link(victim, path + ".tmp");
  ASSERT_NO_FATAL_FAILURE(write_one());
  EXPECT_EQ(read(victim), "keep me");
  std::ofstream(path + ".tmp") << "left by a run that died";
  ASSERT_NO_FATAL_FAILURE(write_one());
}

TEST(SafetensorsTest, RefusesTruncatedFile) {
  std::vector<std::pair<std::string, TensorView>> tensors;
  std::vector<float> values(64, 1.5f);
  tensors.push_back({"w", {"F32", {8, 8}, reinterpret_cast<const std::byte*>(values.data()), 256}});
  TempDir dir;
  const std::string path = dir.File("t.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  std::vector<std::byte> bytes = ReadAll(path);
  bytes.resize(bytes.size() - 1);
  absl::Status status = ParseRaw(bytes);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor 'w'"));
  EXPECT_THAT(status.message(), HasSubstr("truncated"));
  bytes.resize(20);  // cut inside the header
  EXPECT_THAT(ParseRaw(bytes).message(), HasSubstr("past the end of the file"));
  bytes.resize(5);  // not even the length
  EXPECT_THAT(ParseRaw(bytes).message(), HasSubstr("shorter than the 8-byte header length"));
}

TEST(SafetensorsTest, RefusesBadHeaderLength) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_TRUE(ParseRaw(RawFile(header, 4)).ok());
  absl::Status status = ParseRaw(RawFile(header, 4, 1u << 30));
  EXPECT_THAT(status.message(), HasSubstr("header length 1073741824 runs past the end"));
  status = ParseRaw(RawFile(header, 4, UINT64_MAX - 1));
  EXPECT_THAT(status.message(), HasSubstr("runs past the end"));
  // A length that is too short cuts the JSON.
  EXPECT_THAT(ParseRaw(RawFile(header, 4, header.size() - 3)).message(),
              HasSubstr("malformed JSON header"));
}

class SafetensorsBadHeaderTest
    : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(SafetensorsBadHeaderTest, RefusedWithMessage) {
  const auto& [header, expected] = GetParam();
  absl::Status status = ParseRaw(RawFile(header, 64));
  ASSERT_FALSE(status.ok()) << header;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(expected)) << header;
}

INSTANTIATE_TEST_SUITE_P(
    Headers, SafetensorsBadHeaderTest,
    ::testing::Values(
        std::pair<std::string, std::string>{"", "malformed JSON header at byte 0"},
        std::pair<std::string, std::string>{"[]", "malformed JSON header at byte 0"},
        std::pair<std::string, std::string>{"{\"w\":", "malformed JSON header"},
        std::pair<std::string, std::string>{"{\"w\" {}}", "expected ':'"},
        std::pair<std::string, std::string>{R"({"w":{"dtype":"F32","shape":[1],)"
                                            R"("data_offsets":[0,4]},})",
                                            "malformed JSON header"},
        std::pair<std::string, std::string>{R"({"w":{"dtype":"F32","shape":[1]}})",
                                            "missing \"data_offsets\""},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", "unknown key 'x'"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "non-negative integer"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "non-negative integer"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "[begin, end]"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} trailing)",
            "unexpected text after"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            "appears twice"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})",
            "tensor 'w': unknown dtype 'F128'"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[32,80]}})",
            "tensor 'w': data_offsets [32, 80] run past the data section (64 bytes)"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,4]}})", "end before they begin"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})",
            "hold 12 bytes, but F32 [4] needs 16"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
            "overflows"},
        std::pair<std::string, std::string>{
            R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
            R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
            "tensors 'a' and 'b' overlap"},
        std::pair<std::string, std::string>{R"({"__metadata__":{"k":1}})",
                                            "__metadata__ values must be strings"},
        std::pair<std::string, std::string>{"{\"w\x01\":{}}", "control character"},
        std::pair<std::string, std::string>{R"({"\ud800":{}})", "unpaired surrogate"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[1],"shape":[1],"data_offsets":[0,4]}})",
            "\"shape\" given twice"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})",
            "tensor 'w': malformed JSON header at byte 45: shape has more than 8 dimensions"},
        std::pair<std::string, std::string>{
            R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4,4]}})",
            "data_offsets must be [begin, end]"}));

// A header's size bounds what parsing it holds: a shape of millions of zero dimensions is
// refused at the ninth (it would take 8 bytes per dimension from 2 bytes of header).
TEST(SafetensorsTest, RefusesAShapeOfMillionsOfDimensionsAtTheLimit) {
  std::string dims = "0";
  for (int i = 0; i < 1000000; ++i) dims += ",0";
  const std::vector<std::byte> file = RawFile(
      absl::StrCat(R"({"w":{"dtype":"F32","shape":[)", dims, R"(],"data_offsets":[0,0]}})"), 0);
  const absl::Status status = ParseRaw(file);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("shape has more than 8 dimensions (the limit)"));
}

// Empty tensors take no data bytes but a few hundred bytes each once parsed: their number
// is limited, by default to kMaxSafetensorsTensors; a caller may allow more.
TEST(SafetensorsTest, RefusesMoreTensorsThanTheLimit) {
  std::string header = "{";
  for (size_t i = 0; i <= kMaxSafetensorsTensors; ++i) {
    absl::StrAppend(&header, i == 0 ? "" : ",", "\"t", i,
                    R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})");
  }
  header += "}";
  const std::vector<std::byte> file = RawFile(header, 0);
  absl::Status status = ParseRaw(file);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("the header describes more than ", kMaxSafetensorsTensors,
                                     " tensors (the limit)")));
  EXPECT_TRUE(ParseSafetensors(file.data(), file.size(), nullptr, kMaxSafetensorsTensors + 1).ok());
}

TEST(SafetensorsTest, AcceptsEmptyHeaderAndSpacePadding) {
  absl::StatusOr<TensorMap> parsed =
      ParseSafetensors(RawFile("{}      ", 0).data(), RawFile("{}      ", 0).size());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->empty());
  const std::vector<std::byte> file =
      RawFile(R"( { "\u00e9\ud83d\ude00" : { "shape" : [ 2 ] , "dtype" : "I8" ,)"
              R"( "data_offsets" : [ 0 , 2 ] } } )",
              2);
  parsed = ParseSafetensors(file.data(), file.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->count("\xc3\xa9\xf0\x9f\x98\x80"), 1u);
}

TEST(SafetensorsTest, MappedFileErrorsNamePath) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open("/nonexistent/w.bin");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr("/nonexistent/w.bin"));
  EXPECT_THAT(file.status().message(), HasSubstr("No such file"));
  TempDir dir;
  const std::string empty = dir.File("empty");
  std::ofstream(empty).close();
  file = MappedFile::Open(empty);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->size(), 0u);
  EXPECT_FALSE(ParseSafetensors((*file)->data(), (*file)->size()).ok());
}

}  // namespace
}  // namespace fuserank::engine
