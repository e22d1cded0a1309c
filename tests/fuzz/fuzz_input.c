//  Copies of a fuzz input (fuzz_input.h).

#include "fuzz_input.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

//  A copy of data with room for one byte more, so that an empty input
//  still gets a buffer of its own.
static uint8_t *
s_copy (const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc (size + 1);
    if (!copy)
        abort ();
    if (size)
        memcpy (copy, data, size);
    return copy;
}

char *
fuzz_input_text (const uint8_t *data, size_t size)
{
    char *text = (char *) s_copy (data, size);
    text [size] = 0;
    return text;
}

uint8_t *
fuzz_input_sealed (const uint8_t *data, size_t size)
{
    uint8_t *file = s_copy (data, size);
    if (size >= 4) {
        uint32_t crc = (uint32_t) crc32 (crc32 (0, Z_NULL, 0), file, (uInt) (size - 4));
        for (int i = 0; i < 4; i++)
            file [size - 4 + (size_t) i] = (uint8_t) (crc >> (8 * i));
    }
    return file;
}
