//  Test tool: validate JSON documents against a JSON Schema with
//  common/base/ps_jsonschema, for tests/test_jsonschema_cross.py, which
//  compares the verdicts with python3-jsonschema's.
//
//  Usage: jsonschema_check SCHEMA DOC...
//  Prints one line per document, "valid" or "invalid: MESSAGE", and exits
//  0; exits 2 when the schema cannot be loaded or a document is not JSON.

#include <stdio.h>
#include <stdlib.h>

#include "ps_jsonschema.h"

int
main (int argc, char *argv [])
{
    if (argc < 2) {
        fprintf (stderr, "usage: jsonschema_check SCHEMA DOC...\n");
        return 2;
    }
    json_error_t jerr;
    json_t *root = json_load_file (argv [1], JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        fprintf (stderr, "%s: line %d: %s\n", argv [1], jerr.line, jerr.text);
        return 2;
    }
    ps_error_t err = { 0 };
    ps_jsonschema_t *schema = ps_jsonschema_new (root, argv [1], &err);
    json_decref (root);
    if (!schema) {
        fprintf (stderr, "%s\n", err.msg);
        return 2;
    }
    int rc = 0;
    for (int i = 2; i < argc && rc == 0; i++) {
        json_t *doc = json_load_file (argv [i], JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (!doc) {
            fprintf (stderr, "%s: line %d: %s\n", argv [i], jerr.line, jerr.text);
            rc = 2;
            break;
        }
        err = (ps_error_t) { 0 };
        if (ps_jsonschema_validate (schema, doc, &err) == 0)
            printf ("valid\n");
        else
            printf ("invalid: %s\n", err.msg);
        json_decref (doc);
    }
    ps_jsonschema_destroy (&schema);
    return rc;
}
