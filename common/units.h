/* Strict parsing of command-line numbers, with units where natural.
 * Every function returns 0 on success and -1 when the text is not a complete,
 * finite, in-range value (no trailing junk). */
#ifndef GC_UNITS_H
#define GC_UNITS_H

/* plain number ("0.1", "1e-4") */
int parse_double(const char *s, double *out);
/* integer, optional k/M/G suffix (powers of 1000): "128", "10k" */
int parse_long(const char *s, long *out);
/* bandwidth in bits per second: "100mbit", "1gbit", "10Mbps", "1.5gbps", "800kbit", "125MB/s" (bytes),
 * a bare number is bits per second */
int parse_bandwidth(const char *s, double *bits_per_s);
/* duration in seconds: "0.5ms", "20us", "2s", "1.5m"; a bare number is seconds */
int parse_duration(const char *s, double *seconds);
/* shortest "%g" text of v that reads back exactly (0.9, not 0.90000000000000002); returns buf */
#define NUM_TEXT_MAX 32
const char *num_text(char *buf /* [NUM_TEXT_MAX] */, double v);
/* "1.23 Gbit/s"-style formatting of bits per second */
void format_bandwidth(char *buf, int n, double bits_per_s);
/* "12.3 MB"-style formatting of a byte count */
void format_bytes(char *buf, int n, double bytes);

#endif
