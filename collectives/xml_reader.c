/* xml_reader.c -- the small XML reader of xml_reader.h: one pass, no recursion, every read
 * bounded by the input's length. */
#include "collectives/xml_reader.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

typedef struct {
  const char *p, *end;
  int line;
  const char *what;
  xml_doc_t *d;
} reader_t;

static weft_result_t syntax(const reader_t *r, const char *msg) {
  return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s:%d: %s", r->what, r->line, msg);
}

static weft_result_t oom(void) {
  return WEFT_ERR(WEFT_ERR_NO_MEMORY, "xml: out of memory reading the document");
}

static void skip_char(reader_t *r) {
  if (*r->p == '\n') r->line++;
  r->p++;
}

static int starts(const reader_t *r, const char *s) {
  size_t n = strlen(s);
  return (size_t)(r->end - r->p) >= n && memcmp(r->p, s, n) == 0;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == ':' || (unsigned char)c >= 0x80;
}

static void skip_space(reader_t *r) {
  while (r->p < r->end && is_space(*r->p)) skip_char(r);
}

/* Skips to just past `term`; 0 when the input ends first. */
static int skip_past(reader_t *r, const char *term) {
  while (r->p < r->end) {
    if (starts(r, term)) {
      r->p += strlen(term);
      return 1;
    }
    skip_char(r);
  }
  return 0;
}

/* Appends n bytes and a NUL to the pool; the offset of the copy, or SIZE_MAX out of memory. */
static size_t pool_add(xml_doc_t *d, const char *s, size_t n) {
  if (d->pool_cap - d->pool_len < n + 1) {
    size_t cap = d->pool_cap ? d->pool_cap : 256;
    while (cap - d->pool_len < n + 1) cap *= 2;
    char *p = realloc(d->pool, cap);
    if (!p) return SIZE_MAX;
    d->pool = p;
    d->pool_cap = cap;
  }
  size_t at = d->pool_len;
  memcpy(d->pool + at, s, n);
  d->pool[at + n] = 0;
  d->pool_len += n + 1;
  return at;
}

static weft_result_t read_name(reader_t *r, size_t *out) {
  const char *start = r->p;
  while (r->p < r->end && is_name_char(*r->p)) r->p++;
  if (r->p == start) return syntax(r, "expected a name");
  *out = pool_add(r->d, start, (size_t)(r->p - start));
  return *out == SIZE_MAX ? oom() : WEFT_SUCCESS;
}

/* One entity after '&' (r->p past it) into buf; its length, 0 when unknown. */
static size_t entity(reader_t *r, char *buf) {
  static const struct {
    const char *name;
    char c;
  } named[] = {{"lt;", '<'}, {"gt;", '>'}, {"amp;", '&'}, {"quot;", '"'}, {"apos;", '\''}};
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
    if (starts(r, named[i].name)) {
      r->p += strlen(named[i].name);
      buf[0] = named[i].c;
      return 1;
    }
  if (!starts(r, "#")) return 0;
  r->p++;
  int hex = r->p < r->end && *r->p == 'x';
  if (hex) r->p++;
  unsigned long v = 0;
  int digits = 0;
  while (r->p < r->end && *r->p != ';' && digits < 8) {
    char c = *r->p;
    int dv = c >= '0' && c <= '9'          ? c - '0'
             : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
             : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
    if (dv < 0) return 0;
    v = v * (hex ? 16 : 10) + (unsigned long)dv;
    digits++;
    r->p++;
  }
  if (digits == 0 || r->p >= r->end || *r->p != ';' || v == 0 || v > 0x10FFFF) return 0;
  r->p++;
  /* UTF-8 */
  if (v < 0x80) {
    buf[0] = (char)v;
    return 1;
  }
  if (v < 0x800) {
    buf[0] = (char)(0xC0 | (v >> 6));
    buf[1] = (char)(0x80 | (v & 0x3F));
    return 2;
  }
  if (v < 0x10000) {
    buf[0] = (char)(0xE0 | (v >> 12));
    buf[1] = (char)(0x80 | ((v >> 6) & 0x3F));
    buf[2] = (char)(0x80 | (v & 0x3F));
    return 3;
  }
  buf[0] = (char)(0xF0 | (v >> 18));
  buf[1] = (char)(0x80 | ((v >> 12) & 0x3F));
  buf[2] = (char)(0x80 | ((v >> 6) & 0x3F));
  buf[3] = (char)(0x80 | (v & 0x3F));
  return 4;
}

