/* libFuzzer target: the onebit decoder on arbitrary payloads, and onebit round trips
 * of arbitrary floats (input layout and properties: tests/fuzz/fuzz_dense.h). */
#define FUZZ_CODEC "onebit"
#include "tests/fuzz/fuzz_dense.h"
