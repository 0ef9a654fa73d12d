/* Checkpoint files: round trip, atomic replace, and rejection of truncated,
 * corrupt, foreign and wrong-version files. */
#include <unistd.h>

#include "common/ckpt.h"
#include "common/crc32c.h"
#include "tests/test.h"

int main(void) {
    char path[] = "/tmp/gcx_ckpt_testXXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char err[512];
    float a[100];
    for (int i = 0; i < 100; i++) a[i] = (float)i * 0.5f;
    long step = 1234;
    CkptSection s[3] = {{"params", a, sizeof a}, {"step", &step, sizeof step}, {"empty", NULL, 0}};
    CHECK(ckpt_write(path, s, 3, err, sizeof err) == 0, "write: %s", err);
    Ckpt ck;
    CHECK(ckpt_read(&ck, path, err, sizeof err) == 0, "read: %s", err);
    float b[100];
    long st = 0;
    CHECK(ckpt_load(&ck, "params", b, sizeof b, err, sizeof err) == 0 && memcmp(a, b, sizeof a) == 0, "params");
    CHECK(ckpt_load(&ck, "step", &st, sizeof st, err, sizeof err) == 0 && st == 1234, "step");
    CHECK(ckpt_load(&ck, "step", &st, 4, err, sizeof err) == -1 && strstr(err, "expects"), "size mismatch: %s", err);
    CHECK(ckpt_load(&ck, "nope", &st, 4, err, sizeof err) == -1, "missing section");
    size_t len = 1;
    CHECK(ckpt_find(&ck, "empty", &len) != NULL && len == 0, "empty section");
    /* every truncation and every single-byte corruption is rejected */
    FILE *f = fopen(path, "rb");
    uint8_t buf[2048];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ckpt_free(&ck);
    int rejected_trunc = 0, rejected_flip = 0;
    for (size_t k = 0; k < n; k++) {
        f = fopen(path, "wb");
        fwrite(buf, 1, k, f);
        fclose(f);
        if (ckpt_read(&ck, path, err, sizeof err) != 0) rejected_trunc++;
        ckpt_free(&ck);
    }
    CHECK(rejected_trunc == (int)n, "all %zu truncations rejected (%d)", n, rejected_trunc);
    for (size_t k = 0; k < n; k += 3) {
        buf[k] ^= 0x40;
        f = fopen(path, "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
        if (ckpt_read(&ck, path, err, sizeof err) != 0) rejected_flip++;
        ckpt_free(&ck);
        buf[k] ^= 0x40;
    }
    CHECK(rejected_flip == (int)((n + 2) / 3), "all bit flips rejected (%d)", rejected_flip);
    buf[0] = 'X';
    f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    CHECK(ckpt_read(&ck, path, err, sizeof err) != 0 && strstr(err, "expected magic"), "foreign file: %s", err);
    /* wrong version with a valid checksum */
    buf[0] = 'G';
    buf[8] = 9;
    uint32_t c = crc32c(0, buf, n - 4);
    for (int i = 0; i < 4; i++) buf[n - 4 + i] = (uint8_t)(c >> (8 * i));
    f = fopen(path, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    CHECK(ckpt_read(&ck, path, err, sizeof err) != 0 && strstr(err, "version 9"), "version: %s", err);
    CHECK(ckpt_read(&ck, "/nonexistent/dir/x.ckpt", err, sizeof err) != 0 && strstr(err, "/nonexistent"),
          "missing file names the path: %s", err);
    unlink(path);
    TEST_END();
}
