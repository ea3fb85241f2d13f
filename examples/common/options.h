/* The examples' command lines: options of the form `--name VALUE`, flags `--name` and `--quiet`,
 * parsed from a table, and whole files read into memory (an ONNX model to hand a peer). */
#ifndef BB_EXAMPLES_OPTIONS_H
#define BB_EXAMPLES_OPTIONS_H

#include <stddef.h>

#include "bb/common.h"

typedef enum bb_option_kind {
  BB_OPTION_INT,    /* int, as atoi reads it */
  BB_OPTION_DOUBLE, /* double, as atof reads it */
  BB_OPTION_U64,    /* uint64_t, as strtoull reads it in base 10 */
  BB_OPTION_STRING, /* const char *, the argument itself */
  BB_OPTION_FLAG    /* int set to 1; takes no argument */
} bb_option_kind;

typedef struct bb_option {
  const char *name; /* with its dashes: "--rounds" */
  bb_option_kind kind;
  void *out; /* where the value goes, of the type its kind names */
} bb_option;

/* Reads argv[1..argc): `--quiet` sets *quiet to 1, each option of the table takes the
 * argument after it. Returns 0, or -1 on an option not in the table or one missing its
 * value (the values read before it are set). */
int bb_options_parse(int argc, char **argv, const bb_option *table, size_t n, int *quiet);

/* The whole file at path into out->data (free() it), or BB_ERR_IO with a message naming
 * the file when it cannot be opened or read. */
int bb_read_whole_file(const char *path, bb_bytes *out, bb_error *err);

#endif
