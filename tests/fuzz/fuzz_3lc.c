/* libFuzzer target: the 3lc decoder on arbitrary payloads, and 3lc round trips
 * of arbitrary floats (input layout and properties: tests/fuzz/fuzz_dense.h). */
#define FUZZ_CODEC "3lc"
#include "tests/fuzz/fuzz_dense.h"
