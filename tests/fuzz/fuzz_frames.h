//  The framing in which the fuzz targets that take several byte strings
//  read their input: ZeroMQ frames for the codec and the server, names and
//  contents of files for the checkpoint reader.
//
//  An input is a run of frames, each a little-endian 16-bit word followed
//  by that many bytes (the word's low 15 bits); the word's high bit marks
//  the frame that ends a message. A length that runs past the end of the
//  input takes what is left, and a lone last byte is an empty frame, so
//  every input splits into frames and a mutation that breaks one length
//  still leaves the frames before it intact. tests/fuzz/fuzz_seeds.c writes
//  the seeds in the same framing.

#ifndef FUZZ_FRAMES_H_INCLUDED
#define FUZZ_FRAMES_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

//  A frame's bytes are borrowed from the input.
typedef struct {
    const uint8_t *data;
    size_t size;
    bool last;                  //  ends a message
} fuzz_frame_t;

//  Split data into at most max frames (more are dropped) and return how
//  many there are.
size_t fuzz_frames_split (const uint8_t *data, size_t size, fuzz_frame_t *frames, size_t max);

//  Write one frame to file. Returns 0, or -1 when size is over 32767 bytes
//  or the write fails.
int fuzz_frames_write (FILE *file, const void *data, size_t size, bool last);

#endif
