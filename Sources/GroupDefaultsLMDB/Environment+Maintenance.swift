internal import CLMDB
import Glibc

// Whole-environment checks for the maintenance API (SharedDefaults+Maintenance.swift). The copy
// itself is `Environment.copy(to:)`, next to the map-size machinery it shares.

extension Environment {
    /// Checks the structure of every page in use, whatever the file's size and
    /// `structureCheckLimit`: the free-page tree, the main tree and every named tree (see
    /// `StructureCheck`). Runs under a read transaction, so the pages it walks stay as they are while
    /// other processes write. Throws `StructureDamage` or `FileHeader.Truncated` for a damaged file.
    package func verifyStructure() throws {
        var attempts = 0
        while true {
            do {
                return try readTransaction { txn in
                    try StructureCheck.verify(
                        env: mdb_txn_env(txn.txn),
                        txn: txn.txn,
                        snapshot: UInt64(mdb_txn_id(txn.txn)),
                        limit: .max,
                        scope: .everything
                    )
                }
            } catch is StructureCheck.Retry where attempts < 100 {
                attempts += 1  // a writer committed twice while the meta page was read
            }
        }
    }

    /// The reader slots held by live processes (one per thread that has read the suite, this
    /// process's included), after clearing the slots of processes that died.
    package func liveReaderCount() throws -> Int {
        var count = 0
        try readTransaction { txn in
            let env = mdb_txn_env(txn.txn)
            var dead: Int32 = 0
            _ = mdb_reader_check(env, &dead)
            // `mdb_reader_list` reports one line per held slot ("pid thread txnid"), after a header
            // line, or a single parenthesised line when there is none.
            try check(
                mdb_reader_list(
                    env,
                    { line, context in
                        guard let line, let context else { return 0 }
                        var first = line
                        while first.pointee == 0x20 { first += 1 }
                        if first.pointee >= 0x30 && first.pointee <= 0x39 {  // a line that starts with a pid
                            context.assumingMemoryBound(to: Int.self).pointee += 1
                        }
                        return 0
                    },
                    &count
                )
            )
        }
        return count
    }
}
