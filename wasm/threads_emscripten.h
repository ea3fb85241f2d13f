/* bb-mt.wasm: what a worker instance needs of Emscripten's threaded libc before it runs C
 * code that reaches libc (threads_emscripten.c). */
#ifndef BB_WASM_THREADS_EMSCRIPTEN_H
#define BB_WASM_THREADS_EMSCRIPTEN_H

#include <stdint.h>

/* Gives the calling instance (a worker, slot 1..BB_CPU_MAX_THREADS-1) its own thread: a
 * pthread record for libc (errno, locale, locks' owner) and its thread-local block. The
 * host has set the instance's stack pointer to a stack of its own before the call.
 * Returns 0, or nonzero when the thread-local block cannot be allocated. */
int bbw_thread_enter(uint32_t slot);

/* Releases what bbw_thread_enter took; the instance runs no more C code afterwards. */
void bbw_thread_leave(uint32_t slot);

/* The stack of slot `slot`'s worker: `bytes` from the module's allocator, held by the slot
 * until bbw_stack_free. Returns the stack's top (16-byte aligned), or 0 when the slot holds
 * one already or there is no memory. */
uintptr_t bbw_stack_alloc(uint32_t slot, uint32_t bytes);

/* Returns slot `slot`'s stack to the allocator: 0, 1 when the slot's worker is between
 * bbw_thread_enter and bbw_thread_leave (it runs on that stack), 2 when the slot holds none. */
int bbw_stack_free(uint32_t slot);

/* How many worker stacks slots hold now. */
uint32_t bbw_stacks_held(void);

#endif
