// The ranges and cross-field rules of SPEC section 2 for ValidateModelSpec: bounded names,
// row counts and widths, table names that are not KServe input names (SPEC section 6), the
// rules of each interaction (dot's equal widths, linear's cross_dim, dcn's layers) and the
// total width the interaction gives.
#include "engine/model_spec_checks.h"

#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/escape_text.h"

namespace fuserank::engine {
namespace {

constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();  // 2^31 - 1
constexpr int64_t kMaxWidth = int64_t{1} << 20;       // any one dim, dense count or layer width
constexpr int64_t kMaxTotalWidth = int64_t{1} << 24;  // concat(V) and the interaction output
constexpr size_t kMaxNameBytes = 256;                 // name, version, table names
constexpr size_t kQuoted = 64;  // bytes of a spec value quoted back in a message

// Names travel into messages, logs and metric labels: printable UTF-8 of bounded length.
void CheckName(ErrorList& problems, absl::string_view field, const std::string& name) {
  if (name.size() > kMaxNameBytes) {
    problems.Add(field,
                 absl::StrCat("must be at most ", kMaxNameBytes, " bytes, got ", name.size()));
  } else if (!IsPrintableUtf8(name)) {
    problems.Add(field, absl::StrCat("must be printable UTF-8 without control characters, got '",
                                     EscapeText(name, kQuoted), "'"));
  }
}

void CheckWidth(ErrorList& problems, absl::string_view field, int64_t value, int64_t min) {
  if (value < min || value > kMaxWidth) {
    problems.Add(field, absl::StrCat("must be in ", min, "..", kMaxWidth, ", got ", value));
  }
}

// dcn.layers and dcn.low_rank: required ranges with interaction dcn, absent otherwise.
void CheckDcn(const ModelSpec& spec, ErrorList& problems) {
  if (spec.interaction != Interaction::kDcn) {
    if (spec.dcn.layers != 0 || spec.dcn.low_rank != 0) {
      problems.Add("dcn", absl::StrCat("must be absent unless interaction is dcn, got {layers: ",
                                       spec.dcn.layers, ", low_rank: ", spec.dcn.low_rank, "}"));
    }
    return;
  }
  if (spec.dcn.layers == 0 && spec.dcn.low_rank == 0) {
    problems.Add("dcn", "must be given with interaction: dcn, e.g. {layers: 3, low_rank: 512}");
    return;
  }
  if (spec.dcn.layers < 1 || spec.dcn.layers > kMaxDcnLayers) {
    problems.Add("dcn.layers", absl::StrCat("must be in 1..", kMaxDcnLayers,
                                            " with interaction: dcn, got ", spec.dcn.layers));
  }
  CheckWidth(problems, "dcn.low_rank", spec.dcn.low_rank, 0);
}

// SPEC section 6 names a model's KServe inputs after its tables (`t`, `t__lengths`,
// `t__weights`) beside `user_dense`, `item_dense` and `item_ids`: a table under one of
// those three names would be two inputs of one name (ModelInfer could not send its ids).
void CheckKServeName(ErrorList& problems, const std::string& field, const std::string& name) {
  for (const char* input : {"user_dense", "item_dense", "item_ids"}) {
    if (name == input) {
      problems.Add(field, absl::StrCat("'", name,
                                       "' is the name of a KServe input of every model (SPEC "
                                       "section 6); rename the table"));
    }
  }
}

// A table named like another's `__lengths` or `__weights` input (SPEC section 6).
void CheckKServeSuffixes(const ModelSpec& spec, const std::set<std::string>& names,
                         ErrorList& problems) {
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const std::string& name = spec.tables[i].name;
    for (absl::string_view suffix : {"__lengths", "__weights"}) {
      if (name.size() > suffix.size() && absl::EndsWith(name, suffix) &&
          names.count(name.substr(0, name.size() - suffix.size())) > 0) {
        problems.Add(absl::StrCat("tables[", i, "].name"),
                     absl::StrCat("'", EscapeText(name, kQuoted), "' is the KServe ",
                                  suffix.substr(2), " input of table '",
                                  EscapeText(name.substr(0, name.size() - suffix.size()), kQuoted),
                                  "' (SPEC section 6); rename the table"));
      }
    }
  }
}

// The names, the weights file and each table's own fields.
void CheckNamesAndTables(const ModelSpec& spec, ErrorList& problems) {
  if (spec.name.empty()) problems.Add("name", "must not be empty");
  CheckName(problems, "name", spec.name);
  CheckName(problems, "version", spec.version);
  if (spec.weights_path.empty()) problems.Add("weights", "must name the safetensors file");
  std::set<std::string> names;
  for (size_t i = 0; i < spec.tables.size(); ++i) {
    const TableSpec& t = spec.tables[i];
    const std::string p = absl::StrCat("tables[", i, "]");
    if (t.name.empty()) problems.Add(p + ".name", "must not be empty");
    CheckName(problems, p + ".name", t.name);
    if (!t.name.empty() && !names.insert(t.name).second) {
      problems.Add(p + ".name",
                   absl::StrCat("duplicate table name '", EscapeText(t.name, kQuoted), "'"));
    }
    CheckKServeName(problems, p + ".name", t.name);
    if (t.remote()) {
      if (t.rows != 0) problems.Add(p + ".rows", "a storage: redis table has no row count");
    } else if (t.rows < 1 || t.rows > kMaxRows) {
      problems.Add(p + ".rows", absl::StrCat("must be in 1..", kMaxRows, ", got ", t.rows));
    }
    if (t.dim < 1) {
      problems.Add(p + ".dim", absl::StrCat("must be >= 1, got ", t.dim));
    } else {
      CheckWidth(problems, p + ".dim", t.dim, 1);
    }
  }
  CheckKServeSuffixes(spec, names, problems);
}

// The dense widths, the MLP layers and the interaction's own parameters.
void CheckLayers(const ModelSpec& spec, ErrorList& problems) {
  CheckWidth(problems, "dense.user", spec.dense_user, 0);
  CheckWidth(problems, "dense.item", spec.dense_item, 0);
  for (size_t i = 0; i < spec.bottom_mlp.size(); ++i) {
    CheckWidth(problems, absl::StrCat("bottom_mlp[", i, "]"), spec.bottom_mlp[i], 1);
  }
  for (size_t i = 0; i < spec.top_mlp.size(); ++i) {
    CheckWidth(problems, absl::StrCat("top_mlp[", i, "]"), spec.top_mlp[i], 1);
  }
  if (spec.top_mlp.empty()) {
    problems.Add("top_mlp", "must not be empty (the last layer has width 1)");
  } else if (spec.top_mlp.back() != 1) {
    problems.Add(
        absl::StrCat("top_mlp[", spec.top_mlp.size() - 1, "]"),
        absl::StrCat("the last layer must have width 1 (the score), got ", spec.top_mlp.back()));
  }
  // In 64 bits: the widths are not yet known to be in range (dense_total() is an int).
  const int64_t dense_total = int64_t{spec.dense_user} + spec.dense_item;
  if (spec.tables.empty() && dense_total == 0) {
    problems.Add("tables", "the model needs at least one table or dense feature");
  }
  if (!spec.bottom_mlp.empty() && dense_total == 0) {
    problems.Add("bottom_mlp", "there are no dense features for it (dense.user + dense.item = 0)");
  }
  if (spec.interaction == Interaction::kLinear) {
    if (spec.cross_dim < 1) {
      problems.Add("cross_dim",
                   absl::StrCat("must be >= 1 with interaction: linear, got ", spec.cross_dim));
    } else {
      CheckWidth(problems, "cross_dim", spec.cross_dim, 1);
    }
  } else if (spec.cross_dim != 0) {
    problems.Add("cross_dim",
                 absl::StrCat("must be 0 unless interaction is linear, got ", spec.cross_dim));
  }
  CheckDcn(spec, problems);
}

// The widths the interaction gives; REQUIRES: the fields passed the checks above.
void CheckInteractionWidth(const ModelSpec& spec, ErrorList& problems) {
  if (spec.interaction == Interaction::kDot) {
    const int z = spec.z_width();
    const int d = z > 0 ? z : (spec.tables.empty() ? 0 : spec.tables[0].dim);
    const char* what = z == 0                    ? "tables[0].dim"
                       : spec.bottom_mlp.empty() ? "the dense width dense.user + dense.item"
                                                 : "the last bottom_mlp width";
    for (size_t i = 0; i < spec.tables.size(); ++i) {
      if (spec.tables[i].dim != d) {
        problems.Add(absl::StrCat("tables[", i, "].dim"),
                     absl::StrCat("interaction dot needs every vector the same width: got ",
                                  spec.tables[i].dim, ", expected ", d, " (", what, ")"));
      }
    }
  }
  int64_t concat = spec.z_width();
  for (const TableSpec& t : spec.tables) concat += t.dim;
  const int64_t n = spec.dot_vectors();
  if (concat > kMaxTotalWidth || n * (n - 1) / 2 > kMaxTotalWidth) {
    problems.Add("tables",
                 absl::StrCat("the interaction is too wide (limit ", kMaxTotalWidth, ")"));
  } else if (problems.empty() && spec.interaction_width() < 1) {
    problems.Add("interaction", "interaction dot over a single vector gives no features");
  }
}
}  // namespace

void CheckModelSpec(const ModelSpec& spec, ErrorList& problems) {
  CheckNamesAndTables(spec, problems);
  CheckLayers(spec, problems);
  if (!problems.empty()) return;  // widths below assume sane fields
  CheckInteractionWidth(spec, problems);
}

}  // namespace fuserank::engine
