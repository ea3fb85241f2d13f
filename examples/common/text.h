/* Real texts as next-character data for the examples: each text (a licence Debian ships in
 * /usr/share/common-licenses) becomes windows of `context` characters, each labelled with
 * the character that follows. Characters fold into BB_TEXT_CLASSES classes: the letters
 * a-z (either case), a space for any run of white space, and one class for everything
 * else; a window's features are its characters' classes as floats. */
#ifndef BB_EXAMPLES_TEXT_H
#define BB_EXAMPLES_TEXT_H

#include "bb/common.h"
#include "bb/dataset.h"
#include "digits.h"

#define BB_TEXT_CLASSES 28
#define BB_TEXT_SPACE 26 /* the class of white space */

/* The class of one byte (white space maps to BB_TEXT_SPACE). */
int bb_text_class(unsigned char c);

/* The texts as a federated split (the examples' shared container, digits.h): shard i holds
 * every window of the first 90% of text i (a client per text, each its own kind of
 * English); test holds windows from the last 10% of every text, at most max_test of them,
 * spread evenly; train is every shard's windows together. A missing file is BB_ERR_IO
 * naming it; a text too short for one window of each part is BB_ERR_INVALID_ARGUMENT. */
int bb_text_split_load(const char *const *paths, size_t n_paths, size_t context, size_t max_test,
                       bb_digits_split *out, bb_error *err);

#endif
