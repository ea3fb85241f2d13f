/* A tensor over caller-owned memory (bb_tensor_wrap): it reads and writes that memory in
 * place, views share it, and the caller's release runs once, when the last tensor that
 * holds the memory goes. */
#include <string.h>

#include "bb/tensor.h"
#include "harness.h"

static int released;
static void release(void *user) {
  released++;
  CHECK(user == &released);
}

static void test_wrap_shares_and_releases_once(void) {
  _Alignas(64) float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t dims[2] = {2, 3}, flat[1] = {6};
  released = 0;
  bb_tensor *t = bb_tensor_wrap(NULL, BB_DTYPE_FLOAT, 2, dims, data, release, &released);
  CHECK(t != NULL);
  if (!t) return;
  CHECK(bb_tensor_data(t) == (void *)data && t->numel == 6);
  ((float *)bb_tensor_data(t))[5] = 60;
  CHECK(data[5] == 60); /* no copy: the caller's memory */
  bb_tensor *v = bb_tensor_view(t, 1, flat);
  CHECK(v && bb_tensor_data(v) == (void *)data);
  bb_tensor_release(t);
  CHECK_EQ_INT(released, 0); /* the view still holds it */
  bb_tensor_release(v);
  CHECK_EQ_INT(released, 1);
  /* without a release callback nothing is called */
  bb_tensor *plain = bb_tensor_wrap(NULL, BB_DTYPE_FLOAT, 2, dims, data, NULL, NULL);
  CHECK(plain != NULL);
  bb_tensor_release(plain);
  CHECK_EQ_INT(released, 1);
  /* a shape it cannot describe is refused */
  int64_t negative[1] = {-1};
  CHECK(bb_tensor_wrap(NULL, BB_DTYPE_FLOAT, 1, negative, data, release, &released) == NULL);
}

int main(void) {
  RUN(test_wrap_shares_and_releases_once);
  return bb_test_finish();
}
