#define _POSIX_C_SOURCE 200809L

#include "CLMDBReference.h"

#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Largest value a get copies out; the benchmark's values are about 60 bytes. */
#define GDREF_COPY_MAX 4096
#define GDREF_MAX_DBS 8
#define GDREF_DB_NAME "values"

struct gdref_dataset {
    MDB_val *keys;
    MDB_val *values;
    size_t count;
    size_t capacity;
};

struct gdref_env {
    MDB_env *env;
    MDB_dbi dbi;
    /* The other databases of a suite, for gdref_bench_set_calls (opened at its first call). */
    int suite_dbs_open;
    MDB_dbi log_dbi, meta_dbi, tombstones_dbi;
    uint64_t log_sequence;
    char error[256];
};

/* Keeps the compiler from dropping a copy nobody reads. */
static void escape(const void *p) {
    __asm__ volatile("" : : "r"(p) : "memory");
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void set_error(char *buf, size_t len, const char *what, int rc) {
    if (buf != NULL && len > 0) {
        snprintf(buf, len, "%s: %s", what, mdb_strerror(rc));
    }
}

/* Records a failed LMDB call on `env`. Returns nonzero when rc is an error. */
static int failed(gdref_env *env, int rc, const char *what) {
    if (rc == MDB_SUCCESS) {
        return 0;
    }
    set_error(env->error, sizeof env->error, what, rc);
    return 1;
}

/* ---- dataset ---- */

static void *copy_bytes(const void *src, size_t len) {
    void *dst = malloc(len > 0 ? len : 1);
    if (dst != NULL && len > 0) {
        memcpy(dst, src, len);
    }
    return dst;
}

gdref_dataset *gdref_dataset_create(size_t capacity) {
    gdref_dataset *ds = calloc(1, sizeof *ds);
    if (ds == NULL) {
        return NULL;
    }
    ds->keys = calloc(capacity > 0 ? capacity : 1, sizeof *ds->keys);
    ds->values = calloc(capacity > 0 ? capacity : 1, sizeof *ds->values);
    if (ds->keys == NULL || ds->values == NULL) {
        gdref_dataset_free(ds);
        return NULL;
    }
    ds->capacity = capacity;
    return ds;
}

int gdref_dataset_add(gdref_dataset *ds, const void *key, size_t key_len,
                      const void *value, size_t value_len) {
    if (ds->count == ds->capacity) {
        return -1;
    }
    void *k = copy_bytes(key, key_len);
    void *v = copy_bytes(value, value_len);
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return -1;
    }
    ds->keys[ds->count] = (MDB_val){ .mv_size = key_len, .mv_data = k };
    ds->values[ds->count] = (MDB_val){ .mv_size = value_len, .mv_data = v };
    ds->count += 1;
    return 0;
}

size_t gdref_dataset_count(const gdref_dataset *ds) {
    return ds->count;
}

void gdref_dataset_free(gdref_dataset *ds) {
    if (ds == NULL) {
        return;
    }
    for (size_t i = 0; i < ds->count; i++) {
        free(ds->keys[i].mv_data);
        free(ds->values[i].mv_data);
    }
    free(ds->keys);
    free(ds->values);
    free(ds);
}

/* ---- environment ---- */

