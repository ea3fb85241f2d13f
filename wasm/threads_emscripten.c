/* bb-mt.wasm: the little of Emscripten's JavaScript thread runtime that its threaded libc
 * (libc-mt, dlmalloc-mt) calls, written in C, so the module needs no Emscripten glue.
 *
 * Every instance of the module on the shared memory is one thread. Its thread state lives
 * in wasm globals (thread_ptr and flags, per instance): the first instance, the host's
 * main thread, sets it in libc's constructor; a worker sets it in bbw_thread_enter, before
 * it reaches libc. The main thread never blocks in memory.atomic.wait (a browser's main
 * thread may not): libc's futex wait busy-waits there; workers may block. */
#define _GNU_SOURCE /* locale_t, as libc itself is built */
#include <stdlib.h>
#include <string.h>

#include "bb/cpu.h"
#include <libc.h>
#include <pthread_impl.h>
#include "threads_emscripten.h"

#include <threading_internal.h> /* Emscripten's own headers (their include path: wasm/CMakeLists.txt) */
#include <emscripten/eventloop.h>

/* emscripten_thread_state.S: sets this instance's thread pointer and flags. */
void __set_thread_state(pthread_t ptr, int is_main, int is_runtime, int can_block);
/* wasm-ld: copies the thread-local initialisers into a block and points __tls_base at it. */
void __wasm_init_tls(void *memory);

/* A thread-local block at `block` (size + align bytes), aligned as the linker asks. */
static void init_tls(void *block) {
  const uintptr_t align = __builtin_wasm_tls_align() < 16 ? 16 : __builtin_wasm_tls_align();
  __wasm_init_tls((void *)(((uintptr_t)block + align - 1) & ~(align - 1)));
}

/* The main thread's thread-local block: wasm-ld's memory initialiser leaves __tls_base at 0,
 * so the first instance gets its block here, before any constructor that could use one. */
static _Alignas(16) unsigned char main_tls[256];

/* libc's constructor for the main thread (library_pthread.c) hands its pthread record here. */
void __emscripten_init_main_thread_js(void *main) {
  __set_thread_state(main, 1, 1, 0);
  const size_t need = __builtin_wasm_tls_size() + (__builtin_wasm_tls_align() < 16 ? 16 : __builtin_wasm_tls_align());
  void *block = need <= sizeof main_tls ? main_tls : malloc(need);
  if (!block) __builtin_trap(); /* at start-up, with no memory for a few bytes */
  init_tls(block);
}

/* Reached only by pthread_exit on the main thread, which the module never calls. */
void emscripten_unwind_to_js_event_loop(void) { __builtin_trap(); }

/* libc-mt's memcpy hands copies of 512 bytes and more to emscripten_memcpy_big, which the
 * standalone library leaves unreachable (it expects JavaScript's); the link wraps it
 * (--wrap) with this: one memory.copy (the copy intrinsic lowers to it with bulk memory). */
void *__wrap_emscripten_memcpy_big(void *restrict dest, const void *restrict src, size_t n);
void *__wrap_emscripten_memcpy_big(void *restrict dest, const void *restrict src, size_t n) {
  return __builtin_memcpy(dest, src, n);
}

static struct pthread workers[BB_CPU_MAX_THREADS];
static void *worker_tls[BB_CPU_MAX_THREADS];
static void *worker_tsd[BB_CPU_MAX_THREADS][1];
/* Each slot's stack while it holds one, and whether its worker runs C code (entered, not
 * left). The host's main thread allocates and frees stacks; a worker sets and clears its
 * own flag. */
static void *worker_stack[BB_CPU_MAX_THREADS];
static _Atomic int worker_entered[BB_CPU_MAX_THREADS];

int bbw_thread_enter(uint32_t slot) {
  struct pthread *t = &workers[slot];
  memset(t, 0, sizeof *t);
  t->self = t;
  t->tid = getpid() + 1 + (int)slot; /* the main thread's is getpid() */
  t->detach_state = DT_DETACHED;
  t->robust_list.head = &t->robust_list.head;
  t->locale = &libc.global_locale;
  t->tsd = worker_tsd[slot];
  __set_thread_state(t, 0, 0, 1);
  worker_entered[slot] = 1;
  void *tls = malloc(__builtin_wasm_tls_size() + (__builtin_wasm_tls_align() < 16 ? 16 : __builtin_wasm_tls_align()));
  if (!tls) {
    worker_entered[slot] = 0;
    return 1;
  }
  init_tls(tls);
  worker_tls[slot] = tls;
  return 0;
}

void bbw_thread_leave(uint32_t slot) {
  free(worker_tls[slot]);
  worker_tls[slot] = NULL;
  worker_entered[slot] = 0;
}

uintptr_t bbw_stack_alloc(uint32_t slot, uint32_t bytes) {
  if (worker_stack[slot]) return 0;
  void *stack = malloc(bytes);
  if (!stack) return 0;
  worker_stack[slot] = stack;
  return ((uintptr_t)stack + bytes) & ~(uintptr_t)15;
}

int bbw_stack_free(uint32_t slot) {
  if (worker_entered[slot]) return 1;
  if (!worker_stack[slot]) return 2;
  free(worker_stack[slot]);
  worker_stack[slot] = NULL;
  return 0;
}

uint32_t bbw_stacks_held(void) {
  uint32_t n = 0;
  for (uint32_t slot = 0; slot < BB_CPU_MAX_THREADS; slot++) n += worker_stack[slot] != NULL;
  return n;
}
