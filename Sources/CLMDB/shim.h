#ifndef GROUPDEFAULTS_CLMDB_SHIM_H
#define GROUPDEFAULTS_CLMDB_SHIM_H

#include <lmdb.h>
#include <errno.h>

/* Linux's fallocate(2), which Swift's Glibc module does not export (it needs _GNU_SOURCE).
   glibc's posix_fallocate is no substitute: where the file system cannot reserve space it falls
   back to writing a byte into each block, which races with writers of a shared mapping. */
extern int fallocate(int fd, int mode, long offset, long len);

/* Reserves disk space for the first `length` bytes of `fd` without changing its size
   (FALLOC_FL_KEEP_SIZE): a later extension by LMDB's ftruncate uses the reserved blocks, so writes
   through a shared mapping cannot fault on a full disk. Returns 0 or an errno value. */
static inline int gd_reserve_space(int fd, long length) {
    return fallocate(fd, 1 /* FALLOC_FL_KEEP_SIZE */, 0, length) == 0 ? 0 : errno;
}

/* This thread's innermost read scope (`ReadScope` in Environment.swift): a thread-local word,
   read and written in place (pthread_getspecific and pthread_setspecific are calls). Only
   GroupDefaultsLMDB uses it, so the one copy this header's `static` gives each importer is its.
   A static of the function rather than of the file: Swift emits the functions it calls from a
   header, and with them their statics, but not a file's static variables. */
static inline void **gd_read_scope_slot(void) {
    static __thread void *scope;
    return &scope;
}
static inline void *gd_read_scope_get(void) { return *gd_read_scope_slot(); }
static inline void gd_read_scope_set(void *scope) { *gd_read_scope_slot() = scope; }

/* Atomic operations on a machine word (a kept LMDB read transaction), without Swift's generic
   atomics, whose metadata a cold-starting process would have to instantiate. */
static inline unsigned long gd_atomic_exchange_word(unsigned long *word, unsigned long value) {
    return __atomic_exchange_n(word, value, __ATOMIC_ACQ_REL);
}
/* Returns 1 if `*word` held `expected` and now holds `desired`. */
static inline int gd_atomic_compare_exchange_word(unsigned long *word, unsigned long expected, unsigned long desired) {
    return __atomic_compare_exchange_n(word, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* Atomic operations on words of a file mapping shared by processes (the verified-state record in
   the suite's sidecar): the library's commit count, the time of its last commit, the record. */
static inline unsigned int gd_atomic_load_u32(const unsigned int *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}
static inline void gd_atomic_add_u32(unsigned int *word, unsigned int value) {
    __atomic_fetch_add(word, value, __ATOMIC_ACQ_REL);
}
static inline unsigned long gd_atomic_load_u64(const unsigned long *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}
static inline void gd_atomic_store_u64(unsigned long *word, unsigned long value) {
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
}
/* Raises `*word` to `value` if it is lower. */
static inline void gd_atomic_max_u64(unsigned long *word, unsigned long value) {
    unsigned long current = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    while (current < value &&
           !__atomic_compare_exchange_n(word, &current, value, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
}

#endif
