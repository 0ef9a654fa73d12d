#include "common/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* number followed by a (possibly empty) unit; unit copied lower-cased */
static int split(const char *s, double *v, char *unit, size_t n) {
    if (!s || !*s) return -1;
    char *end = NULL;
    *v = strtod(s, &end);
    if (end == s || !isfinite(*v)) return -1;
    while (*end == ' ') end++;
    if (strlen(end) >= n) return -1;
    size_t i = 0;
    for (; end[i]; i++) unit[i] = (char)tolower((unsigned char)end[i]);
    unit[i] = 0;
    return 0;
}

int parse_double(const char *s, double *out) {
    double v;
    char u[8];
    if (split(s, &v, u, sizeof u) || u[0]) return -1;
    *out = v;
    return 0;
}

int parse_long(const char *s, long *out) {
    /* a plain integer: exact over the whole range of long */
    if (s && (isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1])))) {
        char *end;
        errno = 0;
        long l = strtol(s, &end, 10);
        if (!*end) {
            if (errno == ERANGE) return -1;
            *out = l;
            return 0;
        }
    }
    double v;
    char u[8];
    if (split(s, &v, u, sizeof u)) return -1;
    double mul = 1;
    if (!strcmp(u, "k")) mul = 1e3;
    else if (!strcmp(u, "m")) mul = 1e6;
    else if (!strcmp(u, "g")) mul = 1e9;
    else if (u[0]) return -1;
    v *= mul;
    if (v != floor(v) || fabs(v) > 9007199254740992.0) return -1; /* beyond 2^53 a double is not exact */
    *out = (long)v;
    return 0;
}

int parse_bandwidth(const char *s, double *bps) {
    double v;
    char u[16];
    if (split(s, &v, u, sizeof u) || v <= 0) return -1;
    static const struct { const char *unit; double mul; } units[] = {
        {"", 1},          {"bit", 1},      {"bps", 1},       {"kbit", 1e3},    {"kbps", 1e3},   {"kbit/s", 1e3},
        {"mbit", 1e6},    {"mbps", 1e6},   {"mbit/s", 1e6},  {"gbit", 1e9},    {"gbps", 1e9},   {"gbit/s", 1e9},
        {"b/s", 8},       {"kb/s", 8e3},   {"mb/s", 8e6},    {"gb/s", 8e9},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(u, units[i].unit)) {
            *bps = v * units[i].mul;
            return 0;
        }
    return -1;
}

int parse_duration(const char *s, double *sec) {
    double v;
    char u[8];
    if (split(s, &v, u, sizeof u) || v < 0) return -1;
    double mul;
    if (!u[0] || !strcmp(u, "s")) mul = 1;
    else if (!strcmp(u, "ms")) mul = 1e-3;
    else if (!strcmp(u, "us")) mul = 1e-6;
    else if (!strcmp(u, "ns")) mul = 1e-9;
    else if (!strcmp(u, "m") || !strcmp(u, "min")) mul = 60;
    else return -1;
    *sec = v * mul;
    return 0;
}

void format_bandwidth(char *buf, int n, double b) {
    if (b >= 1e9) snprintf(buf, (size_t)n, "%.3g Gbit/s", b / 1e9);
    else if (b >= 1e6) snprintf(buf, (size_t)n, "%.3g Mbit/s", b / 1e6);
    else if (b >= 1e3) snprintf(buf, (size_t)n, "%.3g kbit/s", b / 1e3);
    else snprintf(buf, (size_t)n, "%.3g bit/s", b);
}

void format_bytes(char *buf, int n, double b) {
    if (b >= 1e12) snprintf(buf, (size_t)n, "%.3g TB", b / 1e12);
    else if (b >= 1e9) snprintf(buf, (size_t)n, "%.3g GB", b / 1e9);
    else if (b >= 1e6) snprintf(buf, (size_t)n, "%.3g MB", b / 1e6);
    else if (b >= 1e3) snprintf(buf, (size_t)n, "%.3g kB", b / 1e3);
    else snprintf(buf, (size_t)n, "%.0f B", b);
}

const char *num_text(char *buf, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, NUM_TEXT_MAX, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    return buf;
}
