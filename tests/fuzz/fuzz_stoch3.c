/* libFuzzer target: the stoch3 decoder on arbitrary payloads, and stoch3 round trips
 * of arbitrary floats (input layout and properties: tests/fuzz/fuzz_dense.h). */
#define FUZZ_CODEC "stoch3"
#include "tests/fuzz/fuzz_dense.h"
