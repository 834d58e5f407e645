// `litetopk`: build and device info, one selection or one indexer run (verify, benchmark), the
// sparse-decoding trade-off, a DSA layer end to end (indexer + sparse attention), a demo, exact
// nearest-neighbour retrieval (cli.h).
#include <cstdio>

#include "cli.h"

int main(int argc, char** argv) {
  // Line by line even into a pipe or a file, so that each stage shows as it starts.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  return litetopk::tools::run_cli(argc, argv);
}
