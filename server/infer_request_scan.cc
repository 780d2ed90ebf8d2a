#include "server/infer_request_scan.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/wire_reader.h"

namespace fuserank::server {
namespace {

// Field numbers of proto/inference/grpc_service.proto.
constexpr uint32_t kRequestModelName = 1;
constexpr uint32_t kRequestModelVersion = 2;
constexpr uint32_t kRequestId = 3;
constexpr uint32_t kRequestParameters = 4;
constexpr uint32_t kRequestInputs = 5;
constexpr uint32_t kRequestOutputs = 6;
constexpr uint32_t kRequestRawContents = 7;
constexpr uint32_t kInputName = 1;
constexpr uint32_t kInputShape = 3;
constexpr uint32_t kInputParameters = 4;
constexpr uint32_t kInputContents = 5;
constexpr uint32_t kOutputParameters = 2;
constexpr uint32_t kContentsFp32 = 6;
constexpr uint32_t kContentsFp64 = 7;
constexpr uint32_t kContentsBytes = 8;  // 1-5 are varint kinds: bool, int32, int64, uint32, uint64
constexpr uint32_t kEntryValue = 2;     // a map entry's value: an InferParameter

// Wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kDelimited = 2;
constexpr uint32_t kStartGroup = 3;
constexpr uint32_t kFixed32 = 5;

uint32_t Field(uint32_t tag) { return tag >> 3; }
uint32_t WireType(uint32_t tag) { return tag & 7; }

// Where in the request the scan is, turned into text only for a message (nothing is
// allocated while the scan goes well): "outputs[3].parameters", "inputs[0].contents".
struct Where {
  explicit Where(absl::string_view list, int index = -1, absl::string_view sub = "")
      : list(list), index(index), sub(sub) {}

  absl::string_view list;  // "the request", "parameters", "inputs", "outputs"
  int index;               // in `list`; -1: not a list
  absl::string_view sub;   // "", ".parameters", ".contents"

  Where In(absl::string_view field) const { return Where(list, index, field); }
  std::string Text() const {
    return index < 0 ? absl::StrCat(list, sub) : absl::StrCat(list, "[", index, "]", sub);
  }
};

absl::Status NotARequest(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid inference.ModelInferRequest: ", what));
}

// Counts unknown fields against the request's bound and skips them.
class Unknowns {
 public:
  explicit Unknowns(int* count) : count_(count) {}

  // Skips the field whose tag was just read, which the scan does not know (or not with this
  // wire type, which protobuf keeps as unknown too). `where` names the message, for errors.
  absl::Status Skip(wire::Reader* in, uint32_t tag, const Where& where) {
    if (WireType(tag) == kStartGroup) {
      return NotARequest(absl::StrCat(where.Text(), " holds a group (field ", Field(tag),
                                      "); no field of the KServe v2 protocol is one"));
    }
    if (++*count_ > kMaxInferUnknownFields) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the request holds more than ", kMaxInferUnknownFields,
          " fields that inference.ModelInferRequest does not define (the last at ", where.Text(),
          ", field ", Field(tag), "); send only the KServe v2 protocol's fields"));
    }
    if (!wire::SkipField(in, tag, wire::kRecursionLimit)) {
      return NotARequest(absl::StrCat(where.Text(), " is malformed"));
    }
    return absl::OkStatus();
  }

 private:
  int* const count_;
};

// Skips a field the scan knows (or one ScanInferTop has read already), inline for the
// length-delimited ones.
inline bool SkipKnown(wire::Reader* in, uint32_t tag) {
  if (WireType(tag) != kDelimited) return wire::SkipField(in, tag, wire::kRecursionLimit);
  uint32_t length = 0;
  return in->Length(&length) && in->Skip(length);
}

// Enters the length-delimited field `in` is at: `sub` is its bytes.
bool Enter(wire::Reader* in, wire::Reader* sub) {
  uint32_t length = 0;
  if (!in->Length(&length)) return false;
  *sub = in->Sub(length);
  return true;
}

