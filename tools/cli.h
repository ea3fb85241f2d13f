/* Shared pieces of the bb command-line tool. */
#ifndef BB_TOOLS_CLI_H
#define BB_TOOLS_CLI_H

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

int cmd_inspect(int argc, char **argv);
int cmd_reencode(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_wire(int argc, char **argv);
int cmd_vocab(int argc, char **argv);

#endif