/* Opens `path` into a created MDB_env and its "values" database; on failure closes the env. */
static int open_env(MDB_env **out_env, MDB_dbi *out_dbi, const char *path, unsigned int env_flags,
                    size_t map_size, unsigned int dbi_flags, char *err, size_t errlen) {
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    int rc = mdb_env_create(&env);
    if (rc != MDB_SUCCESS) {
        set_error(err, errlen, "mdb_env_create", rc);
        return -1;
    }
    const char *what = "mdb_env_set_mapsize";
    if ((rc = mdb_env_set_mapsize(env, map_size)) != MDB_SUCCESS) goto fail;
    what = "mdb_env_set_maxdbs";
    if ((rc = mdb_env_set_maxdbs(env, GDREF_MAX_DBS)) != MDB_SUCCESS) goto fail;
    what = "mdb_env_open";
    if ((rc = mdb_env_open(env, path, env_flags | MDB_NOSUBDIR, 0600)) != MDB_SUCCESS) goto fail;
    what = "mdb_txn_begin";
    unsigned int txn_flags = (dbi_flags & MDB_CREATE) ? 0 : MDB_RDONLY;
    if ((rc = mdb_txn_begin(env, NULL, txn_flags, &txn)) != MDB_SUCCESS) goto fail;
    what = "mdb_dbi_open";
    if ((rc = mdb_dbi_open(txn, GDREF_DB_NAME, dbi_flags, out_dbi)) != MDB_SUCCESS) goto fail;
    what = "mdb_txn_commit";
    rc = mdb_txn_commit(txn);
    txn = NULL;
    if (rc != MDB_SUCCESS) goto fail;
    *out_env = env;
    return 0;

fail:
    set_error(err, errlen, what, rc);
    if (txn != NULL) {
        mdb_txn_abort(txn);
    }
    mdb_env_close(env);
    return -1;
}

gdref_env *gdref_open(const char *path, unsigned int env_flags, size_t map_size,
                      char *err, size_t errlen) {
    gdref_env *e = calloc(1, sizeof *e);
    if (e == NULL) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "out of memory");
        }
        return NULL;
    }
    if (open_env(&e->env, &e->dbi, path, env_flags, map_size, MDB_CREATE, err, errlen) != 0) {
        free(e);
        return NULL;
    }
    return e;
}

void gdref_close(gdref_env *env) {
    if (env == NULL) {
        return;
    }
    mdb_env_close(env->env);
    free(env);
}

const char *gdref_env_error(const gdref_env *env) {
    return env->error;
}

/* ---- workloads ---- */

int gdref_put_all(gdref_env *env, const gdref_dataset *ds) {
    MDB_txn *txn;
    if (failed(env, mdb_txn_begin(env->env, NULL, 0, &txn), "mdb_txn_begin")) {
        return -1;
    }
    for (size_t i = 0; i < ds->count; i++) {
        if (failed(env, mdb_put(txn, env->dbi, &ds->keys[i], &ds->values[i], 0), "mdb_put")) {
            mdb_txn_abort(txn);
            return -1;
        }
    }
    return failed(env, mdb_txn_commit(txn), "mdb_txn_commit") ? -1 : 0;
}

long gdref_get(gdref_env *env, const void *key, size_t key_len, void *buf, size_t buflen) {
    MDB_txn *txn;
    MDB_val k = { .mv_size = key_len, .mv_data = (void *)key };
    MDB_val value;
    if (failed(env, mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn), "mdb_txn_begin")) {
        return -1;
    }
    if (failed(env, mdb_get(txn, env->dbi, &k, &value), "mdb_get")) {
        mdb_txn_abort(txn);
        return -1;
    }
    long length = (long)value.mv_size;
    if (value.mv_size > buflen) {
        snprintf(env->error, sizeof env->error, "value of %zu bytes is larger than %zu", value.mv_size, buflen);
        length = -1;
    } else {
        memcpy(buf, value.mv_data, value.mv_size);
    }
    mdb_txn_abort(txn);
    return length;
}

