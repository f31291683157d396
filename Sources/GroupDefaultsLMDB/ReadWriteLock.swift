import Glibc

/// A process-local reader/writer lock around `pthread_rwlock_t`.
///
/// Every LMDB transaction of this process holds it shared; changing the map size holds it
/// exclusively, because `mdb_env_set_mapsize` unmaps the file under any transaction still running.
/// glibc's default rwlock prefers readers, so a thread that already holds it shared may take it
/// shared again without deadlocking behind a waiting writer.
final class ReadWriteLock: @unchecked Sendable {  // the pthread lock is the synchronisation
    private let lock: UnsafeMutablePointer<pthread_rwlock_t>

    init() {
        lock = .allocate(capacity: 1)
        lock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(lock, nil)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    @inline(__always)
    func withReadLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func withWriteLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}
