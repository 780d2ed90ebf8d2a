// Hand-written protobuf wire bytes for the tests of the RankRequest wire parse: field
// encoders, and random RankRequests built field by field (packed and unpacked values,
// unknown fields of every wire type, known fields of the wrong one, groups, names that are
// no table, invalid UTF-8, NaNs, counts around the decoder tests' limits) with random
// byte mutations. Plain functions; thread-safe (the caller owns the generator).
#ifndef FUSERANK_TESTS_SERVER_WIRE_TEST_UTIL_H_
#define FUSERANK_TESTS_SERVER_WIRE_TEST_UTIL_H_

#include <google/protobuf/repeated_field.h>

#include <cstdint>
#include <random>
#include <string>

#include "absl/types/span.h"

namespace fuserank::testing::wire {

std::string Varint(uint64_t value);
std::string Tag(int field, int wire_type);
std::string Len(int field, const std::string& bytes);  // a length-delimited field
std::string Float(float value);                        // 4 bytes, little-endian

// The same floats, bit for bit (NaNs included).
bool SameFloats(absl::Span<const float> a, const google::protobuf::RepeatedField<float>& b);

// A random RankRequest's bytes for the model of the decoder tests (user_0, user_1, item_0,
// item_1; dense {user: 2, item: 3}); most are well-formed, many break a rule of SPEC
// section 3.
std::string RandomRequest(std::mt19937_64* rng);
// Leaves `bytes` as they are half of the time; else flips, inserts or removes a byte or
// cuts the tail, one to three times.
void Mutate(std::mt19937_64* rng, std::string* bytes);

}  // namespace fuserank::testing::wire

#endif  // FUSERANK_TESTS_SERVER_WIRE_TEST_UTIL_H_
