/* siphash.h - SipHash-2-4 (Aumasson and Bernstein, 2012), a keyed 64-bit MAC for short
 * messages: what the hold channel's two sides prove their tokens with, never sending them.
 *
 * Why this and not a crypto library: the plugin is loaded into every srun and slurmstepd, and
 * a proof of 64 bits over fresh nonces needs no more than these forty lines (an impostor
 * guesses it once per connection, at 2^-64).
 */
#ifndef AUTOBATCH_SIPHASH_H
#define AUTOBATCH_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of msg[0..len) under the 128-bit key (16 bytes, little-endian halves). */
uint64_t ab_siphash24(const unsigned char key[16], const void *msg, size_t len);

#endif
