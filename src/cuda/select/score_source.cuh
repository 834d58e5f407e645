// Reading one row (or one segment of a row) of scores as selection keys.
//
// A row is split into an unaligned head, a body of 16-byte vectors and a tail. The body is cut into
// tiles of kVectorsPerThread vectors per thread; the head and tail (< 2 vectors) are read one
// element per thread by the row's last segment. Every element becomes (key, index) with the keys of
// formats/score_keys.h: key 0 for NaN and for lanes past the end, so it can never be selected.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "formats/score_keys.h"
#include "litetopk/types.h"

namespace litetopk::cuda_select {

// Per-dtype storage and key conversion.
struct Float32Scores {
  using Storage = uint32_t;
  static constexpr int kPerVector = 4;
  static __device__ __forceinline__ uint32_t key(uint32_t bits, bool largest) {
    return keys::key_from_f32_bits(bits, largest);
  }
  static __device__ __forceinline__ void store_value(void* values, int64_t slot, uint32_t key,
                                                     bool largest) {
    static_cast<uint32_t*>(values)[slot] = keys::f32_bits_from_key(key, largest);
  }
  static constexpr uint32_t kNanBits = 0x7fc00000u;
  static constexpr uint32_t kNegInfBits = 0xff800000u;
  static constexpr uint32_t kPosInfBits = 0x7f800000u;
  static __device__ __forceinline__ float to_float(uint32_t bits) { return __uint_as_float(bits); }
  static __device__ __forceinline__ uint32_t bits_of_float(float v) { return __float_as_uint(v); }
  static __device__ __forceinline__ uint32_t bits_of_key(uint32_t key, bool largest) {
    return keys::f32_bits_from_key(key, largest);
  }
};

struct BFloat16Scores {
  using Storage = uint16_t;
  static constexpr int kPerVector = 8;
  static __device__ __forceinline__ uint32_t key(uint32_t bits, bool largest) {
    return keys::key_from_bf16_bits(bits, largest);
  }
  static __device__ __forceinline__ void store_value(void* values, int64_t slot, uint32_t key,
                                                     bool largest) {
    static_cast<uint16_t*>(values)[slot] = static_cast<uint16_t>(keys::bits16_from_key(key, largest));
  }
  static constexpr uint32_t kNanBits = 0x7fc0u;
  static constexpr uint32_t kNegInfBits = 0xff80u;
  static constexpr uint32_t kPosInfBits = 0x7f80u;
  static __device__ __forceinline__ float to_float(uint32_t bits) {
    return __uint_as_float(bits << 16);
  }
  static __device__ __forceinline__ uint32_t bits_of_float(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rz(v));
  }
  static __device__ __forceinline__ uint32_t bits_of_key(uint32_t key, bool largest) {
    return keys::bits16_from_key(key, largest);
  }
};

struct Float16Scores {
  using Storage = uint16_t;
  static constexpr int kPerVector = 8;
  static __device__ __forceinline__ uint32_t key(uint32_t bits, bool largest) {
    return keys::key_from_f16_bits(bits, largest);
  }
  static __device__ __forceinline__ void store_value(void* values, int64_t slot, uint32_t key,
                                                     bool largest) {
    static_cast<uint16_t*>(values)[slot] = static_cast<uint16_t>(keys::bits16_from_key(key, largest));
  }
  static constexpr uint32_t kNanBits = 0x7e00u;
  static constexpr uint32_t kNegInfBits = 0xfc00u;
  static constexpr uint32_t kPosInfBits = 0x7c00u;
  static __device__ __forceinline__ float to_float(uint32_t bits) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  }
  static __device__ __forceinline__ uint32_t bits_of_float(float v) {
    return __half_as_ushort(__float2half_rz(v));
  }
  static __device__ __forceinline__ uint32_t bits_of_key(uint32_t key, bool largest) {
    return keys::bits16_from_key(key, largest);
  }
};

// Bits of element e (compile-time) of a 16-byte vector of scores.
template <typename Traits>
__device__ __forceinline__ uint32_t element_bits(const uint4& raw, int e) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (Traits::kPerVector == 4) {
    return words[e];
  } else {
    return (words[e / 2] >> (16 * (e % 2))) & 0xffffu;
  }
}

