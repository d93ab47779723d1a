#ifndef PACELINE_ENGINE_SAMPLING_ROW_SAMPLING_MATH_H_
#define PACELINE_ENGINE_SAMPLING_ROW_SAMPLING_MATH_H_

// What engine-side sampling (row_sampling.h) shares between the host
// implementation and the CUDA kernel (cuda/kernels/sampling.cu), so both
// compute the same bits from the same logits: the per-row parameters
// (RowSampling), the token mask's bit layout, the weight of a logit,
// its fixed-point mass, its rank key, and one level of the radix selection
// over rank keys. Plain C++, marked __host__ __device__ under nvcc; every
// float step is an IEEE operation or an explicit fmaf, which no compiler
// may contract differently.

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define PACELINE_HOST_DEVICE __host__ __device__
#else
#define PACELINE_HOST_DEVICE
#endif

namespace paceline::engine {

// One logits row's sampling, as the scheduler hands it to the engine. Plain
// data with the same layout on host and device.
struct RowSampling {
  // false: the engine returns this row's logits instead (the request needs
  // the host sampler: penalties or logprobs).
  bool in_engine = false;
  float temperature = 0.0f;  // >= 0; 0 = greedy
  int32_t top_k = 0;         // 0 or >= vocab = off
  float top_p = 1.0f;        // (0, 1]; 1 = off
  float min_p = 0.0f;        // [0, 1]; 0 = off
  double uniform = 0.0;      // [0, 1): SamplingUniform(seed, step)
  // The token mask (token_mask.h): MaskWords(vocab) words, in the engine's
  // memory (the CUDA engine uploads the host's words and points this at its
  // copy); null = every token allowed.
  const uint32_t* allowed = nullptr;
};

// The words of a token mask over `vocab` ids.
PACELINE_HOST_DEVICE inline int64_t MaskWords(int64_t vocab) {
  return (vocab + 31) / 32;
}

// Whether `allowed` (null = all) lets token `id` through.
PACELINE_HOST_DEVICE inline bool MaskAllows(const uint32_t* allowed,
                                            int32_t id) {
  return allowed == nullptr || ((allowed[id >> 5] >> (id & 31)) & 1u) != 0;
}

// SampleRow's result when the mask allows no token (every logit finite).
inline constexpr int32_t kNoAllowedToken = INT32_MIN;

namespace sampling {

// A weight w in [0, 1] is carried as the integer floor(w * 2^40): sums over
// any vocabulary (< 2^23 ids) fit in 64 bits and are exact, so they do not
// depend on the order a device adds them in. Weights below 2^-40 (about
// 1e-12 of the most likely token's) count as zero.
inline constexpr int kMassFractionBits = 40;

// Radix selection works on 64-bit keys a digit of this many bits at a time.
inline constexpr int kDigitBits = 8;
inline constexpr int kBins = 1 << kDigitBits;

PACELINE_HOST_DEVICE inline uint32_t FloatBits(float x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(__float_as_int(x));
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
#endif
}

PACELINE_HOST_DEVICE inline float BitsFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(static_cast<int>(bits));
#else
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
#endif
}

PACELINE_HOST_DEVICE inline bool IsFinite(float x) {
  return (FloatBits(x) & 0x7f800000u) != 0x7f800000u;
}

// e^x for x <= 0, within 2 ulp of the true value; 0 below -64 (where the
// fixed-point mass is 0 anyway). x = n ln2 + r with |r| <= ln2 / 2 (ln2
// split in two for an exact product), e^r by its degree-7 Taylor polynomial
// in Horner form, then scaled by 2^n (n >= -93: the result stays normal).
PACELINE_HOST_DEVICE inline float WeightExp(float x) {
  if (!(x >= -64.0f)) return 0.0f;
  const float n = rintf(x * 1.44269504f);
  float r = fmaf(n, -0.693145752f, x);
  r = fmaf(n, -1.42860677e-06f, r);
  float p = 1.98412698e-04f;  // 1/7!
  p = fmaf(p, r, 1.38888892e-03f);
  p = fmaf(p, r, 8.33333377e-03f);
  p = fmaf(p, r, 4.16666679e-02f);
  p = fmaf(p, r, 1.66666672e-01f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  const int32_t e = static_cast<int32_t>(n);
  return p * BitsFloat(static_cast<uint32_t>(e + 127) << 23);
}

// The weight of logit z in a row whose largest logit is `max`, sampled at
// temperature t > 0: its probability relative to the most likely token
// (exactly 1 for that token).
PACELINE_HOST_DEVICE inline float Weight(float z, float max, float t) {
  return WeightExp((z - max) / t);
}

PACELINE_HOST_DEVICE inline uint64_t Mass(float weight) {
  constexpr float kScale = static_cast<float>(uint64_t{1} << kMassFractionBits);
  return static_cast<uint64_t>(weight * kScale);  // the product is exact
}

// The selection's first floor: below every allowed id's key (the smallest
// is -FLT_MAX's, 2^55 and up), above a masked id's 0.
inline constexpr uint64_t kFirstFloor = 1;

// A key per id whose order is the sampler's rank order (larger logit
// first, then lower id): the logit's bits made monotone (with -0 taken as
// +0, as == does), above the complemented id. Keys of distinct ids differ.
PACELINE_HOST_DEVICE inline uint64_t RankKey(float z, int32_t id) {
  const uint32_t bits = FloatBits(z == 0.0f ? 0.0f : z);
  const uint32_t ordered =
      (bits & 0x80000000u) != 0 ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(ordered) << 32) |
         (0xffffffffu - static_cast<uint32_t>(id));
}

// One radix selection: among candidate keys, the largest key K such that
// F(K) — the sum of f over the candidates with key >= K (f = 1 to count, or
// the mass) — reaches `target`. The caller guarantees F(smallest candidate)
// >= target, so K exists and is a candidate's key.
//
// Level by level from the top digit: the caller histograms the candidates
// whose higher digits equal `prefix` (Matches) by their current digit (Bin):
// per bin the number of keys, the sum of f and the largest key; Next picks
// the highest bin whose sum, added to everything above it, reaches the
// target, and either finishes (the bin holds one key) or narrows to it.
struct KeySelect {
  int shift = 64 - kDigitBits;  // the current digit is key bits [shift, +8)
  uint64_t prefix = 0;          // the chosen digits above it
  uint64_t above = 0;           // sum of f over candidates above the range
  bool done = false;
  uint64_t key = 0;  // the answer, once done

