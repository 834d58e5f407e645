// The paged indexer cache layout under its src/ name, for cuda/indexer/paged_scoring_sm90.cuh,
// which includes it by this path; the layout is public: litetopk/paged_kv_layout.h.
#pragma once

#include "litetopk/paged_kv_layout.h"