// The gate in value space: compares floats (sign-flipped for smallest-first) with the value T
// whose key is the gate's key, two or three instructions per element instead of building keys.
// v > T implies key(v) > key(T), so the element passes; v == T (which includes -0 against +0)
// needs the exact composite check; NaN compares false and never passes.
// A gate key below the worst value's key (the initial gate) admits every non-NaN value; one above
// the best value's key decodes to NaN and admits nothing, as it should.
template <typename Traits>
struct ValueGate {
  float threshold;  // in oriented space: the value for largest-first, its negation otherwise
  uint32_t flip;    // sign bit xor-ed into every value: 0 for largest-first

  __device__ __forceinline__ ValueGate(uint64_t gate, bool largest) {
    const auto gate_key = static_cast<uint32_t>(gate >> 32);
    const uint32_t worst_bits = largest ? Traits::kNegInfBits : Traits::kPosInfBits;
    const float value = gate_key <= Traits::key(worst_bits, largest)
                            ? Traits::to_float(worst_bits)
                            : Traits::to_float(Traits::bits_of_key(gate_key, largest));
    threshold = largest ? value : -value;
    flip = largest ? 0u : 0x80000000u;
  }

  // Bit e of *above: element e of raw is beyond T; of *equal: it compares equal to T.
  __device__ __forceinline__ void classify(const uint4& raw, uint32_t* above,
                                           uint32_t* equal) const {
    uint32_t gt = 0;
    uint32_t eq = 0;
#pragma unroll
    for (int e = 0; e < Traits::kPerVector; ++e) {
      const float v = __uint_as_float(
          __float_as_uint(Traits::to_float(element_bits<Traits>(raw, e))) ^ flip);
      if (v > threshold) gt |= 1u << e;
      if (v == threshold) eq |= 1u << e;
    }
    *above = gt;
    *equal = eq;
  }
};

// Calls body(DTypeTraits{}) for the runtime dtype.
template <typename Body>
__host__ auto dispatch_dtype(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::kBFloat16: return body(BFloat16Scores{});
    case DType::kFloat16: return body(Float16Scores{});
    case DType::kFloat32: break;
  }
  return body(Float32Scores{});
}

// Device-side description of a select_topk call.
struct SelectArgs {
  const void* scores;
  int64_t row_stride;
  int32_t n;
  const int32_t* row_starts;  // may be null
  const int32_t* row_ends;    // may be null
  int32_t k;
  bool largest;
  bool deterministic;
  // Output: either the final indices/values, or (for sorted output) composites to sort later.
  int32_t* indices;
  void* values;             // may be null
  uint64_t* out_composites; // when non-null, written instead of indices/values
};

// The row's half-open range after clamping into [0, n] (an inverted range is empty).
struct RowRange {
  int32_t start;
  int32_t length;
};

__device__ __forceinline__ RowRange row_range(const SelectArgs& args, int64_t row) {
  int32_t start = args.row_starts ? args.row_starts[row] : 0;
  int32_t end = args.row_ends ? args.row_ends[row] : args.n;
  start = min(max(start, 0), args.n);
  end = min(max(end, start), args.n);
  return {start, end - start};
}

// Writes one selected composite (or the empty composite) to output slot `slot` of `row`.
template <typename Traits>
__device__ __forceinline__ void write_output(const SelectArgs& args, int64_t row, int32_t slot,
                                             uint64_t composite) {
  const int64_t at = row * args.k + slot;
  if (args.out_composites != nullptr) {
    args.out_composites[at] = composite;
    return;
  }
  args.indices[at] = keys::composite_index(composite);
  if (args.values != nullptr) {
    if (composite == keys::kEmptyComposite) {
      static_cast<typename Traits::Storage*>(args.values)[at] =
          static_cast<typename Traits::Storage>(Traits::kNanBits);
    } else {
      Traits::store_value(args.values, at, keys::composite_key(composite), args.largest);
    }
  }
}

