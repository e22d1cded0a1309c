//  The monotonic clock, in milliseconds, for deadlines, progress reports
//  and timings. CLOCK_MONOTONIC never jumps with the wall clock, so an
//  interval measured with it is never negative.

#ifndef PS_CLOCK_H_INCLUDED
#define PS_CLOCK_H_INCLUDED

#include <time.h>

//  Milliseconds since an arbitrary fixed point, with sub-ms resolution.
static inline double
ps_clock_ms (void)
{
    struct timespec ts;
    //  Cannot fail: CLOCK_MONOTONIC exists on every Linux and ts is valid.
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#endif
