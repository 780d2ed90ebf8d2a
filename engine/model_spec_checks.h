// The ranges and cross-field rules of a ModelSpec (SPEC section 2), behind
// ValidateModelSpec (engine/model_spec.h): specs parsed from YAML and specs built in code
// go through the same checks. Internal to the engine; a pure function, thread-safe.
#ifndef FUSERANK_ENGINE_MODEL_SPEC_CHECKS_H_
#define FUSERANK_ENGINE_MODEL_SPEC_CHECKS_H_

#include "engine/error_list.h"
#include "engine/model_spec.h"

namespace fuserank::engine {

// Adds every problem of `spec` to `problems`, each under the field it names
// ("tables[1].dim", "dcn.layers"); adds nothing to a valid spec.
void CheckModelSpec(const ModelSpec& spec, ErrorList& problems);

}  // namespace fuserank::engine

#endif  // FUSERANK_ENGINE_MODEL_SPEC_CHECKS_H_
