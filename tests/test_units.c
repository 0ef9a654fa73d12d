#include "common/blas.h"
#include "common/units.h"
#include "tests/test.h"

int main(void) {
    double v;
    long l;
    CHECK(parse_bandwidth("100mbit", &v) == 0 && v == 1e8, "100mbit");
    CHECK(parse_bandwidth("1Gbps", &v) == 0 && v == 1e9, "1Gbps");
    CHECK(parse_bandwidth("10MB/s", &v) == 0 && v == 8e7, "10MB/s is bytes");
    CHECK(parse_bandwidth("100", &v) == 0 && v == 100, "bare number");
    CHECK(parse_bandwidth("100mbitx", &v) == -1, "junk unit");
    CHECK(parse_bandwidth("-5mbit", &v) == -1, "negative");
    CHECK(parse_bandwidth("", &v) == -1, "empty");
    CHECK(parse_duration("0.5ms", &v) == 0 && fabs(v - 5e-4) < 1e-15, "0.5ms");
    CHECK(parse_duration("20us", &v) == 0 && fabs(v - 2e-5) < 1e-15, "20us");
    CHECK(parse_duration("2", &v) == 0 && v == 2, "bare seconds");
    CHECK(parse_duration("2 hours", &v) == -1, "unknown unit");
    CHECK(parse_long("10k", &l) == 0 && l == 10000, "10k");
    CHECK(parse_long("1.5", &l) == -1, "non-integer");
    CHECK(parse_long("12abc", &l) == -1, "junk");
    CHECK(parse_long("9007199254740993", &l) == 0 && l == 9007199254740993L, "2^53 + 1 exactly");
    CHECK(parse_long("9223372036854775807", &l) == 0 && l == 9223372036854775807L, "LONG_MAX");
    CHECK(parse_long("9223372036854775808", &l) == -1, "past LONG_MAX refused");
    CHECK(parse_long("-12", &l) == 0 && l == -12, "-12");
    CHECK(parse_long("1e15", &l) == 0 && l == 1000000000000000L, "1e15");
    CHECK(parse_long("1e16", &l) == -1, "1e16: past 2^53 through a double, refused (the digits are taken)");
    CHECK(parse_double("1e-4", &v) == 0 && v == 1e-4, "1e-4");
    CHECK(parse_double("nan", &v) == -1, "nan rejected");
    CHECK(parse_double("0.1x", &v) == -1, "trailing junk");
    /* OpenBLAS serves 2 x MAX_THREADS threads calling it at once (common/blas.h) */
    CHECK(blas_max_callers_from("OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH USE_OPENMP Haswell MAX_THREADS=64") == 128,
          "MAX_THREADS=64: 128 callers");
    CHECK(blas_max_callers_from("OpenBLAS 0.3.13 Haswell") == 0 && blas_max_callers_from(NULL) == 0,
          "no MAX_THREADS: unknown");
    CHECK(blas_max_callers_from("MAX_THREADS=x") == 0, "not a number: unknown");
    TEST_END();
}
