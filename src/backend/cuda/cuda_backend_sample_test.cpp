// Parity of CUDA sampling with the reference sampler (CpuBackend::sample runs sample_on_host): the same token for
// every row of mixed batches (greedy, temperature, top-k, top-p, min-p, penalties, logprobs), on peaked, nearly flat
// (every token a candidate) and quantised (exact ties across the cuts) logits, over many (seed, step) pairs; plus
// checks that the draws stay inside the truncation and repeat exactly.
#include <numeric>

#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

constexpr double kLogprobTolerance = 1e-5;

struct Mode {
  const char* name;
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
};

constexpr Mode kModes[] = {
    {"greedy", 0.0f, -1, 1.0f, 0.0f},
    {"t0.3", 0.3f, -1, 1.0f, 0.0f},
    {"t1", 1.0f, -1, 1.0f, 0.0f},
    {"t2", 2.0f, -1, 1.0f, 0.0f},
    {"k1", 1.0f, 1, 1.0f, 0.0f},
    {"k5", 1.0f, 5, 1.0f, 0.0f},
    {"k50", 0.7f, 50, 1.0f, 0.0f},
    {"k3000", 1.0f, 3000, 1.0f, 0.0f},
    {"p0.1", 1.0f, -1, 0.1f, 0.0f},
    {"p0.9", 1.0f, -1, 0.9f, 0.0f},
    {"p0.999", 1.3f, -1, 0.999f, 0.0f},
    {"minp0.05", 1.0f, -1, 1.0f, 0.05f},
    {"minp0.5", 1.5f, -1, 1.0f, 0.5f},
    {"k50p0.9", 0.8f, 50, 0.9f, 0.0f},
    {"k3000minp0.05p0.9", 1.0f, 3000, 0.9f, 0.05f},
    {"minp0.5p0.999", 2.0f, -1, 0.999f, 0.5f},
    {"t2p0.9", 2.0f, -1, 0.9f, 0.0f},
    {"k5t0.3", 0.3f, 5, 1.0f, 0.0f},
};
constexpr int kNumModes = static_cast<int>(std::size(kModes));

enum class Shape { kNormal, kPeaked, kFlat, kQuantised };
constexpr int kNumShapes = 4;
const char* shape_name(Shape s) {
  switch (s) {
    case Shape::kNormal: return "normal";
    case Shape::kPeaked: return "peaked";
    case Shape::kFlat: return "flat";
    default: return "quantised";
  }
}

std::vector<float> make_logits(std::mt19937& rng, int32_t vocab, Shape shape) {
  switch (shape) {
    case Shape::kNormal: return normal(rng, vocab, 3.0f);
    case Shape::kPeaked: {  // a trained model's look: a broad body and a few clear favourites
      auto v = normal(rng, vocab, 2.0f);
      for (int i = 0; i < 8; ++i) v[rng() % vocab] += 10.0f + 2.0f * i;
      return v;
    }
    case Shape::kFlat: return normal(rng, vocab, 0.05f);  // random weights: every token within the cutoff
    default: {
      // Few distinct values (rounding also makes -0.0): large groups of exact ties straddle every cut.
      auto v = normal(rng, vocab, 1.2f);
      for (float& x : v) x = std::round(x) * 0.5f;
      return v;
    }
  }
}

// Unique ids, some only in the prompt (count 0), some generated several times; often the row's favourites, so that
// the penalties change the pick. Frequency penalties are multiples of 1/4 so that count * frequency is exact whether
// or not the reference's compiler fuses it with + presence.
std::vector<PenaltyToken> make_penalties(std::mt19937& rng, const std::vector<float>& logits, int32_t count) {
  const auto vocab = static_cast<int32_t>(logits.size());
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + 4, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::shuffle(ids.begin() + 4, ids.end(), rng);
  if (rng() % 2) std::shuffle(ids.begin(), ids.end(), rng);  // favourites not always listed
  std::vector<PenaltyToken> out;
  for (int32_t i = 0; i < std::min(count, vocab); ++i) {
    const uint32_t r = rng() % 4;
    out.push_back({ids[i], r == 0 ? 0 : static_cast<int32_t>(r == 3 ? 2 + rng() % 6 : r)});
  }
  return out;
}

struct RowCase {
  SampleSpec spec;
  std::string what;
};

