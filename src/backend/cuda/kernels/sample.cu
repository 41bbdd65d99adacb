// Sampling on CUDA: one thread block per logit row picks exactly the token that the reference sampler
// (cpu/kernels/sample.cpp, semantics in backend/sampling.h) picks, and reports the same logprobs.
//
// Tokens are compared through 64-bit keys (ordered bits of the logit, then the inverted id), so that descending key
// order is the reference order (higher logit first, ties to the lower id). A row first takes the log-softmax
// statistics and the top logprobs of its raw logits (per-warp sorted key lists merged by warp 0), then applies the
// penalties in place, then picks:
// - greedy: the largest key;
// - temperature only: inverse CDF in vocabulary order, over tiles of per-thread runs combined by block scans;
// - truncated (top-k, min-p, top-p): the candidates (within kSampleCutoffNats of the best) are sorted in shared memory
//   when they fit. Otherwise each cut (the top-k / min-p rank, the top-p mass, the draw) is found by narrowing a key
//   range with passes that count and weigh (in double) the tokens above a few probe keys, until what is left of the
//   range fits in shared memory to be sorted.
// Every sum is a fixed-order reduction (no floating atomics), so a row always gives the same token. The sums differ
// from the CPU's sequential ones in the last bits only, which can move a cut only where it lies within ~1e-16 of the
// target. Greedy, temperature-only and logprob rows run in a lighter kernel than truncated rows (fewer registers, more
// threads); each kernel skips the other's rows.
#include <cstdint>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/launch.cuh"
#include "backend/cuda/kernels/sample_primitives.cuh"
#include "backend/sampling.h"