/* A quoted attribute value, entities decoded, into the pool. */
static weft_result_t read_value(reader_t *r, size_t *out) {
  if (r->p >= r->end || (*r->p != '"' && *r->p != '\''))
    return syntax(r, "attribute value must be quoted");
  char q = *r->p++;
  size_t at = pool_add(r->d, "", 0);
  if (at == SIZE_MAX) return oom();
  r->d->pool_len = at; /* grow the value in place from here */
  while (r->p < r->end && *r->p != q) {
    char buf[4];
    size_t n = 1;
    if (*r->p == '<') return syntax(r, "'<' inside an attribute value");
    if (*r->p == '&') {
      r->p++;
      n = entity(r, buf);
      if (n == 0) return syntax(r, "unknown entity in an attribute value");
    } else {
      buf[0] = *r->p;
      skip_char(r);
    }
    if (pool_add(r->d, buf, n) == SIZE_MAX) return oom();
    r->d->pool_len--; /* drop the NUL: the value goes on */
  }
  if (r->p >= r->end) return syntax(r, "attribute value not closed");
  r->p++;
  if (pool_add(r->d, "", 0) == SIZE_MAX) return oom();
  *out = at;
  return WEFT_SUCCESS;
}

static weft_result_t new_elem(reader_t *r, int parent, int *out) {
  xml_doc_t *d = r->d;
  if (d->nelems == d->elems_cap) {
    int cap = d->elems_cap ? 2 * d->elems_cap : 64;
    xml_elem_t *e = realloc(d->elems, sizeof *e * (size_t)cap);
    if (!e) return oom();
    d->elems = e;
    d->elems_cap = cap;
  }
  int i = d->nelems++;
  xml_elem_t *e = &d->elems[i];
  memset(e, 0, sizeof *e);
  e->line = r->line;
  e->parent = parent;
  e->first_child = e->next_sibling = e->last_child = -1;
  e->first_attr = d->nattrs;
  if (parent >= 0) {
    xml_elem_t *p = &d->elems[parent];
    if (p->last_child >= 0)
      d->elems[p->last_child].next_sibling = i;
    else
      p->first_child = i;
    p->last_child = i;
  }
  *out = i;
  return WEFT_SUCCESS;
}

static weft_result_t add_attr(reader_t *r, int e, size_t name, size_t value) {
  xml_doc_t *d = r->d;
  const xml_elem_t *el = &d->elems[e];
  for (int k = el->first_attr; k < el->first_attr + el->nattrs; k++)
    if (strcmp(d->pool + d->attrs[k].name, d->pool + name) == 0)
      return syntax(r, "an attribute appears twice");
  if (d->nattrs == d->attrs_cap) {
    int cap = d->attrs_cap ? 2 * d->attrs_cap : 256;
    xml_attr_t *a = realloc(d->attrs, sizeof *a * (size_t)cap);
    if (!a) return oom();
    d->attrs = a;
    d->attrs_cap = cap;
  }
  d->attrs[d->nattrs++] = (xml_attr_t){name, value};
  d->elems[e].nattrs++;
  return WEFT_SUCCESS;
}

/* After '<' and a name: attributes up to '>' or '/>'. *closed = 1 for '/>'. */
static weft_result_t read_attrs(reader_t *r, int e, int *closed) {
  for (;;) {
    const char *before = r->p;
    skip_space(r);
    if (r->p >= r->end) return syntax(r, "tag not closed");
    if (*r->p == '>') {
      r->p++;
      *closed = 0;
      return WEFT_SUCCESS;
    }
    if (starts(r, "/>")) {
      r->p += 2;
      *closed = 1;
      return WEFT_SUCCESS;
    }
    if (r->p == before) return syntax(r, "attributes must be separated by white space");
    size_t name = 0, value = 0;
    WEFT_CHECK(read_name(r, &name));
    skip_space(r);
    if (r->p >= r->end || *r->p != '=') return syntax(r, "expected '=' after an attribute name");
    r->p++;
    skip_space(r);
    WEFT_CHECK(read_value(r, &value));
    WEFT_CHECK(add_attr(r, e, name, value));
  }
}

