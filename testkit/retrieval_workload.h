// Inputs for retrieval_topk that look like embeddings: queries [batch, dim] and corpus [n, dim]
// generated on the host from a kind and a seed (the same spec always gives the same bytes).
//
// Kinds (row r of an array draws its coordinates from hash64 streams of (seed, array, r)):
// - normal:      iid N(0, 1) coordinates, queries and corpus alike: scores concentrate, the hard
//                case for a threshold.
// - normalized:  normal rows scaled to unit L2 norm (what cosine search passes).
// - clustered:   unit-norm cluster centres (one per 64 corpus rows, at least 1); a corpus row is
//                its centre plus N(0, 0.25^2 / dim) noise, a query is a random centre plus
//                N(0, 0.1^2 / dim) noise, both renormalised: each query has a dense near
//                neighbourhood.
// - anisotropic: coordinate j has standard deviation exp(-3 j / dim) around a shared mean
//                direction of norm 1 (a decaying spectrum and a common offset, as trained
//                embeddings have).
// Values are rounded to the spec's dtype (float16 or bfloat16). With corpus_format kFp8E4M3 the
// corpus rows are quantised instead: row r's scale is max_j |x_rj| / 448 (1 for a zero row) and
// its bytes the nearest e4m3 of x_rj / scale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/retrieval.h"

namespace litetopk::testkit {

enum class RetrievalKind {
  kNormal,
  kNormalized,
  kClustered,
  kAnisotropic,
};

const char* retrieval_kind_name(RetrievalKind kind);
bool parse_retrieval_kind(const std::string& name, RetrievalKind* kind);
// "normal|normalized|clustered|anisotropic", for help texts.
std::string retrieval_kind_choices();
// Every kind, for tests that run all of them.
std::vector<RetrievalKind> all_retrieval_kinds();

struct RetrievalSpec {
  int64_t batch = 0;
  int64_t n = 0;
  int64_t dim = 0;
  int64_t k = 0;
  DType dtype = DType::kFloat16;
  RetrievalCorpusFormat corpus_format = RetrievalCorpusFormat::kSameAsQueries;
  RetrievalMetric metric = RetrievalMetric::kInnerProduct;
  RetrievalKind kind = RetrievalKind::kNormal;
  uint64_t seed = 0;
};

struct RetrievalWorkload {
  RetrievalSpec spec;
  std::vector<uint16_t> queries;  // [batch, dim] raw fp16 / bf16 bits
  std::vector<uint16_t> corpus;   // [n, dim] (empty for an fp8 corpus)
  std::vector<uint8_t> corpus_fp8;    // [n, dim] e4m3 bytes (fp8 corpus only)
  std::vector<float> corpus_scales;   // [n] (fp8 corpus only)
  std::vector<float> corpus_norms;  // [n] squared norms of the rounded rows (fp64, then fp32)

  // The corpus' bytes, whatever its format.
  const void* corpus_data() const;
  std::size_t corpus_bytes() const;
  // A problem over this host data with the spec's shape, format and metric (scales for fp8; no
  // norms, no ranges, no bitmap, default flags); the caller sets indices, scores and the rest.
  RetrievalProblem host_problem() const;
};

RetrievalWorkload make_retrieval_workload(const RetrievalSpec& spec);

// A corpus bitmap over n rows (retrieval_bitmap_bytes(n) bytes) with each row allowed with
// probability `allowed` (0: none, 1: all), drawn from `seed`.
std::vector<uint8_t> make_retrieval_bitmap(int64_t n, double allowed, uint64_t seed);

}  // namespace litetopk::testkit