// Geometry of a row as head + 16-byte-vector body + tail.
template <typename Traits>
struct RowLayout {
  using Storage = typename Traits::Storage;
  static constexpr int kPerVector = Traits::kPerVector;

  const Storage* base;  // first element of the row's range
  int32_t length;
  int32_t head;         // elements before the first 16-byte-aligned one
  int32_t num_vectors;  // full vectors in the body
  int32_t tail_begin;   // first element after the body

  __device__ __forceinline__ RowLayout(const SelectArgs& args, int64_t row) {
    const RowRange range = row_range(args, row);
    init(static_cast<const Storage*>(args.scores) + row * args.row_stride + range.start,
         range.length);
  }

  // Any run of `run_length` scores from `first` (a part of a row's range).
  __device__ __forceinline__ RowLayout(const Storage* first, int32_t run_length) {
    init(first, run_length);
  }

  __device__ __forceinline__ void init(const Storage* first, int32_t run_length) {
    base = first;
    length = run_length;
    const auto address = reinterpret_cast<uintptr_t>(base);
    // The scores pointer is element-aligned (validated), so the head is whole elements.
    const int32_t misalign = static_cast<int32_t>((16 - (address & 15)) & 15) / int32_t(sizeof(Storage));
    head = min(misalign, length);
    num_vectors = (length - head) / kPerVector;
    tail_begin = head + num_vectors * kPerVector;
  }

  // Elements read one by one: the head and the tail.
  __device__ __forceinline__ int32_t num_scalar() const { return head + (length - tail_begin); }
  __device__ __forceinline__ int32_t scalar_index(int32_t i) const {
    return i < head ? i : tail_begin + (i - head);
  }

  __device__ __forceinline__ uint4 load_vector(int32_t v) const {
    return __ldcs(reinterpret_cast<const uint4*>(base + head) + v);
  }

  // Unpacks a vector into keys and indices.
  __device__ __forceinline__ void unpack(const uint4& raw, int32_t v, bool largest, uint32_t* key,
                                         uint32_t* index) const {
    const uint32_t first = static_cast<uint32_t>(head + v * kPerVector);
#pragma unroll
    for (int i = 0; i < kPerVector; ++i) {
      key[i] = Traits::key(element_bits<Traits>(raw, i), largest);
      index[i] = first + i;
    }
  }

  __device__ __forceinline__ uint32_t scalar_key(int32_t element, bool largest) const {
    return Traits::key(static_cast<uint32_t>(base[element]), largest);
  }
};

}  // namespace litetopk::cuda_select

namespace litetopk::cuda_select {

// Calls fn(key, index) for every element of segment `segment` of `segments` of the row, 16-byte
// vectors first (kUnroll loads in flight per thread), then the head and tail in the last segment.
template <typename Traits, int kThreads, int kUnroll, typename Fn>
__device__ __forceinline__ void for_each_key(const RowLayout<Traits>& layout, bool largest,
                                             int segment, int segments, Fn&& fn) {
  constexpr int kPer = Traits::kPerVector;
  const int v_begin = static_cast<int>(int64_t{layout.num_vectors} * segment / segments);
  const int v_end = static_cast<int>(int64_t{layout.num_vectors} * (segment + 1) / segments);
  for (int base = v_begin; base < v_end; base += kThreads * kUnroll) {
    uint4 raw[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * kThreads + static_cast<int>(threadIdx.x);
      raw[u] = v < v_end ? layout.load_vector(v) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int v = base + u * kThreads + static_cast<int>(threadIdx.x);
      if (v >= v_end) break;
      uint32_t key[kPer];
      uint32_t index[kPer];
      layout.unpack(raw[u], v, largest, key, index);
#pragma unroll
      for (int i = 0; i < kPer; ++i) fn(key[i], index[i]);
    }
  }
  if (segment == segments - 1) {
    for (int i = static_cast<int>(threadIdx.x); i < layout.num_scalar(); i += kThreads) {
      const int32_t element = layout.scalar_index(i);
      fn(layout.scalar_key(element, largest), static_cast<uint32_t>(element));
    }
  }
}

}  // namespace litetopk::cuda_select
