#include "tests/server/wire_test_util.h"

#include <cstring>
#include <limits>
#include <vector>

namespace fuserank::testing::wire {
namespace {

using Rng = std::mt19937_64;

int Uniform(Rng* rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(*rng); }
bool OneIn(Rng* rng, int n) { return Uniform(rng, 0, n - 1) == 0; }

std::string Name(Rng* rng) {
  static const char* const kNames[] = {"user_0", "user_1", "item_0",  "item_1",
                                       "item_0", "item_1", "country", ""};
  if (OneIn(rng, 40)) return "item_\xff";
  return kNames[Uniform(rng, 0, 7)];
}

int64_t Id(Rng* rng) {
  switch (Uniform(rng, 0, 5)) {
    case 0:
      return -Uniform(rng, 1, 200);
    case 1:
      return std::numeric_limits<int64_t>::min() + Uniform(rng, 0, 3);
    case 2:
      return Uniform(rng, 40, 120);
    default:
      return Uniform(rng, 0, 12);
  }
}

float Value(Rng* rng) {
  if (OneIn(rng, 30)) return std::numeric_limits<float>::quiet_NaN();
  if (OneIn(rng, 30)) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(Uniform(rng, -100, 100)) / 8.0f;
}

// `count` floats of field `field`: packed, unpacked or split in two chunks.
std::string Floats(Rng* rng, int field, int count) {
  std::string out, packed;
  const int split = Uniform(rng, 0, 2);
  for (int i = 0; i < count; ++i) {
    const float v = Value(rng);
    if (split == 1 || (split == 2 && i % 2 == 1)) {
      out += Tag(field, 5) + Float(v);
    } else {
      packed += Float(v);
    }
  }
  if (!packed.empty() || OneIn(rng, 4)) out = Len(field, packed) + out;
  return out;
}

// A field no message of ranker.proto knows, or a known number with a wrong wire type.
std::string Unknown(Rng* rng, int depth = 0) {
  const int field = OneIn(rng, 2) ? Uniform(rng, 1, 6) : Uniform(rng, 7, 3000);
  switch (Uniform(rng, 0, 4)) {
    case 0:
      return Tag(field, 0) + Varint(static_cast<uint64_t>(Id(rng)));
    case 1:
      return Tag(field, 1) + std::string(8, 'u');
    case 2:
      return Tag(field, 5) + std::string(4, 'v');
    case 3: {
      std::string inner;
      if (depth < 3 && OneIn(rng, 2)) inner = Unknown(rng, depth + 1);
      return Tag(field, 3) + inner + Tag(field, 4);
    }
    default:
      return Len(field, OneIn(rng, 2) ? std::string("\xff\x01", 2) : "bytes");
  }
}

std::string FeatureBytes(Rng* rng) {
  std::string out;
  if (!OneIn(rng, 15)) out += Len(1, Name(rng));
  const int ids = OneIn(rng, 8) ? Uniform(rng, 4, 6) : Uniform(rng, 0, 3);
  std::string packed;
  for (int i = 0; i < ids; ++i) {
    const uint64_t id = static_cast<uint64_t>(Id(rng));
    if (OneIn(rng, 4)) {
      out += Tag(2, 0) + Varint(id);
    } else {
      packed += Varint(id);
    }
  }
  if (!packed.empty()) out += Len(2, packed);
  if (OneIn(rng, 3)) out += Floats(rng, 3, OneIn(rng, 5) ? Uniform(rng, 0, 4) : ids);
  if (OneIn(rng, 6)) out += Unknown(rng);
  if (OneIn(rng, 12)) out += Len(1, Name(rng));  // the last name wins
  return out;
}

std::string CandidateBytes(Rng* rng) {
  std::string out;
  if (!OneIn(rng, 5)) out += Tag(1, 0) + Varint(static_cast<uint64_t>(Id(rng)));
  const int features = Uniform(rng, 0, 3);
  for (int k = 0; k < features; ++k) out += Len(2, FeatureBytes(rng));
  out += Floats(rng, 3, OneIn(rng, 8) ? Uniform(rng, 0, 5) : 3);
  if (OneIn(rng, 8)) out += Unknown(rng);
  return out;
}

}  // namespace

std::string Varint(uint64_t value) {
  std::string out;
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
  return out;
}

std::string Tag(int field, int wire_type) {
  return Varint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

std::string Len(int field, const std::string& bytes) {
  return Tag(field, 2) + Varint(bytes.size()) + bytes;
}

std::string Float(float value) {
  std::string out(sizeof(float), '\0');
  std::memcpy(out.data(), &value, sizeof(float));
  return out;
}

bool SameFloats(absl::Span<const float> a, const google::protobuf::RepeatedField<float>& b) {
  return a.size() == static_cast<size_t>(b.size()) &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::string RandomRequest(Rng* rng) {
  std::string out;
  if (OneIn(rng, 2)) out += Len(1, OneIn(rng, 20) ? "id\xc0" : "req-1");
  const int user = Uniform(rng, 0, 3);
  for (int k = 0; k < user; ++k) out += Len(2, FeatureBytes(rng));
  out += Floats(rng, 3, OneIn(rng, 8) ? Uniform(rng, 0, 3) : 2);
  const int candidates = OneIn(rng, 10) ? Uniform(rng, 8, 10) : Uniform(rng, 0, 3);
  for (int c = 0; c < candidates; ++c) {
    out += Len(4, CandidateBytes(rng));
    if (OneIn(rng, 10)) out += Len(2, FeatureBytes(rng));  // user features after candidates
    if (OneIn(rng, 10)) out += Tag(3, 5) + Float(Value(rng));
  }
  if (OneIn(rng, 2)) out += Tag(5, 0) + Varint(static_cast<uint64_t>(Uniform(rng, 0, 4)));
  if (OneIn(rng, 6)) out += Unknown(rng);
  return out;
}

void Mutate(Rng* rng, std::string* bytes) {
  if (OneIn(rng, 2) || bytes->empty()) return;
  const int mutations = Uniform(rng, 1, 3);
  for (int m = 0; m < mutations && !bytes->empty(); ++m) {
    const size_t at = static_cast<size_t>(Uniform(rng, 0, static_cast<int>(bytes->size()) - 1));
    switch (Uniform(rng, 0, 3)) {
      case 0:
        (*bytes)[at] = static_cast<char>((*bytes)[at] ^ (1 << Uniform(rng, 0, 7)));
        break;
      case 1:
        bytes->insert(at, 1, static_cast<char>(Uniform(rng, 0, 255)));
        break;
      case 2:
        bytes->erase(at, 1);
        break;
      default:
        bytes->resize(at);
    }
  }
}

}  // namespace fuserank::testing::wire
