/* libFuzzer target: the fp16 decoder on arbitrary payloads, and fp16 round trips
 * of arbitrary floats (input layout and properties: tests/fuzz/fuzz_dense.h). */
#define FUZZ_CODEC "fp16"
#include "tests/fuzz/fuzz_dense.h"
