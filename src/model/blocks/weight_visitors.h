// The two things done to every weight a model and its blocks hold after loading, as WeightVisitors: uploading to
// the device, and letting the backend prepare (repack) projections and expert lists.
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace rs::model {

// Uploads every tensor to the backend's device (projections: their values, scales and input order; a tensor without
// data, the shape of a weight only its packed copy holds, stays as it is).
class Uploader final : public WeightVisitor {
 public:
  Uploader(Backend& backend, std::vector<Buffer>& keep_alive) : backend_(backend), keep_alive_(keep_alive) {}
  void tensor(Tensor& t) override;
  void linear(LinearWeight& w, bool projection) override;
  void experts(MoeWeights& experts) override;

 private:
  Backend& backend_;
  std::vector<Buffer>& keep_alive_;
};

// Lets the backend prepare its own copy of every projection not yet prepared (routers and one-row gates stay as
// stored); or, with `experts_only`, of every expert list (right after the experts load, before any upload).
class Preparer final : public WeightVisitor {
 public:
  Preparer(Backend& backend, std::vector<Buffer>& keep_alive, bool experts_only)
      : backend_(backend), keep_alive_(keep_alive), experts_only_(experts_only) {}
  void tensor(Tensor& /*t*/) override {}
  void linear(LinearWeight& w, bool projection) override;
  void experts(MoeWeights& experts) override;

 private:
  Backend& backend_;
  std::vector<Buffer>& keep_alive_;
  const bool experts_only_;
};

}  // namespace rs::model