// One message's fields, each handed to `field(tag, in)` until the bytes end.
template <typename FieldFn>
absl::Status ForEachField(wire::Reader* in, const Where& where, FieldFn field) {
  while (!in->done()) {
    uint32_t tag = 0;
    if (!in->Tag(&tag) || wire::EndsMessage(tag)) {
      return NotARequest(absl::StrCat(where.Text(), " is malformed"));
    }
    if (absl::Status s = field(tag, in); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// An InferParameter: a oneof of bool, int64, string, double and uint64; nothing that grows.
absl::Status ScanParameter(wire::Reader in, const Where& where, Unknowns* unknowns) {
  return ForEachField(&in, where, [&](uint32_t tag, wire::Reader* r) -> absl::Status {
    const uint32_t field = Field(tag);
    const uint32_t type = WireType(tag);
    const bool known = ((field == 1 || field == 2 || field == 5) && type == kVarint) ||
                       (field == 3 && type == kDelimited) || (field == 4 && type == kFixed64);
    if (!known) return unknowns->Skip(r, tag, where);
    if (field == 3) {  // string_param
      absl::string_view value;
      return wire::String(r, &value)
                 ? absl::OkStatus()
                 : NotARequest(absl::StrCat(where.Text(), ": a string_param is not valid UTF-8"));
    }
    return SkipKnown(r, tag) ? absl::OkStatus()
                             : NotARequest(absl::StrCat(where.Text(), " is malformed"));
  });
}

// The entry of a parameters map `in` is at: key string, InferParameter value.
absl::Status ScanEntry(wire::Reader* in, const Where& where, Unknowns* unknowns) {
  wire::Reader entry{nullptr, nullptr};
  if (!Enter(in, &entry)) return NotARequest(absl::StrCat(where.Text(), " is malformed"));
  return ForEachField(&entry, where, [&](uint32_t tag, wire::Reader* r) -> absl::Status {
    if (Field(tag) == kEntryValue && WireType(tag) == kDelimited) {
      wire::Reader value{nullptr, nullptr};
      if (!Enter(r, &value)) return NotARequest(absl::StrCat(where.Text(), " is malformed"));
      return ScanParameter(value, where, unknowns);
    }
    if (Field(tag) == 1 && WireType(tag) == kDelimited) {
      absl::string_view key;
      return wire::String(r, &key)
                 ? absl::OkStatus()
                 : NotARequest(absl::StrCat(where.Text(), ": a key is not valid UTF-8"));
    }
    return unknowns->Skip(r, tag, where);
  });
}

// Counts one more entry of the parameters map at `where` and scans it.
absl::Status ScanParametersEntry(wire::Reader* in, const Where& where, int* entries,
                                 Unknowns* unknowns) {
  if (++*entries > kMaxInferParameters) {
    return absl::InvalidArgumentError(
        absl::StrCat(where.Text(), ": more than ", kMaxInferParameters, " parameters; send fewer"));
  }
  return ScanEntry(in, where, unknowns);
}

// One InferRequestedOutputTensor: its name and parameters.
absl::Status ScanOutput(wire::Reader in, int k, Unknowns* unknowns) {
  const Where where("outputs", k);
  int parameters = 0;
  return ForEachField(&in, where, [&](uint32_t tag, wire::Reader* r) -> absl::Status {
    if (Field(tag) == kOutputParameters && WireType(tag) == kDelimited) {
      return ScanParametersEntry(r, where.In(".parameters"), &parameters, unknowns);
    }
    if (Field(tag) == kInputName && WireType(tag) == kDelimited) {
      absl::string_view name;
      return wire::String(r, &name)
                 ? absl::OkStatus()
                 : NotARequest(absl::StrCat(where.Text(), ".name is not valid UTF-8"));
    }
    return unknowns->Skip(r, tag, where);
  });
}

// One InferTensorContents: adds its numeric values to input->elements, its bytes_contents
// entries to input->bytes_values.
absl::Status ScanContents(wire::Reader in, const Where& where, ScannedInput* input,
                          Unknowns* unknowns) {
  int64_t* elements = &input->elements;
  return ForEachField(&in, where, [&](uint32_t tag, wire::Reader* r) -> absl::Status {
    const uint32_t field = Field(tag);
    const uint32_t type = WireType(tag);
    const bool varints = field >= 1 && field <= 5;
    const bool packable = varints || field == kContentsFp32 || field == kContentsFp64;
    if (packable && type == kDelimited) {
      wire::Reader packed{nullptr, nullptr};
      if (!Enter(r, &packed)) return NotARequest(absl::StrCat(where.Text(), " is malformed"));
      const int64_t bytes = packed.end - packed.p;
      *elements += varints                  ? wire::CountVarintEnds(packed.p, packed.end)
                   : field == kContentsFp32 ? (bytes + 3) / 4
                                            : (bytes + 7) / 8;
      return absl::OkStatus();
    }
    const bool one = (varints && type == kVarint) || (field == kContentsFp32 && type == kFixed32) ||
                     (field == kContentsFp64 && type == kFixed64) ||
                     (field == kContentsBytes && type == kDelimited);
    if (!one) return unknowns->Skip(r, tag, where);
    ++*(field == kContentsBytes ? &input->bytes_values : elements);
    return SkipKnown(r, tag) ? absl::OkStatus()
                             : NotARequest(absl::StrCat(where.Text(), " is malformed"));
  });
}

// One InferInputTensor: its name, shape, parameters and contents.
absl::Status ScanInput(wire::Reader in, ScannedInput* input, Unknowns* unknowns) {
  const Where where("inputs", input->index);
  int64_t dims = 0;
  int parameters = 0;
  return ForEachField(&in, where, [&](uint32_t tag, wire::Reader* r) -> absl::Status {
    const uint32_t field = Field(tag);
    const uint32_t type = WireType(tag);
    if (field == kInputShape && (type == kVarint || type == kDelimited)) {
      if (type == kDelimited) {
        wire::Reader packed{nullptr, nullptr};
        if (!Enter(r, &packed))
          return NotARequest(absl::StrCat(where.Text(), ".shape is malformed"));
        dims += wire::CountVarintEnds(packed.p, packed.end);
      } else {
        uint64_t dim = 0;
        if (!r->Varint(&dim)) return NotARequest(absl::StrCat(where.Text(), ".shape is malformed"));
        ++dims;
      }
      if (dims > kMaxInferShapeDims) {
        return absl::InvalidArgumentError(absl::StrCat(where.Text(), ": its shape has more than ",
                                                       kMaxInferShapeDims,
                                                       " dimensions; every input has 1 or 2"));
      }
      return absl::OkStatus();
    }
    if (field == kInputContents && type == kDelimited) {
      wire::Reader contents{nullptr, nullptr};
      if (!Enter(r, &contents))
        return NotARequest(absl::StrCat(where.Text(), ".contents is malformed"));
      return ScanContents(contents, where.In(".contents"), input, unknowns);
    }
    if (field == kInputParameters && type == kDelimited) {
      return ScanParametersEntry(r, where.In(".parameters"), &parameters, unknowns);
    }
    if (field == kInputName && type == kDelimited) {
      return wire::String(r, &input->name)
                 ? absl::OkStatus()
                 : NotARequest(absl::StrCat(where.Text(), ".name is not valid UTF-8"));
    }
    if (field == 2 && type == kDelimited) {  // datatype: checked by the decoder
      return SkipKnown(r, tag) ? absl::OkStatus()
                               : NotARequest(absl::StrCat(where.Text(), " is malformed"));
    }
    return unknowns->Skip(r, tag, where);
  });
}

wire::Reader ReaderOf(absl::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  return wire::Reader{p, p + bytes.size()};
}

}  // namespace

absl::Status ScanInferTop(absl::string_view bytes, InferRequestTop* top) {
  *top = InferRequestTop{};
  wire::Reader in = ReaderOf(bytes);
  Unknowns unknowns(&top->unknown_fields);
  int parameters = 0;
  const Where request("the request");
  const Where parameters_where("parameters");
  return ForEachField(&in, request, [&](uint32_t tag, wire::Reader* r) -> absl::Status {
    const uint32_t field = Field(tag);
    if (WireType(tag) != kDelimited || field < kRequestModelName || field > kRequestRawContents) {
      return unknowns.Skip(r, tag, request);
    }
    switch (field) {
      case kRequestModelName:
      case kRequestModelVersion: {
        absl::string_view* out =
            field == kRequestModelName ? &top->model_name : &top->model_version;
        if (!wire::String(r, out)) {
          return NotARequest(absl::StrCat(
              field == kRequestModelName ? "model_name" : "model_version", " is not valid UTF-8"));
        }
        return absl::OkStatus();
      }
      case kRequestParameters:
        return ScanParametersEntry(r, parameters_where, &parameters, &unknowns);
      case kRequestOutputs: {
        wire::Reader output{nullptr, nullptr};
        if (!Enter(r, &output)) {
          return NotARequest(absl::StrCat("outputs[", top->outputs, "] is malformed"));
        }
        return ScanOutput(output, top->outputs++, &unknowns);
      }
      case kRequestId: {
        absl::string_view id;
        return wire::String(r, &id) ? absl::OkStatus() : NotARequest("id is not valid UTF-8");
      }
      default: {  // inputs (walked by ScanInferInputs) and raw_input_contents
        if (field == kRequestInputs) ++top->inputs;
        if (field == kRequestRawContents) ++top->raw_input_contents;
        return SkipKnown(r, tag) ? absl::OkStatus() : NotARequest("a field is truncated");
      }
    }
  });
}

absl::Status ScanInferInputs(absl::string_view bytes, InferRequestTop* top,
                             absl::FunctionRef<absl::Status(const ScannedInput&)> check) {
  wire::Reader in = ReaderOf(bytes);
  Unknowns unknowns(&top->unknown_fields);
  int index = 0;
  return ForEachField(
      &in, Where("the request"), [&](uint32_t tag, wire::Reader* r) -> absl::Status {
        if (Field(tag) != kRequestInputs || WireType(tag) != kDelimited) {
          // Read by ScanInferTop already: well-formed, counted.
          return SkipKnown(r, tag) ? absl::OkStatus() : NotARequest("a field is truncated");
        }
        ScannedInput input;
        input.index = index++;
        wire::Reader tensor{nullptr, nullptr};
        if (!Enter(r, &tensor)) {
          return NotARequest(absl::StrCat("inputs[", input.index, "] is malformed"));
        }
        if (absl::Status s = ScanInput(tensor, &input, &unknowns); !s.ok()) return s;
        top->values += input.elements;
        return check(input);
      });
}

}  // namespace fuserank::server