double gdref_bench_get(gdref_env *env, const gdref_dataset *ds, size_t first, size_t ops) {
    unsigned char buffer[GDREF_COPY_MAX];
    size_t i = first % ds->count;
    long long start = now_ns();
    for (size_t n = 0; n < ops; n++) {
        MDB_txn *txn;
        MDB_val value;
        if (failed(env, mdb_txn_begin(env->env, NULL, MDB_RDONLY, &txn), "mdb_txn_begin")) {
            return -1;
        }
        if (failed(env, mdb_get(txn, env->dbi, &ds->keys[i], &value), "mdb_get")) {
            mdb_txn_abort(txn);
            return -1;
        }
        if (value.mv_size > sizeof buffer) {
            snprintf(env->error, sizeof env->error, "value of %zu bytes is larger than %d",
                     value.mv_size, GDREF_COPY_MAX);
            mdb_txn_abort(txn);
            return -1;
        }
        memcpy(buffer, value.mv_data, value.mv_size);
        escape(buffer);
        mdb_txn_abort(txn);
        if (++i == ds->count) i = 0;
    }
    return (double)(now_ns() - start) / (double)ops;
}

double gdref_bench_put(gdref_env *env, const gdref_dataset *ds, size_t first, size_t ops) {
    size_t i = first % ds->count;
    long long start = now_ns();
    for (size_t n = 0; n < ops; n++) {
        MDB_txn *txn;
        if (failed(env, mdb_txn_begin(env->env, NULL, 0, &txn), "mdb_txn_begin")) {
            return -1;
        }
        if (failed(env, mdb_put(txn, env->dbi, &ds->keys[i], &ds->values[i], 0), "mdb_put")) {
            mdb_txn_abort(txn);
            return -1;
        }
        if (failed(env, mdb_txn_commit(txn), "mdb_txn_commit")) {
            return -1;
        }
        if (++i == ds->count) i = 0;
    }
    return (double)(now_ns() - start) / (double)ops;
}

static int open_suite_dbs(gdref_env *env) {
    if (env->suite_dbs_open) return 0;
    MDB_txn *txn;
    MDB_dbi unused;
    if (failed(env, mdb_txn_begin(env->env, NULL, 0, &txn), "mdb_txn_begin")) return -1;
    if (failed(env, mdb_dbi_open(txn, "log", MDB_CREATE, &env->log_dbi), "mdb_dbi_open log")
        || failed(env, mdb_dbi_open(txn, "meta", MDB_CREATE, &env->meta_dbi), "mdb_dbi_open meta")
        || failed(env, mdb_dbi_open(txn, "tombstones", MDB_CREATE, &env->tombstones_dbi), "mdb_dbi_open tombstones")
        /* A suite's other two (the set touches neither): the main database holds the same records. */
        || failed(env, mdb_dbi_open(txn, "journal", MDB_CREATE, &unused), "mdb_dbi_open journal")
        || failed(env, mdb_dbi_open(txn, "pending", MDB_CREATE, &unused), "mdb_dbi_open pending")) {
        mdb_txn_abort(txn);
        return -1;
    }
    /* The records a suite's "meta" holds (the layout version, the origin and its file's identity),
     * of their sizes: the set's lookup of "sync.server" then searches a page, as in the store. */
    static const char *meta_keys[] = { "format", "origin", "origin.file" };
    static const size_t meta_sizes[] = { 4, 8, 16 };
    unsigned char meta_value[16] = { 0 };
    for (int m = 0; m < 3; m++) {
        MDB_val key = { .mv_size = strlen(meta_keys[m]), .mv_data = (void *)meta_keys[m] };
        MDB_val value = { .mv_size = meta_sizes[m], .mv_data = meta_value };
        if (failed(env, mdb_put(txn, env->meta_dbi, &key, &value, 0), "mdb_put meta")) {
            mdb_txn_abort(txn);
            return -1;
        }
    }
    if (failed(env, mdb_txn_commit(txn), "mdb_txn_commit")) return -1;
    env->suite_dbs_open = 1;
    return 0;
}

