// libFuzzer target: ScanReply (engine/remote/resp_frame.h) on any bytes, against hiredis's
// own reader. It must never read outside the input; a reply it calls complete must be one
// hiredis parses from exactly those bytes; bytes it calls incomplete must not hold a reply
// hiredis would return. Small limits, so the refusals are reached too.
#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "engine/remote/resp_frame.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_verdict.h"

namespace {

struct ReaderFree {
  void operator()(redisReader* r) const { redisReaderFree(r); }
};

// What hiredis makes of `bytes`: 1 a reply (*consumed: its length), 0 none yet, -1 an error.
int HiredisReads(std::string_view bytes, size_t* consumed) {
  std::unique_ptr<redisReader, ReaderFree> reader(redisReaderCreate());
  if (redisReaderFeed(reader.get(), bytes.data(), bytes.size()) != REDIS_OK) return -1;
  void* reply = nullptr;
  if (redisReaderGetReply(reader.get(), &reply) != REDIS_OK) return -1;
  if (reply == nullptr) return 0;
  freeReplyObject(reply);
  *consumed = bytes.size() - (reader->len - reader->pos);
  return 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuserank::remote;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  RespLimits limits;
  limits.max_line = 64;
  limits.max_bulk = 256;
  limits.max_elements = 16;
  limits.max_total_elements = 64;
  limits.max_depth = 4;
  const FrameScan scan = ScanReply(bytes, limits);
  fuserank::fuzz::FuzzVerdict(scan.state == FrameState::kComplete,
                              scan.state == FrameState::kIncomplete ? "incomplete" : scan.why);
  size_t consumed = 0;
  switch (scan.state) {
    case FrameState::kComplete: {
      FUZZ_CHECK(scan.bytes > 0 && scan.bytes <= size, absl::StrCat("length ", scan.bytes));
      const int read = HiredisReads(bytes.substr(0, scan.bytes), &consumed);
      FUZZ_CHECK(read == 1, absl::StrCat("hiredis: ", read, " for a complete reply"));
      FUZZ_CHECK(consumed == scan.bytes,
                 absl::StrCat("hiredis read ", consumed, " bytes of ", scan.bytes));
      break;
    }
    case FrameState::kIncomplete:
      FUZZ_CHECK(HiredisReads(bytes, &consumed) != 1, "hiredis found a reply in incomplete bytes");
      break;
    case FrameState::kRefused:
      FUZZ_CHECK(!scan.why.empty(), "a refusal without a reason");
      break;
  }
  return 0;
}
