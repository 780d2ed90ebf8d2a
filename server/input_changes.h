// What a client must send differently to a new version of a model: the tables it names (by
// name and side), the ids a table takes (oov: reject, its rows) and the dense widths it
// sends, compared between two specs. For the reload
// message, so that an operator sees at once that existing clients will be refused (dense
// widths, tables gone) or scored without a new table (an absent bag is the zero vector).
// Pure functions.
#ifndef FUSERANK_SERVER_INPUT_CHANGES_H_
#define FUSERANK_SERVER_INPUT_CHANGES_H_

#include <string>

#include "engine/model_types.h"

namespace fuserank::server {

// "" when `after` takes the same inputs as `before`; else what changed, e.g. "tables gone:
// user_1 (user); new tables: item_2 (item); item_0 refuses ids outside [0, 500) (oov:
// reject; was modulo); user dense 2 -> 4".
std::string InputChanges(const engine::ModelSpec& before, const engine::ModelSpec& after);

}  // namespace fuserank::server

#endif  // FUSERANK_SERVER_INPUT_CHANGES_H_
