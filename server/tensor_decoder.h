// Validates the input tensors of a KServe v2 ModelInferRequest against one model (the
// tensors of SPEC section 6: kserve_tensors.h) and appends the request to an engine::Batch
// exactly as RequestDecoder appends the equivalent RankRequest: the same bags, rows,
// weights, dense values and top-K, hence the same scores bit for bit. Ids are mapped to
// rows straight from the request's bytes (raw_input_contents or typed contents): nothing
// is allocated per id, and nothing at all once the batch's buffers have grown (but for
// models of more than 32 tables). Every bad input gets the status and the reason of its
// SPEC section 3 row, located by tensor name instead of RankRequest field path; shape and
// datatype errors are INVALID_ARGUMENT naming the tensor.
// Immutable after construction; Append() is thread-safe (one Batch per caller).
#ifndef FUSERANK_SERVER_TENSOR_DECODER_H_
#define FUSERANK_SERVER_TENSOR_DECODER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/batch.h"
#include "engine/model.h"
#include "inference/grpc_service.pb.h"
#include "server/infer_request_scan.h"
#include "server/infer_tensor_view.h"
#include "server/request_decoder.h"

namespace fuserank::server {

// What the encoder needs of a decoded request. Views into the request: valid while it is.
struct InferRequestInfo {
  int num_candidates = 0;
  Column<int64_t> item_ids;  // one per candidate, echoed in the output `item_ids`
};

class TensorDecoder {
 public:
  // Keeps what it needs of `model` (names, rows, oov policies, dense widths), not `model`.
  // `served_name`: the name the model is served under, which messages name (a client
  // addresses it so); "" = the spec's own name.
  TensorDecoder(const engine::Model& model, DecodeLimits limits, std::string served_name = "");

  class WireInputs;

  // Appends `request` as the next request of `batch`. `model` must be the model this
  // decoder was built from; an empty batch takes it, a batch of another model is an
  // INTERNAL error. On any error the batch is left exactly as it was. `scanned`: what
  // CheckWire() found in the bytes `request` was parsed from, which spares looking each
  // input's name up again (ignored unless it holds as many inputs as `request`).
  absl::Status Append(const inference::ModelInferRequest& request,
                      const std::shared_ptr<const engine::Model>& model, engine::Batch* batch,
                      InferRequestInfo* info, const WireInputs* scanned = nullptr) const;

  // The checks before parsing (infer_request_scan.h; tensor_decoder_scan.cc) of a request
  // whose top level ScanInferTop read into `top`: what its wire bytes show Append() or the
  // output selection would refuse anyway, refused before protobuf makes it large. More
  // inputs than the model takes, raw_input_contents than inputs or outputs than
  // kNumOutputs; an unknown or repeated input (Append's messages); typed contents of more
  // values than the input can hold within the limits (server.max_candidates,
  // server.max_ids_per_feature, engine.max_batch_ids, the model's dense widths). On OK,
  // `out` (when not null) says where each of the model's inputs is.
  absl::Status CheckWire(absl::string_view wire, InferRequestTop* top,
                         WireInputs* out = nullptr) const;

 private:
  enum class Role : uint8_t { kIds, kLengths, kWeights, kUserDense, kItemDense, kItemIds };
  struct InputRef {
    Role role = Role::kIds;
    int table = -1;  // index into tables_ for kIds, kLengths and kWeights
  };
  struct Table {
    std::string name;
    engine::Side side = engine::Side::kItem;
    int64_t rows = 0;
    engine::Oov oov = engine::Oov::kModulo;
    bool remote = false;  // storage: redis
  };
  // Positions in request.inputs() of what the request sent (-1: not sent).
  struct Inputs {
    absl::InlinedVector<std::array<int, 3>, 32> table;  // per table: ids, lengths, weights
    int user_dense = -1;
    int item_dense = -1;
    int item_ids = -1;
  };
  // The slot of `inputs` that input `ref` fills.
  static int* SlotIn(const InputRef& ref, Inputs* inputs);

 public:
  // Where a request's wire bytes hold each of the model's inputs (CheckWire).
  class WireInputs {
   private:
    friend class TensorDecoder;
    Inputs inputs;
    int count = -1;  // inputs in the request; -1: nothing scanned
  };

 private:
  // One table's tensors, validated: lengths sum to the ids, weights one per id.
  struct Columns {
    Column<int64_t> ids;
    Column<int32_t> lengths;  // empty: no bag has ids
    Column<float> weights;    // empty: every weight is 1
    int64_t cursor = 0;       // ids consumed so far, while appending item bags
  };
  using ColumnSet = absl::InlinedVector<Columns, 32>;

  absl::Status AppendImpl(const inference::ModelInferRequest& request, const WireInputs* scanned,
                          engine::Batch* batch, InferRequestInfo* info) const;
  absl::Status Resolve(const inference::ModelInferRequest& request, Inputs* inputs) const;
  absl::Status UnknownInput(absl::string_view name) const;
  static absl::Status GivenTwice(absl::string_view name, int first, int second);
  absl::Status ViewTable(const inference::ModelInferRequest& request,
                         const std::array<int, 3>& sent, int t, int candidates, Columns* out) const;
  absl::Status CheckLengths(const Table& table, const Columns& columns) const;
  absl::Status AppendUserDense(const inference::ModelInferRequest& request, int input,
                               std::vector<float>* out) const;
  absl::StatusOr<Column<float>> ViewItemDense(const inference::ModelInferRequest& request,
                                              int input, int candidates) const;
  // Appends ids [columns->cursor, + count) of table `t` as one bag and advances the cursor.
  absl::Status AppendBag(int t, int64_t count, Columns* columns, engine::BagSet* bags) const;
  absl::Status AppendItems(ColumnSet& columns, const Column<float>& dense, int candidates,
                           engine::Batch* batch) const;
  std::string TableNames(engine::Side side) const;

  // What the inputs CheckWire() has scanned so far took.
  struct ScanTally {
    Inputs inputs;  // where each was sent
    int64_t ids = 0;
    int64_t weights = 0;
  };
  absl::Status CheckScannedCounts(const InferRequestTop& top) const;
  absl::Status CheckScannedInput(const ScannedInput& input, ScanTally* tally) const;
  // The model's inputs: 3 per table (ids, lengths, weights), user_dense, item_dense, item_ids.
  int num_inputs() const { return 3 * static_cast<int>(tables_.size()) + 3; }
  // The most typed elements an input of `ref` can hold within the limits, and why.
  int64_t MaxElements(const InputRef& ref) const;
  // The datatype of input `ref`.
  static TensorType TypeOf(const InputRef& ref);
  std::string WhyMax(const InputRef& ref) const;

  std::string model_name_;  // the served name, for messages
  int dense_user_ = 0;
  int dense_item_ = 0;
  DecodeLimits limits_;
  std::vector<Table> tables_;    // spec order
  bool keyed_ = false;           // the model has a storage: redis table: bags carry keys
  std::vector<int> user_order_;  // tables_ indices in Model::user_tables() order
  std::vector<int> item_order_;  // tables_ indices in Model::item_tables() order
  absl::flat_hash_map<std::string, InputRef> inputs_;
};

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_TENSOR_DECODER_H_
