//  Error codes and error reports; see ps_error.h.

#include "ps_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    int code;
    const char *name;
} s_names [] = {
    { PS_OK,        "ok" },
    { PS_DUPLICATE, "duplicate" },
    { PS_EINVAL,    "invalid" },
    { PS_EPROTO,    "bad_message" },
    { PS_ESHAPE,    "bad_shape" },
    { PS_ENOTFOUND, "not_found" },
    { PS_EEXIST,    "exists" },
    { PS_EIO,       "io" },
    { PS_ECORRUPT,  "corrupt" },
    { PS_ETIMEDOUT, "timeout" },
    { PS_EREMOTE,   "remote" },
    { PS_ETOOBIG,   "too_big" },
    { PS_EVERSION,  "bad_version" },
    { PS_ECANCELED, "canceled" },
    { PS_EBUSY,     "busy" },
    { PS_EPERM,     "forbidden" },
    { PS_ENONFINITE, "nonfinite" },
};

const char *
ps_error_name (int code)
{
    for (size_t i = 0; i < sizeof s_names / sizeof s_names [0]; i++)
        if (s_names [i].code == code)
            return s_names [i].name;
    return "unknown";
}

int
ps_error_from_name (const char *name)
{
    for (size_t i = 0; i < sizeof s_names / sizeof s_names [0]; i++)
        if (strcmp (s_names [i].name, name) == 0)
            return s_names [i].code;
    return PS_EREMOTE;
}

int
ps_error_set (ps_error_t *err, int code, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list args;
        va_start (args, fmt);
        vsnprintf (err->msg, sizeof err->msg, fmt, args);
        va_end (args);
    }
    return code;
}

int
ps_error_prefix (ps_error_t *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    char prefix [PS_ERROR_MSG_MAX];
    va_list args;
    va_start (args, fmt);
    vsnprintf (prefix, sizeof prefix, fmt, args);
    va_end (args);
    //  Truncation of the joined text is acceptable: the message stays a
    //  valid string and the most specific context comes first.
    char joined [PS_ERROR_MSG_MAX];
    size_t plen = strnlen (prefix, sizeof joined - 3);
    memcpy (joined, prefix, plen);
    memcpy (joined + plen, ": ", 2);
    size_t rest = sizeof joined - plen - 3;
    size_t mlen = strnlen (err->msg, rest);
    memcpy (joined + plen + 2, err->msg, mlen);
    joined [plen + 2 + mlen] = 0;
    memcpy (err->msg, joined, sizeof joined);
    err->code = code;
    return code;
}
