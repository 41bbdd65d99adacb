// Which release layout dummy weights stand for: the tensor names a model tests with WeightSource::contains() to choose
// between the layouts real checkpoints of its architecture ship, derived here from config.json alone.
#pragma once

#include <string>
#include <vector>

#include "loader/hf_config.h"

namespace rs::loader {

// Name suffixes a dummy WeightSource of `config` reports as present (WeightSource::dummy's `layout`).
std::vector<std::string> dummy_layout(const ModelConfig& config);

}  // namespace rs::loader
