// Build and run: cc -O2 -o /tmp/one-flush Tools/bench-files/one-flush.c -llmdb && /tmp/one-flush /var/tmp/one-flush
// (a directory on the disk to measure; remove it afterwards).
// One flush or two per durable commit, on this disk: LMDB's default (data pages, then the meta
// page), LMDB with MDB_NOMETASYNC (the data pages only; the meta page reaches the disk with the
// next commit's flush), and a write-ahead log's append (a 100-byte record, fdatasync, into a
// preallocated file, as etcd's WAL does). Commits per second, one after another, 3 s each.
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static double lmdb(const char *dir, unsigned flags) {
  MDB_env *env; MDB_dbi dbi; MDB_txn *txn; char value[60]; memset(value, 'v', 60);
  mkdir(dir, 0700); mdb_env_create(&env); mdb_env_set_mapsize(env, 64 << 20);
  if (mdb_env_open(env, dir, flags, 0600)) { perror("open"); exit(1); }
  mdb_txn_begin(env, NULL, 0, &txn); mdb_dbi_open(txn, NULL, 0, &dbi); mdb_txn_commit(txn);
  double start = now(), end = start + 3; long n = 0;
  while (now() < end) {
    unsigned long key = n % 1000; MDB_val k = {sizeof key, &key}, v = {60, value};
    mdb_txn_begin(env, NULL, 0, &txn); mdb_put(txn, dbi, &k, &v, 0);
    if (mdb_txn_commit(txn)) { fprintf(stderr, "commit\n"); exit(1); } n++;
  }
  double rate = n / (now() - start); mdb_env_close(env); return rate;
}
static double wal(const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600); char record[100]; memset(record, 'r', 100);
  if (posix_fallocate(fd, 0, 64 << 20)) { perror("fallocate"); exit(1); } fsync(fd);
  double start = now(), end = start + 3; long n = 0;
  while (now() < end) { pwrite(fd, record, 100, n * 100); fdatasync(fd); n++; }
  double rate = n / (now() - start); close(fd); return rate;
}
int main(int argc, char **argv) {
  const char *root = argc > 1 ? argv[1] : "/var/tmp/oneflush";
  char a[256], b[256], c[256];
  mkdir(root, 0700);
  snprintf(a, sizeof a, "%s/default", root); snprintf(b, sizeof b, "%s/nometasync", root); snprintf(c, sizeof c, "%s/wal", root);
  for (int round = 0; round < 2; round++) {
    printf("LMDB default (2 flushes): %.0f/s\n", lmdb(a, 0));
    printf("LMDB MDB_NOMETASYNC (1 flush): %.0f/s\n", lmdb(b, MDB_NOMETASYNC));
    printf("WAL append + fdatasync (1 flush): %.0f/s\n", wal(c));
  }
  return 0;
}
