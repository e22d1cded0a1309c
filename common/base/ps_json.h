//  Where in JSON text a number too large to read sits, as a key path.
//
//  jansson reads integers into 64 bits and reals into doubles, and refuses
//  a document holding a larger one with "too big integer near '...'" and a
//  byte position, which names no key. Every configuration reader of
//  ps-cluster (job files, TF_CONFIG, model specs) turns that into its own
//  message naming the key and what the key expects; this module finds the
//  key. The text before the position is well-formed JSON (jansson read it
//  without complaint), so a small scan of it finds the enclosing objects'
//  keys and arrays' indices.

#ifndef PS_JSON_H_INCLUDED
#define PS_JSON_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef struct {
    //  The key path: object keys joined by '.', array items as "[i]"
    //  ("optimizer.lr", "cluster.worker[1]", "layers[2].units"); empty for
    //  a number that is the whole document. Cut short ("...") if longer.
    char path [160];
    //  The same place as a JSON pointer ("/optimizer/lr", "/layers/2/units";
    //  empty for the whole document), cut short ("...") if longer.
    char pointer [160];
    //  The number as written ("18446744073709551616", "1e999"), cut short
    //  ("...") if longer.
    char literal [48];
    bool integer;               //  an integer, not a real
} ps_json_overflow_t;

//  When jerr, from parsing the len bytes of text, reports a number too
//  large to read, fill *overflow and return true; otherwise return false.
bool ps_json_overflow (const char *text, size_t len, const json_error_t *jerr,
                       ps_json_overflow_t *overflow);

#endif
