/* libFuzzer target: the ternsum decoder on arbitrary payloads, and ternsum round
 * trips of arbitrary floats (input layout and properties: tests/fuzz/fuzz_dense.h). */
#define FUZZ_CODEC "ternsum"
#include "tests/fuzz/fuzz_dense.h"
