/* libFuzzer target for the topk (bitmap + fp32 values, compress/topk.c) decoder and a
 * round trip through its encoder. Input layout and properties: sparse_fuzz.h.
 * Replayed over tests/fuzz/corpus/fuzz_topk/ by `make test`; `make fuzz` runs it
 * under libFuzzer. The seed corpus comes from tests/fuzz/gen_sparse_corpus.c. */
#define SPARSE_FUZZ_CODEC "topk"
#include "sparse_fuzz.h"
