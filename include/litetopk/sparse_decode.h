// sparse_decode: decoding attention for one new query token per sequence that reads only the KV
// blocks that can matter ("Faster Flash Decoding" style). Every key is kept twice over: a 2-bit
// code per element (cheap to scan) and an 8-bit residual that rebuilds it. The kernel scans the
// codes, keeps the blocks whose estimated best score is within `delta` of a pseudo-maximum taken
// from exact scores, and runs exact attention over the kept blocks only.
//
// ---- The KV cache (SparseKvCache) ----
// head_dim D = 128. Per sequence b and KV head h, the tokens are cut into blocks of BS tokens
// (BS = block_size, 128 or 256). Block j holds tokens [j*BS, (j+1)*BS). With len = lengths[b]:
//   full blocks   nf = floor(len / BS): keys quantized (codes, scales, residuals), values.
//   open block    tokens [nf*BS, len), nt = len - nf*BS in [0, BS): keys in full precision in
//                 tail_keys (cache dtype), values in block nf's value slot. When an append fills
//                 it, it is quantized into block nf's slot and the tail starts over.
//
// Storage is in block slots: every array below is [slots, ...] with the same slot index for a
// given (b, h, j):
//   contiguous (block_table == null): slot = (b * num_kv_heads + h) * max_blocks + j, so the
//                 arrays are [batch, kv_heads, max_blocks, ...]; slots = batch*kv_heads*max_blocks
//   paged:        slot = block_table[b * max_blocks + j] * num_kv_heads + h, so the arrays are
//                 [num_pages, kv_heads, ...] (one page holds block j of every KV head of one
//                 sequence); slots = num_pages * kv_heads. Table entries of blocks 0..ceil(len/BS)-1
//                 (0..ceil((len+1)/BS)-1 for an append) must be valid pages in [0, num_pages).
//                 Writers (append, conversion) need pages of their own for the blocks they
//                 write (no other block in use on them; the CPU writers check it, the GPU ones
//                 cannot read a device table); decode only reads, so sequences may share the
//                 pages of full blocks (a prefix) that no writer writes.
// Per slot:
//   key_codes      [BS, D/4] bytes: token t, channel c in byte t*D/4 + c/4, bits 2*(c%4)..+1.
//                  code q in {0,1,2,3} means level L = q - 1.5 in {-1.5, -0.5, +0.5, +1.5}.
//   key_scales     [D] of the cache dtype: s_c, one symmetric scale per channel per block.
//   key_residuals  [BS, D] int8 r: R = (r + 1/2) * 2^-8, in units of s_c.
//   values         [BS, D] of the cache dtype (full precision).
// tail_keys is per sequence, not per slot: [batch, kv_heads, BS, D] of the cache dtype; its row i
// is token nf*BS + i.
//
// Quantizing a block (append, conversion, and the CPU reference, bit for bit), per channel c over
// the block's BS keys k (exact in fp32), all arithmetic fp32 round-to-nearest:
//   amax = max_t |k_t|
//   s    = to_dtype(amax / 1.5f); if s == 0 and amax > 0, s = the dtype's smallest subnormal
//   x    = s > 0 ? k / s : 0                  (|x| <= 1.5 (1 + 2^-11), up to subnormal s)
//   q    = (x >= -1) + (x >= 0) + (x >= 1),  L = q - 1.5   (the nearest level)
//   r    = clamp(floor((x - L) * 256), -128, 127),  R = (r + 1/2) / 256   (|x - L| <= 0.5 for
//                                                          normal s: the clamp never acts there)
// and the rebuilt key is
//   key  = s * (L + R)
// which is exact in fp32: L + R is an odd multiple of 2^-9 below 2.3 in magnitude (code + r/256 is
// even exact in fp16) and s has at most 11 significant bits. The 2-bit estimate of a key is s * L
// (no residual).
//   Why s = amax/1.5 with levels +-0.5, +-1.5: the outer levels sit at +-amax, so the token that
//   sets a channel's maximum (a sink, a needle: the tokens a sparse scan must not miss) is
//   estimated at its value, not below it. Keys are within s/2 of their level, so the 2-bit
//   estimate of a dot product is off by at most sum_c |q_c| s_c / 2, and the residual lies in
//   [-0.5, 0.5] s, which its 256 cells tile. The alternative s = amax/2 (the uniform quantizer
//   over [-amax, amax], cells of width amax/2) has 3/4 of the residual error but estimates the
//   channel-max token at 0.75 amax: measured (docs/sparse_decode.md) it needs a larger delta or a
//   smaller mass target for the same error, and its mass estimates are far worse (the heavy
//   blocks' masses come out low by several nats). MSE-optimal clipped scales would underestimate
//   the outlier keys even more.
//   Scales have the cache dtype: fp16 for an fp16 cache; bf16 for a bf16 cache, whose keys may
//   exceed fp16's range (the scale's own precision does not affect the rebuild: the residual is
//   taken against the rounded scale).
//   Why the residual is stored in units of s: the raw residual k - s*L spans the whole fp16 range
//   (up to 16376 for keys near 65504) and would need a scale of its own; x - L lies in [-0.5, 0.5]
//   whatever the key's magnitude. It costs no extra scale, and a kernel can fold s into the query
//   once per block: q.key = sum_c (q_c s_c) (L + R).
//   Accuracy: |key - k| <= s * 2^-9 (plus fp32 rounding), uniform over the cell: 2^-8 / sqrt(12)
//   = 1.1e-3 of s in RMS. Why not fp8
//   e4m3 of the same size: 3 mantissa bits, an error proportional to |R| (up to s/32, about 1%
//   relative in RMS for Gaussian keys), which alone puts the output's rel L2 near 1e-2 when
//   every block is read (docs/sparse_decode.md measures both). Subnormal scales (keys below
//   fp16's normal range) may leave |x - L| up to 0.74 and then a clamp error up to 0.24 s, an
//   absolute error below 2^-26 for fp16 keys. Keys must be finite (the CPU functions reject others; the GPU
//   does not check).
//
// Memory per token per KV head (full blocks, D = 128): codes D/4 = 32 B, residuals D = 128 B,
// values 2D = 256 B, scales 2D/BS B (2 B at BS = 128, 1 B at 256): 418 B (BS = 128) and 417 B
// (BS = 256), 0.816 and 0.814 of fp16 K+V (4D = 512 B). Plus per sequence and KV head the tail
// buffer, 2*BS*D B (32 KiB at BS = 128), and the unfilled part of the open block's value slot.
// sparse_kv_bytes_per_token() gives the per-token figure.
//
// ---- Sparse decode (SparseDecodeProblem) ----
// One query token per sequence: q [batch, num_q_heads, D] of the cache dtype; query head i reads
// KV head i / G, G = num_q_heads / num_kv_heads in 1..16. With scale = softmax_scale (0 means
// 1/sqrt(D)) the exact logit of token t for head i is l_t = scale * q_i . key_t (rebuilt keys in
// full blocks, tail keys in the open block). For each (b, KV head h):
//   1. Pseudo-max: pm_i = max of the exact logits of the anchor tokens: block 0, block nf-1 (when
//      nf >= 1) and the open block's tokens. These are exact scores, never 2-bit estimates: the
//      pseudo-max is a lower bound of the true maximum, so it never raises the bar.
//   2. Estimate: for each full block j, e_ij = scale * max over the block's tokens of q_i . (s*L).
//   3. Keep block j when it is an anchor or e_ij >= pm_i - delta for at least one query head i of
//      the group (the block is read once for the whole group, so every head of the group then
//      attends to it). The open block is always read. delta = +infinity keeps every block.
//   4. Exact attention over the kept blocks only: softmax of the exact logits of their tokens (and
//      the open block's), weighted sum of the values. lse (optional) = log sum exp of those logits.
// delta is in natural-log units of the softmax weight: a block is kept when its estimated best
// weight exp(e) is at least exp(-delta) times the pseudo-max's weight exp(pm) (delta = 5 keeps
// blocks down to e^-5 = 0.0067 of it). A kernel that works in log2 units (exp2 of l * log2(e))
// compares e2 >= pm2 - delta * log2(e) with e2 = e * log2(e), pm2 = pm * log2(e); delta2 = delta *
// 1.4427. Note what delta does not bound: the dropped mass is at most (tokens in dropped blocks) *
// exp(-delta) of the pseudo-max's weight when the estimates are exact, so a long flat tail can
// hold much mass below the threshold.
// Bounded mass (selection = kMass) replaces steps 1 and 3; anchors and the open block are kept as
// above. Per query head i and full block j, the estimated mass is the softmax mass of the 2-bit
// pseudo-logits, m_ij = sum over the block's tokens t of exp(scale * q_i . (s * L_t)), and
// T_i = sum_j m_ij over every full block. The candidates are the full blocks that are not anchors.
// Head i skips candidate j when C_ij = sum of m_ik over the candidates k with m_ik <= m_ij
// (ties included) is <= mass_target * T_i: the lightest candidates whose estimated mass adds up
// to at most mass_target of the total. A block is read when some head of the group does not skip
// it, so every head's estimated skipped mass is <= mass_target. mass_target = 0 keeps every block.
// The estimate is of the pseudo-logits' mass: the true skipped mass differs by the 2-bit
// quantization error of the logits (docs/sparse_decode.md measures both).
// A sequence with len = 0 gets an all-zero output and lse = -infinity.
//
// ---- Dense baseline (DenseKvCache, DenseDecodeProblem) ----
// keys and values [batch, kv_heads, capacity, D] of one dtype, with element strides (the channel
// stride is 1), lengths [batch]; plain softmax attention over tokens [0, len). The same contract
// as sparse decode with every block kept, over the original keys.
//
// ---- CPU functions (host pointers) ----
// The references the GPU kernels are tested against, in fp64: quantization (bit-exact), append,
// sparse decode (block decisions in fp64), dense decode, and fidelity metrics. They validate like
// the GPU calls and also check the host-visible lengths, block table and key finiteness. A GPU
// kernel estimating in fp32 may decide differently for a block whose estimate is within rounding
// of pm - delta; its tests should accept either decision there.
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk {

constexpr int64_t kSparseDecodeHeadDim = 128;
constexpr int64_t kSparseDecodeMaxGroupSize = 16;  // query heads per KV head

// ---- the quantized cache ----

struct SparseKvCache {
  DType dtype = DType::kFloat16;  // values, tail keys, key scales and queries: fp16 or bf16
  int64_t batch = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = kSparseDecodeHeadDim;  // 128
  int64_t block_size = 128;                 // BS: 128 or 256
  int64_t max_blocks = 0;                   // capacity of each sequence, in blocks (>= 1)
  const int32_t* block_table = nullptr;     // [batch, max_blocks] page ids, or null (contiguous)
  int64_t num_pages = 0;                    // paged only: pages in the pool
  int32_t* lengths = nullptr;               // [batch] tokens per sequence (append increments)
  uint8_t* key_codes = nullptr;             // [slots, BS, D/4]
  void* key_scales = nullptr;               // [slots, D] of dtype
  uint8_t* key_residuals = nullptr;         // [slots, BS, D] int8 residuals
  void* values = nullptr;                   // [slots, BS, D] of dtype
  void* tail_keys = nullptr;                // [batch, num_kv_heads, BS, D] of dtype
};

// Bytes of each array of a cache of this shape (dtype, batch, num_kv_heads, head_dim, block_size,
// max_blocks, block_table/num_pages); the pointers are not looked at.
struct SparseKvCacheBytes {
  std::size_t key_codes = 0, key_scales = 0, key_residuals = 0, values = 0, tail_keys = 0;
  std::size_t lengths = 0, block_table = 0;  // int32 [batch], [batch, max_blocks] (paged)
  std::size_t total() const {
    return key_codes + key_scales + key_residuals + values + tail_keys + lengths + block_table;
  }
};
Status sparse_kv_cache_bytes(const SparseKvCache& shape, SparseKvCacheBytes* bytes);
// Slots in the cache's arrays: batch * kv_heads * max_blocks (contiguous) or num_pages * kv_heads.
int64_t sparse_kv_num_slots(const SparseKvCache& shape);
// Bytes per token per KV head in a full block (codes + residuals + values + the block's scales
// spread over its tokens) for a 2-byte dtype; 0 for an unsupported block_size or head_dim.
double sparse_kv_bytes_per_token(int64_t block_size, int64_t head_dim = kSparseDecodeHeadDim);

// ---- a dense fp16/bf16 cache (the input of conversion, the baseline's cache) ----

struct DenseKvCache {
  DType dtype = DType::kFloat16;  // fp16 or bf16 (fp32 is accepted by the CPU functions only)
  int64_t batch = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = kSparseDecodeHeadDim;
  int64_t capacity = 0;  // tokens per sequence
  void* keys = nullptr;  // element (b, h, t, c) at b*batch_stride + h*head_stride + t*token_stride + c
  void* values = nullptr;  // same layout and strides as keys
  // Element strides; 0 means the contiguous [batch, kv_heads, capacity, D] value.
  int64_t batch_stride = 0, head_stride = 0, token_stride = 0;
  int32_t* lengths = nullptr;  // [batch], each in [0, capacity]
};

// ---- decode problems ----

// How sparse_decode picks the blocks it reads (the two rules are described above).
enum class SparseSelection : int32_t {
  kDelta = 0,  // top-delta: blocks whose estimated best logit is within delta of the pseudo-max
  kMass = 1,   // bounded mass: blocks until the estimated skipped mass is <= mass_target
};

struct SparseDecodeProblem {
  SparseKvCache cache;
  const void* q = nullptr;   // [batch, num_q_heads, D] of cache.dtype
  int64_t num_q_heads = 0;   // num_kv_heads * G, G in 1..16
  float softmax_scale = 0;   // 0: 1/sqrt(head_dim); else finite and > 0
  SparseSelection selection = SparseSelection::kDelta;
  float delta = 5.0f;        // kDelta: natural-log units, >= 0; +infinity keeps every block
  float mass_target = 0.01f;  // kMass: in [0, 1); 0 keeps every block
  void* out = nullptr;       // [batch, num_q_heads, D] of out_dtype (fp32, fp16 or bf16)
  DType out_dtype = DType::kFloat16;
  float* lse = nullptr;      // optional [batch, num_q_heads]: natural-log log-sum-exp
  // Optional [batch, num_kv_heads, max_blocks]: for j < ceil(len / BS), 1 when block j was read
  // exactly (anchors and the open block always), 0 when skipped; later entries are not written.
  uint8_t* kept_mask = nullptr;
};

struct DenseDecodeProblem {
  DenseKvCache cache;
  const void* q = nullptr;   // [batch, num_q_heads, D] of cache.dtype
  int64_t num_q_heads = 0;
  float softmax_scale = 0;   // 0: 1/sqrt(head_dim)
  void* out = nullptr;       // [batch, num_q_heads, D] of out_dtype
  DType out_dtype = DType::kFloat16;
  float* lse = nullptr;      // optional [batch, num_q_heads]
};

struct DecodeOptions {
  // Work per split (the flash-decoding unit: one CTA per split, sequence and KV head; the last
  // split of a (sequence, KV head) to finish merges them) on the GPU, >= 0. sparse_decode: KV
  // blocks of BS tokens (capped at 1024); dense_decode: the kernel's 64-token tiles. 0 lets the
  // kernel choose: enough splits of the capacity (max_blocks, or the dense capacity) for about
  // one CTA per SM (dense) or two (sparse) over all (sequence, KV head) pairs, none shorter than
  // 512 tokens. The split plan and the workspace size depend on it, on the
  // capacity and on the current device's SM count, never on the lengths, so one workspace serves
  // a captured CUDA graph as the context grows (splits past a length exit at once).
  int64_t blocks_per_split = 0;
  // sparse_decode: read every block without the 2-bit scan when the plan's sizes say the scan
  // does not pay (batch * num_kv_heads * max_blocks * BS below a measured threshold,
  // src/heuristics/decode_heuristics.h): the output is then attention over every block and
  // kept_mask all ones. Decided from sizes only, so graph-safe. false: always select as asked.
  bool read_all_when_small = true;
};

// ---- validation (no pointer is dereferenced) ----
// kInvalidArgument naming the argument, the expected and the actual value.
Status validate_sparse_kv_cache(const SparseKvCache& cache);
Status validate_dense_kv_cache(const DenseKvCache& cache);
Status validate_sparse_decode_problem(const SparseDecodeProblem& problem);
Status validate_dense_decode_problem(const DenseDecodeProblem& problem);
// Host copies of the lengths (and of the block table when paged): 0 <= len <= max_blocks * BS
// (< for an append: `extra_tokens` = 1) and valid pages for the blocks in use.
Status validate_sparse_kv_lengths(const SparseKvCache& cache, const int32_t* host_lengths,
                                  const int32_t* host_block_table, int64_t extra_tokens = 0);

// ---- GPU (device pointers) ----
// sm_90a kernels (src/cuda/decode/; docs/sparse_decode.md, "GPU cache writers" and "GPU kernels").
// Each call validates its arguments on the host without dereferencing a pointer (kInvalidArgument;
// the decodes also check the workspace: kWorkspaceTooSmall), then enqueues its kernels on `stream`
// and returns: no allocation, no synchronization, no host read of device data (lengths and block
// tables are read on the device), so every call can be captured once in a CUDA graph and replayed
// at every step as the lengths grow. The caches may be contiguous or paged (sparse) and strided
// (dense). Arrays must be 16-byte aligned (lengths, block_table and lse: 4-byte; kept_mask: any).
// A build without CUDA returns kNotCompiled; a failed launch kCudaError.

// Appends one token to every sequence: new_keys, new_values [batch, num_kv_heads, D] of
// cache.dtype, 16-byte aligned. Writes token lengths[b] (tail key, value slot), quantizes the
// block when the token fills it (bit-exact with sparse_kv_append_cpu), then lengths[b] += 1 (a
// second kernel, after every KV head has read the old length). A sequence already at capacity is
// left unchanged (the CPU function rejects it instead).
Status sparse_kv_append(const SparseKvCache& cache, const void* new_keys, const void* new_values,
                        cudaStream_t stream);
// Builds the sparse cache from a dense one: tokens [0, dense.lengths[b]) of every sequence (full
// blocks quantized bit-exactly as sparse_decode_quantize_cpu does, the open block's keys to the
// tail, values copied), then cache.lengths = dense.lengths (which may be the same array). One task
// per (sequence, KV head, block) of the dense capacity (the lengths are on the device); nothing
// past a length is written. dense.capacity must be <= max_blocks * BS.
Status sparse_kv_from_dense(const DenseKvCache& dense, const SparseKvCache& cache,
                            cudaStream_t stream);
// Plan once per batch shape, launch every step. A plan checks the shapes (a problem's pointers may
// be null: it keeps whether the cache is paged, from block_table, and whether lse and kept_mask
// are written), fixes the split plan and sizes the workspace (both from the capacity and the
// current device's SM count, never from the lengths); a launch takes the step's addresses and
// checks only those (set and aligned).
struct SparseDecodePlan {
  SparseDecodeProblem problem{};  // shapes of the planned call (its pointers are not used)
  DecodeOptions options{};
  bool paged = false;              // the launches pass a block_table
  bool has_lse = false, has_kept_mask = false;
  // Every block is read without selecting (delta = inf, mass_target = 0, or the size dispatch of
  // DecodeOptions::read_all_when_small).
  bool reads_all = false;
  std::size_t workspace_bytes = 0;
  bool planned = false;            // set by sparse_decode_plan
};
struct SparseDecodeAddresses {
  const void* q = nullptr;
  void* out = nullptr;
  float* lse = nullptr;                 // required when the plan has lse
  uint8_t* kept_mask = nullptr;         // required when the plan has kept_mask
  const int32_t* block_table = nullptr;  // required when the plan is paged
  int32_t* lengths = nullptr;
  uint8_t* key_codes = nullptr;
  void* key_scales = nullptr;
  uint8_t* key_residuals = nullptr;
  void* values = nullptr;
  void* tail_keys = nullptr;
};
Status sparse_decode_plan(const SparseDecodeProblem& problem, const DecodeOptions& options,
                          SparseDecodePlan* plan);
Status sparse_decode_launch(const SparseDecodePlan& plan, const SparseDecodeAddresses& addresses,
                            void* workspace, cudaStream_t stream);

struct DenseDecodePlan {
  DenseDecodeProblem problem{};  // shapes of the planned call (its pointers are not used)
  DecodeOptions options{};
  bool has_lse = false;
  std::size_t workspace_bytes = 0;
  bool planned = false;           // set by dense_decode_plan
};
struct DenseDecodeAddresses {
  const void* q = nullptr;
  void* out = nullptr;
  float* lse = nullptr;  // required when the plan has lse
  void* keys = nullptr;
  void* values = nullptr;
  int32_t* lengths = nullptr;
};
Status dense_decode_plan(const DenseDecodeProblem& problem, const DecodeOptions& options,
                         DenseDecodePlan* plan);
Status dense_decode_launch(const DenseDecodePlan& plan, const DenseDecodeAddresses& addresses,
                           void* workspace, cudaStream_t stream);

// The one-shot calls below plan and launch in one go.
// The workspace of sparse_decode: the splits' partial outputs and log-sum-exps (fp32) and the
// anchor maxima, for batch * num_q_heads rows (about 1 MB at batch 8 and 256K tokens).
Status sparse_decode_workspace_size(const SparseDecodeProblem& problem,
                                    std::size_t* workspace_bytes,
                                    const DecodeOptions& options = {});
// Top-delta: steps 1-4 above in two kernels: the anchors' exact logits (pseudo-max); per split,
// the scan of the 2-bit codes (int8 tensor cores, the query folded with the scales and rounded to
// int8; it writes kept_mask) and exact attention over the kept blocks only (rebuilt keys,
// fp32-grade scores, softmax weights rounded to the cache dtype for P V, fp32 accumulation), the
// last split to finish merging them into out (fp32, fp16 or bf16) and lse. A split whose first
// four full blocks are all kept stops scanning and reads all its blocks (kept_mask 1 for each),
// so top-delta may read more blocks than sparse_decode_cpu keeps, never fewer. Bounded mass: the scan writes each
// block's pseudo-logit mass, a pick kernel finds each head's threshold (a bisection over the fp32
// masses, at most 51200 blocks per sequence: else kUnsupported), then the attention with the
// merge in its last split. delta = inf, mass_target = 0 and the size dispatch (DecodeOptions::read_all_when_small)
// skip the scan and read every block. Skipped blocks' residuals and values are never read. A
// block whose estimate is within rounding of the threshold (pm - delta, or the mass budget) may be
// decided differently from sparse_decode_cpu. fp16 and bf16 caches. Every kernel is enqueued
// whatever the lengths, so a captured graph replays with any lengths within the capacity.
Status sparse_decode(const SparseDecodeProblem& problem, void* workspace,
                     std::size_t workspace_bytes, cudaStream_t stream,
                     const DecodeOptions& options = {});
// The workspace of dense_decode: the splits' partial outputs and log-sum-exps (fp32).
Status dense_decode_workspace_size(const DenseDecodeProblem& problem, std::size_t* workspace_bytes,
                                   const DecodeOptions& options = {});
// Flash-decoding over tokens [0, len) of an fp16 or bf16 cache (an fp32 cache is kUnsupported on
// the GPU: dense_decode_cpu takes it): K and V tiles streamed by bulk copies, scores on tensor
// cores with fp32 accumulation, softmax weights rounded to the cache dtype for P V (an output
// element is off by at most about 2.5 u sum_t w_t |v_t|, u the dtype's unit roundoff), then the
// merge of the splits into out and lse.
Status dense_decode(const DenseDecodeProblem& problem, void* workspace, std::size_t workspace_bytes,
                    cudaStream_t stream, const DecodeOptions& options = {});

// ---- CPU (host pointers) ----

// sparse_kv_from_dense on the host: quantizes the full blocks, fills the tail and the value
// slots, copies the lengths. Rejects non-finite keys in the tokens it reads.
Status sparse_decode_quantize_cpu(const DenseKvCache& dense, const SparseKvCache& cache);
// sparse_kv_append on the host; rejects (before writing anything) a sequence at capacity.
Status sparse_kv_append_cpu(const SparseKvCache& cache, const void* new_keys,
                            const void* new_values);
// The cache as a dense fp32 cache: rebuilt keys s * (L + R) of the full blocks, tail keys and
// values widened exactly; out.lengths = cache.lengths. `out` must be fp32 with out.capacity >=
// max_blocks * BS and the same batch, num_kv_heads and head_dim.
Status sparse_kv_rebuild_cpu(const SparseKvCache& cache, const DenseKvCache& out);

// Optional per-head details of sparse_decode_cpu (host arrays, each may be null).
struct SparseDecodeCpuDiagnostics {
  double* pseudo_max = nullptr;      // [batch, num_q_heads]: pm_i (natural-log logits)
  double* block_estimate = nullptr;  // [batch, num_q_heads, max_blocks]: e_ij of full blocks
                                     // (-infinity beyond them)
  double* kept_fraction = nullptr;   // [1]: kept full blocks / full blocks over every (b, h)
  double* block_log_mass = nullptr;  // [batch, num_q_heads, max_blocks]: log m_ij of full blocks
                                     // (-infinity beyond them), in either selection
};
// The reference of the sparse kernel (steps 1-4 above), in fp64.
Status sparse_decode_cpu(const SparseDecodeProblem& problem,
                         const SparseDecodeCpuDiagnostics& diagnostics = {});
// Dense attention in fp64 over the dense cache (fp16, bf16 or fp32: use sparse_kv_rebuild_cpu for
// the rebuilt keys).
Status dense_decode_cpu(const DenseDecodeProblem& problem);

// ---- fidelity of a decode result ----

struct DecodeFidelityProblem {
  DenseDecodeProblem reference;  // cache (original keys), q, num_q_heads, softmax_scale; its out
                                 // and lse are not used
  const void* out = nullptr;     // the result to judge: [batch, num_q_heads, D] of out_dtype
  DType out_dtype = DType::kFloat32;
  // Optional: the kept_mask of the run, [batch, num_kv_heads, mask_blocks]; null means every
  // block was read. block_size: the sparse cache's BS.
  const uint8_t* kept_mask = nullptr;
  int64_t block_size = 128;
  int64_t mask_blocks = 0;
};

struct DecodeFidelity {
  double rel_l2 = 0;            // ||out - ref||_2 / ||ref||_2 over every (b, head, channel)
  double max_head_rel_l2 = 0;   // the worst (b, head) of the same ratio
  double kept_fraction = 1;     // kept full blocks / full blocks (1 when there are none)
  double kept_mass_mean = 1;    // reference softmax mass in the read blocks, mean over (b, head)
  double kept_mass_min = 1;     // ... and the smallest
  // Recall of the blocks holding the top 1% of tokens (ceil(len / 100), at least 1) by reference
  // weight: hits / blocks over every (b, head), and the worst (b, head).
  double top1_recall = 1;
  double top1_recall_min = 1;
  // Recall of the heaviest 1% of blocks (ceil(blocks / 100), at least 1; the open block counts
  // as a block) ranked by reference mass: hits / blocks over every (b, head), and the worst.
  double top1_block_recall = 1;
  double top1_block_recall_min = 1;
  // Bytes a sparse kernel reads / bytes a dense fp16 kernel reads (4 D per token): every full
  // block's codes and scales, kept full blocks' residuals and values, the open block's keys and
  // values in full precision. A model of the speed-up bound, not a measurement.
  double read_fraction = 1;
};
// The reference is dense attention in fp64 over reference.cache.
Status decode_fidelity_cpu(const DecodeFidelityProblem& problem, DecodeFidelity* fidelity);

}  // namespace litetopk