double gdref_bench_set_calls(gdref_env *env, const gdref_dataset *ds, size_t first, size_t ops) {
    if (open_suite_dbs(env) != 0) return -1;
    /* The store's sizes: a value record is a 22-byte header, the codec's type tag and length (one
     * byte each for a string under 128 bytes) and the value; a log record is a 17-byte header, the
     * key's length (2 bytes), the key and a copy of the value record (the log keeps the value of a
     * change whose value takes at most 4,096 bytes encoded). */
    enum { header = 22, tag_and_length = 2, log_header = 17, key_length = 2, kept_limit = 4096, retention = 10000 };
    unsigned char record[header + tag_and_length + GDREF_COPY_MAX];
    unsigned char log_record[log_header + key_length + 512 + sizeof record];
    size_t i = first % ds->count;
    long long start = now_ns();
    for (size_t n = 0; n < ops; n++) {
        const MDB_val *key = &ds->keys[i], *value = &ds->values[i];
        if (value->mv_size > GDREF_COPY_MAX || value->mv_size >= 128 || key->mv_size > 512) {
            snprintf(env->error, sizeof env->error, "an entry too large for the set's buffers");
            return -1;
        }
        MDB_txn *txn;
        MDB_cursor *cursor;
        MDB_val last_key, last_value, found, meta_key = { .mv_size = 11, .mv_data = "sync.server" };
        MDB_stat stat;
        if (failed(env, mdb_txn_begin(env->env, NULL, 0, &txn), "mdb_txn_begin")) return -1;
        if (failed(env, mdb_cursor_open(txn, env->log_dbi, &cursor), "mdb_cursor_open")) goto fail;
        int rc = mdb_cursor_get(cursor, &last_key, &last_value, MDB_LAST);
        mdb_cursor_close(cursor);
        if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) { failed(env, rc, "mdb_cursor_get"); goto fail; }
        rc = mdb_get(txn, env->meta_dbi, &meta_key, &found);
        if (rc != MDB_NOTFOUND) { failed(env, rc == MDB_SUCCESS ? MDB_KEYEXIST : rc, "mdb_get meta"); goto fail; }
        if (failed(env, mdb_stat(txn, env->tombstones_dbi, &stat), "mdb_stat")) goto fail;
        memset(record, (int)n, header);
        record[header] = 1;
        record[header + 1] = (unsigned char)value->mv_size;
        memcpy(record + header + tag_and_length, value->mv_data, value->mv_size);
        size_t record_size = header + tag_and_length + value->mv_size;
        MDB_val record_val = { .mv_size = record_size, .mv_data = record };
        if (failed(env, mdb_put(txn, env->dbi, (MDB_val *)key, &record_val, 0), "mdb_put values")) goto fail;
        env->log_sequence += 1;
        unsigned char sequence[8];
        for (int b = 0; b < 8; b++) sequence[b] = (unsigned char)(env->log_sequence >> (56 - 8 * b));
        memset(log_record, 1, log_header);
        size_t log_size = log_header;
        if (record_size - header <= kept_limit) {
            log_record[log_size++] = (unsigned char)key->mv_size;
            log_record[log_size++] = (unsigned char)(key->mv_size >> 8);
            memcpy(log_record + log_size, key->mv_data, key->mv_size);
            log_size += key->mv_size;
            memcpy(log_record + log_size, record, record_size);
            log_size += record_size;
        } else {
            memcpy(log_record + log_size, key->mv_data, key->mv_size);
            log_size += key->mv_size;
        }
        MDB_val log_key = { .mv_size = 8, .mv_data = sequence };
        MDB_val log_val = { .mv_size = log_size, .mv_data = log_record };
        if (failed(env, mdb_put(txn, env->log_dbi, &log_key, &log_val, MDB_APPEND), "mdb_put log")) goto fail;
        /* The store's trim: every 64th record past retention + 64 drops the records before the last
         * `retention`. */
        if (env->log_sequence > retention + 64 && env->log_sequence % 64 == 0) {
            if (failed(env, mdb_cursor_open(txn, env->log_dbi, &cursor), "mdb_cursor_open")) goto fail;
            uint64_t keep_from = env->log_sequence - retention + 1;
            while ((rc = mdb_cursor_get(cursor, &last_key, &last_value, MDB_FIRST)) == MDB_SUCCESS) {
                uint64_t first_sequence = 0;
                for (int b = 0; b < 8; b++) first_sequence = first_sequence << 8 | ((unsigned char *)last_key.mv_data)[b];
                if (first_sequence >= keep_from) break;
                if ((rc = mdb_cursor_del(cursor, 0)) != MDB_SUCCESS) break;
            }
            mdb_cursor_close(cursor);
            if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND) { failed(env, rc, "trimming the log"); goto fail; }
        }
        if (failed(env, mdb_txn_commit(txn), "mdb_txn_commit")) return -1;
        if (++i == ds->count) i = 0;
        continue;
    fail:
        mdb_txn_abort(txn);
        return -1;
    }
    return (double)(now_ns() - start) / (double)ops;
}

