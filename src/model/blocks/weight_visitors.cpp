#include "model/blocks/weight_visitors.h"

namespace rs::model {

void Uploader::tensor(Tensor& t) {
  if (!t.empty() && t.data() != nullptr) t = backend_.upload_weight(t, keep_alive_);
}

void Uploader::linear(LinearWeight& w, bool /*projection*/) {
  tensor(w.weight);
  tensor(w.scales);
  tensor(w.input_order);
}

void Uploader::experts(MoeWeights& experts) {
  for (auto* list : {&experts.gate, &experts.up, &experts.gate_up, &experts.down})
    for (LinearWeight& w : *list) linear(w, true);
  tensor(experts.gate_up_bias);
  tensor(experts.down_bias);
}

void Preparer::linear(LinearWeight& w, bool projection) {
  if (!experts_only_ && projection && !w.weight.empty() && w.packed.empty()) backend_.prepare_linear(w, keep_alive_);
}

void Preparer::experts(MoeWeights& experts) {
  if (experts_only_) backend_.prepare_experts(experts, keep_alive_);
}

}  // namespace rs::model
