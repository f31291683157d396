#ifndef GROUPDEFAULTS_CLMDB_SHIM_H
#define GROUPDEFAULTS_CLMDB_SHIM_H

#include <lmdb.h>
#include <stdint.h>

/* Atomic operations on 32-bit words in memory shared between processes (the suite's sidecar
   file, mapped by every process that opens the suite). Swift's own atomics cannot be placed at an
   address in such a mapping. */
static inline uint32_t gd_atomic_load(const uint32_t *word) {
    return __atomic_load_n(word, __ATOMIC_SEQ_CST);
}
static inline void gd_atomic_store(uint32_t *word, uint32_t value) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
}
static inline uint32_t gd_atomic_exchange(uint32_t *word, uint32_t value) {
    return __atomic_exchange_n(word, value, __ATOMIC_SEQ_CST);
}
static inline int gd_atomic_compare_exchange(uint32_t *word, uint32_t expected, uint32_t desired) {
    return __atomic_compare_exchange_n(word, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

#endif
