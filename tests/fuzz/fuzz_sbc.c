/* libFuzzer target for the sbc (one mean + Golomb-Rice coded gaps, compress/sbc.c) decoder and a
 * round trip through its encoder. Input layout and properties: sparse_fuzz.h.
 * Replayed over tests/fuzz/corpus/fuzz_sbc/ by `make test`; `make fuzz` runs it
 * under libFuzzer. The seed corpus comes from tests/fuzz/gen_sparse_corpus.c. */
#define SPARSE_FUZZ_CODEC "sbc"
#include "sparse_fuzz.h"