class SampleParity : public CudaParity {
 protected:
  // Samples `rows` [R, vocab] on both backends (each on its own copy) and compares every row.
  void expect_parity(const std::vector<float>& rows, int32_t vocab, const std::vector<RowCase>& cases) {
    const auto r = static_cast<int64_t>(cases.size());
    Tensor h = host(rows, DType::kF32, {r, vocab});
    Tensor d = dev(h);
    std::vector<SampleSpec> specs;
    for (const RowCase& c : cases) specs.push_back(c.spec);
    std::vector<SampledToken> want(r), got(r);
    cpu_->sample(h, specs, want);
    gpu_->sample(d, specs, got);
    for (int64_t i = 0; i < r; ++i) {
      const std::string what = fmt::format("row {} vocab {} {}", i, vocab, cases[i].what);
      EXPECT_EQ(got[i].token_id, want[i].token_id) << what;
      if (specs[i].logprobs) {
        EXPECT_NEAR(got[i].logprob, want[i].logprob, kLogprobTolerance) << what;
      }
      ASSERT_EQ(got[i].top_logprobs.size(), want[i].top_logprobs.size()) << what;
      for (size_t k = 0; k < want[i].top_logprobs.size(); ++k) {
        EXPECT_EQ(got[i].top_logprobs[k].token_id, want[i].top_logprobs[k].token_id) << what << " top " << k;
        EXPECT_NEAR(got[i].top_logprobs[k].logprob, want[i].top_logprobs[k].logprob, kLogprobTolerance)
            << what << " top " << k;
      }
    }
  }

  std::vector<std::vector<PenaltyToken>> penalty_storage_;
};

// Every mode on every logit shape, with penalties and logprob requests rotating over the rows, several batches per
// vocabulary (each batch one call: the modes mixed, as the engine sends them).
TEST_F(SampleParity, MixedBatches) {
  for (const auto& [vocab, batches] : {std::pair{1000, 8}, std::pair{50257, 3}, std::pair{151936, 2}}) {
    for (int batch = 0; batch < batches; ++batch) {
      std::vector<float> rows;
      std::vector<RowCase> cases;
      for (int shape_index = 0; shape_index < kNumShapes; ++shape_index)
        for (int m = 0; m < kNumModes; ++m) {
          const Mode& mode = kModes[m];
          const auto shape = static_cast<Shape>(shape_index);
          const auto logits = make_logits(rng_, vocab, shape);
          SampleSpec spec{
              .temperature = mode.temperature, .top_k = mode.top_k, .top_p = mode.top_p, .min_p = mode.min_p};
          const int penalties = (m + shape_index + batch) % 4;
          if (penalties == 1) spec.repetition_penalty = 1.3f;
          if (penalties == 2) spec.presence_penalty = 0.7f, spec.frequency_penalty = 0.25f;
          if (penalties == 3)
            spec.repetition_penalty = 0.8f, spec.presence_penalty = -0.3f, spec.frequency_penalty = 1.5f;
          if (penalties != 0) {
            const int32_t count = std::min<int32_t>(vocab / 2, rng_() % 3 == 0 ? 3000 : 1 + rng_() % 200);
            penalty_storage_.push_back(make_penalties(rng_, logits, count));
            spec.penalty_tokens = penalty_storage_.back();
          }
          const int logprobs = (m + 2 * shape_index + batch) % 4;
          spec.logprobs = logprobs == 1 || logprobs == 2;
          spec.top_logprobs = logprobs == 2 ? 5 : logprobs == 3 ? 20 : 0;
          spec.seed = (static_cast<uint64_t>(rng_()) << 32) | rng_();
          spec.step = rng_() % 5000;
          rows.insert(rows.end(), logits.begin(), logits.end());
          cases.push_back(
              {spec, fmt::format("{} {} penalties {} logprobs {}/{} seed {} step {}", mode.name, shape_name(shape),
                                 penalties, spec.logprobs, spec.top_logprobs, spec.seed, spec.step)});
        }
      expect_parity(rows, vocab, cases);
    }
  }
}

