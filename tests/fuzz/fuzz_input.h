//  The copies of a fuzz input that several targets make before they hand
//  it to the code under test: as a C string, for the parsers of JSON text,
//  and as a snapshot file sealed with its CRC-32, as the snapshot writer
//  seals one, so that mutations reach what lies behind the checksum
//  instead of all stopping at it. Allocation failure aborts (a failure of
//  the harness, not a finding).

#ifndef FUZZ_INPUT_H_INCLUDED
#define FUZZ_INPUT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

//  A copy of the size bytes of data with a NUL after them; free it.
char *fuzz_input_text (const uint8_t *data, size_t size);

//  A copy of the size bytes of data whose last four bytes (when it has
//  four) are replaced by the little-endian CRC-32 of the rest; free it.
uint8_t *fuzz_input_sealed (const uint8_t *data, size_t size);

#endif
