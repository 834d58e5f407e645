// The fp8 e4m3 conversions under their src/ name, for the indexer GPU tests that include them by
// this path; the conversions are public: litetopk/fp8_e4m3.h.
#pragma once

#include "litetopk/fp8_e4m3.h"
