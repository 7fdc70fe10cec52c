/* xml_reader.h -- internal: a small XML reader for algorithm files (msccl_import.c): elements,
 * attributes, comments, self-closing tags and line numbers; nothing else.
 *
 * What it takes: an optional <?xml ...?> declaration and <!DOCTYPE ...>, comments, elements with
 * attributes in single or double quotes (the five predefined entities and &#N; / &#xN; in values),
 * character data (kept by nobody: algorithm files carry everything in attributes) and CDATA.
 * What it refuses, naming the line: unclosed or mismatched tags, a second root, duplicate
 * attributes, unquoted values, nesting deeper than XML_MAX_DEPTH. Any input, however broken,
 * gives an error or a document; never a crash (tests/fuzz/xml_reader_fuzz.c). */
#ifndef WEFT_COLLECTIVES_XML_READER_H_
#define WEFT_COLLECTIVES_XML_READER_H_

#include <stddef.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XML_MAX_DEPTH 64

typedef struct {
  size_t name, value; /* offsets into the document's string pool */
} xml_attr_t;

/* Elements in document order; the root is element 0. -1: none. */
typedef struct {
  size_t name;
  int line; /* of the '<' that opens it */
  int parent, first_child, next_sibling, last_child;
  int first_attr, nattrs;
} xml_elem_t;

typedef struct {
  xml_elem_t *elems;
  int nelems, elems_cap;
  xml_attr_t *attrs;
  int nattrs, attrs_cap;
  char *pool; /* NUL-terminated names and decoded values */
  size_t pool_len, pool_cap;
} xml_doc_t;

/* Parses `len` bytes of `text`; `what` (a file name) starts every error message, with the line:
 * "algo.xml:12: <step> is closed by </tb>". On error *doc holds nothing to free. */
weft_result_t xml_parse(const char *text, size_t len, const char *what, xml_doc_t *doc);
void xml_free(xml_doc_t *doc);

static inline const char *xml_name(const xml_doc_t *d, int e) { return d->pool + d->elems[e].name; }
/* The value of attribute `name` of element e, or NULL when it has none. */
const char *xml_attr(const xml_doc_t *d, int e, const char *name);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_XML_READER_H_ */
