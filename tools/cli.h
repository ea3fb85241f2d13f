/* Shared pieces of the bb command-line tool. */
#ifndef BB_TOOLS_CLI_H
#define BB_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bb/ir.h"

/* Reads a whole file; prints "bb: PATH: reason" and returns nonzero on failure.
 * Free *data with free(). */
int cli_read_file(const char *path, uint8_t **data, size_t *len);
/* Writes bytes to a file (atomically: a temporary beside it, then rename). */
int cli_write_file(const char *path, const void *data, size_t len);
/* Reads and decodes a model; prints what was wrong on failure. */
int cli_load_model(const char *path, bb_model **out);

/* A whole argument as a finite number, or as a decimal count; false for anything else. */
bool cli_number(const char *s, double *out);
bool cli_count(const char *s, uint64_t *out);

int cmd_inspect(int argc, char **argv);
int cmd_reencode(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_wire(int argc, char **argv);
int cmd_vocab(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_dp_epsilon(int argc, char **argv);

#endif