// One row of logits drawn under many (seed, step) pairs: the same tokens as the reference, never outside the top-k /
// nucleus / min-p set, spread over it, and identical when sampled again.
TEST_F(SampleParity, DrawsStayInsideTheTruncation) {
  const int32_t vocab = 50257, draws = 256;
  for (const Shape shape : {Shape::kFlat, Shape::kPeaked, Shape::kQuantised}) {
    const auto logits = make_logits(rng_, vocab, shape);
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    const Mode modes[] = {{"k5", 1.5f, 5, 1.0f, 0.0f},
                          {"k3000", 1.0f, 3000, 1.0f, 0.0f},
                          {"p0.5", 1.0f, -1, 0.5f, 0.0f},
                          {"minp0.9", 1.0f, -1, 1.0f, 0.9f}};
    for (const Mode& mode : modes) {
      // The allowed set, straight from the definition (the reference's roundings, sequential sums).
      const float top = logits[order[0]];
      std::vector<double> w;
      for (int32_t i = 0; i < vocab; ++i) {
        const double z = static_cast<double>(logits[order[i]] - top) * (1.0 / mode.temperature);
        if (z > -kSampleCutoffNats) w.push_back(std::exp(z));
      }
      auto allowed = static_cast<int32_t>(w.size());
      if (mode.top_k > 0) allowed = std::min(allowed, mode.top_k);
      if (mode.min_p > 0)
        allowed = static_cast<int32_t>(
            std::count_if(w.begin(), w.begin() + allowed, [&](double x) { return x >= mode.min_p; }));
      if (mode.top_p < 1) {
        const double total = std::accumulate(w.begin(), w.begin() + allowed, 0.0);
        double mass = 0;
        int32_t n = 0;
        while (n < allowed && mass < mode.top_p * total) mass += w[n++];
        allowed = n;
      }
      const std::vector<int32_t> inside(order.begin(), order.begin() + allowed);
      std::vector<float> rows;
      std::vector<RowCase> cases;
      for (int i = 0; i < draws; ++i) {
        rows.insert(rows.end(), logits.begin(), logits.end());
        SampleSpec spec{.temperature = mode.temperature, .top_k = mode.top_k, .top_p = mode.top_p, .min_p = mode.min_p};
        spec.seed = 1000 + i % 16;
        spec.step = i / 16;
        cases.push_back({spec, fmt::format("{} {}", mode.name, shape_name(shape))});
      }
      expect_parity(rows, vocab, cases);
      std::vector<SampleSpec> specs;
      for (const RowCase& c : cases) specs.push_back(c.spec);
      std::vector<SampledToken> first(draws), again(draws);
      gpu_->sample(dev(host(rows, DType::kF32, {draws, vocab})), specs, first);
      gpu_->sample(dev(host(rows, DType::kF32, {draws, vocab})), specs, again);
      std::vector<int32_t> seen;
      for (int i = 0; i < draws; ++i) {
        EXPECT_EQ(first[i].token_id, again[i].token_id) << mode.name << " draw " << i << " repeats";
        const bool ok = std::find(inside.begin(), inside.end(), first[i].token_id) != inside.end();
        EXPECT_TRUE(ok) << mode.name << " " << shape_name(shape) << " drew token " << first[i].token_id
                        << " outside the " << allowed << " allowed";
        seen.push_back(first[i].token_id);
      }
      std::sort(seen.begin(), seen.end());
      const auto distinct = std::unique(seen.begin(), seen.end()) - seen.begin();
      if (shape == Shape::kFlat && allowed >= 5) {
        EXPECT_GE(distinct, 4) << mode.name << ": " << draws << " draws over " << allowed << " near-equal tokens";
      }
    }
  }
}

// Edge shapes: a vocabulary of one token, rows whose maximum is shared by every token, k beyond the vocabulary, and
// every token penalised (so the chosen token's logprob must come from its raw logit).
TEST_F(SampleParity, EdgeCases) {
  {
    std::vector<RowCase> cases;
    for (const Mode& mode : kModes) {
      SampleSpec spec{.temperature = mode.temperature, .top_k = mode.top_k, .top_p = mode.top_p, .min_p = mode.min_p};
      spec.logprobs = true;
      spec.top_logprobs = 20;
      cases.push_back({spec, mode.name});
    }
    expect_parity(std::vector<float>(cases.size(), 0.5f), 1, cases);
  }
  const int32_t vocab = 5000;
  std::vector<float> rows;
  std::vector<RowCase> cases;
  for (int i = 0; i < 64; ++i) {
    std::vector<float> logits(vocab, i % 2 ? 1.0f : -0.0f);  // all tied (and -0.0 == +0.0)
    if (i % 4 >= 2) logits[rng_() % vocab] = 0.0f;
    rows.insert(rows.end(), logits.begin(), logits.end());
    const Mode& mode = kModes[i % kNumModes];
    SampleSpec spec{.temperature = mode.temperature,
                    .top_k = i % 8 == 7 ? vocab + 10 : mode.top_k,
                    .top_p = mode.top_p,
                    .min_p = mode.min_p};
    spec.seed = rng_();
    spec.step = i;
    spec.logprobs = i % 3 == 0;
    spec.top_logprobs = i % 5 == 0 ? 20 : 0;
    cases.push_back({spec, fmt::format("tied {}", mode.name)});
  }
  expect_parity(rows, vocab, cases);

  std::vector<PenaltyToken> everyone(vocab);
  for (int32_t i = 0; i < vocab; ++i) everyone[i] = {i, i % 3};
  rows.clear();
  cases.clear();
  for (const Mode& mode : kModes) {
    const auto logits = make_logits(rng_, vocab, Shape::kNormal);
    rows.insert(rows.end(), logits.begin(), logits.end());
    SampleSpec spec{.temperature = mode.temperature,
                    .top_k = mode.top_k,
                    .top_p = mode.top_p,
                    .min_p = mode.min_p,
                    .repetition_penalty = 1.4f,
                    .presence_penalty = 0.2f,
                    .frequency_penalty = 0.5f,
                    .penalty_tokens = everyone,
                    .seed = rng_(),
                    .top_logprobs = 5,
                    .logprobs = true};
    cases.push_back({spec, fmt::format("all penalised {}", mode.name)});
  }
  expect_parity(rows, vocab, cases);
}

}  // namespace
}  // namespace rs::cuda_test
