/* Op lists: plain text files naming operators, one a line (the mixed
 * precision lists in hmp/). The core only reads and checks the text; which
 * names exist is for the layer that knows the operators (the shim). */
#ifndef HPU_OPLIST_H
#define HPU_OPLIST_H
#include <stddef.h>

#include "hpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hpu_oplist hpu_oplist_t;

/* Reads an op list. Format: one op name a line; '#' starts a comment (to the
 * end of the line); blank lines and surrounding blanks are ignored. A name is
 * an identifier, optionally prefixed "aten::" (dropped) and optionally
 * followed by ".overload" (e.g. "addmm", "aten::conv2d", "add.Tensor").
 * A name listed twice in one file is kept once.
 * Errors: HPU_ERROR_SYSTEM if the file cannot be read (message names the
 * path and the OS reason), HPU_ERROR_INVALID_ARGUMENT for a malformed line
 * (message "<path>:<line>: ..."). */
hpu_status_t hpu_oplist_read(const char *path, hpu_oplist_t **out);
void hpu_oplist_free(hpu_oplist_t *list);

const char *hpu_oplist_path(const hpu_oplist_t *list);
size_t hpu_oplist_size(const hpu_oplist_t *list);
/* The i-th name (without "aten::") and the line it was read from (1-based). */
const char *hpu_oplist_name(const hpu_oplist_t *list, size_t i);
int hpu_oplist_line(const hpu_oplist_t *list, size_t i);

/* Checks that no name is in two of `n` lists. A name that is in a list the
 * user gave (`user_given[i]` != 0) and in a default list is dropped from the
 * default one (the user's file wins); in two lists of the same kind it is an
 * error naming both places: "<path>:<line>: 'name' is also in <path>:<line>".
 * `user_given` may be NULL (all of one kind). */
hpu_status_t hpu_oplist_resolve(hpu_oplist_t *const *lists, const int *user_given, size_t n);

#ifdef __cplusplus
}
#endif
#endif
