//  The fuzz targets' input framing; see fuzz_frames.h.

#include "fuzz_frames.h"

#define S_LAST_BIT   0x8000u
#define S_MAX_SIZE   0x7fffu

size_t
fuzz_frames_split (const uint8_t *data, size_t size, fuzz_frame_t *frames, size_t max)
{
    size_t count = 0;
    size_t pos = 0;
    while (pos < size && count < max) {
        unsigned word = data [pos];
        if (pos + 1 < size)
            word |= (unsigned) data [pos + 1] << 8;
        pos += pos + 1 < size ? 2 : 1;
        size_t len = word & S_MAX_SIZE;
        if (len > size - pos)
            len = size - pos;
        frames [count++] = (fuzz_frame_t) { data + pos, len, (word & S_LAST_BIT) != 0 };
        pos += len;
    }
    return count;
}

int
fuzz_frames_write (FILE *file, const void *data, size_t size, bool last)
{
    if (size > S_MAX_SIZE)
        return -1;
    unsigned word = (unsigned) size | (last ? S_LAST_BIT : 0);
    uint8_t prefix [2] = { (uint8_t) (word & 0xff), (uint8_t) (word >> 8) };
    if (fwrite (prefix, 1, sizeof prefix, file) != sizeof prefix
    ||  (size && fwrite (data, 1, size, file) != size))
        return -1;
    return 0;
}