double gdref_bench_increment(gdref_env *env, const gdref_dataset *ds, size_t first, size_t ops) {
    size_t i = first % ds->count;
    long long start = now_ns();
    for (size_t n = 0; n < ops; n++) {
        MDB_txn *txn;
        MDB_val value;
        int64_t counter = 0;
        if (failed(env, mdb_txn_begin(env->env, NULL, 0, &txn), "mdb_txn_begin")) {
            return -1;
        }
        int rc = mdb_get(txn, env->dbi, &ds->keys[i], &value);
        if (rc == MDB_SUCCESS && value.mv_size == sizeof counter) {
            memcpy(&counter, value.mv_data, sizeof counter);
        } else if (rc == MDB_SUCCESS) {
            snprintf(env->error, sizeof env->error, "value of %zu bytes is not an 8-byte integer",
                     value.mv_size);
            mdb_txn_abort(txn);
            return -1;
        } else if (rc != MDB_NOTFOUND) {
            failed(env, rc, "mdb_get");
            mdb_txn_abort(txn);
            return -1;
        }
        counter += 1;
        value = (MDB_val){ .mv_size = sizeof counter, .mv_data = &counter };
        if (failed(env, mdb_put(txn, env->dbi, &ds->keys[i], &value, 0), "mdb_put")) {
            mdb_txn_abort(txn);
            return -1;
        }
        if (failed(env, mdb_txn_commit(txn), "mdb_txn_commit")) {
            return -1;
        }
        if (++i == ds->count) i = 0;
    }
    return (double)(now_ns() - start) / (double)ops;
}

double gdref_bench_write_many(gdref_env *env, const gdref_dataset *ds, size_t first,
                              size_t per_txn, size_t txns) {
    size_t i = first % ds->count;
    long long start = now_ns();
    for (size_t t = 0; t < txns; t++) {
        MDB_txn *txn;
        if (failed(env, mdb_txn_begin(env->env, NULL, 0, &txn), "mdb_txn_begin")) {
            return -1;
        }
        for (size_t n = 0; n < per_txn; n++) {
            if (failed(env, mdb_put(txn, env->dbi, &ds->keys[i], &ds->values[i], 0), "mdb_put")) {
                mdb_txn_abort(txn);
                return -1;
            }
            if (++i == ds->count) i = 0;
        }
        if (failed(env, mdb_txn_commit(txn), "mdb_txn_commit")) {
            return -1;
        }
    }
    return (double)(now_ns() - start) / (double)txns;
}

