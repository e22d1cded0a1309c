//  Reading a JSON Schema document (draft 2020-12) rather than validating
//  with it: resolving a $ref, saying in words what a subschema expects
//  ("an integer in 1 .. 65536", "one of \"sgd\", \"adam\""), and finding
//  the subschema that applies at a JSON pointer of a document. The
//  validator (ps_jsonschema.h) words its messages with these, and readers
//  of configuration files use them, through it, for what cannot be
//  validated, such as a number too large to read. Every function takes the
//  schema's root, for its $refs, and assumes a schema that ps_jsonschema
//  has loaded, and so checked.

#ifndef PS_SCHEMADOC_H_INCLUDED
#define PS_SCHEMADOC_H_INCLUDED

#include <stddef.h>

#include <jansson.h>

#include "ps_error.h"

//  A pointer into a configuration file is short; a deeper one is cut.
#define PS_SCHEMADOC_POINTER_MAX  256

//  $refs nested deeper than this are taken for a loop ("a": {"$ref":
//  "#/$defs/a"}).
#define PS_SCHEMADOC_DEPTH_MAX  64

//  The schema a $ref names within root: "#" (root itself) or
//  "#/$defs/NAME". NULL when it names nothing there.
const json_t *ps_schemadoc_resolve (const json_t *root, const char *ref);

//  Append to buf (size bytes, NUL-terminated) what schema expects, in
//  words: its const or enum values, its types with their bounds, or what
//  its $ref, alternatives or first allOf member expect.
void ps_schemadoc_describe (const json_t *root, const json_t *schema, char *buf, size_t size);

//  Append to buf what any of the schemas in list expects ("an integer
//  >= 1 or an array of 2 items").
void ps_schemadoc_describe_any (const json_t *root, const json_t *list, char *buf,
                                size_t size);

//  The keys an object schema names under properties, comma-separated, in
//  buf (cut short when size is too small).
void ps_schemadoc_keys (const json_t *schema, char *buf, size_t size);

//  Find in *found the schema that applies at pointer (RFC 6901) of a
//  document, following properties (also those an allOf member, its then
//  or else, or a $ref adds), prefixItems, items and $ref. Returns 0,
//  PS_ENOTFOUND when no schema says what is there, or PS_EINVAL with err
//  naming the key when an object on the way admits no such key.
int ps_schemadoc_at (const json_t *root, const char *pointer, const json_t **found,
                     ps_error_t *err);

//  The value of key in obj, a document the schema accepted, or when obj
//  has none the "default" of key in properties, the object schema's
//  "properties"; NULL when neither is there or the default is null
//  (meaning "computed"). What readers of accepted documents read fields
//  with, so that a default lives in the schema alone.
const json_t *ps_schemadoc_field (const json_t *obj, const json_t *properties,
                                  const char *key);

#endif