  PACELINE_HOST_DEVICE bool Matches(uint64_t k) const {
    return shift + kDigitBits >= 64 || (k >> (shift + kDigitBits)) == prefix;
  }
  PACELINE_HOST_DEVICE int Bin(uint64_t k) const {
    return static_cast<int>((k >> shift) & (kBins - 1));
  }

  // Consumes one level's histogram.
  PACELINE_HOST_DEVICE void Next(const uint32_t* count, const uint64_t* sum,
                                 const uint64_t* max_key, double target) {
    int chosen = -1;
    int lowest = -1;
    for (int b = kBins - 1; b >= 0; --b) {
      if (count[b] == 0) continue;
      lowest = b;
      if (static_cast<double>(above + sum[b]) >= target) {
        chosen = b;
        break;
      }
      above += sum[b];
    }
    if (chosen < 0) {
      // Only for a caller that broke the guarantee: no candidates at all,
      // or a target above their sum; then the lowest key.
      if (lowest < 0) {
        done = true;
        return;
      }
      chosen = lowest;
      above -= sum[lowest];
    }
    if (count[chosen] == 1 || shift == 0) {
      done = true;
      key = max_key[chosen];
      return;
    }
    prefix = (prefix << kDigitBits) | static_cast<uint64_t>(chosen);
    shift -= kDigitBits;
  }
};

}  // namespace sampling
}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_SAMPLING_ROW_SAMPLING_MATH_H_
