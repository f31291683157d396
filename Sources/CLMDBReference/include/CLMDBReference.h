#ifndef GROUPDEFAULTS_CLMDB_REFERENCE_H
#define GROUPDEFAULTS_CLMDB_REFERENCE_H

/*
 * Raw LMDB reference for groupdefaults-bench.
 *
 * Plain C over lmdb.h that runs the benchmark's workloads with no Swift in the
 * measured loop: each gdref_bench_* function times its own batch with
 * clock_gettime(CLOCK_MONOTONIC) and returns nanoseconds per operation.
 * The caller passes the environment flags the store uses, so both sides run
 * LMDB the same way. Keys are taken in turn from a dataset, starting at `first`
 * and wrapping around.
 *
 * Functions that can fail return a negative number (or NULL) and describe the
 * failure in the caller's `err` buffer or in gdref_env_error().
 */

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Keys and values, copied in once so that the timed loops only index arrays. */
typedef struct gdref_dataset gdref_dataset;

gdref_dataset *gdref_dataset_create(size_t capacity);
/* Appends one entry (copies both buffers). Returns 0, or -1 when full or out of memory. */
int gdref_dataset_add(gdref_dataset *ds, const void *key, size_t key_len,
                      const void *value, size_t value_len);
size_t gdref_dataset_count(const gdref_dataset *ds);
void gdref_dataset_free(gdref_dataset *ds);

/* An LMDB environment in one file (MDB_NOSUBDIR is always added) with one named database, "values". */
typedef struct gdref_env gdref_env;

/* Creates the file if needed (mode 0600). Returns NULL and fills `err` on failure. */
gdref_env *gdref_open(const char *path, unsigned int env_flags, size_t map_size,
                      char *err, size_t errlen);
void gdref_close(gdref_env *env);
/* The last failure on this environment, or "" if none. */
const char *gdref_env_error(const gdref_env *env);

/* Puts every entry of `ds` in one write transaction (setup). Returns 0 or -1. */
int gdref_put_all(gdref_env *env, const gdref_dataset *ds);

/* Copies the value of `key` into `buf`. Returns its length, or -1 (not found, too large, error). */
long gdref_get(gdref_env *env, const void *key, size_t key_len, void *buf, size_t buflen);

/* ns/op; each op = read-only txn + mdb_get + copy of the value out + abort. */
double gdref_bench_get(gdref_env *env, const gdref_dataset *ds, size_t first, size_t ops);
/* ns/op; each op = write txn + mdb_put of the dataset's value + commit. */
double gdref_bench_put(gdref_env *env, const gdref_dataset *ds, size_t first, size_t ops);
/* ns/op; each op = the LMDB calls of a GroupDefaults `set`, with none of its Swift: write txn +
 * cursor to the last record of a "log" database + mdb_get in "meta" (absent) + mdb_stat of
 * "tombstones" + mdb_put of a value record of the store's size (22-byte header, type tag, length,
 * value) in "values" + an MDB_APPEND put in "log" of a record of the store's size (17-byte header,
 * the key's length and the key, a copy of the value record), trimmed to its last 10,000 records
 * every 64, as the store trims + commit. Values must be under 128 bytes. Opens those databases at
 * its first call, and stores in "meta" three records of the sizes of a suite's (its layout, origin
 * and origin file), so that the lookup searches a page as the store's does. */
double gdref_bench_set_calls(gdref_env *env, const gdref_dataset *ds, size_t first, size_t ops);
/* ns/op; each op = write txn + mdb_get of an 8-byte integer (0 if absent) + mdb_put of it + 1 + commit. */
double gdref_bench_increment(gdref_env *env, const gdref_dataset *ds, size_t first, size_t ops);
/* ns per transaction; each = write txn + `per_txn` puts of consecutive entries + commit. */
double gdref_bench_write_many(gdref_env *env, const gdref_dataset *ds, size_t first,
                              size_t per_txn, size_t txns);

/*
 * Cold start, meant to run in a fresh process: ns from just before
 * mdb_env_create to just after the first mdb_get of `key` returns (the value
 * copied out). The environment stays open until the process exits, as an
 * extension's would. Returns -1 and fills `err` on failure.
 */
long long gdref_cold_open_first_read(const char *path, unsigned int env_flags, size_t map_size,
                                     const void *key, size_t key_len, char *err, size_t errlen);

/*
 * Durable commits, the ceiling of a store that flushes every commit: for about `seconds`, one
 * write transaction per op (one mdb_put of an 8-byte key and a 60-byte value, then commit) in a
 * new environment at `path` opened with LMDB's default durability (no MDB_NOSYNC, MDB_NOMETASYNC
 * or MDB_WRITEMAP: each commit writes its pages and fdatasyncs, then writes the meta page and
 * fdatasyncs again). Returns commits per second, or -1 and fills `err`. The file is left in place.
 */
double gdref_durable_commits_per_second(const char *path, double seconds, char *err, size_t errlen);

/* Writes the names of the MDB_* flags set in `env_flags` ("MDB_NOSUBDIR|MDB_NOSYNC"), or "0". */
void gdref_describe_flags(unsigned int env_flags, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
