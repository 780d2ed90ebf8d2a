// Text that came from outside (a request, a model file) made safe to put in a message or a
// log line: control characters and bytes that are not valid UTF-8 become escapes, and the
// text is cut, on a character boundary, to a given number of input bytes. Pure functions;
// thread-safe.
#ifndef FUSERANK_ENGINE_ESCAPE_TEXT_H_
#define FUSERANK_ENGINE_ESCAPE_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace fuserank::engine {

// `text` with \n, \r, \t, \\ written as such, other control characters (C0, DEL, C1) and
// every byte that is not part of a valid UTF-8 sequence as \xNN; printable ASCII and
// valid multi-byte UTF-8 are kept. At most `max_bytes` bytes of `text` are used, cut
// before a character that would not fit whole; a cut text ends in "...".
std::string EscapeText(absl::string_view text, size_t max_bytes = 256);

// True when `text` is valid UTF-8 without control characters (C0, DEL, C1): EscapeText
// would keep every byte but the backslashes.
bool IsPrintableUtf8(absl::string_view text);

// Length of the valid UTF-8 sequence starting at text[0], or 0 when it is not one
// (overlong forms, surrogates and code points above U+10FFFF are not valid).
size_t Utf8SequenceLength(absl::string_view text);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_ESCAPE_TEXT_H_
