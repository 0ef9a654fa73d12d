/* libFuzzer target: the terngrad decoder on arbitrary payloads, and terngrad round trips
 * of arbitrary floats (input layout and properties: tests/fuzz/fuzz_dense.h). */
#define FUZZ_CODEC "terngrad"
#include "tests/fuzz/fuzz_dense.h"
