// The fp8 e4m3 conversions under their src/ name, for tests/gpu/indexer_paged_gpu_test.cpp, which
// includes them by this path; the conversions are public: litetopk/fp8_e4m3.h.
#pragma once

#include "litetopk/fp8_e4m3.h"
