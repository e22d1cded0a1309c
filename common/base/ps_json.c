//  Where a number too large to read sits in JSON text; see ps_json.h.

#include "ps_json.h"

#include <stdio.h>
#include <string.h>

//  Objects and arrays nested deeper than this are left out of the path,
//  which then ends in "...".
#define S_DEPTH  32

//  One enclosing object or array.
typedef struct {
    bool object;
    size_t index;               //  an array: the item being read
    const char *key;            //  an object: the member being read, in the text
    size_t key_len;
} s_frame_t;

//  Append text to path (size bytes), marking a cut with "...".
static void
s_append (char *path, size_t size, const char *format, const char *text, size_t len,
          size_t index)
{
    size_t used = strlen (path);
    int n = text ? snprintf (path + used, size - used, format, (int) len, text)
                 : snprintf (path + used, size - used, format, index);
    if (n < 0 || (size_t) n >= size - used)
        snprintf (path + size - 4, 4, "...");
}

bool
ps_json_overflow (const char *text, size_t len, const json_error_t *jerr,
                  ps_json_overflow_t *overflow)
{
    if (json_error_code (jerr) != json_error_numeric_overflow
    ||  jerr->position < 0 || (size_t) jerr->position > len)
        return false;
    //  jansson stops right after the number it cannot hold.
    size_t end = (size_t) jerr->position;
    s_frame_t frames [S_DEPTH];
    size_t depth = 0;
    bool want_key = false;
    for (size_t p = 0; p < end; p++) {
        char c = text [p];
        s_frame_t *top = depth > 0 && depth <= S_DEPTH ? &frames [depth - 1] : NULL;
        if (c == '"') {
            size_t start = ++p;
            while (p < end && text [p] != '"')
                p += text [p] == '\\' ? 2 : 1;
            if (want_key && top) {
                top->key = text + start;
                top->key_len = p - start;
            }
            want_key = false;
        }
        else
        if (c == '{' || c == '[') {
            if (depth < S_DEPTH)
                frames [depth] = (s_frame_t) { .object = c == '{' };
            depth++;
            want_key = c == '{';
        }
        else
        if ((c == '}' || c == ']') && depth > 0)
            depth--;
        else
        if (c == ',' && top) {
            if (top->object)
                want_key = true;
            else
                top->index++;
        }
    }
    overflow->path [0] = 0;
    for (size_t i = 0; i < depth && i < S_DEPTH; i++) {
        if (!frames [i].object)
            s_append (overflow->path, sizeof overflow->path, "[%zu]", NULL, 0, frames [i].index);
        else
        if (frames [i].key)
            s_append (overflow->path, sizeof overflow->path, i ? ".%.*s" : "%.*s",
                      frames [i].key, frames [i].key_len, 0);
    }
    if (depth > S_DEPTH)
        s_append (overflow->path, sizeof overflow->path, "%.*s", "...", 3, 0);
    //  The same place as a JSON pointer (RFC 6901), '~' and '/' escaped.
    overflow->pointer [0] = 0;
    for (size_t i = 0; i < depth && i < S_DEPTH; i++) {
        if (!frames [i].object)
            s_append (overflow->pointer, sizeof overflow->pointer, "/%zu", NULL, 0,
                      frames [i].index);
        else
        if (frames [i].key) {
            s_append (overflow->pointer, sizeof overflow->pointer, "/", "", 0, 0);
            for (size_t k = 0; k < frames [i].key_len; k++) {
                char c = frames [i].key [k];
                const char *escaped = c == '~' ? "~0" : c == '/' ? "~1" : NULL;
                if (escaped)
                    s_append (overflow->pointer, sizeof overflow->pointer, "%.*s", escaped, 2, 0);
                else
                    s_append (overflow->pointer, sizeof overflow->pointer, "%.*s",
                              frames [i].key + k, 1, 0);
            }
        }
    }
    size_t start = end;
    while (start > 0 && text [start - 1] && strchr ("0123456789+-.eE", text [start - 1]))
        start--;
    size_t n = end - start;
    if (n < sizeof overflow->literal)
        snprintf (overflow->literal, sizeof overflow->literal, "%.*s", (int) n, text + start);
    else
        snprintf (overflow->literal, sizeof overflow->literal, "%.*s...",
                  (int) sizeof overflow->literal - 4, text + start);
    overflow->integer = strcspn (overflow->literal, ".eE") == strlen (overflow->literal);
    return true;
}