long long gdref_cold_open_first_read(const char *path, unsigned int env_flags, size_t map_size,
                                     const void *key, size_t key_len, char *err, size_t errlen) {
    unsigned char buffer[GDREF_COPY_MAX];
    MDB_env *env;
    MDB_dbi dbi;
    MDB_txn *txn;
    MDB_val k = { .mv_size = key_len, .mv_data = (void *)key };
    MDB_val value;

    long long start = now_ns();
    if (open_env(&env, &dbi, path, env_flags, map_size, 0, err, errlen) != 0) {
        return -1;
    }
    int rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (rc != MDB_SUCCESS) {
        set_error(err, errlen, "mdb_txn_begin", rc);
        return -1;
    }
    rc = mdb_get(txn, dbi, &k, &value);
    if (rc != MDB_SUCCESS) {
        set_error(err, errlen, "mdb_get", rc);
        mdb_txn_abort(txn);
        return -1;
    }
    if (value.mv_size > sizeof buffer) {
        snprintf(err, errlen, "value of %zu bytes is larger than %d", value.mv_size, GDREF_COPY_MAX);
        mdb_txn_abort(txn);
        return -1;
    }
    memcpy(buffer, value.mv_data, value.mv_size);
    escape(buffer);
    mdb_txn_abort(txn);
    return now_ns() - start;
}

double gdref_durable_commits_per_second(const char *path, double seconds, char *err, size_t errlen) {
    MDB_env *env;
    MDB_dbi dbi;
    if (open_env(&env, &dbi, path, 0, (size_t)64 << 20, MDB_CREATE, err, errlen) != 0) {
        return -1;
    }
    char value[60];
    memset(value, 'v', sizeof value);
    long long start = now_ns();
    long long end = start + (long long)(seconds * 1e9);
    long long commits = 0;
    long long now = start;
    while (now < end) {
        uint64_t key = (uint64_t)commits % 1000;
        MDB_val k = { .mv_size = sizeof key, .mv_data = &key };
        MDB_val v = { .mv_size = sizeof value, .mv_data = value };
        MDB_txn *txn;
        int rc = mdb_txn_begin(env, NULL, 0, &txn);
        if (rc != MDB_SUCCESS) {
            set_error(err, errlen, "mdb_txn_begin", rc);
            mdb_env_close(env);
            return -1;
        }
        if ((rc = mdb_put(txn, dbi, &k, &v, 0)) != MDB_SUCCESS) {
            set_error(err, errlen, "mdb_put", rc);
            mdb_txn_abort(txn);
            mdb_env_close(env);
            return -1;
        }
        if ((rc = mdb_txn_commit(txn)) != MDB_SUCCESS) {
            set_error(err, errlen, "mdb_txn_commit", rc);
            mdb_env_close(env);
            return -1;
        }
        commits += 1;
        now = now_ns();
    }
    mdb_env_close(env);
    return (double)commits * 1e9 / (double)(now - start);
}

void gdref_describe_flags(unsigned int env_flags, char *buf, size_t len) {
    static const struct { unsigned int flag; const char *name; } names[] = {
        { MDB_FIXEDMAP, "MDB_FIXEDMAP" },   { MDB_NOSUBDIR, "MDB_NOSUBDIR" },
        { MDB_NOSYNC, "MDB_NOSYNC" },       { MDB_RDONLY, "MDB_RDONLY" },
        { MDB_NOMETASYNC, "MDB_NOMETASYNC" }, { MDB_WRITEMAP, "MDB_WRITEMAP" },
        { MDB_MAPASYNC, "MDB_MAPASYNC" },   { MDB_NOTLS, "MDB_NOTLS" },
        { MDB_NOLOCK, "MDB_NOLOCK" },       { MDB_NORDAHEAD, "MDB_NORDAHEAD" },
        { MDB_NOMEMINIT, "MDB_NOMEMINIT" },
    };
    if (len == 0) {
        return;
    }
    buf[0] = '\0';
    size_t used = 0;
    unsigned int rest = env_flags;
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        if ((env_flags & names[n].flag) == 0) continue;
        rest &= ~names[n].flag;
        int w = snprintf(buf + used, len - used, "%s%s", used > 0 ? "|" : "", names[n].name);
        if (w < 0 || (size_t)w >= len - used) return;
        used += (size_t)w;
    }
    if (rest != 0) {
        snprintf(buf + used, len - used, "%s0x%x", used > 0 ? "|" : "", rest);
    } else if (used == 0) {
        snprintf(buf, len, "0");
    }
}
