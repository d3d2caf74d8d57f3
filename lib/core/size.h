/* size.h - byte sizes as people write them (80GiB, 300MB, 2M, 1048576) and as we print
 * them (61.2 GiB).
 */
#ifndef AUTOBATCH_SIZE_H
#define AUTOBATCH_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Plain bytes, or a number with K/M/G/T followed by iB (1024), B (1000), or nothing (1024).
 * Up to 2^60 bytes; fractions allowed with a unit ("1.5GiB"). 0 or -EINVAL/-ERANGE. */
int ab_parse_size(const char *text, uint64_t *out, char *err, size_t errlen);

/* "61.2 GiB", "512 MiB", "900 B". Returns buf. */
const char *ab_format_size(uint64_t bytes, char *buf, size_t buflen);

/* Two sizes compared in one sentence ("reached X, over the Y limit"), each as
 * ab_format_size writes it, or in MiB with one decimal where those two read the same
 * (819.4 and 819.2 MiB, not 819 and 819). */
void ab_format_sizes_apart(uint64_t a, uint64_t b, char *sa, char *sb, size_t len);

#endif
