/* Reading op lists (the .txt files in hmp/ and the files users name instead). */
#include "hpu/oplist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPLIST_NAME_MAX 128

struct hpu_oplist {
  char *path;
  size_t size, cap;
  char **names;
  int *lines;
};

static int is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* "name" or "name.overload", identifiers only. */
static int valid_name(const char *s) {
  if (!is_ident_start(*s)) return 0;
  while (is_ident_char(*s)) s++;
  if (*s == '.') {
    s++;
    if (!is_ident_start(*s)) return 0;
    while (is_ident_char(*s)) s++;
  }
  return *s == '\0';
}

static int list_contains(const hpu_oplist_t *l, const char *name) {
  for (size_t i = 0; i < l->size; i++)
    if (strcmp(l->names[i], name) == 0) return 1;
  return 0;
}

static hpu_status_t list_append(hpu_oplist_t *l, const char *name, int line) {
  if (list_contains(l, name)) return HPU_SUCCESS;
  if (l->size == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 32;
    char **names = realloc(l->names, cap * sizeof *names);
    if (!names) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "out of host memory reading %s", l->path);
    l->names = names;
    int *lines = realloc(l->lines, cap * sizeof *lines);
    if (!lines) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "out of host memory reading %s", l->path);
    l->lines = lines;
    l->cap = cap;
  }
  l->names[l->size] = strdup(name);
  if (!l->names[l->size]) return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "out of host memory reading %s", l->path);
  l->lines[l->size++] = line;
  return HPU_SUCCESS;
}

void hpu_oplist_free(hpu_oplist_t *l) {
  if (!l) return;
  for (size_t i = 0; i < l->size; i++) free(l->names[i]);
  free(l->names);
  free(l->lines);
  free(l->path);
  free(l);
}

hpu_status_t hpu_oplist_read(const char *path, hpu_oplist_t **out) {
  if (!path || !out) return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "hpu_oplist_read: null argument");
  *out = NULL;
  FILE *f = fopen(path, "r");
  if (!f) return hpu_error(HPU_ERROR_SYSTEM, "cannot read op list '%s': %s", path, strerror(errno));
  hpu_oplist_t *l = calloc(1, sizeof *l);
  if (!l || !(l->path = strdup(path))) {
    free(l);
    fclose(f);
    return hpu_error(HPU_ERROR_OUT_OF_MEMORY, "out of host memory reading %s", path);
  }
  hpu_status_t st = HPU_SUCCESS;
  char buf[1024];
  int line = 0;
  while (st == HPU_SUCCESS && fgets(buf, sizeof buf, f)) {
    line++;
    size_t len = strlen(buf);
    if (len == sizeof buf - 1 && buf[len - 1] != '\n' && !feof(f)) {
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s:%d: line too long (over %d characters)", path, line,
                     (int)sizeof buf - 2);
      break;
    }
    char *hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char *s = buf, *e = buf + strlen(buf);
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n')) e--;
    *e = '\0';
    if (*s == '\0') continue;
    if (strncmp(s, "aten::", 6) == 0) s += 6;
    if (strlen(s) >= OPLIST_NAME_MAX || !valid_name(s)) {
      st = hpu_error(HPU_ERROR_INVALID_ARGUMENT,
                     "%s:%d: malformed line '%.80s': expected one op name a line, such as 'addmm', "
                     "'aten::conv2d' or 'add.Tensor' ('#' starts a comment)",
                     path, line, s);
      break;
    }
    st = list_append(l, s, line);
  }
  if (st == HPU_SUCCESS && ferror(f))
    st = hpu_error(HPU_ERROR_SYSTEM, "cannot read op list '%s': %s", path, strerror(errno));
  fclose(f);
  if (st != HPU_SUCCESS) {
    hpu_oplist_free(l);
    return st;
  }
  *out = l;
  return HPU_SUCCESS;
}

const char *hpu_oplist_path(const hpu_oplist_t *l) { return l ? l->path : ""; }
size_t hpu_oplist_size(const hpu_oplist_t *l) { return l ? l->size : 0; }
const char *hpu_oplist_name(const hpu_oplist_t *l, size_t i) { return l && i < l->size ? l->names[i] : NULL; }
int hpu_oplist_line(const hpu_oplist_t *l, size_t i) { return l && i < l->size ? l->lines[i] : 0; }

static void list_remove(hpu_oplist_t *l, size_t i) {
  free(l->names[i]);
  memmove(l->names + i, l->names + i + 1, (l->size - i - 1) * sizeof *l->names);
  memmove(l->lines + i, l->lines + i + 1, (l->size - i - 1) * sizeof *l->lines);
  l->size--;
}

hpu_status_t hpu_oplist_resolve(hpu_oplist_t *const *lists, const int *user_given, size_t n) {
  for (size_t a = 0; a < n; a++) {
    for (size_t b = a + 1; b < n; b++) {
      hpu_oplist_t *la = lists[a], *lb = lists[b];
      if (!la || !lb) continue;
      int ua = user_given ? user_given[a] != 0 : 0, ub = user_given ? user_given[b] != 0 : 0;
      for (size_t i = 0; i < la->size;) {
        size_t j = 0;
        while (j < lb->size && strcmp(la->names[i], lb->names[j]) != 0) j++;
        if (j == lb->size) {
          i++;
          continue;
        }
        if (ua == ub)
          return hpu_error(HPU_ERROR_INVALID_ARGUMENT, "%s:%d: '%s' is also in %s:%d; an op can be in one list only",
                           lb->path, lb->lines[j], lb->names[j], la->path, la->lines[i]);
        if (ua) {
          list_remove(lb, j);  /* the user's list wins over a default one */
          i++;
        } else {
          list_remove(la, i);
        }
      }
    }
  }
  return HPU_SUCCESS;
}