namespace rs::cuda {
namespace {

using namespace sample_primitives;

constexpr int kSimpleThreads = 1024;
constexpr int kTruncatedThreads = 512;
constexpr int kProbes = 7;         // probe keys per narrowing pass (besides the range's low end)
constexpr int kOrderedProbes = 2;  // of which spread evenly in ordered bits; the rest mostly evenly in value
constexpr int kMaxTiles = 64;      // vocabulary-order tiles of the temperature-only draw

// ---- every row: raw statistics, penalties, the best penalised key ----

// A warp's descending list of the n (<= 32) largest keys offered so far: lane i holds the i-th (0 while fewer).
// Each lane offers `key`; only keys above the current n-th are inserted, one at a time.
__device__ __forceinline__ void list_offer(Key& list, int n, Key key) {
  const int lane = threadIdx.x % 32;
  Key kth = __shfl_sync(kFull, list, n - 1);
  unsigned pending = __ballot_sync(kFull, key > kth);
  while (pending) {
    const Key k = __shfl_sync(kFull, key, __ffs(pending) - 1);
    const int pos = __popc(__ballot_sync(kFull, lane < n && list > k));
    const Key above = __shfl_up_sync(kFull, list, 1);
    if (lane >= pos && lane < n) list = lane == pos ? k : above;
    kth = __shfl_sync(kFull, list, n - 1);
    pending &= (pending - 1) & __ballot_sync(kFull, key > kth);
  }
}

template <int kThreads>
__device__ Key max_key(const float* x, int vocab) {
  Key best = 0;
  for_each_logit<kThreads, kLoads>(x, vocab, [&](int i, float v, bool valid) {
    if (valid) best = max(best, make_key(v, i));
  });
  return block_reduce<kThreads>(best, MaxOp{});
}

// The largest key; with top_n > 0 also the top_n largest, left in warp 0's `list` (lane i: the i-th).
template <int kThreads>
__device__ Key max_key_and_top(const float* x, int vocab, int top_n, Key& list) {
  constexpr int kWarps = kThreads / 32;
  __shared__ Key lists[kWarps * kSampleMaxTop];
  __shared__ Key best;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  list = 0;
  for_each_logit<kThreads, kLoads>(
      x, vocab, [&](int i, float v, bool valid) { list_offer(list, top_n, valid ? make_key(v, i) : 0); });
  if (lane < top_n) lists[warp * top_n + lane] = list;
  __syncthreads();
  if (warp == 0) {
    list = 0;
    for (int base = 0; base < kWarps * top_n; base += 32)
      list_offer(list, top_n, base + lane < kWarps * top_n ? lists[base + lane] : 0);
    if (lane == 0) best = list;
  }
  __syncthreads();
  return best;
}

struct RowStart {
  Key best;        // largest key of the penalised logits
  float raw_max;   // of the raw logits (when logprobs are wanted)
  double log_sum;  // log sum exp(raw - raw_max)
};

// Raw statistics (and the top logprobs, written to `out`), then the penalties, then the best penalised key.
template <int kThreads>
__device__ RowStart row_start(float* x, int vocab, const SampleRowSpec& s, int top_n, const int2* penalties,
                              float* saved_raw, SampleRowResult* out) {
  RowStart r{0, 0.0f, 0.0};
  const bool want_logprobs = s.logprobs || s.top_logprobs > 0;
  if (want_logprobs) {
    Key top_list = 0;
    r.best = top_n > 0 ? max_key_and_top<kThreads>(x, vocab, top_n, top_list) : max_key<kThreads>(x, vocab);
    r.raw_max = key_value(r.best);
    // The normaliser in float exp, summed in double: logprobs agree with the reference to ~1e-7.
    double sum = 0.0;
    for_each_logit<kThreads, kLoads>(x, vocab, [&](int, float v, bool valid) {
      if (valid) sum += static_cast<double>(expf(__fsub_rn(v, r.raw_max)));
    });
    r.log_sum = log(block_reduce<kThreads>(sum, SumOp{}));
    if (threadIdx.x < top_n) {  // warp 0
      out->top_ids[threadIdx.x] = key_id(top_list);
      out->top_logprobs[threadIdx.x] = logprob_of(key_value(top_list), r.raw_max, r.log_sum);
    }
  }
  if (s.penalty_count > 0) {
    __syncthreads();  // the raw logits are read before they are penalised
    // Ids are unique (SampleSpec), so the entries touch distinct logits. The raw logit of a penalised id is kept for
    // the chosen token's logprob.
    for (int j = threadIdx.x; j < s.penalty_count; j += kThreads) {
      const int2 t = penalties[s.penalty_begin + j];
      if (t.x < 0 || t.x >= vocab) continue;
      const float v = x[t.x];
      if (s.logprobs) saved_raw[t.x] = v;
      x[t.x] = penalised(v, t.y, s);
    }
    __syncthreads();
  }
  if (!want_logprobs || s.penalty_count > 0) r.best = max_key<kThreads>(x, vocab);
  return r;
}

template <int kThreads>
__device__ void write_result(const float* x, const SampleRowSpec& s, int top_n, const RowStart& r, int32_t token,
                             const int2* penalties, const float* saved_raw, SampleRowResult* out) {
  __shared__ int token_penalised;
  float raw = 0.0f;
  if (s.logprobs) {
    if (threadIdx.x == 0) token_penalised = 0;
    __syncthreads();
    for (int j = threadIdx.x; j < s.penalty_count; j += kThreads)
      if (penalties[s.penalty_begin + j].x == token) token_penalised = 1;
    __syncthreads();
    raw = token_penalised ? saved_raw[token] : x[token];
  }
  if (threadIdx.x == 0) {
    out->token_id = token;
    out->logprob = s.logprobs ? logprob_of(raw, r.raw_max, r.log_sum) : 0.0f;
    out->num_top = top_n;
  }
}

// ---- temperature only ----

// Inverse CDF in vocabulary order. Tiles of kThreads runs of consecutive tokens: a tile's total is its block scan's
// last value, the tile totals are chained in order, and the tile that crosses the target is scanned again (the same
// values) to find the run, which its thread walks.
template <int kThreads>
__device__ int32_t draw_in_vocab_order(const float* x, int vocab, float top, double inv_t, double u) {
  __shared__ double tile_totals[kMaxTiles];
  __shared__ int picked;
  const int per = max(8, (vocab + kMaxTiles * kThreads - 1) / (kMaxTiles * kThreads));
  const int tile = per * kThreads, tiles = (vocab + tile - 1) / tile;
  auto run_sum = [&](int t) {
    const int first = t * tile + threadIdx.x * per, end = min(first + per, vocab);
    double sum = 0.0;
    for (int i0 = first; i0 < end; i0 += 8) {  // eight loads in flight, then the sequential sum
      float v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = i0 + k < end ? x[i0 + k] : 0.0f;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (i0 + k < end) sum += weight(v[k], top, inv_t);
    }
    return sum;
  };
  double total = 0.0;
  for (int t = 0; t < tiles; ++t) {
    double exclusive, tile_total;
    block_scan<kThreads>(run_sum(t), &exclusive, &tile_total);
    if (threadIdx.x == 0) tile_totals[t] = tile_total;
    total += tile_total;
  }
  __syncthreads();
  const double target = u * total;
  double before = 0.0;
  int hit = tiles;
  for (int t = 0; t < tiles; ++t) {
    if (target < before + tile_totals[t]) {
      hit = t;
      break;
    }
    before += tile_totals[t];
  }
  if (hit == tiles) return vocab - 1;  // the reference's fallback
  double exclusive, tile_total;
  const double inclusive = block_scan<kThreads>(run_sum(hit), &exclusive, &tile_total);
  const int run =
      block_reduce<kThreads>(target < before + inclusive ? static_cast<int>(threadIdx.x) : kThreads, MinOp{});
  if (threadIdx.x == run) {
    const int first = hit * tile + run * per, end = min(first + per, vocab);
    double cumulative = before + exclusive;
    int pick = -1, last_positive = end - 1;
    for (int i = first; i < end && pick < 0; ++i) {
      const double w = weight(x[i], top, inv_t);
      cumulative += w;
      if (w > 0.0) last_positive = i;
      if (target < cumulative) pick = i;
    }
    // Not crossed within the run: the scan's sum and the walk's differ in the last bit; the run ends the crossing.
    picked = pick >= 0 ? pick : last_positive;
  }
  __syncthreads();
  return picked;
}

// ---- truncated ----

// The cut being looked for: the first token (in descending key order) whose prefix (it and every token before it)
// holds `rank` tokens, or weighs at least / more than `fraction` of the whole range's weight (the reference's
// top_p * kept_total and u * total: the range is always exactly the kept tokens).
struct Cut {
  enum Kind { kRank, kMassAtLeast, kMassAbove } kind;
  int rank;
  double fraction;
  double target = 0.0;  // fraction * the range's weight, once known
  __device__ bool reached(int count, double mass) const {
    return kind == kRank ? count >= rank : kind == kMassAtLeast ? mass >= target : mass > target;
  }
};

// A token and how many tokens its prefix holds.
struct Pick {
  Key key;
  int count;
};

struct TruncatedShared {
  Key keys[kGatherCap];
  double prefix[kGatherCap];
  int gathered;
};

// Appends the keys of the lanes that `take` to keys[], one atomic per warp; beyond kGatherCap they are dropped (the
// count goes on). Every lane of the warp calls it.
__device__ __forceinline__ void gather(bool take, Key key, TruncatedShared& sh) {
  const unsigned mask = __ballot_sync(kFull, take);
  if (mask == 0) return;
  const int lane = threadIdx.x % 32, leader = __ffs(mask) - 1;
  int base = 0;
  if (lane == leader) base = atomicAdd(&sh.gathered, __popc(mask));
  base = __shfl_sync(kFull, base, leader);
  const int slot = base + __popc(mask & ((1u << lane) - 1));
  if (take && slot < kGatherCap) sh.keys[slot] = key;
}

// Probe coordinates q[1..kProbes], non-decreasing, for the range [lo, hi]. Over a range of several logit values they
// are ordered logit bits in (lo, hi]: spread evenly in value (which suits logits), a few evenly in ordered bits (which
// bounds the passes whatever the values), and on a range's first pass some at a few nats below the best instead
// (where the mass of a trained model's distribution lies). Over a range of one value they are (inverted) ids.
// A token is at or above probe k when its coordinate (ordered bits, or inverted id) is >= q[k].
__device__ void make_probes(Key lo, Key hi, bool first, double temperature, uint32_t (&q)[kProbes + 1]) {
  const uint32_t lo32 = static_cast<uint32_t>(lo >> 32), hi32 = static_cast<uint32_t>(hi >> 32);
  if (lo32 == hi32) {
    const uint32_t a = static_cast<uint32_t>(lo), span = static_cast<uint32_t>(hi) - a;
    q[0] = a;
#pragma unroll
    for (int k = 1; k <= kProbes; ++k)
      q[k] = a + max(static_cast<uint32_t>(static_cast<uint64_t>(span) * k / (kProbes + 1)), 1u);
    return;
  }
  q[0] = lo32;
  const double v_lo = from_ordered_bits(lo32), v_hi = from_ordered_bits(hi32);
  constexpr int kEven = kProbes - kOrderedProbes;  // probes spread in value (two fewer on a first pass)
#pragma unroll
  for (int k = 0; k < kProbes; ++k) {
    uint32_t o;
    if (k >= kEven) {
      o = lo32 + static_cast<uint32_t>(static_cast<uint64_t>(hi32 - lo32) * (k - kEven + 1) / (kOrderedProbes + 1));
    } else if (first && k < 2) {
      o = ordered_bits(static_cast<float>(v_hi - (k == 0 ? 1.0 : 4.0) * temperature));
    } else {
      const int index = first ? k - 2 : k, spread = first ? kEven - 2 : kEven;
      o = ordered_bits(static_cast<float>(v_lo + (v_hi - v_lo) * (index + 1) / (spread + 1)));
    }
    q[k + 1] = min(max(o, lo32 + 1), hi32);
  }
#pragma unroll
  for (int a = 1; a <= kProbes; ++a)
#pragma unroll
    for (int b = 1; b + 1 <= kProbes + 1 - a; ++b)
      if (q[b] > q[b + 1]) {
        const uint32_t t = q[b];
        q[b] = q[b + 1];
        q[b + 1] = t;
      }
}

// Block totals of the probe accumulators: warp butterflies, then one thread per value sums the warps in order.
template <int kThreads>
__device__ void reduce_probes(int (&count)[kProbes + 1], double (&mass)[kProbes + 1], uint32_t (&lo)[kProbes + 1],
                              uint32_t (&hi)[kProbes + 1]) {
  constexpr int kWarps = kThreads / 32, kN = kProbes + 1;
  __shared__ double warp_mass[kWarps][kN];
  __shared__ uint32_t warp_bits[kWarps][3 * kN];
  __shared__ double total_mass[kN];
  __shared__ uint32_t total_bits[3 * kN];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    count[j] = warp_reduce(count[j], SumOp{});
    mass[j] = warp_reduce(mass[j], SumOp{});
    lo[j] = warp_reduce(lo[j], MinOp{});
    hi[j] = warp_reduce(hi[j], MaxOp{});
    if (lane == 0) {
      warp_mass[warp][j] = mass[j];
      warp_bits[warp][j] = static_cast<uint32_t>(count[j]);
      warp_bits[warp][kN + j] = lo[j];
      warp_bits[warp][2 * kN + j] = hi[j];
    }
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t < kN) {
    double m = warp_mass[0][t];
    for (int w = 1; w < kWarps; ++w) m += warp_mass[w][t];
    total_mass[t] = m;
  } else if (t < 4 * kN) {
    const int col = t - kN, kind = col / kN;
    uint32_t v = warp_bits[0][col];
    for (int w = 1; w < kWarps; ++w) {
      const uint32_t b = warp_bits[w][col];
      v = kind == 0 ? v + b : kind == 1 ? min(v, b) : max(v, b);
    }
    total_bits[col] = v;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    mass[j] = total_mass[j];
    count[j] = static_cast<int>(total_bits[j]);
    lo[j] = total_bits[kN + j];
    hi[j] = total_bits[2 * kN + j];
  }
}

// The cut among the `count` tokens with keys in [lo, hi]: exactly the kept candidates. Narrows [lo, hi] by probe
// passes until it fits in shared memory, keeping the invariant that the prefix ending at lo reaches the cut and the
// tokens above hi do not, then sorts what is left. Rank cuts count only; mass cuts also weigh (in double).
template <int kThreads>
__device__ Pick find_cut(const float* x, int vocab, float top, double inv_t, double temperature, Key lo, Key hi,
                         int count, Cut cut, TruncatedShared& sh) {
  const bool weigh = cut.kind != Cut::kRank;
  bool first_pass = true;
  int above_count = 0;
  double above_mass = 0.0;
  while (count > kGatherCap) {
    const uint32_t lo32 = static_cast<uint32_t>(lo >> 32), hi32 = static_cast<uint32_t>(hi >> 32);
    const bool by_id = lo32 == hi32;
    uint32_t q[kProbes + 1];
    make_probes(lo, hi, first_pass, temperature, q);
    // Per probe: tokens in [probe, hi] and their weight; per interval [q[j], q[j+1]): its value range, to tighten.
    int c[kProbes + 1];
    double m[kProbes + 1];
    uint32_t min_bits[kProbes + 1], max_bits[kProbes + 1];
#pragma unroll
    for (int j = 0; j <= kProbes; ++j) c[j] = 0, m[j] = 0.0, min_bits[j] = 0xffffffffu, max_bits[j] = 0;
    // Interval j's lowest bits are the lowest at or above probe j, its highest the highest below probe j + 1.
    for_each_kept_logit<kThreads, kLoads>(
        x, vocab,
        [&](int i, float v) {
          const uint32_t bits = ordered_bits(v);
          return bits - lo32 <= hi32 - lo32 &&  // within [lo32, hi32], then exactly at the ends
                 ((bits != lo32 && bits != hi32) || (make_key(v, i) >= lo && make_key(v, i) <= hi));
        },
        [&](int i, float v) {
          const uint32_t bits = ordered_bits(v), coord = by_id ? 0xffffffffu - static_cast<uint32_t>(i) : bits;
          const double w = weigh ? weight(v, top, inv_t) : 0.0;
          ++c[0], m[0] += w, min_bits[0] = min(min_bits[0], bits), max_bits[kProbes] = max(max_bits[kProbes], bits);
#pragma unroll
          for (int j = 1; j <= kProbes; ++j) {
            if (coord >= q[j]) {
              ++c[j], m[j] += w, min_bits[j] = min(min_bits[j], bits);
            } else {
              max_bits[j - 1] = max(max_bits[j - 1], bits);
            }
          }
        });
    reduce_probes<kThreads>(c, m, min_bits, max_bits);
    if (first_pass) cut.target = cut.fraction * m[0];  // m[0]: the whole range
    first_pass = false;
    // The last probe whose prefix reaches the cut. A probe with the same tokens as lo inherits lo's standing (its
    // weight may round differently from when lo was chosen), so the chosen interval is never empty.
    int chosen = 0;
#pragma unroll
    for (int j = 1; j <= kProbes; ++j)
      if (c[j] == c[0] || cut.reached(above_count + c[j], above_mass + m[j])) chosen = j;
#pragma unroll
    for (int j = 0; j <= kProbes; ++j)
      if (j == chosen) {
        const Key probe = j == 0 ? lo : by_id ? (static_cast<Key>(lo32) << 32) | q[j] : static_cast<Key>(q[j]) << 32;
        lo = probe;
        if (j < kProbes) {
          hi = (by_id ? (static_cast<Key>(lo32) << 32) | q[j + 1] : static_cast<Key>(q[j + 1]) << 32) - 1;
          above_count += c[j + 1];
          above_mass += m[j + 1];
          count = c[j] - c[j + 1];
        } else {
          count = c[j];
        }
        if (!by_id) {
          lo = max(lo, static_cast<Key>(min_bits[j]) << 32);
          hi = min(hi, (static_cast<Key>(max_bits[j]) << 32) | 0xffffffffu);
        }
      }
  }
  __syncthreads();  // the previous cut's keys have been read
  if (threadIdx.x == 0) sh.gathered = 0;
  __syncthreads();
  for_each_logit<kThreads, kLoads>(x, vocab, [&](int i, float v, bool valid) {
    const Key key = make_key(v, i);
    gather(valid && key >= lo && key <= hi, key, sh);
  });
  __syncthreads();
  const int n = min(sh.gathered, kGatherCap);
  sort_descending<kThreads>(sh.keys, n);
  if (weigh) {
    prefix_weights<kThreads>(sh.keys, n, top, inv_t, sh.prefix);
    if (first_pass) cut.target = cut.fraction * sh.prefix[n - 1];
  }
  int f = first_index<kThreads>(
      n, [&](int i) { return cut.reached(above_count + i + 1, weigh ? above_mass + sh.prefix[i] : 0.0); });
  if (f == n) f = n - 1;  // the whole range: lo reached the cut when it was chosen
  return Pick{sh.keys[f], above_count + f + 1};
}

template <int kThreads>
__device__ int32_t draw_truncated(const float* x, int vocab, const SampleRowSpec& s, Key best, double u,
                                  TruncatedShared& sh) {
  const float top = key_value(best);
  const double inv_t = 1.0 / static_cast<double>(s.temperature);
  // min-p keeps weights >= min_p * (weight of the best, exp(0) = 1). exp is evaluated only near the threshold.
  const double min_weight = static_cast<double>(s.min_p);
  const double min_z = s.min_p > 0.0f ? log(min_weight) : 0.0, margin = 1e-9 * (1.0 + fabs(min_z));
  // Candidates: a prefix of the reference order. Gathered into shared memory while they fit.
  if (threadIdx.x == 0) sh.gathered = 0;
  __syncthreads();
  int candidates = 0, above_min_p = 0;
  float lowest = INFINITY;  // the lowest candidate logit
  for_each_logit<kThreads, kLoads>(x, vocab, [&](int i, float v, bool valid) {
    const double z = scaled(v, top, inv_t);
    const bool candidate = valid && z > -kSampleCutoffNats;
    const Key key = make_key(v, i);
    // Stop gathering once they cannot all fit (lane 0's read decides for the warp: gather() is collective).
    if (__shfl_sync(kFull, *static_cast<volatile int*>(&sh.gathered), 0) <= kGatherCap) gather(candidate, key, sh);
    if (!candidate) return;
    ++candidates;
    lowest = fminf(lowest, v);
    above_min_p += z > min_z + margin || (z >= min_z - margin && exp(z) >= min_weight);
  });
  candidates = block_reduce<kThreads>(candidates, SumOp{});
  above_min_p = block_reduce<kThreads>(above_min_p, SumOp{});
  lowest = block_reduce<kThreads>(lowest, MinOp{});
  const Key lowest_key = static_cast<Key>(ordered_bits(lowest)) << 32;  // at or below every candidate's key
  if (candidates == 0) return key_id(best);  // a best logit of +-inf or NaN: the reference has no candidate either
  // Weights fall along the order, so top-k and min-p keep a prefix whose length is known from counts.
  int keep = candidates;
  if (s.top_k > 0) keep = min(keep, s.top_k);
  if (s.min_p > 0.0f) keep = max(1, min(keep, above_min_p));
  const bool nucleus = s.top_p < 1.0f;
  if (nucleus && !(s.top_p > 0.0f)) return key_id(best);  // top_p * kept total <= 0: the reference keeps one token

  if (candidates <= kGatherCap) {  // all in shared memory: sort once, then cut by index
    sort_descending<kThreads>(sh.keys, candidates);
    prefix_weights<kThreads>(sh.keys, candidates, top, inv_t, sh.prefix);
    if (nucleus) {
      const double target = static_cast<double>(s.top_p) * sh.prefix[keep - 1];
      const int f = first_index<kThreads>(keep, [&](int i) { return sh.prefix[i] >= target; });
      keep = f < keep ? f + 1 : keep;
    }
    const double target = u * sh.prefix[keep - 1];
    const int f = first_index<kThreads>(keep, [&](int i) { return target < sh.prefix[i]; });
    return key_id(sh.keys[f < keep ? f : keep - 1]);
  }

  // Each cut's range is the kept tokens [last, best], so its targets are fractions of the range's weight.
  const double temperature = s.temperature;
  Key last = lowest_key;
  if (keep < candidates)
    last = find_cut<kThreads>(x, vocab, top, inv_t, temperature, lowest_key, best, candidates,
                              Cut{Cut::kRank, keep, 0.0}, sh)
               .key;
  if (nucleus) {
    const Pick p =
        find_cut<kThreads>(x, vocab, top, inv_t, temperature, last, best, keep, Cut{Cut::kMassAtLeast, 0, s.top_p}, sh);
    last = p.key;
    keep = p.count;
  }
  return key_id(
      find_cut<kThreads>(x, vocab, top, inv_t, temperature, last, best, keep, Cut{Cut::kMassAbove, 0, u}, sh).key);
}

// ---- kernels ----

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    sample_simple_kernel(float* logits, int32_t vocab, const SampleRowSpec* specs, const int2* penalties,
                         SampleRowResult* results, float* saved_raw) {
  pdl_enter();
  const SampleRowSpec s = specs[blockIdx.x];
  if (is_truncated(s)) return;
  float* x = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float* saved = saved_raw + static_cast<int64_t>(blockIdx.x) * vocab;
  const int top_n = s.top_logprobs > 0 ? min(s.top_logprobs, min(kSampleMaxTop, vocab)) : 0;
  const RowStart r = row_start<kThreads>(x, vocab, s, top_n, penalties, saved, results + blockIdx.x);
  const int32_t token =
      s.greedy ? key_id(r.best)
               : draw_in_vocab_order<kThreads>(x, vocab, key_value(r.best), 1.0 / static_cast<double>(s.temperature),
                                               sample_uniform_device(s.seed, s.step));
  write_result<kThreads>(x, s, top_n, r, token, penalties, saved, results + blockIdx.x);
}

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    sample_truncated_kernel(float* logits, int32_t vocab, const SampleRowSpec* specs, const int2* penalties,
                            SampleRowResult* results, float* saved_raw) {
  pdl_enter();
  __shared__ TruncatedShared sh;
  const SampleRowSpec s = specs[blockIdx.x];
  if (!is_truncated(s)) return;
  float* x = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float* saved = saved_raw + static_cast<int64_t>(blockIdx.x) * vocab;
  const int top_n = s.top_logprobs > 0 ? min(s.top_logprobs, min(kSampleMaxTop, vocab)) : 0;
  const RowStart r = row_start<kThreads>(x, vocab, s, top_n, penalties, saved, results + blockIdx.x);
  const int32_t token = draw_truncated<kThreads>(x, vocab, s, r.best, sample_uniform_device(s.seed, s.step), sh);
  write_result<kThreads>(x, s, top_n, r, token, penalties, saved, results + blockIdx.x);
}

}  // namespace

// One float per logit: the raw value of each penalised id, kept for the chosen token's logprob.
size_t sample_scratch_bytes(int32_t rows, int32_t vocab) {
  return static_cast<size_t>(rows) * static_cast<size_t>(vocab) * sizeof(float);
}

void launch_sample(float* logits, int32_t rows, int32_t vocab, const SampleRowSpec* specs, const int2* penalties,
                   SampleRowResult* results, void* scratch, cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return;
  float* saved_raw = static_cast<float*>(scratch);
  launch_kernel(sample_simple_kernel<kSimpleThreads>, rows, kSimpleThreads, 0, stream, logits, vocab, specs, penalties,
                results, saved_raw);
  launch_kernel(sample_truncated_kernel<kTruncatedThreads>, rows, kTruncatedThreads, 0, stream, logits, vocab, specs,
                penalties, results, saved_raw);
}

}  // namespace rs::cuda
