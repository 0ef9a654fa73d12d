/* libFuzzer target for the dgc (fp32 values + 16-bit zero runs, compress/dgc.c) decoder and a
 * round trip through its encoder. Input layout and properties: sparse_fuzz.h.
 * Replayed over tests/fuzz/corpus/fuzz_dgc/ by `make test`; `make fuzz` runs it
 * under libFuzzer. The seed corpus comes from tests/fuzz/gen_sparse_corpus.c. */
#define SPARSE_FUZZ_CODEC "dgc"
#include "sparse_fuzz.h"
