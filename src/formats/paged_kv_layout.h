// The paged indexer cache layout under its src/ name, for the indexer kernels that include it by
// this path; the layout is public: litetopk/paged_kv_layout.h.
#pragma once

#include "litetopk/paged_kv_layout.h"
