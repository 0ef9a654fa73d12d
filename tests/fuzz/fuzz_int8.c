/* libFuzzer target: the int8 decoder on arbitrary payloads, and int8 round trips
 * of arbitrary floats (input layout and properties: tests/fuzz/fuzz_dense.h). */
#define FUZZ_CODEC "int8"
#include "tests/fuzz/fuzz_dense.h"
