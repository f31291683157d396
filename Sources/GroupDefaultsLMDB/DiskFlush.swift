/// How an environment brings its committed transactions to the disk, when it is given one.
///
/// An environment opened without one (every production caller) flushes with LMDB's own
/// `mdb_env_sync`. A test of a failing disk passes one that fails on purpose (EIO cannot be caused
/// for real), so that `Environment` itself carries no test hook.
package protocol DiskFlush: Sendable {
    /// Flushes the environment: `flushEnvironment` is LMDB's flush; throws what it throws, or a
    /// failure of this flush's own.
    func flush(_ flushEnvironment: () throws(LMDBError) -> Void) throws(LMDBError)
}