static weft_result_t parse(reader_t *r) {
  xml_doc_t *d = r->d;
  int cur = -1, depth = 0, root_done = 0;
  while (r->p < r->end) {
    if (*r->p != '<') {
      if (!is_space(*r->p) && cur < 0) return syntax(r, "text outside the root element");
      skip_char(r);
      continue;
    }
    if (starts(r, "<!--")) {
      if (!skip_past(r, "-->")) return syntax(r, "comment not closed");
      continue;
    }
    if (starts(r, "<?")) {
      if (!skip_past(r, "?>")) return syntax(r, "processing instruction not closed");
      continue;
    }
    if (starts(r, "<![CDATA[")) {
      if (cur < 0) return syntax(r, "CDATA outside the root element");
      if (!skip_past(r, "]]>")) return syntax(r, "CDATA not closed");
      continue;
    }
    if (starts(r, "<!")) {
      if (cur >= 0 || root_done) return syntax(r, "declaration inside the document");
      if (!skip_past(r, ">")) return syntax(r, "declaration not closed");
      continue;
    }
    if (starts(r, "</")) {
      r->p += 2;
      size_t name;
      WEFT_CHECK(read_name(r, &name));
      skip_space(r);
      if (r->p >= r->end || *r->p != '>') return syntax(r, "closing tag not closed");
      r->p++;
      if (cur < 0) return syntax(r, "closing tag without an open element");
      if (strcmp(d->pool + name, xml_name(d, cur)) != 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "<%.40s> (line %d) is closed by </%.40s>", xml_name(d, cur),
                 d->elems[cur].line, d->pool + name);
        return syntax(r, msg);
      }
      d->pool_len = name; /* the closing name is not kept */
      cur = d->elems[cur].parent;
      depth--;
      if (cur < 0) root_done = 1;
      continue;
    }
    r->p++;
    if (root_done) return syntax(r, "a second root element");
    if (depth >= XML_MAX_DEPTH) return syntax(r, "elements nested too deep");
    int e = -1, closed = 0;
    WEFT_CHECK(new_elem(r, cur, &e));
    WEFT_CHECK(read_name(r, &d->elems[e].name));
    WEFT_CHECK(read_attrs(r, e, &closed));
    if (closed) {
      if (cur < 0) root_done = 1;
      continue;
    }
    cur = e;
    depth++;
  }
  if (cur >= 0) {
    char msg[120];
    snprintf(msg, sizeof msg, "<%.40s> (line %d) is never closed", xml_name(d, cur),
             d->elems[cur].line);
    return syntax(r, msg);
  }
  if (d->nelems == 0) return syntax(r, "no element");
  return WEFT_SUCCESS;
}

weft_result_t xml_parse(const char *text, size_t len, const char *what, xml_doc_t *doc) {
  memset(doc, 0, sizeof *doc);
  reader_t r = {text, text + len, 1, what ? what : "xml", doc};
  weft_result_t res = parse(&r);
  if (res != WEFT_SUCCESS) xml_free(doc);
  return res;
}

void xml_free(xml_doc_t *doc) {
  free(doc->elems);
  free(doc->attrs);
  free(doc->pool);
  memset(doc, 0, sizeof *doc);
}

const char *xml_attr(const xml_doc_t *d, int e, const char *name) {
  const xml_elem_t *el = &d->elems[e];
  for (int k = el->first_attr; k < el->first_attr + el->nattrs; k++)
    if (strcmp(d->pool + d->attrs[k].name, name) == 0) return d->pool + d->attrs[k].value;
  return NULL;
}
